#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json_reader.h"
#include "memory/memory_stats.h"

namespace strata::memory {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr std::size_t kMiB = 1024 * 1024;

// JSON written by the stats parses back with the library's reader (core/json_reader.h).
using Json = JsonValue;
struct JsonReader {
  static Json parse(const std::string& text) { return parse_json(text); }
};

TEST(JsonReaderSelfTest, AcceptsValidAndRejectsInvalidJson) {
  const Json v = JsonReader::parse(R"( {"a":[1,-2.5e3,"x\n\u00e9"],"b":null,"c":true} )");
  EXPECT_EQ(v["a"][1].number, -2500);
  EXPECT_EQ(v["a"][2].raw, "x\n\xc3\xa9");
  EXPECT_TRUE(v["c"].boolean);
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "[01]", "\"a\nb\"", "[1] x", "{\"a\":nul}"}) {
    EXPECT_THROW(JsonReader::parse(bad), std::runtime_error) << bad;
  }
}

// ---- helpers ------------------------------------------------------------------------------------

// A fresh directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "strata-stats-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

TimelineConfig config(std::size_t max_samples, double min_interval_s, std::size_t max_marks = 4096) {
  TimelineConfig c;
  c.max_samples = max_samples;
  c.min_interval_s = min_interval_s;
  c.max_marks = max_marks;
  return c;
}

// ---- MemoryStats counters -----------------------------------------------------------------------

TEST(MemoryStats, StartsAtZero) {
  MemoryStats stats;
  const MemoryStatsSnapshot s = stats.snapshot();
  EXPECT_EQ(s.fast.current_bytes, 0u);
  EXPECT_EQ(s.slow.peak_bytes, 0u);
  EXPECT_EQ(s.moved_to_slow.count, 0u);
  EXPECT_EQ(s.direct_slow_read_bytes, 0u);
  EXPECT_FALSE(stats.timeline().enabled());
}

TEST(MemoryStats, CountsMovesElisionsAvoidedWritebacksAndDirectTraffic) {
  MemoryStats stats;
  stats.on_move(Tier::Fast, Tier::Slow, 100);
  stats.on_move(Tier::Fast, Tier::Slow, 28);
  stats.on_move(Tier::Slow, Tier::Fast, 7);
  stats.on_copy_elided(64);
  stats.on_copy_elided(36);
  stats.on_copy_elided(1);
  stats.on_writeback_avoided(4096);
  stats.on_direct_slow_read(10);
  stats.on_direct_slow_read(5);
  stats.on_direct_slow_write(3);
  const MemoryStatsSnapshot s = stats.snapshot();
  EXPECT_EQ(s.moved_to_slow.count, 2u);
  EXPECT_EQ(s.moved_to_slow.bytes, 128u);
  EXPECT_EQ(s.moved_to_fast.count, 1u);
  EXPECT_EQ(s.moved_to_fast.bytes, 7u);
  EXPECT_EQ(s.copies_elided.count, 3u);
  EXPECT_EQ(s.copies_elided.bytes, 101u);
  EXPECT_EQ(s.writebacks_avoided.count, 1u);
  EXPECT_EQ(s.writebacks_avoided.bytes, 4096u);
  EXPECT_EQ(s.direct_slow_read_bytes, 15u);
  EXPECT_EQ(s.direct_slow_write_bytes, 3u);
  // Moves do not change occupancy: the heaps report that through on_alloc/on_free.
  EXPECT_EQ(s.fast.current_bytes, 0u);
}

TEST(MemoryStats, AMoveWithinOneTierIsRejected) {
  MemoryStats stats;
  try {
    stats.on_move(Tier::Fast, Tier::Fast, 8);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("two different tiers, got fast -> fast"));
  }
  EXPECT_EQ(stats.snapshot().moved_to_fast.count, 0u);
}

TEST(MemoryStats, TracksCurrentAndPeakPerHeap) {
  MemoryStats stats;
  stats.on_alloc(Tier::Fast, 100);
  stats.on_alloc(Tier::Fast, 50);
  stats.on_alloc(Tier::Slow, 1000);
  stats.on_free(Tier::Fast, 100);
  stats.on_alloc(Tier::Fast, 30);
  stats.on_free(Tier::Slow, 400);
  const MemoryStatsSnapshot s = stats.snapshot();
  EXPECT_EQ(s.fast.current_bytes, 80u);
  EXPECT_EQ(s.fast.peak_bytes, 150u);
  EXPECT_EQ(s.fast.allocations, 3u);
  EXPECT_EQ(s.fast.frees, 1u);
  EXPECT_EQ(s.slow.current_bytes, 600u);
  EXPECT_EQ(s.slow.peak_bytes, 1000u);
  EXPECT_EQ(s.slow.allocations, 1u);
  EXPECT_EQ(s.slow.frees, 1u);
  EXPECT_EQ(&s.heap(Tier::Slow), &s.slow);
}

TEST(MemoryStats, FreeingMoreThanIsInUseIsAnInternalErrorAndChangesNothing) {
  MemoryStats stats;
  stats.on_alloc(Tier::Slow, 10);
  try {
    stats.on_free(Tier::Slow, 11);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("freeing 11 bytes from the slow heap, which has only 10 bytes in use"));
  }
  EXPECT_EQ(stats.snapshot().slow.current_bytes, 10u);
  EXPECT_EQ(stats.snapshot().slow.frees, 0u);
}

TEST(MemoryStats, ResetZeroesCountersButKeepsLiveOccupancy) {
  MemoryStats stats;
  stats.on_alloc(Tier::Fast, 300);
  stats.on_free(Tier::Fast, 200);
  stats.on_move(Tier::Slow, Tier::Fast, 5);
  stats.on_copy_elided(5);
  stats.on_writeback_avoided(5);
  stats.on_direct_slow_write(5);
  stats.reset();
  MemoryStatsSnapshot s = stats.snapshot();
  EXPECT_EQ(s.fast.current_bytes, 100u);
  EXPECT_EQ(s.fast.peak_bytes, 100u);  // the peak restarts from what is live
  EXPECT_EQ(s.fast.allocations, 0u);
  EXPECT_EQ(s.fast.frees, 0u);
  EXPECT_EQ(s.moved_to_fast.count, 0u);
  EXPECT_EQ(s.moved_to_fast.bytes, 0u);
  EXPECT_EQ(s.copies_elided.bytes, 0u);
  EXPECT_EQ(s.writebacks_avoided.count, 0u);
  EXPECT_EQ(s.direct_slow_write_bytes, 0u);
  stats.on_free(Tier::Fast, 100);  // the live object can still be freed after a reset
  EXPECT_EQ(stats.snapshot().fast.current_bytes, 0u);
}

TEST(MemoryStats, ToJsonIsTheDocumentedObject) {
  MemoryStats stats;
  stats.on_alloc(Tier::Fast, 4096);
  stats.on_alloc(Tier::Slow, 8192);
  stats.on_free(Tier::Fast, 1024);
  stats.on_move(Tier::Fast, Tier::Slow, 3000);
  stats.on_move(Tier::Slow, Tier::Fast, 2000);
  stats.on_move(Tier::Slow, Tier::Fast, 1);
  stats.on_copy_elided(512);
  stats.on_writeback_avoided(256);
  stats.on_direct_slow_read(7);
  stats.on_direct_slow_write(9);
  EXPECT_EQ(stats.to_json(), R"({"moved_to_slow":{"count":1,"bytes":3000},"moved_to_fast":{"count":2,"bytes":2001},)"
                             R"("copies_elided":{"count":1,"bytes":512},"writebacks_avoided":{"count":1,"bytes":256},)"
                             R"("direct_slow_read_bytes":7,"direct_slow_write_bytes":9,)"
                             R"("heaps":{"fast":{"current_bytes":3072,"peak_bytes":4096,"allocations":1,"frees":1},)"
                             R"("slow":{"current_bytes":8192,"peak_bytes":8192,"allocations":1,"frees":0}}})");
  stats.set_slow_tier_mode("modeled: \"optane\" read 2.0 GB/s");
  const Json j = JsonReader::parse(stats.to_json());
  EXPECT_EQ(j["slow_tier_mode"].raw, "modeled: \"optane\" read 2.0 GB/s");
  EXPECT_EQ(j["heaps"]["slow"]["peak_bytes"].number, 8192);
}

TEST(MemoryStats, DescribeReportsMiBWithOneDecimalAndCounts) {
  MemoryStats stats;
  stats.on_alloc(Tier::Fast, 3 * kMiB / 2);  // 1.5 MiB
  stats.on_alloc(Tier::Fast, kMiB / 2);      // peak 2.0 MiB
  stats.on_free(Tier::Fast, kMiB / 2);
  stats.on_alloc(Tier::Slow, 10 * kMiB);
  stats.on_move(Tier::Fast, Tier::Slow, 5 * kMiB);
  stats.on_move(Tier::Slow, Tier::Fast, kMiB / 4);
  stats.on_copy_elided(kMiB);
  stats.on_copy_elided(kMiB);
  stats.on_writeback_avoided(3 * kMiB);
  stats.on_direct_slow_read(kMiB / 10 * 3 + 1);  // just over 0.3 MiB
  stats.set_slow_tier_mode("modeled");
  const std::string d = stats.describe();
  EXPECT_THAT(d, HasSubstr("(slow tier: modeled)"));
  EXPECT_THAT(d, HasSubstr("fast heap: 1.5 MiB in use, peak 2.0 MiB (2 allocations, 1 frees)"));
  EXPECT_THAT(d, HasSubstr("slow heap: 10.0 MiB in use, peak 10.0 MiB (1 allocations, 0 frees)"));
  EXPECT_THAT(d, HasSubstr("moved fast -> slow: 5.0 MiB in 1 move\n"));
  EXPECT_THAT(d, HasSubstr("moved slow -> fast: 0.2 MiB in 1 move\n"));  // printf rounds 0.25 to even
  EXPECT_THAT(d, HasSubstr("copies elided (clean evictions): 2, 2.0 MiB"));
  EXPECT_THAT(d, HasSubstr("write-backs avoided (freed while fast): 1, 3.0 MiB"));
  EXPECT_THAT(d, HasSubstr("direct slow-tier reads: 0.3 MiB, writes: 0.0 MiB"));
  EXPECT_GE(std::count(d.begin(), d.end(), '\n'), 7);
}

// ---- OccupancyTimeline --------------------------------------------------------------------------

TEST(OccupancyTimeline, RecordsNothingWhileDisabled) {
  OccupancyTimeline tl(config(64, 0));
  tl.record(1, 2);
  tl.record(1, 2, "forward");
  tl.mark("backward");
  EXPECT_TRUE(tl.samples().empty());
  EXPECT_TRUE(tl.marks().empty());
  tl.enable();
  tl.record(1, 2);
  EXPECT_EQ(tl.samples().size(), 1u);
  tl.enable(false);
  tl.record(3, 4);
  EXPECT_EQ(tl.samples().size(), 1u);
}

TEST(OccupancyTimeline, RejectsBadConfiguration) {
  EXPECT_THAT([] { OccupancyTimeline tl(config(4, 0)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("max_samples must be at least 8, got 4")));
  EXPECT_THAT([] { OccupancyTimeline tl(config(64, 0, 2)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("max_marks must be at least 8, got 2")));
  EXPECT_THAT([] { OccupancyTimeline tl(config(64, -1)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("min_interval_s must be a finite number")));
}

TEST(OccupancyTimeline, StoresSamplesInTimeOrderWithLabelsAsMarks) {
  OccupancyTimeline tl(config(64, 0));
  tl.enable();
  tl.record(100, 0);
  tl.record(200, 10, "forward");
  tl.mark("backward");
  tl.record(50, 10);
  const auto s = tl.samples();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].fast_bytes, 100u);
  EXPECT_EQ(s[1].fast_bytes, 200u);
  EXPECT_EQ(s[1].slow_bytes, 10u);
  EXPECT_EQ(s[2].fast_bytes, 50u);
  EXPECT_LE(s[0].t, s[1].t);
  EXPECT_LE(s[1].t, s[2].t);
  const auto m = tl.marks();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].label, "forward");
  EXPECT_EQ(m[0].t, s[1].t);  // a labeled sample's mark sits exactly on it
  EXPECT_EQ(m[1].label, "backward");
  EXPECT_LE(m[1].t, s[2].t);
}

TEST(OccupancyTimeline, TimeStartsWhenRecordingIsEnabled) {
  OccupancyTimeline tl(config(64, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  tl.enable();
  tl.record(1, 1);
  EXPECT_LT(tl.samples()[0].t, 0.2);
}

TEST(OccupancyTimeline, RateLimitsUnlabeledSamplesButKeepsTheLatestAsTheTail) {
  OccupancyTimeline tl(config(64, 1000.0));  // nothing but the first sample passes the limit
  tl.enable();
  tl.record(10, 1);
  tl.record(20, 2);
  tl.record(30, 3);
  auto s = tl.samples();
  ASSERT_EQ(s.size(), 2u);  // the first, and the latest rate-limited one
  EXPECT_EQ(s[0].fast_bytes, 10u);
  EXPECT_EQ(s[1].fast_bytes, 30u);
  EXPECT_EQ(s[1].slow_bytes, 3u);
  tl.record(40, 4, "evict");  // labeled: stored despite the limit, and supersedes the tail
  tl.record(0, 0);
  s = tl.samples();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].fast_bytes, 40u);
  EXPECT_EQ(s[2].fast_bytes, 0u);
  EXPECT_EQ(tl.marks().size(), 1u);
}

TEST(OccupancyTimeline, DownsamplingBoundsMemoryAndKeepsFirstAndLastSamples) {
  constexpr std::size_t kMax = 16;
  OccupancyTimeline tl(config(kMax, 0));
  tl.enable();
  EXPECT_EQ(tl.min_interval_s(), 0.0);
  constexpr std::size_t kRecords = 5000;
  for (std::size_t i = 0; i < kRecords; ++i) {
    tl.record(i, 2 * i);
    ASSERT_LE(tl.samples().size(), kMax) << "after record " << i;
  }
  const auto s = tl.samples();
  ASSERT_GE(s.size(), kMax / 2);
  EXPECT_EQ(s.front().fast_bytes, 0u);
  EXPECT_EQ(s.back().fast_bytes, kRecords - 1);
  EXPECT_EQ(s.back().slow_bytes, 2 * (kRecords - 1));
  for (std::size_t i = 1; i < s.size(); ++i) {
    EXPECT_LT(s[i - 1].fast_bytes, s[i].fast_bytes);  // order kept
    EXPECT_LE(s[i - 1].t, s[i].t);
  }
  EXPECT_GT(tl.dropped_samples(), 0u);
  EXPECT_GT(tl.min_interval_s(), 0.0);  // grew from 0 to the kept samples' average spacing
}

TEST(OccupancyTimeline, DownsamplingKeepsEveryOtherSampleAndTheLastExactly) {
  OccupancyTimeline tl(config(9, 0));
  tl.enable();
  // Labeled, so no rate limit and no tail. The 9th record finds 8 stored (no room left for a tail):
  // 0..7 become 0, 2, 4, 6 and the last, 7; then 8 is appended.
  for (std::size_t i = 0; i < 9; ++i) tl.record(i, 0, "x");
  std::vector<std::size_t> values;
  for (const auto& s : tl.samples()) values.push_back(s.fast_bytes);
  EXPECT_EQ(values, (std::vector<std::size_t>{0, 2, 4, 6, 7, 8}));
  EXPECT_EQ(tl.dropped_samples(), 3u);
}

TEST(OccupancyTimeline, DownsamplingDoublesTheMinimumInterval) {
  OccupancyTimeline tl(config(8, 1e-3));
  tl.enable();
  const double before = tl.min_interval_s();
  // Unlabeled and rate-limited: at most one stored per millisecond, so the store fills in ~8 ms.
  for (std::size_t i = 0; tl.dropped_samples() == 0; ++i) tl.record(i, 0);
  EXPECT_GE(tl.min_interval_s(), 2 * before);
  const auto s = tl.samples();
  for (std::size_t i = 1; i < s.size(); ++i) EXPECT_GE(s[i].t - s[i - 1].t, before * 0.999) << i;
  EXPECT_GT(tl.dropped_samples(), 0u);
  tl.clear();
  EXPECT_EQ(tl.min_interval_s(), before);
  EXPECT_EQ(tl.dropped_samples(), 0u);
  EXPECT_TRUE(tl.samples().empty());
  EXPECT_TRUE(tl.marks().empty());
}

TEST(OccupancyTimeline, EndlessLabeledSamplesKeepTheIntervalWithinTheTimeline) {
  OccupancyTimeline tl(config(8, 1.0));  // starts at 1 s; every compaction would double it
  tl.enable();
  for (std::size_t i = 0; i < 20000; ++i) tl.record(i, 0, "op");  // ~5000 compactions
  const auto s = tl.samples();
  ASSERT_LE(s.size(), 8u);
  EXPECT_EQ(s.back().fast_bytes, 19999u);
  // No overflow (UBSan would stop here), and no interval longer than the recorded span.
  EXPECT_LE(tl.min_interval_s(), s.back().t - s.front().t + 1e-9);
  EXPECT_LE(tl.marks().size(), 4096u);
}

TEST(OccupancyTimeline, MarksAreBoundedAndKeepFirstAndLast) {
  OccupancyTimeline tl(config(64, 0, 8));
  tl.enable();
  for (int i = 0; i < 100; ++i) tl.mark("m" + std::to_string(i));
  const auto m = tl.marks();
  ASSERT_LE(m.size(), 8u);
  EXPECT_EQ(m.front().label, "m0");
  EXPECT_EQ(m.back().label, "m99");
  EXPECT_EQ(tl.dropped_marks(), 100 - m.size());
}

TEST(OccupancyTimeline, ToJsonFollowsTheSchemaAndEscapesLabels) {
  OccupancyTimeline tl(config(64, 0));
  tl.set_capacity(1 << 20, 0);
  tl.enable();
  tl.record(1024, 2048);
  tl.record(4096, 2048, "forward");
  tl.mark("say \"hi\"\\\n\x01 caf\xc3\xa9");
  tl.mark("bad \xff utf8 \xe2\x82");  // a stray byte and a truncated sequence
  tl.record(0, 0);
  const std::string text = tl.to_json();
  Json j;
  ASSERT_NO_THROW(j = JsonReader::parse(text)) << text;
  EXPECT_EQ(j["version"].raw, "1");
  EXPECT_EQ(j["unit"].raw, "bytes");
  EXPECT_EQ(j["time_unit"].raw, "s");
  EXPECT_EQ(j["fast_capacity"].number, 1 << 20);
  EXPECT_EQ(j["slow_capacity"].kind, Json::Null);
  EXPECT_EQ(j["min_interval"].number, 0);
  EXPECT_EQ(j["dropped_samples"].number, 0);
  EXPECT_EQ(j["dropped_marks"].number, 0);
  const Json& samples = j["samples"];
  ASSERT_EQ(samples.kind, Json::Array);
  ASSERT_EQ(samples.items.size(), 3u);
  for (const Json& s : samples.items) {
    ASSERT_EQ(s.items.size(), 3u);
    EXPECT_GE(s[0].number, 0);
  }
  EXPECT_EQ(samples[0][1].raw, "1024");
  EXPECT_EQ(samples[0][2].raw, "2048");
  EXPECT_EQ(samples[1][1].raw, "4096");
  EXPECT_EQ(samples[2][1].raw, "0");
  const Json& marks = j["marks"];
  ASSERT_EQ(marks.items.size(), 3u);
  EXPECT_EQ(marks[0][1].raw, "forward");
  EXPECT_EQ(marks[0][0].raw, samples[1][0].raw);
  EXPECT_EQ(marks[1][1].raw, "say \"hi\"\\\n\x01 caf\xc3\xa9");
  EXPECT_EQ(marks[2][1].raw, "bad \xef\xbf\xbd utf8 \xef\xbf\xbd\xef\xbf\xbd");  // U+FFFD each
}

TEST(OccupancyTimeline, EmptyTimelineIsValidJson) {
  OccupancyTimeline tl;
  EXPECT_EQ(tl.to_json(), R"({"version":1,"unit":"bytes","time_unit":"s","fast_capacity":null,"slow_capacity":null,)"
                          R"("min_interval":0.0001,"dropped_samples":0,"dropped_marks":0,"samples":[],"marks":[]})");
}

TEST(OccupancyTimeline, SaveJsonWritesTheFileAtomically) {
  TempDir dir;
  OccupancyTimeline tl(config(64, 0));
  tl.enable();
  tl.record(1, 2, "start");
  const std::string path = dir / "timeline.json";
  std::ofstream(path) << "old content";
  tl.save_json(path);
  EXPECT_EQ(read_file(path), tl.to_json() + "\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);  // no temporary left
  EXPECT_NO_THROW(JsonReader::parse(read_file(path)));
}

TEST(OccupancyTimeline, SaveJsonToAMissingDirectoryRaisesAndLeavesNothing) {
  TempDir dir;
  OccupancyTimeline tl;
  const std::string path = dir / "no/such/dir/timeline.json";
  EXPECT_THAT([&] { tl.save_json(path); },
              ::testing::ThrowsMessage<Error>(
                  ::testing::AllOf(HasSubstr("cannot write '" + path + "'"), HasSubstr("No such file or directory"))));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(OccupancyTimeline, SaveJsonOverADirectoryRaisesAndLeavesNoPartialFile) {
  TempDir dir;
  const std::string path = dir / "taken";
  fs::create_directory(path);
  fs::create_directory(dir / "taken/sub");  // a non-empty directory cannot be replaced by rename
  OccupancyTimeline tl;
  EXPECT_THAT([&] { tl.save_json(path); }, ::testing::ThrowsMessage<Error>(::testing::AllOf(
                                               HasSubstr("cannot write '" + path + "'"), HasSubstr("renaming"))));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);  // taken/ only
  EXPECT_TRUE(fs::is_directory(dir / "taken/sub"));
}

// ---- MemoryStats feeding the timeline -----------------------------------------------------------

TEST(MemoryStats, FeedsTheTimelineOnEveryAllocAndFreeWhenEnabled) {
  MemoryStats stats(config(64, 0));
  stats.on_alloc(Tier::Fast, 7);  // disabled: not recorded
  stats.timeline().enable();
  stats.on_alloc(Tier::Fast, 100);
  stats.on_alloc(Tier::Slow, 50);
  stats.on_free(Tier::Fast, 100);
  stats.on_move(Tier::Fast, Tier::Slow, 3);  // moves alone do not sample
  const auto s = stats.timeline().samples();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].fast_bytes, 107u);
  EXPECT_EQ(s[0].slow_bytes, 0u);
  EXPECT_EQ(s[1].fast_bytes, 107u);
  EXPECT_EQ(s[1].slow_bytes, 50u);
  EXPECT_EQ(s[2].fast_bytes, 7u);
  EXPECT_EQ(s[2].slow_bytes, 50u);
}

TEST(MemoryStats, SampleRecordsTheCurrentOccupancyWithALabel) {
  MemoryStats stats(config(64, 1000.0));
  stats.sample("before");  // disabled: nothing
  stats.timeline().enable();
  stats.on_alloc(Tier::Slow, 5);
  stats.on_alloc(Tier::Fast, 9);            // rate-limited
  stats.sample("backward");                 // labeled: stored regardless
  stats.timeline().record(123456, 654321);  // a MemoryStats' timeline shows its own counters
  const auto s = stats.timeline().samples();
  // Stored: (0, 5) and the labeled (9, 5); the last, rate-limited record adds a tail at its time.
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].fast_bytes, 0u);
  EXPECT_EQ(s[0].slow_bytes, 5u);
  EXPECT_EQ(s[1].fast_bytes, 9u);
  EXPECT_EQ(s[1].slow_bytes, 5u);
  EXPECT_EQ(s[2].fast_bytes, 9u);
  EXPECT_EQ(s[2].slow_bytes, 5u);
  EXPECT_GE(s[2].t, s[1].t);
  const auto m = stats.timeline().marks();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].label, "backward");
  EXPECT_EQ(m[0].t, s[1].t);
}

TEST(MemoryStats, DisablingTheTimelineClosesItAtThatMoment) {
  MemoryStats stats(config(64, 1000.0));
  stats.timeline().enable();
  stats.on_alloc(Tier::Fast, 10);
  stats.on_alloc(Tier::Fast, 20);  // rate-limited
  stats.timeline().enable(false);
  stats.on_alloc(Tier::Fast, 1000);  // after recording stopped: not part of the picture
  const auto s = stats.timeline().samples();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].fast_bytes, 10u);
  EXPECT_EQ(s[1].fast_bytes, 30u);
}

TEST(MemoryStats, RateLimitedTimelineStillEndsAtTheCurrentOccupancy) {
  MemoryStats stats(config(64, 1000.0));
  stats.timeline().enable();
  for (int i = 0; i < 10; ++i) stats.on_alloc(Tier::Fast, 10);
  for (int i = 0; i < 10; ++i) stats.on_free(Tier::Fast, 10);
  const auto s = stats.timeline().samples();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.front().fast_bytes, 10u);
  EXPECT_EQ(s.back().fast_bytes, 0u);
}

// Many threads count, record and mark at once while another reads; every total must balance.
// Runs in well under a second normally and a few under ThreadSanitizer.
TEST(MemoryStats, ConcurrentCountingAndRecordingBalance) {
  constexpr int kThreads = 8;
  constexpr int kIters = 20000;
  constexpr std::size_t kMaxSamples = 256;
  MemoryStats stats(config(kMaxSamples, 0, 64));
  stats.timeline().enable();
  std::atomic<bool> go{false};
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kIters; ++i) {
        const std::size_t a = 64 + static_cast<std::size_t>((t * 7 + i) % 13) * 64;
        const std::size_t b = 1 + static_cast<std::size_t>(i % 5);
        stats.on_alloc(Tier::Fast, a);
        stats.on_alloc(Tier::Slow, b);
        stats.on_move(Tier::Fast, Tier::Slow, a);
        stats.on_move(Tier::Slow, Tier::Fast, b);
        stats.on_copy_elided(1);
        stats.on_writeback_avoided(2);
        stats.on_direct_slow_read(3);
        stats.on_direct_slow_write(4);
        if (i % 97 == 0) stats.timeline().mark(i % 2 ? "forward" : "backward");
        if (i % 89 == 0) stats.sample("evict");
        stats.on_free(Tier::Fast, a);
        stats.on_free(Tier::Slow, b);
      }
      running.fetch_sub(1);
    });
  }
  std::thread reader([&] {
    while (!go.load()) std::this_thread::yield();
    while (running.load() > 0) {
      const MemoryStatsSnapshot s = stats.snapshot();
      EXPECT_LE(s.fast.current_bytes, s.fast.peak_bytes);
      EXPECT_LE(stats.timeline().samples().size(), kMaxSamples);
      (void)stats.to_json();
      (void)stats.timeline().to_json();
    }
  });
  go.store(true);
  for (auto& th : threads) th.join();
  reader.join();

  const MemoryStatsSnapshot s = stats.snapshot();
  std::uint64_t fast_bytes = 0, slow_bytes = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kIters; ++i) {
      fast_bytes += 64 + static_cast<std::size_t>((t * 7 + i) % 13) * 64;
      slow_bytes += 1 + static_cast<std::size_t>(i % 5);
    }
  }
  constexpr std::uint64_t kOps = std::uint64_t{kThreads} * kIters;
  EXPECT_EQ(s.fast.current_bytes, 0u);
  EXPECT_EQ(s.slow.current_bytes, 0u);
  EXPECT_EQ(s.fast.allocations, kOps);
  EXPECT_EQ(s.fast.frees, kOps);
  EXPECT_EQ(s.slow.allocations, kOps);
  EXPECT_EQ(s.slow.frees, kOps);
  // Each thread holds at most one block per heap, so the peak is at most kThreads blocks.
  EXPECT_GE(s.fast.peak_bytes, 64u);
  EXPECT_LE(s.fast.peak_bytes, kThreads * (64u + 12u * 64u));
  EXPECT_LE(s.slow.peak_bytes, kThreads * 5u);
  EXPECT_EQ(s.moved_to_slow.count, kOps);
  EXPECT_EQ(s.moved_to_slow.bytes, fast_bytes);
  EXPECT_EQ(s.moved_to_fast.count, kOps);
  EXPECT_EQ(s.moved_to_fast.bytes, slow_bytes);
  EXPECT_EQ(s.copies_elided.bytes, kOps);
  EXPECT_EQ(s.writebacks_avoided.bytes, 2 * kOps);
  EXPECT_EQ(s.direct_slow_read_bytes, 3 * kOps);
  EXPECT_EQ(s.direct_slow_write_bytes, 4 * kOps);

  const auto samples = stats.timeline().samples();
  ASSERT_LE(samples.size(), kMaxSamples);
  ASSERT_GE(samples.size(), 2u);
  for (std::size_t i = 1; i < samples.size(); ++i) EXPECT_LE(samples[i - 1].t, samples[i].t) << i;
  EXPECT_EQ(samples.back().fast_bytes, 0u);  // the last free of the last thread closes the curve
  EXPECT_EQ(samples.back().slow_bytes, 0u);
  EXPECT_LE(stats.timeline().marks().size(), 64u);
  EXPECT_GT(stats.timeline().dropped_samples(), 0u);
  EXPECT_NO_THROW(JsonReader::parse(stats.timeline().to_json()));
}

}  // namespace
}  // namespace strata::memory
