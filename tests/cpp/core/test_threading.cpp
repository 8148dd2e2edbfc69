// Thread settings and parallel_for.

#include "core/threading.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.h"
#include "test_util.h"
#include "tests/cpp/error_text.h"

namespace {

using namespace strata;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class Threading : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(Threading, DefaultIsPositive) { EXPECT_GE(get_num_threads(), 1); }

TEST_F(Threading, SetAndGet) {
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
}

TEST_F(Threading, BadThreadCounts) {
  set_num_threads(2);
  EXPECT_THAT(ERROR_MESSAGE(set_num_threads(0)),
              AllOf(HasSubstr("set_num_threads"), ContainsRegex("(^|[^0-9.])0([^0-9.]|$)")));
  EXPECT_THAT(ERROR_MESSAGE(set_num_threads(-3)), AllOf(HasSubstr("set_num_threads"), HasSubstr("-3")));
  EXPECT_EQ(get_num_threads(), 2) << "a rejected call must not change the setting";
}

TEST_F(Threading, ThreadCountsAreBoundedWithOneMessage) {
  set_num_threads(2);
  EXPECT_EQ(ERROR_MESSAGE(set_num_threads(kMaxThreads + 1)),
            "set_num_threads: expected a thread count in [1, 4096], got 4097");
  EXPECT_EQ(ERROR_MESSAGE(set_num_threads(1'000'000'000)),
            "set_num_threads: expected a thread count in [1, 4096], got 1000000000");
  EXPECT_EQ(get_num_threads(), 2) << "a rejected call must not change the setting";
  set_num_threads(kMaxThreads);  // the bound itself is accepted
  EXPECT_EQ(get_num_threads(), kMaxThreads);
  EXPECT_EQ(ERROR_MESSAGE(check_num_threads(int64_t{1} << 40, "strata.set_num_threads()")),
            "strata.set_num_threads(): expected a thread count in [1, 4096], got 1099511627776");
}

TEST_F(Threading, ParsedThreadCountsUseTheSameMessage) {
  EXPECT_EQ(parse_num_threads("8", "STRATA_NUM_THREADS"), 8);
  EXPECT_EQ(parse_num_threads("4096", "--threads"), 4096);
  for (const char* bad :
       {"0", "-2", "4097", "1000000000000", "99999999999999999999999", "", "8 ", " 8", "+8", "8x", "0x10", "1.5"}) {
    EXPECT_EQ(ERROR_MESSAGE(parse_num_threads(bad, "STRATA_NUM_THREADS")),
              std::string("STRATA_NUM_THREADS: expected a thread count in [1, 4096], got '") + bad + "'")
        << bad;
  }
  // Echoed text is escaped and cut (Note [Quoting user data in messages]).
  EXPECT_EQ(ERROR_MESSAGE(parse_num_threads(std::string("4\0", 2), "--threads")),
            "--threads: expected a thread count in [1, 4096], got '4\\x00'");
  EXPECT_THAT(ERROR_MESSAGE(parse_num_threads(std::string(100000, '9'), "--threads")), HasSubstr("(100000 bytes)"));
}

void expect_exact_cover(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::atomic<int64_t> bad_chunks{0};
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    if (b < 0 || e > n || b >= e) {
      ++bad_chunks;
      return;
    }
    for (int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
  });
  EXPECT_EQ(bad_chunks.load(), 0) << "n=" << n << " grain=" << grain;
  int64_t wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  EXPECT_EQ(wrong, 0) << "n=" << n << " grain=" << grain << ": elements not visited exactly once";
}

TEST_F(Threading, ParallelForCoversRangeExactlyOnce) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t n : {1, 2, 7, 100, 1000, 100003}) {
      for (int64_t grain : {1, 16, 1000, 1 << 20}) expect_exact_cover(n, grain);
    }
  }
}

TEST_F(Threading, EmptyRangeDoesNothingUseful) {
  int64_t covered = 0;
  parallel_for(0, 1, [&](int64_t b, int64_t e) { covered += e - b; });
  EXPECT_EQ(covered, 0);
}

TEST_F(Threading, SmallRangesRunSeriallyInOneCall) {
  set_num_threads(2);
  std::vector<std::pair<int64_t, int64_t>> calls;
  std::thread::id caller = std::this_thread::get_id(), ran_on;
  parallel_for(50, 100, [&](int64_t b, int64_t e) {
    calls.emplace_back(b, e);
    ran_on = std::this_thread::get_id();
  });
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (std::pair<int64_t, int64_t>{0, 50}));
  EXPECT_EQ(ran_on, caller);
}

TEST_F(Threading, ChunksAreAtLeastGrain) {
  // threading.h: "in chunks of at least `grain` elements" (the last one may be shorter only when n
  // is not a multiple and cannot be split evenly).
  set_num_threads(2);
  const int64_t n = 10000, grain = 1000;
  std::mutex m;
  std::vector<int64_t> sizes;
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    sizes.push_back(e - b);
  });
  int64_t total = 0, small = 0;
  for (int64_t s : sizes) {
    total += s;
    small += s < grain;
  }
  EXPECT_EQ(total, n);
  EXPECT_EQ(small, 0) << "found chunks smaller than the grain (" << sizes.size() << " chunks)";
}

TEST_F(Threading, RespectsThreadCap) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::mutex m;
    std::set<std::thread::id> ids;
    parallel_for(1 << 16, 1, [&](int64_t b, int64_t e) {
      volatile double sink = 0;
      for (int64_t i = b; i < e; ++i) sink = sink + static_cast<double>(i);
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
    });
    EXPECT_LE(static_cast<int>(ids.size()), threads);
    if (threads == 1) {
      EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
    }
  }
}

TEST_F(Threading, StrataErrorsPropagate) {
  set_num_threads(2);
  try {
    parallel_for(100000, 10, [](int64_t b, int64_t e) {
      if (b <= 54321 && 54321 < e) throw Error("kernel failed at 54321");
    });
    FAIL() << "parallel_for swallowed the exception";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("kernel failed at 54321"));
  }
}

TEST_F(Threading, OtherExceptionsPropagateWithTheirType) {
  set_num_threads(2);
  EXPECT_THROW(parallel_for(100000, 10,
                            [](int64_t b, int64_t) {
                              if (b == 0) throw std::out_of_range("first chunk");
                            }),
               std::out_of_range);
  // Serial path too.
  EXPECT_THROW(parallel_for(5, 100, [](int64_t, int64_t) { throw std::invalid_argument("serial"); }),
               std::invalid_argument);
  // parallel_for still works afterwards.
  expect_exact_cover(1000, 10);
}

TEST_F(Threading, NestedParallelFor) {
  set_num_threads(2);
  constexpr int64_t kOuter = 64, kInner = 500;
  std::vector<std::atomic<int>> hits(kOuter * kInner);
  parallel_for(kOuter, 1, [&](int64_t ob, int64_t oe) {
    for (int64_t o = ob; o < oe; ++o) {
      parallel_for(kInner, 7, [&](int64_t ib, int64_t ie) {
        for (int64_t i = ib; i < ie; ++i) hits[static_cast<std::size_t>(o * kInner + i)].fetch_add(1);
      });
    }
  });
  int64_t wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  EXPECT_EQ(wrong, 0);
}

TEST_F(Threading, RunSeriallyKeepsNestedWorkOnTheCallingThread) {
  // Note [Serial regions]: inside run_serially a parallel_for is one call on this thread, however
  // large; outside, the same loop splits. Each thread of an outer parallel_for has its own region.
  set_num_threads(2);
  EXPECT_FALSE(in_serial_region());
  std::vector<std::pair<int64_t, int64_t>> calls;
  std::set<std::thread::id> ran_on;
  run_serially([&] {
    EXPECT_TRUE(in_serial_region());
    run_serially([&] { EXPECT_TRUE(in_serial_region()); });  // regions nest
    EXPECT_TRUE(in_serial_region());
    parallel_for(1 << 16, 1, [&](int64_t b, int64_t e) {
      calls.emplace_back(b, e);
      ran_on.insert(std::this_thread::get_id());
    });
  });
  EXPECT_FALSE(in_serial_region());
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (std::pair<int64_t, int64_t>{0, 1 << 16}));
  EXPECT_EQ(ran_on, std::set<std::thread::id>{std::this_thread::get_id()});
  std::atomic<int> outer_chunks{0}, inner_calls{0}, outside_region{0};
  parallel_for(64, 1, [&](int64_t, int64_t) {
    ++outer_chunks;
    run_serially([&] {
      const std::thread::id self = std::this_thread::get_id();
      parallel_for(1 << 16, 1, [&](int64_t, int64_t) {
        ++inner_calls;
        if (std::this_thread::get_id() != self) ++outside_region;
      });
    });
  });
  EXPECT_EQ(inner_calls.load(), outer_chunks.load());
  EXPECT_EQ(outside_region.load(), 0);
}

TEST_F(Threading, RunSeriallyPropagatesExceptionsAndCloses) {
  set_num_threads(2);
  EXPECT_THROW(run_serially([] { throw std::out_of_range("inside the region"); }), std::out_of_range);
  EXPECT_FALSE(in_serial_region());
  EXPECT_ERROR_HAS(run_serially([] { parallel_for(100, 1, [](int64_t, int64_t) { throw Error("serial kernel"); }); }),
                   "serial kernel");
  EXPECT_FALSE(in_serial_region());
  expect_exact_cover(100003, 16);  // and parallel_for splits again afterwards
}

TEST_F(Threading, NonPositiveGrainOrNegativeCount) {
  // Not specified in threading.h; either a strata::Error or a correct result, never a crash/hang.
  set_num_threads(2);
  for (int64_t grain : {0, -5}) {
    try {
      expect_exact_cover(1000, grain);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("parallel_for"));
    }
  }
  try {
    int64_t covered = 0;
    parallel_for(-1, 1, [&](int64_t b, int64_t e) { covered += e - b; });
    EXPECT_EQ(covered, 0);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("parallel_for"));
  }
}

}  // namespace
