// A tour of Strata's core: tensors, views that share storage, dtype conversion, seeded random
// numbers and the thread setting. Run by the README's first command until training lands.

#include <iostream>

#include "core/factories.h"
#include "core/threading.h"
#include "memory/tiered_memory.h"
#include "ops/dnnl_info.h"

using namespace strata;

int main() {
  std::cout << "Strata core tour — " << ops::dnnl_summary() << ", " << get_num_threads() << " threads, allocator '"
            << default_allocator().name() << "'\n";
  if (default_allocator().name() == "tiered")
    std::cout << "tiered memory: " << memory::tiered_memory().config().describe() << "\n";
  std::cout << "\n";

  // A 3x4 matrix of 0..11 and a few views of it.
  Tensor a = arange(0, 12, 1, {DType::f32, nullptr}).view({3, 4});
  std::cout << "a = arange(12).view(3, 4):\n" << a << "\n\n";
  Tensor at = a.t();
  std::cout << "a.t() shares storage: " << std::boolalpha << at.shares_storage(a) << ", strides " << at.strides()
            << ", contiguous " << at.is_contiguous() << "\n";
  Tensor col = a.select(1, 2);
  std::cout << "a[:, 2] = " << col << "\n";
  Tensor every_other = a.slice(1, 0, std::nullopt, 2);
  std::cout << "a[:, ::2] =\n" << every_other << "\n";

  // Writing through a view is visible in the base.
  a.narrow(0, 1, 1).fill_(-1.0);
  std::cout << "after a[1:2].fill_(-1):\n" << a << "\n\n";

  // Broadcasting copy and dtype conversion.
  Tensor row = tensor<float>({0.5f, 1.5f, 2.5f, 3.5f});
  Tensor b = empty({3, 4});
  b.copy_(row);  // broadcast [4] -> [3, 4]
  std::cout << "b.copy_(row) =\n" << b << "\n";
  std::cout << "b.to(i32) = " << b.to(DType::i32).select(0, 0) << "  b.to(bf16)[0] = " << b.to(DType::bf16).select(0, 0)
            << "\n\n";

  // Seeded, thread-count-independent random numbers.
  manual_seed(0);
  set_num_threads(1);
  Tensor r1 = randn({1 << 16});
  manual_seed(0);
  set_num_threads(2);
  Tensor r2 = randn({1 << 16});
  double max_diff = 0;
  for (int64_t i = 0; i < r1.numel(); ++i) max_diff = std::max(max_diff, std::abs(r1.at({i}) - r2.at({i})));
  std::cout << "randn(65536) with 1 and 2 threads, same seed: max |difference| = " << max_diff << "\n";
  std::cout << "randn(2, 3) =\n" << randn({2, 3}) << "\n";

  if (default_allocator().name() == "tiered")
    std::cout << "\n" << memory::tiered_memory().manager().stats().describe() << "\n";
  return max_diff == 0.0 ? 0 : 1;
}
