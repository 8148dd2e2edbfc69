// Records the fast/slow heap occupancy of a toy "training step" that does not fit the fast tier
// and saves it as JSON; Python draws it in the style of the dissertation's Figure 4.6 (Note
// [Timeline plots are drawn in Python] in memory/memory_stats.h):
//
//   ./build/release/examples/occupancy_timeline [out.json]
//   python3 -m strata.memory_plot out.json out.png          (the command it prints; needs
//                                                            `pip install .` and matplotlib)

#include <filesystem>
#include <iostream>
#include <vector>

#include "core/factories.h"
#include "core/text.h"
#include "memory/tiered_memory.h"

using namespace strata;
using namespace strata::memory;

int main(int argc, char** argv) {
  const std::string json = argc > 1 ? argv[1] : "occupancy.json";
  TieredConfig config;
  config.fast_bytes = 4 << 20;  // a 4 MiB fast tier: the "activations" below need 7 MiB
  config.slow_bytes = 64 << 20;
  config.backend = PmBackend::Mmap;
  TieredMemory mem(config);
  MemoryStats& stats = mem.manager().stats();
  stats.timeline().enable(true);
  const TensorOptions options{DType::f32, &mem};

  for (int step = 0; step < 2; ++step) {
    stats.sample("forward");
    std::vector<Tensor> activations;
    for (int layer = 0; layer < 28; ++layer) activations.push_back(full({256, 256}, layer, options));
    stats.sample("backward");
    while (!activations.empty()) {
      Tensor grad = activations.back().clone();  // reads the saved activation (maybe from PM)
      activations.pop_back();                    // freed without write-back
    }
  }
  stats.sample("end");
  std::cout << stats.describe() << "\n";
  try {
    stats.timeline().save_json(json);
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::string png = std::filesystem::path(json).replace_extension(".png").string();
  if (png == json) png = json + ".png";  // never suggest drawing over the data
  std::cout << "saved " << json << "; draw it with:\n  python3 -m strata.memory_plot " << quote_path(json) << " "
            << quote_path(png) << "\n";
  return 0;
}
