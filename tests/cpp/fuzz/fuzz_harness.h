#pragma once
// A seeded mutation fuzzer for the readers of user files (Criteo TSV and binary, NumPy files,
// trace files, checkpoints): valid seed inputs are truncated, bit-flipped, overwritten with
// boundary bytes, spliced with each other, and have ranges duplicated, deleted or inserted; each
// mutant is written to a file and handed to the reader. The reader must either accept it or throw
// strata::Error naming the file — never crash (the suite runs under ASan/UBSan in CI), hang (ctest's
// timeout), or throw anything else (std::bad_alloc from a size read out of a corrupt header,
// std::out_of_range, ...). Seeds are fixed, so a failure reproduces; the case number and the
// mutation history are in the failure message, and STRATA_FUZZ_KEEP=1 keeps the failing input.

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace strata::fuzz {

/// Mutates byte strings, deterministically for a seed.
class Mutator {
 public:
  explicit Mutator(uint64_t seed) : gen_(seed) {}
  /// 1–4 mutations of `input`; `other` is spliced from. `history` gets one word per mutation.
  std::string mutate(const std::string& input, const std::string& other, std::string& history);

 private:
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(gen_() % n); }
  void mutate_once(std::string& s, const std::string& other, std::string& history);
  std::mt19937_64 gen_;
};

/// What a reader returns: nothing (success) or throws.
using Reader = std::function<void(const std::string& path)>;

struct FuzzOptions {
  int cases = 2000;
  uint64_t seed = 1;
  /// The file name the mutant is written under (some readers look at names or neighbours).
  std::string file_name = "input.bin";
};

/// Runs `options.cases` mutants of `seeds` through `reader` (see the file comment) in a fresh
/// temporary directory; gtest failures name the case and its mutations. Returns how many mutants
/// the reader accepted (a harness in which every mutant fails early tests little).
int fuzz_reader(const std::vector<std::string>& seeds, const Reader& reader, const FuzzOptions& options);

/// A directory under the system temp dir removed at destruction.
struct ScratchDir {
  ScratchDir();
  ~ScratchDir();
  std::filesystem::path path;
};

}  // namespace strata::fuzz
