// Storage, allocators and external allocations; the version counter; Tensor's raw constructor.

#include "core/storage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/tensor.h"
#include "test_util.h"

namespace {

using namespace strata;
using strata_test::V;
using strata_test::vec;
using ::testing::AllOf;
using ::testing::HasSubstr;

/// Heap allocation that counts live allocations of its allocator.
class CountingAllocation final : public Allocation {
 public:
  CountingAllocation(std::size_t n, std::atomic<int>& live)
      : n_(n), live_(live), p_(::operator new(n == 0 ? 1 : n, std::align_val_t{Allocator::kAlignment})) {
    ++live_;
  }
  ~CountingAllocation() override {
    ::operator delete(p_, std::align_val_t{Allocator::kAlignment});
    --live_;
  }
  void* data() override { return p_; }
  std::size_t nbytes() const override { return n_; }

 private:
  std::size_t n_;
  std::atomic<int>& live_;
  void* p_;
};

class CountingAllocator final : public Allocator {
 public:
  std::unique_ptr<Allocation> allocate(std::size_t nbytes) override {
    ++calls;
    last_request = nbytes;
    return std::make_unique<CountingAllocation>(nbytes, live);
  }
  std::string_view name() const override { return "counting"; }
  std::atomic<int> calls{0};
  std::atomic<int> live{0};
  std::size_t last_request = 0;
};

class FailingAllocator final : public Allocator {
 public:
  std::unique_ptr<Allocation> allocate(std::size_t nbytes) override {
    throw Error("failing allocator: cannot allocate " + std::to_string(nbytes) + " bytes");
  }
  std::string_view name() const override { return "failing"; }
};

/// Restores the default allocator at scope exit.
struct DefaultAllocatorGuard {
  explicit DefaultAllocatorGuard(Allocator* a) : previous(set_default_allocator(a)) {}
  ~DefaultAllocatorGuard() { set_default_allocator(previous); }
  Allocator* previous;
};

TEST(Storage, UndefinedStorage) {
  Storage s;
  EXPECT_FALSE(s.defined());
  EXPECT_EQ(s.data(), nullptr);
  EXPECT_EQ(s.nbytes(), 0u);
  EXPECT_EQ(s.allocation(), nullptr);
  EXPECT_EQ(s.version(), 0u);
  s.bump_version();  // harmless no-op
  EXPECT_EQ(s.use_count(), 0);
  EXPECT_TRUE(s.is_same(Storage()));
}

TEST(Storage, DefaultAllocatorIsInstalled) {
  Allocator& a = default_allocator();
  EXPECT_FALSE(a.name().empty());
  Storage s = Storage::allocate(100);
  ASSERT_TRUE(s.defined());
  EXPECT_EQ(s.nbytes(), 100u);
  ASSERT_NE(s.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data()) % Allocator::kAlignment, 0u);
  std::memset(s.data(), 0xab, 100);  // the whole range is writable (ASan checks)
  EXPECT_EQ(static_cast<unsigned char*>(s.data())[99], 0xab);
}

TEST(Storage, DefaultAllocatorAlignmentForManySizes) {
  for (std::size_t n : {1u, 3u, 63u, 64u, 65u, 1000u, 4096u, 100000u}) {
    Storage s = Storage::allocate(n);
    EXPECT_EQ(s.nbytes(), n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data()) % Allocator::kAlignment, 0u) << n;
    std::memset(s.data(), 1, n);
  }
  Storage zero = Storage::allocate(0);
  EXPECT_TRUE(zero.defined());
  EXPECT_EQ(zero.nbytes(), 0u);
}

TEST(Storage, CopiesShareBytesAndVersion) {
  Storage a = Storage::allocate(16);
  EXPECT_EQ(a.use_count(), 1);
  Storage b = a;
  EXPECT_EQ(a.use_count(), 2);
  EXPECT_TRUE(a.is_same(b));
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(a.version(), 0u);
  b.bump_version();
  b.bump_version();
  EXPECT_EQ(a.version(), 2u);
  Storage c = Storage::allocate(16);
  EXPECT_FALSE(a.is_same(c));
  {
    Storage d = b;
    EXPECT_EQ(a.use_count(), 3);
  }
  EXPECT_EQ(a.use_count(), 2);
}

TEST(Storage, AllocatesThroughGivenAllocatorAndFreesOnce) {
  CountingAllocator alloc;
  {
    Storage s = Storage::allocate(48, alloc);
    EXPECT_EQ(alloc.calls, 1);
    EXPECT_EQ(alloc.last_request, 48u);
    EXPECT_EQ(alloc.live, 1);
    Storage copy = s;
    EXPECT_EQ(alloc.live, 1);
  }
  EXPECT_EQ(alloc.live, 0);
}

TEST(Storage, AllocatorErrorsPropagate) {
  FailingAllocator failing;
  EXPECT_THAT(ERROR_MESSAGE(Storage::allocate(10, failing)), HasSubstr("10 bytes"));
  TensorOptions opts;
  opts.allocator = &failing;
  EXPECT_THAT(ERROR_MESSAGE(zeros({2, 3}, opts)), HasSubstr("failing"));
}

TEST(Storage, WrapExternalAllocationRunsDeleterOnce) {
  int deleted = 0;
  void* seen = nullptr;
  std::vector<float> buf(8, 1.0f);
  {
    Storage s =
        Storage::wrap(std::make_unique<ExternalAllocation>(buf.data(), buf.size() * sizeof(float), [&](void* p) {
          ++deleted;
          seen = p;
        }));
    EXPECT_EQ(s.data(), buf.data());
    EXPECT_EQ(s.nbytes(), 32u);
    Storage t = s;
    { Storage u = t; }
    EXPECT_EQ(deleted, 0);
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(seen, buf.data());
}

TEST(Storage, ExternalAllocationWithoutDeleter) {
  float x = 3.0f;
  { Storage s = Storage::wrap(std::make_unique<ExternalAllocation>(&x, sizeof x, nullptr)); }
  EXPECT_EQ(x, 3.0f);
}

TEST(Storage, WrapNullAllocationIsAnError) { EXPECT_THAT(ERROR_MESSAGE(Storage::wrap(nullptr)), HasSubstr("wrap")); }

TEST(Storage, SetDefaultAllocatorRoutesFactories) {
  CountingAllocator alloc;
  {
    DefaultAllocatorGuard guard(&alloc);
    EXPECT_NE(guard.previous, nullptr);
    EXPECT_EQ(&default_allocator(), &alloc);
    Tensor t = zeros({4, 4});
    EXPECT_EQ(alloc.calls, 1);
    EXPECT_GE(alloc.last_request, 64u);
    EXPECT_EQ(alloc.live, 1);
    Tensor r = rand({3});
    EXPECT_EQ(alloc.calls, 2);
  }
  EXPECT_NE(&default_allocator(), &alloc);
  EXPECT_EQ(alloc.live, 0);  // the tensors above are gone
}

TEST(Storage, DefaultAllocatorMissingIsAnError) {
  Allocator* previous = set_default_allocator(nullptr);
  std::string msg = ERROR_MESSAGE(default_allocator());
  std::string msg2 = ERROR_MESSAGE(zeros({2}));
  set_default_allocator(previous);
  EXPECT_THAT(msg, HasSubstr("allocator"));
  EXPECT_THAT(msg2, HasSubstr("allocator"));
}

TEST(Storage, FactoryOptionAllocator) {
  CountingAllocator alloc;
  TensorOptions opts;
  opts.allocator = &alloc;
  opts.dtype = DType::f64;
  {
    Tensor t = ones({5}, opts);
    EXPECT_EQ(alloc.calls, 1);
    EXPECT_GE(alloc.last_request, 40u);
    EXPECT_EQ(t.at({4}), 1.0);
    Tensor v = t.view({5, 1});
    Tensor c = t.clone();
    EXPECT_EQ(alloc.live, alloc.calls.load());
  }
  EXPECT_EQ(alloc.live, 0);
}

// ---- Tensor over a Storage ---------------------------------------------------------------------

TEST(TensorStorage, ConstructorBuildsView) {
  Storage s = Storage::allocate(6 * sizeof(float));
  float* p = static_cast<float*>(s.data());
  for (int i = 0; i < 6; ++i) p[i] = static_cast<float>(i);
  Tensor t(s, {2, 3}, {3, 1}, 0, DType::f32);
  EXPECT_LAYOUT(t, ({2, 3}), ({3, 1}), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.at({1, 2}), 5.0);
  EXPECT_TRUE(t.storage().is_same(s));
  Tensor tt(s, {3, 2}, {1, 3}, 0, DType::f32);
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.at({2, 1}), 5.0);
  Tensor tail(s, {2}, {1}, 4, DType::f32);
  EXPECT_EQ(tail.at({0}), 4.0);
  EXPECT_EQ(tail.data_ptr(), static_cast<void*>(p + 4));
  EXPECT_TRUE(tail.shares_storage(t));
}

TEST(TensorStorage, ConstructorRejectsViewsOutsideStorage) {
  Storage s = Storage::allocate(6 * sizeof(float));
  EXPECT_THAT(ERROR_MESSAGE(Tensor(s, {2, 3}, {3, 1}, 1, DType::f32)), AllOf(HasSubstr("Tensor"), HasSubstr("[2, 3]")));
  EXPECT_THAT(ERROR_MESSAGE(Tensor(s, {2, 3}, {3, 1}, 0, DType::f64)),  // 48 bytes needed
              AllOf(HasSubstr("[2, 3]"), HasSubstr("f64")));
  EXPECT_THAT(ERROR_MESSAGE(Tensor(s, {7}, {1}, 0, DType::f32)), HasSubstr("[7]"));
  EXPECT_THAT(ERROR_MESSAGE(Tensor(s, {2}, {1}, -1, DType::f32)), HasSubstr("-1"));
  EXPECT_THAT(ERROR_MESSAGE(Tensor(s, {2, 3}, {1}, 0, DType::f32)), AllOf(HasSubstr("[2, 3]"), HasSubstr("[1]")));
  EXPECT_THAT(ERROR_MESSAGE(Tensor(s, {-2}, {1}, 0, DType::f32)), HasSubstr("-2"));
  EXPECT_THAT(ERROR_MESSAGE(Tensor(Storage(), {2}, {1}, 0, DType::f32)),
              AllOf(HasSubstr("Tensor"), HasSubstr("undefined")));
  // Exactly fitting is fine.
  Tensor ok(s, {3}, {2}, 1, DType::f32);  // elements 1, 3, 5
  EXPECT_EQ(ok.numel(), 3);
}

TEST(TensorStorage, ViewsKeepStorageAlive) {
  Tensor v;
  {
    Tensor a = arange(0, 10, 1, {DType::f32, nullptr});
    v = a.slice(0, 2, 5);
  }
  EXPECT_EQ(strata_test::values(v), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(v.storage().use_count(), 1);
}

TEST(TensorStorage, UseCountCountsViews) {
  Tensor a = zeros({4});
  const long base = a.storage().use_count();
  Tensor copy = a;  // a handle copy shares the impl, not a new view
  {
    Tensor v = a.view({2, 2});
    EXPECT_EQ(a.storage().use_count(), base + 1);
  }
  EXPECT_EQ(a.storage().use_count(), base);
}

TEST(TensorStorage, VersionSharedByViewsAndBumpedByWrites) {
  Tensor a = zeros({2, 3});
  Tensor v = a.transpose(0, 1);
  const uint64_t v0 = a.version();
  EXPECT_EQ(v.version(), v0);
  v.fill_(1.0);
  EXPECT_GT(a.version(), v0);
  const uint64_t v1 = a.version();
  a.select(0, 1).copy_(ones({3}));
  EXPECT_GT(v.version(), v1);
  const uint64_t v2 = a.version();
  a.zero_();
  EXPECT_GT(a.version(), v2);
  const uint64_t v3 = a.version();
  a.bump_version();
  EXPECT_EQ(v.version(), v3 + 1);
  Tensor c = a.clone();
  const uint64_t v4 = a.version();
  c.fill_(5.0);
  EXPECT_EQ(a.version(), v4);  // clones have their own counter
  // Reads and views do not bump.
  (void)a.at({0, 0});
  (void)a.view({6});
  (void)a.contiguous();
  EXPECT_EQ(a.version(), v4);
}

}  // namespace
