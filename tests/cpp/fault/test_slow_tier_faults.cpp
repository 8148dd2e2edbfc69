// Fault injection on the slow tier (Note [Fault-injection suite]): a file system that is full
// before the heap starts, one that another process fills while it runs, two processes sharing
// one, a fault nobody guarded, and an address-space limit. Each must end in a strata::Error that
// names the directory and the bytes (or in success), never in SIGBUS.

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "fault_env.h"
#include "memory/detail/fault_guard.h"
#include "memory/heap.h"
#include "memory/tiered_memory.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "tests/cpp/error_text.h"

using ::testing::AllOf;
using ::testing::HasSubstr;

namespace strata::fault {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

memory::TieredConfig small_tiers(const std::string& dir, std::size_t fast, std::size_t slow) {
  memory::TieredConfig c;
  c.fast_bytes = fast;
  c.slow_bytes = slow;
  c.slow_dir = dir;
  c.backend = memory::PmBackend::Mmap;
  c.model = SlowTierModelSpec::off();
  return c;
}

// Allocates `count` objects of `bytes` through `mem`, each filled with its index; stops at the
// first strata::Error and returns its message ("" when all fit). The objects stay in `held`.
std::string allocate_filled(memory::TieredMemory& mem, int count, std::size_t bytes,
                            std::vector<std::unique_ptr<Allocation>>& held) {
  for (int i = 0; i < count; ++i) {
    try {
      held.push_back(mem.allocate(bytes));
    } catch (const Error& e) {
      return e.what();
    }
    Allocation& a = *held.back();
    a.pin(AccessMode::Write, bytes);
    std::memset(a.data(), static_cast<int>(held.size() & 0x7f), bytes);
    a.unpin(AccessMode::Write);
  }
  return "";
}

// Every held object still has its bytes (read wherever it lives now: no page of it was lost).
void expect_intact(std::vector<std::unique_ptr<Allocation>>& held, std::size_t bytes) {
  for (std::size_t i = 0; i < held.size(); ++i) {
    Allocation& a = *held[i];
    a.pin(AccessMode::Read, bytes);
    const auto* p = static_cast<const unsigned char*>(a.data());
    const unsigned char want = static_cast<unsigned char>((i + 1) & 0x7f);
    EXPECT_EQ(p[0], want) << "object " << i;
    EXPECT_EQ(p[bytes - 1], want) << "object " << i;
    a.unpin(AccessMode::Read);
  }
}

TEST(SlowTierFaults, FullBeforeStartFailsAtCreationNamingTheDirectory) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(8 * kMiB);
  fs.fill("ballast", kMiB);
  const std::string msg =
      testing_util::message_of([&] { memory::TieredMemory mem(small_tiers(fs.path(), 2 * kMiB, 64 * kMiB)); });
  EXPECT_THAT(msg, AllOf(HasSubstr(fs.path()), HasSubstr("No space left on device"), HasSubstr("free there"),
                         HasSubstr("cannot reserve 2.0 MiB")));
}

TEST(SlowTierFaults, RunningOutOfSpaceIsAnErrorAndEarlierObjectsStayIntact) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(16 * kMiB);
  memory::TieredMemory mem(small_tiers(fs.path(), 2 * kMiB, 64 * kMiB));
  std::vector<std::unique_ptr<Allocation>> held;
  // The Python repro of issue 24 (40 tensors of 1 MiB, a 2 MiB fast tier) on a 16 MiB disk.
  const std::string msg = allocate_filled(mem, 40, kMiB, held);
  EXPECT_THAT(msg, AllOf(HasSubstr(fs.path()), HasSubstr("No space left on device"), HasSubstr("bytes")));
  EXPECT_GT(held.size(), 8u);
  EXPECT_LT(held.size(), 40u);
  expect_intact(held, kMiB);
}

TEST(SlowTierFaults, FilledByAnotherProcessDuringARun) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(32 * kMiB);
  memory::TieredMemory mem(small_tiers(fs.path(), 2 * kMiB, 64 * kMiB));
  std::vector<std::unique_ptr<Allocation>> held;
  ASSERT_EQ(allocate_filled(mem, 6, kMiB, held), "");  // 4 MiB already in the slow tier
  const ChildResult filler = run_child("fill", with_args({fs.path()}));
  ASSERT_TRUE(filler.exited && filler.exit_code == 0) << filler.describe();
  const std::string msg = allocate_filled(mem, 60, kMiB, held);
  EXPECT_THAT(msg, AllOf(HasSubstr(fs.path()), HasSubstr("No space left on device")));
  expect_intact(held, kMiB);
}

const bool kFill = register_scenario("fill", [](const std::vector<std::string>& args) {
  fill_directory(args.at(0), "filler", 0);
  return 0;
});

// A child that keeps `count` MiB-objects of tiered memory in `dir` (fast tier 1 MiB) alive for a
// moment, so that two of them compete for the same disk.
const bool kHold = register_scenario("hold", [](const std::vector<std::string>& args) {
  memory::TieredMemory mem(small_tiers(args.at(0), kMiB, 64 * kMiB));
  std::vector<std::unique_ptr<Allocation>> held;
  const std::string msg = allocate_filled(mem, std::stoi(args.at(1)), kMiB, held);
  if (!msg.empty()) {
    std::printf("strata::Error: %s\n", msg.c_str());
    return kErrorExit;
  }
  usleep(200 * 1000);
  expect_intact(held, kMiB);
  return ::testing::Test::HasFailure() ? 1 : 0;
});

TEST(SlowTierFaults, TwoProcessesSharingADiskEndCleanly) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(24 * kMiB);
  // Jobs of 6 MiB each fit together; jobs of 16 MiB do not, and since both grow their heaps step
  // by step, both may run out (each holding part of the disk): each must then stop with the error
  // naming the directory, never with a signal.
  for (const char* objects : {"6", "16", "16", "16"}) {
    const int a = start_child("hold", with_args({fs.path(), objects}));
    const int b = start_child("hold", with_args({fs.path(), objects}));
    const ChildResult ra = wait_child(a), rb = wait_child(b);
    for (const ChildResult* r : {&ra, &rb}) {
      ASSERT_TRUE(r->exited) << r->describe();
      if (std::string(objects) == "6") {
        EXPECT_EQ(r->exit_code, 0) << r->describe();
      } else {
        ASSERT_TRUE(r->exit_code == 0 || r->exit_code == kErrorExit) << r->describe();
      }
      if (r->exit_code == kErrorExit) {
        EXPECT_THAT(r->output, AllOf(HasSubstr(fs.path()), HasSubstr("No space left")));
      }
    }
  }
}

// A fault no reservation prevented (here: the file truncated under the mapping) is reported by
// the handler, with the heap's name and status 74, not as a bare "Bus error".
const bool kTruncated = register_scenario("truncated", [](const std::vector<std::string>& args) {
  const std::string path = args.at(0) + "/victim";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (fd < 0 || ftruncate(fd, 4 * page) != 0) return 10;
  auto* p = static_cast<char*>(mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (p == MAP_FAILED) return 11;
  memory::register_fault_range(p, 4 * page, "pm:mmap:" + args.at(0));
  if (ftruncate(fd, 0) != 0) return 12;
  p[2 * page] = 1;  // SIGBUS
  return 13;
});

TEST(SlowTierFaults, AnUnguardedFaultIsReportedNotABareSignal) {
  Tmpfs* fs = nullptr;
  std::unique_ptr<Tmpfs> owned;
  std::string dir = ::testing::TempDir();
  if (Tmpfs::available(nullptr)) {
    owned = std::make_unique<Tmpfs>(kMiB);
    fs = owned.get();
    dir = fs->path();
  }
  const ChildResult r = run_child("truncated", with_args({dir}));
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, memory::kSlowTierFaultExitCode) << r.describe();
  EXPECT_THAT(r.output, AllOf(HasSubstr("slow-tier heap 'pm:mmap:" + dir + "'"), HasSubstr("SIGBUS")));
}

TEST(SlowTierFaults, TouchPagesReportsAPageThatCannotBeBacked) {
  const std::string path = ::testing::TempDir() + "/strata-touch-" + std::to_string(getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  unlink(path.c_str());
  const long page = sysconf(_SC_PAGE_SIZE);
  ASSERT_EQ(ftruncate(fd, 4 * page), 0);
  auto* p = static_cast<char*>(mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_TRUE(memory::touch_pages(p, 4 * page));
  ASSERT_EQ(ftruncate(fd, page), 0);  // pages 1..3 now lie past the end of the file
  EXPECT_FALSE(memory::touch_pages(p, 4 * page));
  EXPECT_TRUE(memory::touch_pages(p, page));  // the guard is re-armed each call
  munmap(p, 4 * page);
  close(fd);
}

// The default configuration (half the RAM fast, twice the RAM slow) in a process limited to
// 3 GiB of address space: heaps grow on demand, so tensors and a matmul work.
const bool kDefaults = register_scenario("defaults", [](const std::vector<std::string>&) {
  std::vector<Tensor> ts;
  for (int i = 0; i < 40; ++i) ts.push_back(ones({256, 1024}));
  const Tensor m = matmul(ts[0], ts[1].t());
  std::printf("sum %.1f\n", sum(m).item<double>());
  return 0;
});

TEST(SlowTierFaults, DefaultsRunUnderAThreeGiBAddressSpaceLimit) {
  expect_runs_in_three_gib("defaults", {}, "sum 67108864.0");
}

}  // namespace
}  // namespace strata::fault
