#include "tests/cpp/fuzz/fuzz_harness.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <stdexcept>

#include "core/error.h"

namespace strata::fuzz {

namespace {

// Bytes that sit on boundaries of the formats' fields.
constexpr unsigned char kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '\t', '\n', '-', '0', '9', ',', 'e', 'x'};

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

void Mutator::mutate_once(std::string& s, const std::string& other, std::string& history) {
  switch (below(7)) {
    case 0:  // truncate
      s.resize(below(s.size() + 1));
      history += " truncate";
      break;
    case 1:  // flip bits
      for (std::size_t n = 1 + below(4); n > 0 && !s.empty(); --n)
        s[below(s.size())] ^= static_cast<char>(1u << below(8));
      history += " flip";
      break;
    case 2:  // a boundary byte
      if (!s.empty()) s[below(s.size())] = static_cast<char>(kInteresting[below(sizeof kInteresting)]);
      history += " byte";
      break;
    case 3: {  // splice: our head, the other's tail
      const std::size_t a = below(s.size() + 1), b = below(other.size() + 1);
      s = s.substr(0, a) + other.substr(b);
      history += " splice";
      break;
    }
    case 4: {  // duplicate a range
      const std::size_t a = below(s.size() + 1), n = below(std::min<std::size_t>(s.size() - a, 256) + 1);
      s.insert(a, s.substr(a, n));
      history += " dup";
      break;
    }
    case 5: {  // delete a range
      const std::size_t a = below(s.size() + 1), n = below(std::min<std::size_t>(s.size() - a, 64) + 1);
      s.erase(a, n);
      history += " delete";
      break;
    }
    default: {  // insert random bytes
      std::string junk(1 + below(16), '\0');
      for (char& c : junk) c = static_cast<char>(gen_());
      s.insert(below(s.size() + 1), junk);
      history += " insert";
      break;
    }
  }
}

std::string Mutator::mutate(const std::string& input, const std::string& other, std::string& history) {
  std::string s = input;
  for (std::size_t n = 1 + below(4); n > 0; --n) mutate_once(s, other, history);
  return s;
}

ScratchDir::ScratchDir() {
  static std::atomic<int> counter{0};
  // Memory-backed when the machine has it: thousands of small files per reader.
  const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                               : std::filesystem::temp_directory_path();
  path = base / ("strata_fuzz_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)));
  std::filesystem::create_directories(path);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

int fuzz_reader(const std::vector<std::string>& seeds, const Reader& reader, const FuzzOptions& options) {
  EXPECT_FALSE(seeds.empty());
  if (seeds.empty()) return 0;
  ScratchDir dir;
  const std::filesystem::path file = dir.path / options.file_name;
  Mutator mutator(options.seed);
  int accepted = 0, failures = 0;
  for (int i = 0; i < options.cases && failures < 5; ++i) {
    std::string history;
    const std::string input = mutator.mutate(seeds[static_cast<std::size_t>(i) % seeds.size()],
                                             seeds[static_cast<std::size_t>(i + 1) % seeds.size()], history);
    write_file(file, input);
    std::string problem;
    try {
      reader(file.string());
      ++accepted;
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.find(options.file_name) == std::string::npos) problem = "the error does not name the file: " + what;
    } catch (const std::bad_alloc&) {
      problem = "std::bad_alloc (a size from the input was trusted)";
    } catch (const std::exception& e) {
      problem = std::string("not a strata::Error: ") + e.what();
    }
    if (problem.empty()) continue;
    ++failures;
    ADD_FAILURE() << "case " << i << " (seed " << options.seed << ", mutations:" << history << ", " << input.size()
                  << " bytes): " << problem;
    if (std::getenv("STRATA_FUZZ_KEEP") != nullptr)
      write_file(std::filesystem::temp_directory_path() / ("strata_fuzz_case_" + std::to_string(i)), input);
  }
  return accepted;
}

}  // namespace strata::fuzz
