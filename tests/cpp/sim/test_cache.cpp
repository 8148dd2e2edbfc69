// The cache model (sim/detail/cache.h) against hand-computed hit/miss/writeback counts on synthetic
// access patterns: sequential, strided, conflicting, LRU order, fully associative.
#include <gtest/gtest.h>

#include "sim/detail/cache.h"
#include "sim/energy.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;
using namespace strata::sim::detail;  // the component models are internal

namespace {

CacheConfig cfg(uint64_t size, uint32_t ways) {
  CacheConfig c;
  c.size_bytes = size;
  c.associativity = ways;
  c.line_bytes = 64;
  return c;
}

void read_range(Cache& c, uint64_t base, uint64_t bytes, uint64_t stride = 8, AccessClass cls = AccessClass::Program) {
  for (uint64_t a = base; a < base + bytes; a += stride) c.access(a, false, cls);
}

}  // namespace

TEST(SimCache, GeometryOfTable3Caches) {
  Cache c1(cfg(1024, 2));
  EXPECT_EQ(c1.num_sets(), 8u);  // 16 lines / 2 ways
  EXPECT_EQ(c1.ways(), 2u);
  Cache c64(cfg(65536, 0));  // fully associative
  EXPECT_EQ(c64.num_sets(), 1u);
  EXPECT_EQ(c64.ways(), 1024u);
  Cache c128(cfg(131072, 8));
  EXPECT_EQ(c128.num_sets(), 256u);
}

TEST(SimCache, SequentialWordsMissOncePerLine) {
  Cache c(cfg(1024, 2));
  read_range(c, 0, 4096);  // 512 words over 64 lines: 1 miss + 7 hits per line
  EXPECT_EQ(c.stats().misses(), 64u);
  EXPECT_EQ(c.stats().hits(), 448u);
  read_range(c, 0, 4096);  // 4 KB does not fit in 1 KB: every line misses again
  EXPECT_EQ(c.stats().misses(), 128u);
  EXPECT_EQ(c.stats().hits(), 896u);
}

TEST(SimCache, WorkingSetThatFitsHitsOnTheSecondPass) {
  Cache c(cfg(1024, 2));
  read_range(c, 0, 1024);
  EXPECT_EQ(c.stats().misses(), 16u);
  read_range(c, 0, 1024);
  EXPECT_EQ(c.stats().misses(), 16u);
  EXPECT_EQ(c.stats().hits(), 112u + 128u);
  EXPECT_DOUBLE_EQ(c.stats().hit_rate(), 240.0 / 256.0);
}

TEST(SimCache, StrideOfOneLineTouchesEachLineOnce) {
  Cache c(cfg(1024, 2));
  read_range(c, 0, 1024, 64);  // 16 lines, 16 misses
  read_range(c, 0, 1024, 64);  // all resident
  EXPECT_EQ(c.stats().misses(), 16u);
  EXPECT_EQ(c.stats().hits(), 16u);
}

TEST(SimCache, StrideOfTheSetSpanThrashesOneSet) {
  // 1k 2-way: 8 sets of 64-byte lines, so addresses 512 bytes apart share a set.
  Cache c(cfg(1024, 2));
  for (int rep = 0; rep < 3; ++rep)
    for (uint64_t k = 0; k < 3; ++k) c.access(k * 512, false, AccessClass::Program);  // A B C A B C ...
  EXPECT_EQ(c.stats().misses(), 9u);  // LRU with 3 lines cycling through 2 ways: all miss
  EXPECT_EQ(c.stats().hits(), 0u);
  Cache d(cfg(1024, 2));
  for (int rep = 0; rep < 3; ++rep)
    for (uint64_t k = 0; k < 2; ++k) d.access(k * 512, false, AccessClass::Program);  // A B A B ...
  EXPECT_EQ(d.stats().misses(), 2u);
  EXPECT_EQ(d.stats().hits(), 4u);
}

TEST(SimCache, ConflictingArraysInASetAssociativeCacheVersusFullyAssociative) {
  // Three 8-element arrays at 0, 512, 1024 (same set alignment), read x[i], y[i], z[i] for i < 8.
  auto run = [](uint32_t ways) {
    Cache c(cfg(1024, ways));
    for (uint64_t i = 0; i < 8; ++i)
      for (uint64_t base : {0u, 512u, 1024u}) c.access(base + 8 * i, false, AccessClass::Program);
    return c.stats();
  };
  const CacheStats two_way = run(2);
  EXPECT_EQ(two_way.misses(), 24u);  // every access evicts the line the next array needs
  EXPECT_EQ(two_way.hits(), 0u);
  const CacheStats full = run(0);
  EXPECT_EQ(full.misses(), 3u);  // one line per array
  EXPECT_EQ(full.hits(), 21u);
}

TEST(SimCache, LeastRecentlyUsedLineIsEvicted) {
  Cache c(cfg(1024, 2));
  const uint64_t a = 0, b = 512, d = 1024;
  c.access(a, false, AccessClass::Program);  // miss
  c.access(b, false, AccessClass::Program);  // miss
  c.access(a, false, AccessClass::Program);  // hit, B is now LRU
  c.access(d, false, AccessClass::Program);  // miss, evicts B
  EXPECT_TRUE(c.contains(a));
  EXPECT_FALSE(c.contains(b));
  EXPECT_TRUE(c.contains(d));
  EXPECT_TRUE(c.access(a, false, AccessClass::Program).hit);
  EXPECT_FALSE(c.access(b, false, AccessClass::Program).hit);
  EXPECT_EQ(c.stats().misses(), 4u);
  EXPECT_EQ(c.stats().hits(), 2u);
}

TEST(SimCache, WriteBackWriteAllocateCountsWritebacksOfDirtyVictimsPerClass) {
  Cache c(cfg(1024, 2));
  const CacheOutcome w = c.access(8, true, AccessClass::Tape);  // write miss allocates, dirty
  EXPECT_FALSE(w.hit);
  EXPECT_EQ(w.line, 0u);
  EXPECT_TRUE(c.contains(0));
  c.access(512, false, AccessClass::Program);                           // clean
  const CacheOutcome e1 = c.access(1024, false, AccessClass::Program);  // evicts the dirty tape line
  EXPECT_TRUE(e1.writeback);
  EXPECT_EQ(e1.victim_line, 0u);
  const CacheOutcome e2 = c.access(1536, false, AccessClass::Program);  // evicts the clean line at 512
  EXPECT_FALSE(e2.writeback);
  EXPECT_EQ(c.stats().cls[1].writebacks, 1u);
  EXPECT_EQ(c.stats().cls[0].writebacks, 0u);
  EXPECT_EQ(c.stats().cls[1].misses, 1u);
  EXPECT_EQ(c.stats().cls[0].misses, 3u);
  // A write hit makes a clean line dirty.
  c.access(1024, true, AccessClass::Program);
  c.access(0, false, AccessClass::Program);
  const CacheOutcome e3 = c.access(512, false, AccessClass::Program);  // evicts 1024 (LRU), dirty
  EXPECT_TRUE(e3.writeback);
  EXPECT_EQ(e3.victim_line, 1024u);
  EXPECT_EQ(c.stats().cls[0].writebacks, 1u);
}

TEST(SimCache, FullyAssociative64kHoldsExactlyItsCapacity) {
  Cache c(cfg(65536, 0));
  read_range(c, 0, 65536, 64);
  read_range(c, 0, 65536, 64);
  EXPECT_EQ(c.stats().misses(), 1024u);
  EXPECT_EQ(c.stats().hits(), 1024u);
  Cache d(cfg(65536, 0));
  for (int rep = 0; rep < 2; ++rep) read_range(d, 0, 65536 + 64, 64);  // one line too many: LRU thrashes
  EXPECT_EQ(d.stats().misses(), 2050u);
  EXPECT_EQ(d.stats().hits(), 0u);
}

TEST(SimCache, Table3EnergiesAndAssociativities) {
  EXPECT_EQ(table3_cache_energy_pj(1024), 120);
  EXPECT_EQ(table3_cache_energy_pj(2048), 440);
  EXPECT_EQ(table3_cache_energy_pj(32768), 2990);
  EXPECT_EQ(table3_cache_energy_pj(131072), 11350);
  EXPECT_EQ(table3_cache_associativity(16384), 2u);
  EXPECT_EQ(table3_cache_associativity(32768), 4u);
  EXPECT_EQ(table3_cache_associativity(65536), 0u);
  EXPECT_EQ(table3_cache_associativity(131072), 8u);
  EXPECT_ERROR_HAS(table3_cache_energy_pj(3000), "no Table III cache of 3000 bytes");
}

TEST(SimCache, BadGeometryIsRejectedWithTheReason) {
  EXPECT_ERROR_HAS(Cache{cfg(1000, 2)}, "size_bytes must be a power of two");
  EXPECT_ERROR_HAS(Cache{cfg(1024, 3)}, "associativity 3 does not divide the 16 lines");
  EXPECT_ERROR_HAS(Cache{cfg(1024, 32)}, "associativity 32");
  CacheConfig c = cfg(1024, 2);
  c.line_bytes = 48;
  EXPECT_ERROR_HAS(Cache{c}, "line_bytes must be a power of two");
  c = cfg(1024, 2);
  c.mshrs = 0;
  EXPECT_ERROR_HAS(Cache{c}, "mshrs must be > 0");
  c = cfg(1024, 2);
  c.ports = 0;
  EXPECT_ERROR_HAS(Cache{c}, "ports must be > 0");
}
