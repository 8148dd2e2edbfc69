#include "embeddings/criteo_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/file.h"
#include "core/npz.h"
#include "core/text.h"
#include "core/threading.h"
#include "embeddings/criteo.h"

namespace strata::emb {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kDense = kCriteoDense;
constexpr int64_t kSparse = kCriteoSparse;

/// A read-only mapping of a whole file (nothing mapped for an empty file).
class MappedFile {
 public:
  MappedFile(const std::string& path, std::string_view what) {
    std::FILE* f = open_file_for_reading(path, what);
    const int fd = ::fileno(f);
    struct stat st {};
    const bool ok = ::fstat(fd, &st) == 0;
    size_ = ok ? static_cast<std::size_t>(st.st_size) : 0;
    if (ok && size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const char*>(p);
        ::madvise(p, size_, MADV_SEQUENTIAL);
      }
    }
    std::fclose(f);
    STRATA_CHECK(ok && (size_ == 0 || data_ != nullptr), what, ": cannot map ", quote_path(path), " (",
                 std::strerror(errno), ")");
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

/// key -> id in order of first insertion: open addressing with linear probing (Note [Criteo
/// preprocessing]: one per column per chunk, and one global per column).
class KeyIds {
 public:
  uint32_t find_or_insert(uint64_t key) {
    if ((keys_.size() + 1) * 2 > slots_.size()) grow();
    std::size_t i = slot(key);
    for (;;) {
      Slot& s = slots_[i];
      if (s.id == kEmpty) {
        const auto fresh = static_cast<uint32_t>(keys_.size());
        s = {key, fresh};
        keys_.push_back(key);
        return fresh;
      }
      if (s.key == key) return s.id;
      i = (i + 1) & mask_;
    }
  }
  const std::vector<uint64_t>& keys() const { return keys_; }
  std::size_t size() const { return keys_.size(); }
  void clear() {
    if (!keys_.empty()) std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
  }

 private:
  static constexpr uint32_t kEmpty = 0xffffffffu;
  struct Slot {  // key and id side by side: one cache line per probe
    uint64_t key = 0;
    uint32_t id = kEmpty;
  };
  std::size_t slot(uint64_t key) const {
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    return static_cast<std::size_t>(key >> 17) & mask_;
  }
  void grow() {
    const std::size_t cap = std::max<std::size_t>(1024, slots_.size() * 2);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (std::size_t id = 0; id < keys_.size(); ++id) {
      std::size_t i = slot(keys_[id]);
      while (slots_[i].id != kEmpty) i = (i + 1) & mask_;
      slots_[i] = {keys_[id], static_cast<uint32_t>(id)};
    }
  }
  std::vector<Slot> slots_;
  std::vector<uint64_t> keys_;
  std::size_t mask_ = 0;
};

/// A line-aligned piece of one raw file.
struct Chunk {
  int64_t file = 0;
  std::size_t begin = 0, end = 0;  // byte range
  int64_t lines = 0;               // pass 1
  int64_t first_line = 0;          // 0-based line in its file
  int64_t first_global = 0;        // 0-based line over all files (= draw index, = raw row)
};

/// Cuts the files into chunks of about `target` bytes ending after a '\n' (or at the file end).
std::vector<Chunk> make_chunks(const std::vector<std::unique_ptr<MappedFile>>& files, std::size_t target) {
  std::vector<Chunk> chunks;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const char* d = files[f]->data();
    const std::size_t size = files[f]->size();
    std::size_t at = 0;
    while (at < size) {
      std::size_t end = std::min(size, at + target);
      if (end < size) {
        const void* nl = std::memchr(d + end - 1, '\n', size - (end - 1));
        end = nl == nullptr ? size : static_cast<std::size_t>(static_cast<const char*>(nl) - d) + 1;
      }
      chunks.push_back({static_cast<int64_t>(f), at, end, 0, 0, 0});
      at = end;
    }
  }
  return chunks;
}

/// Pass 1: lines per chunk (a last line without '\n' counts, as Python's `for line in f`), then
/// each chunk's first line in its file and overall.
void count_lines(const std::vector<std::unique_ptr<MappedFile>>& files, std::vector<Chunk>& chunks) {
  parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      Chunk& ch = chunks[static_cast<std::size_t>(c)];
      const char* d = files[static_cast<std::size_t>(ch.file)]->data();
      int64_t n = std::count(d + ch.begin, d + ch.end, '\n');
      if (ch.end > ch.begin && d[ch.end - 1] != '\n') ++n;
      ch.lines = n;
    }
  });
  int64_t global = 0, in_file = 0, file = -1;
  for (Chunk& ch : chunks) {
    if (ch.file != file) {
      file = ch.file;
      in_file = 0;
    }
    ch.first_line = in_file;
    ch.first_global = global;
    in_file += ch.lines;
    global += ch.lines;
  }
}

void column_name(int64_t field, char* buf, std::size_t n) {
  if (field == 0) std::snprintf(buf, n, "label");
  else if (field <= kDense) std::snprintf(buf, n, "I%lld", static_cast<long long>(field));
  else std::snprintf(buf, n, "C%lld", static_cast<long long>(field - kDense));
}

/// What every parse task shares.
struct ParseContext {
  const std::vector<std::string>* paths = nullptr;
  const std::vector<std::unique_ptr<MappedFile>>* files = nullptr;
  std::vector<int64_t> day_starts;   // global line of each day's first line, plus the total
  std::vector<uint64_t> drop;        // bit g: the line's draw is < rate (dropped when its label is 0)
  int64_t max_ind_range = -1;
  int32_t* y = nullptr;              // raw-line-indexed outputs (compacted after sub-sampling)
  int32_t* x_int = nullptr;
  int32_t* x_cat = nullptr;
};

/// A chunk's parse state: its kept lines, kept lines per day and per-column local ids.
struct ChunkState {
  int64_t kept = 0;
  std::vector<std::pair<int64_t, int64_t>> kept_per_day;  // (day, lines)
  std::array<KeyIds, kSparse> local;
  std::array<std::vector<uint32_t>, kSparse> remap;
};

/// Parses the fields of one line (Note [Criteo preprocessing]); throws naming file, line, column.
class LineParser {
 public:
  LineParser(const std::string& path, int64_t line_no) : path_(path), line_(line_no) {}

  [[noreturn]] void fail(int64_t field, std::string_view text, const char* why) const {
    char name[16];
    column_name(field, name, sizeof name);
    throw Error(::strata::detail::format_message("criteo ", quote_path(path_), " line ", line_, ", column ", name,
                                                 ": ", quote_field(text), " ", why));
  }
  [[noreturn]] void fail_fields(int64_t found) const {
    throw Error(::strata::detail::format_message("criteo ", quote_path(path_), " line ", line_, ": expected ",
                                                 kCriteoFields, " tab-separated fields (label, I1..I13, C1..C26), ",
                                                 "found ", found));
  }

  /// A decimal integer field ending at '\t', '\n', '\r' or `end`; empty is 0.
  int64_t integer(const char*& p, const char* end, int64_t field) const {
    const char* start = p;
    bool neg = false;
    if (p < end && *p == '-') {
      neg = true;
      ++p;
    }
    int64_t v = 0;
    const char* digits = p;
    while (p < end && static_cast<unsigned char>(*p - '0') < 10) {
      v = v * 10 + (*p - '0');
      if (v > (int64_t{1} << 31)) fail(field, field_text(start, end), "does not fit int32");
      ++p;
    }
    if ((p == digits && neg) || !at_separator(p, end)) fail(field, field_text(start, end), "is not an integer");
    v = neg ? -v : v;
    if (v > INT32_MAX) fail(field, field_text(start, end), "does not fit int32");
    return v;
  }

  /// A hex field of at most 16 digits; empty is 0.
  uint64_t hex(const char*& p, const char* end, int64_t field) const {
    const char* start = p;
    uint64_t v = 0;
    while (p < end) {
      const unsigned char c = static_cast<unsigned char>(*p);
      unsigned d;
      if (static_cast<unsigned>(c - '0') < 10u) d = static_cast<unsigned>(c - '0');
      else if (static_cast<unsigned>((c | 0x20) - 'a') < 6u) d = static_cast<unsigned>((c | 0x20) - 'a') + 10;
      else break;
      v = (v << 4) | d;
      ++p;
    }
    if (p - start > 16 || !at_separator(p, end))
      fail(field, field_text(start, end), "is not a hexadecimal category (at most 16 hex digits)");
    return v;
  }

  static bool at_separator(const char* p, const char* end) {
    return p == end || *p == '\t' || *p == '\n' || *p == '\r';
  }
  static std::string_view field_text(const char* start, const char* end) {
    const char* q = start;
    while (q < end && *q != '\t' && *q != '\n') ++q;
    return {start, static_cast<std::size_t>(q - start)};
  }

 private:
  const std::string& path_;
  int64_t line_;
};

/// Moves past the separator after field `field`: a tab before the last field, the line end after
/// it. Returns false at the end of the line.
bool next_field(const char*& p, const char* end, int64_t field, const LineParser& lp) {
  if (field + 1 < kCriteoFields) {
    if (p < end && *p == '\t') {
      ++p;
      return true;
    }
    lp.fail_fields(field + 1);
  }
  if (p < end && *p == '\r') ++p;
  if (p < end && *p == '\t') {
    int64_t found = kCriteoFields;
    for (; p < end && *p != '\n'; ++p) found += *p == '\t';
    lp.fail_fields(found);
  }
  if (p < end && *p == '\n') ++p;
  return false;
}

/// Parses one line into row `row` of the outputs (local ids in X_cat). Returns false when the
/// line is dropped by sub-sampling.
bool parse_line(const char*& p, const char* end, int64_t global, int64_t row, const LineParser& lp,
                const ParseContext& ctx, ChunkState& st) {
  const char* label_text = p;
  const int64_t label = lp.integer(p, end, 0);
  if (label != 0 && label != 1) lp.fail(0, LineParser::field_text(label_text, end), "is not a 0/1 label");
  next_field(p, end, 0, lp);
  int32_t dense[kDense];
  for (int64_t j = 0; j < kDense; ++j) {
    const int64_t v = lp.integer(p, end, 1 + j);
    dense[j] = static_cast<int32_t>(v < 0 ? 0 : v);
    next_field(p, end, 1 + j, lp);
  }
  uint32_t ids[kSparse];
  const bool drop = label == 0 && !ctx.drop.empty() &&
                    ((ctx.drop[static_cast<std::size_t>(global >> 6)] >> (global & 63)) & 1);
  for (int64_t k = 0; k < kSparse; ++k) {
    uint64_t h = lp.hex(p, end, 1 + kDense + k);
    if (ctx.max_ind_range > 0) h %= static_cast<uint64_t>(ctx.max_ind_range);
    if (!drop) ids[k] = st.local[static_cast<std::size_t>(k)].find_or_insert(h);
    next_field(p, end, 1 + kDense + k, lp);
  }
  if (drop) return false;
  ctx.y[row] = static_cast<int32_t>(label);
  std::memcpy(ctx.x_int + row * kDense, dense, sizeof dense);
  int32_t* cat = ctx.x_cat + row * kSparse;
  for (int64_t k = 0; k < kSparse; ++k) cat[k] = static_cast<int32_t>(ids[k]);
  return true;
}

/// Pass 2 for one chunk: parses its lines, writing kept rows from its raw row onwards.
void parse_chunk(const Chunk& ch, const ParseContext& ctx, ChunkState& st) {
  for (auto& l : st.local) l.clear();
  st.kept = 0;
  st.kept_per_day.clear();
  const char* d = (*ctx.files)[static_cast<std::size_t>(ch.file)]->data();
  const char* p = d + ch.begin;
  const char* end = d + ch.end;
  const std::string& path = (*ctx.paths)[static_cast<std::size_t>(ch.file)];
  auto day = static_cast<int64_t>(std::upper_bound(ctx.day_starts.begin(), ctx.day_starts.end(), ch.first_global) -
                                  ctx.day_starts.begin()) - 1;
  for (int64_t i = 0; i < ch.lines; ++i) {
    const int64_t g = ch.first_global + i;
    while (g >= ctx.day_starts[static_cast<std::size_t>(day + 1)]) ++day;
    const LineParser lp(path, ch.first_line + i + 1);
    if (!parse_line(p, end, g, ch.first_global + st.kept, lp, ctx, st)) continue;
    ++st.kept;
    if (st.kept_per_day.empty() || st.kept_per_day.back().first != day) st.kept_per_day.emplace_back(day, 0);
    ++st.kept_per_day.back().second;
  }
}

/// Merges a wave's local first-appearance lists into the global dictionaries in chunk order and
/// rewrites the wave's rows to global ids (Note [Criteo preprocessing]).
void merge_wave(std::span<const Chunk> wave, std::span<ChunkState> states, std::array<KeyIds, kSparse>& global,
                const ParseContext& ctx) {
  parallel_for(kSparse, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      KeyIds& g = global[static_cast<std::size_t>(k)];
      for (ChunkState& st : states) {
        const auto& keys = st.local[static_cast<std::size_t>(k)].keys();
        auto& remap = st.remap[static_cast<std::size_t>(k)];
        remap.resize(keys.size());
        for (std::size_t i = 0; i < keys.size(); ++i) remap[i] = g.find_or_insert(keys[i]);
        STRATA_CHECK(g.size() <= static_cast<std::size_t>(INT32_MAX), "criteo: column C", k + 1,
                     " has more than 2^31 - 1 distinct values (use --max-ind-range)");
      }
    }
  });
  parallel_for(static_cast<int64_t>(wave.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      const ChunkState& st = states[static_cast<std::size_t>(c)];
      int32_t* cat = ctx.x_cat + wave[static_cast<std::size_t>(c)].first_global * kSparse;
      for (int64_t r = 0; r < st.kept; ++r, cat += kSparse)
        for (int64_t k = 0; k < kSparse; ++k)
          cat[k] = static_cast<int32_t>(st.remap[static_cast<std::size_t>(k)][static_cast<std::size_t>(cat[k])]);
    }
  });
}

/// The progress bar (Note [Criteo preprocessing]): on stderr when it is a terminal or asked for.
class Progress {
 public:
  Progress(bool force, uint64_t total_bytes) : on_(force || ::isatty(2)), total_(total_bytes), start_(Clock::now()) {}
  void update(uint64_t bytes, int64_t lines) const {
    if (!on_) return;
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    const double frac = total_ ? static_cast<double>(bytes) / static_cast<double>(total_) : 1.0;
    const int width = 30;
    const int filled = static_cast<int>(frac * width);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(width - filled), '.');
    const double rate = t > 0 ? static_cast<double>(lines) / t : 0;
    const double eta = frac > 0 ? t * (1 - frac) / frac : 0;
    std::fprintf(stderr, "\rcriteo: [%s] %5.1f%% %lld lines, %.0f lines/s, ETA %.0f s ", bar.c_str(), 100 * frac,
                 static_cast<long long>(lines), rate, eta);
    std::fflush(stderr);
  }
  void done() const {
    if (on_) std::fprintf(stderr, "\n");
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  bool on_;
  uint64_t total_;
  Clock::time_point start_;
};

/// Kaggle: 7 days by line count; terabyte: one day per file.
std::vector<int64_t> day_starts_of(const std::vector<Chunk>& chunks, int64_t files, int64_t days) {
  std::vector<int64_t> per_file(static_cast<std::size_t>(files), 0);
  for (const Chunk& c : chunks) per_file[static_cast<std::size_t>(c.file)] += c.lines;
  std::vector<int64_t> per_day = per_file;
  if (files == 1) {
    const int64_t total = per_file[0];
    per_day.assign(static_cast<std::size_t>(days), total / days);
    for (int64_t j = 0; j < total % days; ++j) ++per_day[static_cast<std::size_t>(j)];
  }
  std::vector<int64_t> starts(1, 0);
  for (int64_t n : per_day) starts.push_back(starts.back() + n);
  return starts;
}

/// The sub-sampling draws: bit g set when line g's uniform is below the rate.
std::vector<uint64_t> draw_drops(int64_t lines, double rate, RandomStream& rng) {
  std::vector<uint64_t> bits(static_cast<std::size_t>((lines + 63) / 64), 0);
  for (int64_t g = 0; g < lines; ++g)
    if (rng.uniform() < rate) bits[static_cast<std::size_t>(g >> 6)] |= uint64_t{1} << (g & 63);
  return bits;
}

/// Moves each chunk's kept rows down to their final position (after sub-sampling).
void compact(const std::vector<Chunk>& chunks, const std::vector<int64_t>& kept, ParseContext& ctx) {
  int64_t out = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const int64_t from = chunks[c].first_global, n = kept[c];
    if (out != from) {
      std::memmove(ctx.y + out, ctx.y + from, static_cast<std::size_t>(n) * 4);
      std::memmove(ctx.x_int + out * kDense, ctx.x_int + from * kDense, static_cast<std::size_t>(n * kDense) * 4);
      std::memmove(ctx.x_cat + out * kSparse, ctx.x_cat + from * kSparse, static_cast<std::size_t>(n * kSparse) * 4);
    }
    out += n;
  }
}

struct Parsed {
  std::vector<int32_t> y, x_int, x_cat;
  std::vector<int64_t> total_per_file;
  std::vector<int64_t> counts;
  int64_t raw_lines = 0, rows = 0;
};

/// Pass 2 over all chunks in waves, then compaction.
void parse_all(const std::vector<Chunk>& chunks, ParseContext& ctx, Parsed& out, const Progress& progress) {
  std::array<KeyIds, kSparse> global;
  const auto wave_size = static_cast<std::size_t>(std::max(2, 2 * get_num_threads()));
  std::vector<ChunkState> states(std::min(wave_size, std::max<std::size_t>(1, chunks.size())));
  std::vector<int64_t> kept(chunks.size(), 0);
  uint64_t bytes = 0;
  for (std::size_t first = 0; first < chunks.size(); first += wave_size) {
    const std::size_t n = std::min(wave_size, chunks.size() - first);
    const std::span<const Chunk> wave(chunks.data() + first, n);
    parallel_for(static_cast<int64_t>(n), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c)
        parse_chunk(wave[static_cast<std::size_t>(c)], ctx, states[static_cast<std::size_t>(c)]);
    });
    merge_wave(wave, std::span<ChunkState>(states.data(), n), global, ctx);
    for (std::size_t c = 0; c < n; ++c) {
      kept[first + c] = states[c].kept;
      out.rows += states[c].kept;
      for (const auto& [day, lines] : states[c].kept_per_day) out.total_per_file[static_cast<std::size_t>(day)] += lines;
      bytes += wave[c].end - wave[c].begin;
    }
    progress.update(bytes, wave.back().first_global + wave.back().lines);
  }
  if (out.rows != out.raw_lines) compact(chunks, kept, ctx);
  for (const KeyIds& g : global) out.counts.push_back(static_cast<int64_t>(g.size()));
}

void write_outputs(const CriteoPaths& paths, const std::string& processed, bool compress, Parsed& p) {
  p.y.resize(static_cast<std::size_t>(p.rows));
  p.x_int.resize(static_cast<std::size_t>(p.rows * kDense));
  p.x_cat.resize(static_cast<std::size_t>(p.rows * kSparse));
  std::vector<int32_t> counts32(p.counts.begin(), p.counts.end());
  {
    npy::NpzWriter w(processed, compress);
    w.add<int32_t>("X_cat", {p.rows, kSparse}, p.x_cat.data());
    w.add<int32_t>("X_int", {p.rows, kDense}, p.x_int.data());
    w.add<int32_t>("y", {p.rows}, p.y.data());
    w.add<int32_t>("counts", {kSparse}, counts32.data());
    w.close();
  }
  npy::NpzWriter days(paths.day_count, true);
  days.add<int64_t>("total_per_file", {static_cast<int64_t>(p.total_per_file.size())}, p.total_per_file.data());
  days.close();
  npy::NpzWriter fea(paths.fea_count, true);
  fea.add<int32_t>("counts", {kSparse}, counts32.data());
  fea.close();
}

}  // namespace

// ---- paths ---------------------------------------------------------------------------------------------

CriteoPaths CriteoPaths::of(std::string_view data_set, const std::string& raw_path) {
  CriteoPaths p;
  STRATA_CHECK(data_set == "kaggle" || data_set == "terabyte", "--data-set: expected kaggle or terabyte, got ",
               quote_field(data_set));
  const bool kaggle = data_set == "kaggle";
  const std::size_t slash = raw_path.rfind('/');
  STRATA_CHECK(slash != std::string::npos, "--raw-data-file: ", quote_path(raw_path),
               " has no directory part; give it as ./", raw_path,
               " (the reference derives its output directory from the path and would write to '/')");
  p.d_path = raw_path.substr(0, slash + 1);
  const std::string name = raw_path.substr(slash + 1);
  p.d_file = kaggle ? name.substr(0, name.find('.')) : name;
  p.day_count = p.d_path + p.d_file + "_day_count.npz";
  p.fea_count = p.d_path + p.d_file + "_fea_count.npz";
  p.default_processed = p.d_path + (kaggle ? "kaggleAdDisplayChallenge_processed.npz" : "terabyte_processed.npz");
  p.days = kaggle ? 7 : 24;
  if (kaggle) {
    p.raw_files = {raw_path};
  } else {
    for (int64_t i = 0; i < p.days; ++i) p.raw_files.push_back(raw_path + "_" + std::to_string(i));
  }
  return p;
}

// ---- preprocessing -------------------------------------------------------------------------------------

CriteoPreprocessResult preprocess_criteo(const CriteoPreprocessConfig& config, RandomStream& rng) {
  const CriteoPaths paths = CriteoPaths::of(config.data_set, config.raw_data_file);
  const std::string processed =
      config.processed_data_file.empty() ? paths.default_processed : config.processed_data_file;
  STRATA_CHECK(config.sub_sample_rate >= 0 && config.sub_sample_rate <= 1,
               "--data-sub-sample-rate: expected a fraction in [0, 1], got ", config.sub_sample_rate);
  std::vector<std::unique_ptr<MappedFile>> files;
  uint64_t total_bytes = 0;
  for (const std::string& f : paths.raw_files) {
    files.push_back(std::make_unique<MappedFile>(f, "--raw-data-file"));
    total_bytes += files.back()->size();
  }
  const Progress progress(config.progress, total_bytes);
  std::vector<Chunk> chunks = make_chunks(files, std::max<std::size_t>(config.chunk_bytes, 1));
  count_lines(files, chunks);
  Parsed parsed;
  ParseContext ctx;
  ctx.paths = &paths.raw_files;
  ctx.files = &files;
  ctx.day_starts = day_starts_of(chunks, static_cast<int64_t>(files.size()), paths.days);
  parsed.raw_lines = ctx.day_starts.back();
  STRATA_CHECK(parsed.raw_lines > 0, "--raw-data-file: ", quote_path(config.raw_data_file), " holds no samples");
  CriteoPreprocessResult result;
  if (config.sub_sample_rate > 0) {
    ctx.drop = draw_drops(parsed.raw_lines, config.sub_sample_rate, rng);
    result.uniform_draws = static_cast<uint64_t>(parsed.raw_lines);
  }
  ctx.max_ind_range = config.max_ind_range;
  parsed.y.resize(static_cast<std::size_t>(parsed.raw_lines));
  parsed.x_int.resize(static_cast<std::size_t>(parsed.raw_lines * kDense));
  parsed.x_cat.resize(static_cast<std::size_t>(parsed.raw_lines * kSparse));
  ctx.y = parsed.y.data();
  ctx.x_int = parsed.x_int.data();
  ctx.x_cat = parsed.x_cat.data();
  parsed.total_per_file.assign(static_cast<std::size_t>(paths.days), 0);
  parse_all(chunks, ctx, parsed, progress);
  files.clear();
  write_outputs(paths, processed, config.compress, parsed);
  progress.done();
  result.processed_file = processed;
  result.total_per_file = parsed.total_per_file;
  result.counts = parsed.counts;
  result.raw_lines = parsed.raw_lines;
  result.rows = parsed.rows;
  result.seconds = progress.seconds();
  std::fprintf(stderr, "criteo: preprocessed %lld lines (%lld kept) of %s in %.2f s (%.0f lines/s) into %s\n",
               static_cast<long long>(result.raw_lines), static_cast<long long>(result.rows),
               quote_path(config.raw_data_file).c_str(), result.seconds,
               static_cast<double>(result.raw_lines) / std::max(result.seconds, 1e-9), quote_path(processed).c_str());
  return result;
}

// ---- reading -------------------------------------------------------------------------------------------

namespace {

/// Converts `n` elements of dtype `t` at `src` to int32, checking integrality and range.
void convert_to_int32(const unsigned char* src, npy::Dtype t, std::size_t n, int32_t* dst, const std::string& where,
                      int64_t first) {
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* p = src + i * npy::itemsize(t);
    double v = 0;
    switch (t) {
      case npy::Dtype::I4: {
        int32_t x;
        std::memcpy(&x, p, 4);
        dst[i] = x;
        continue;
      }
      case npy::Dtype::I8: {
        int64_t x;
        std::memcpy(&x, p, 8);
        v = static_cast<double>(x);
        STRATA_CHECK(x >= INT32_MIN && x <= INT32_MAX, where, ": element ", first + static_cast<int64_t>(i), " (", x,
                     ") does not fit int32");
        dst[i] = static_cast<int32_t>(x);
        continue;
      }
      case npy::Dtype::U1:
      case npy::Dtype::B1: dst[i] = *p; continue;
      case npy::Dtype::F4: {
        float x;
        std::memcpy(&x, p, 4);
        v = x;
        break;
      }
      case npy::Dtype::F8: std::memcpy(&v, p, 8); break;
    }
    STRATA_CHECK(v == std::floor(v) && v >= INT32_MIN && v <= INT32_MAX, where, ": element ",
                 first + static_cast<int64_t>(i), " (", v, ") is not an int32 integer");
    dst[i] = static_cast<int32_t>(v);
  }
}

}  // namespace

CriteoData::~CriteoData() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

void CriteoData::load_member(const std::string& name, int64_t cols, Matrix& out, bool memory_map) {
  const npy::NpzReader npz(path_);
  auto m = npz.open(name);
  const npy::Header& h = m->header();
  const std::string where = "criteo processed file " + quote_path(path_) + ", member " + quote_field(name);
  const bool vector = cols == 1 && name == "y";
  const bool ok = vector ? h.shape.size() == 1 : (h.shape.size() == 2 && h.shape[1] == cols);
  STRATA_CHECK(ok && h.shape[0] == rows_, where, ": shape ", h.shape_string(), ", expected ",
               vector ? "(" + std::to_string(rows_) + ",)"
                      : "(" + std::to_string(rows_) + ", " + std::to_string(cols) + ")");
  const bool fortran = h.fortran_order && h.shape.size() == 2;
  out.row_stride = fortran ? 1 : cols;
  out.col_stride = fortran ? rows_ : 1;
  const auto n = static_cast<std::size_t>(rows_ * cols);
  if (memory_map && h.dtype == npy::Dtype::I4 && m->data_file_offset() >= 0 && map_ != nullptr) {
    out.base = static_cast<const unsigned char*>(map_) + m->data_file_offset();
    return;
  }
  out.owned.resize(n);
  if (h.dtype == npy::Dtype::I4) {
    m->read(out.owned.data(), n * 4);
  } else {
    std::vector<unsigned char> buf(std::size_t{1} << 22);
    const std::size_t per = buf.size() / npy::itemsize(h.dtype);
    for (std::size_t at = 0; at < n; at += per) {
      const std::size_t k = std::min(per, n - at);
      m->read(buf.data(), k * npy::itemsize(h.dtype));
      convert_to_int32(buf.data(), h.dtype, k, out.owned.data() + at, where, static_cast<int64_t>(at));
    }
  }
  m->finish();
  out.base = reinterpret_cast<const unsigned char*>(out.owned.data());
}

std::shared_ptr<const CriteoData> CriteoData::load(const std::string& processed, const std::string& day_count_file,
                                                   int64_t days, bool memory_map) {
  std::shared_ptr<CriteoData> d(new CriteoData());
  d->path_ = processed;
  const npy::NpzReader npz(processed);
  npy::Header yh;
  {
    auto m = npz.open("y");
    yh = m->header();
  }
  STRATA_CHECK(yh.shape.size() == 1, "criteo processed file ", quote_path(processed), ", member 'y': shape ",
               yh.shape_string(), ", expected one dimension");
  d->rows_ = yh.shape[0];
  npy::Header ch;
  d->counts_ = npy::read_integers(npz, "counts", &ch);
  STRATA_CHECK(ch.shape.size() == 1 && ch.shape[0] == kSparse, "criteo processed file ", quote_path(processed),
               ", member 'counts': shape ", ch.shape_string(), ", expected (26,)");
  const std::vector<int64_t> per_day = npy::read_integers(npy::NpzReader(day_count_file), "total_per_file");
  int64_t sum = 0;
  for (int64_t n : per_day) sum += n;
  STRATA_CHECK(static_cast<int64_t>(per_day.size()) == days && sum == d->rows_, "criteo day counts ",
               quote_path(day_count_file), ": ", per_day.size(), " days of ", sum, " samples, but the data set has ",
               days, " days and ", quote_path(processed), " holds ", d->rows_, " samples");
  d->day_offsets_.assign(1, 0);
  for (int64_t n : per_day) d->day_offsets_.push_back(d->day_offsets_.back() + n);
  if (memory_map) d->map_file();
  std::array<std::pair<const char*, int64_t>, 3> members = {{{"X_cat", kSparse}, {"X_int", kDense}, {"y", 1}}};
  std::array<Matrix*, 3> outs = {&d->x_cat_, &d->x_int_, &d->y_};
  parallel_for(3, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      d->load_member(members[static_cast<std::size_t>(i)].first, members[static_cast<std::size_t>(i)].second,
                     *outs[static_cast<std::size_t>(i)], memory_map);
  });
  d->mapped_ = d->x_cat_.owned.empty() && d->rows_ > 0;
  return d;
}

}  // namespace strata::emb

namespace strata::emb {

void CriteoData::map_file() {
  std::FILE* f = open_file_for_reading(path_, "--processed-data-file");
  struct stat st {};
  const bool ok = ::fstat(::fileno(f), &st) == 0 && st.st_size > 0;
  if (ok) {
    map_bytes_ = static_cast<std::size_t>(st.st_size);
    void* p = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, ::fileno(f), 0);
    map_ = p == MAP_FAILED ? nullptr : p;
  }
  std::fclose(f);
  STRATA_CHECK(map_ != nullptr, "--memory-map: cannot map ", quote_path(path_), " (", std::strerror(errno), ")");
}

// ---- split ---------------------------------------------------------------------------------------------

CriteoSplit parse_criteo_split(std::string_view text, std::string_view what) {
  if (text == "train") return CriteoSplit::Train;
  if (text == "test") return CriteoSplit::Test;
  if (text == "val") return CriteoSplit::Val;
  if (text == "none") return CriteoSplit::None;
  STRATA_FAIL(what, ": expected train, test, val or none, got ", quote_field(text));
}

const char* to_string(CriteoSplit s) {
  switch (s) {
    case CriteoSplit::Train: return "train";
    case CriteoSplit::Test: return "test";
    case CriteoSplit::Val: return "val";
    case CriteoSplit::None: return "none";
  }
  return "?";
}

void numpy_shuffle(std::span<int64_t> values, RandomStream& rng) {
  for (std::size_t i = values.size(); i-- > 1;) {
    const auto j = static_cast<std::size_t>(rng.interval(i));
    std::swap(values[i], values[j]);
  }
}

std::vector<int64_t> criteo_split_indices(std::span<const int64_t> o, CriteoSplit split, std::string_view randomize,
                                          RandomStream& rng) {
  STRATA_CHECK(randomize == "total" || randomize == "day" || randomize == "none",
               "--data-randomize: expected total, day or none, got ", quote_field(randomize));
  STRATA_CHECK(o.size() >= 2, "criteo split: no days");
  const int64_t days = static_cast<int64_t>(o.size()) - 1;
  auto range = [](int64_t a, int64_t b) {
    std::vector<int64_t> v(static_cast<std::size_t>(b - a));
    for (int64_t i = a; i < b; ++i) v[static_cast<std::size_t>(i - a)] = i;
    return v;
  };
  if (split == CriteoSplit::None) {
    std::vector<int64_t> all = range(0, o.back());
    if (randomize != "total") return all;
    numpy_shuffle(all, rng);  // X[perm] = X: sample perm[k] is the old sample k
    std::vector<int64_t> order(all.size());
    for (std::size_t k = 0; k < all.size(); ++k) order[static_cast<std::size_t>(all[k])] = static_cast<int64_t>(k);
    return order;
  }
  std::vector<int64_t> train;
  train.reserve(static_cast<std::size_t>(o[static_cast<std::size_t>(days - 1)]));
  for (int64_t d = 0; d + 1 < days; ++d) {
    std::vector<int64_t> day = range(o[static_cast<std::size_t>(d)], o[static_cast<std::size_t>(d + 1)]);
    if (randomize == "day") numpy_shuffle(day, rng);
    train.insert(train.end(), day.begin(), day.end());
  }
  // np.array_split(last day, 2): the first half gets the extra sample.
  const int64_t last = o[static_cast<std::size_t>(days - 1)], n = o.back() - last;
  const int64_t test_n = (n + 1) / 2;
  if (randomize == "total") numpy_shuffle(train, rng);
  if (split == CriteoSplit::Train) return train;
  if (split == CriteoSplit::Test) return range(last, last + test_n);
  return range(last + test_n, o.back());
}

// ---- batches -------------------------------------------------------------------------------------------

CriteoDatasetSource::CriteoDatasetSource(std::shared_ptr<const CriteoData> data, std::vector<int64_t> order,
                                         CriteoSourceConfig config, std::string name)
    : IndexSource(config.rows, kDense, config.batch_size, 0),
      data_(std::move(data)),
      order_(std::move(order)),
      config_(std::move(config)),
      name_(std::move(name)) {
  STRATA_CHECK(static_cast<int64_t>(config_.rows.size()) == kSparse, name_, ": expected ", kSparse,
               " table sizes, got ", config_.rows.size());
  for (std::size_t k = 0; k < config_.rows.size(); ++k)
    STRATA_CHECK(config_.rows[k] > 0, name_, ": table ", k, " has ", config_.rows[k], " rows");
  STRATA_CHECK(config_.batch_size > 0, "--mini-batch-size must be positive, got ", config_.batch_size);
  if (config_.max_samples > 0 && config_.max_samples < num_samples())
    order_.resize(static_cast<std::size_t>(config_.max_samples));
  STRATA_CHECK(!order_.empty(), name_, ": the split holds no samples");
  num_batches_ = (num_samples() + config_.batch_size - 1) / config_.batch_size;
}

bool CriteoDatasetSource::next(Batch& batch) {
  if (next_ >= num_samples()) return false;
  const int64_t n = std::min(config_.batch_size, num_samples() - next_);
  batch.reshape(n, kDense, kSparse);
  for (BagStorage& t : batch.tables) {
    t.indices.resize(static_cast<std::size_t>(n));
    t.weights.clear();
    for (int64_t b = 0; b < n; ++b) t.offsets[static_cast<std::size_t>(b + 1)] = b + 1;
  }
  const CriteoData& d = *data_;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t i = order_[static_cast<std::size_t>(next_ + b)];
    const int32_t label = d.label(i);
    STRATA_CHECK(label == 0 || label == 1, "criteo processed file ", quote_path(d.path()), ", member 'y': sample ", i,
                 " has label ", label, "; labels must be 0 or 1");
    batch.targets[static_cast<std::size_t>(b)] = static_cast<float>(label);
    float* dense = batch.dense.data() + b * kDense;
    for (int64_t j = 0; j < kDense; ++j) dense[j] = std::log(static_cast<float>(std::max(d.dense(i, j), 0)) + 1.0f);
    for (int64_t k = 0; k < kSparse; ++k) {
      int64_t id = d.category(i, k);
      if (config_.max_ind_range > 0) id %= config_.max_ind_range;
      const int64_t rows = config_.rows[static_cast<std::size_t>(k)];
      if (id >= rows && config_.wrap) id %= rows;
      STRATA_CHECK(id >= 0 && id < rows, "criteo processed file ", quote_path(d.path()), ": sample ", i, ", table ", k,
                   " (C", k + 1, "): id ", id, " is outside the table's ", rows, " rows");
      batch.tables[static_cast<std::size_t>(k)].indices[static_cast<std::size_t>(b)] = id;
    }
  }
  next_ += n;
  return true;
}

// ---- the data set --------------------------------------------------------------------------------------

namespace {

/// Draws preprocessing consumed per processed file written by this process (Note [Criteo split]).
std::mutex& draws_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, uint64_t>& draws_by_file() {
  static std::map<std::string, uint64_t> m;
  return m;
}

std::string canonical_key(const std::string& path) {
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

/// Preprocesses unless the processed file exists; returns the draws consumed in this process.
uint64_t ensure_processed(const CriteoDatasetConfig& c, const std::string& processed) {
  const std::string key = canonical_key(processed);
  std::lock_guard<std::mutex> lock(draws_mutex());
  std::error_code ec;
  if (std::filesystem::exists(processed, ec)) {
    const auto it = draws_by_file().find(key);
    return it == draws_by_file().end() ? 0 : it->second;
  }
  STRATA_CHECK(!c.raw_data_file.empty(), "--processed-data-file: ", quote_path(processed),
               " does not exist; give --raw-data-file to create it");
  CriteoPreprocessConfig p;
  p.data_set = c.data_set;
  p.raw_data_file = c.raw_data_file;
  p.processed_data_file = processed;
  p.max_ind_range = c.max_ind_range;
  p.sub_sample_rate = c.sub_sample_rate;
  p.compress = !c.memory_map;
  p.progress = c.progress;
  RandomStream rng(c.seed);
  const CriteoPreprocessResult r = preprocess_criteo(p, rng);
  draws_by_file()[key] = r.uniform_draws;
  return r.uniform_draws;
}

}  // namespace

std::string criteo_processed_path(const CriteoDatasetConfig& c) {
  if (!c.processed_data_file.empty()) return c.processed_data_file;
  STRATA_CHECK(!c.raw_data_file.empty(), "--data-generation dataset: give --raw-data-file or --processed-data-file");
  return CriteoPaths::of(c.data_set, c.raw_data_file).default_processed;
}

CriteoDataset::CriteoDataset(const CriteoDatasetConfig& config) : config_(config) {
  processed_ = criteo_processed_path(config_);
  skip_draws_ = ensure_processed(config_, processed_);
  STRATA_CHECK(!config_.raw_data_file.empty(), "--raw-data-file: the day counts of ", quote_path(processed_),
               " are read from <raw directory>/<raw name>_day_count.npz (as the reference does); give the raw path "
               "the file was made from");
  const CriteoPaths paths = CriteoPaths::of(config_.data_set, config_.raw_data_file);
  data_ = CriteoData::load(processed_, paths.day_count, paths.days, config_.memory_map);
}

std::vector<int64_t> CriteoDataset::indices(CriteoSplit split) const {
  RandomStream rng(config_.seed);
  rng.discard_uniforms(skip_draws_);
  return criteo_split_indices(data_->day_offsets(), split, config_.randomize, rng);
}

std::unique_ptr<CriteoDatasetSource> CriteoDataset::source(CriteoSplit split, CriteoSourceConfig config) const {
  std::string name = std::string("criteo-") + to_string(split) + "(" + processed_ + ", randomize " +
                     config_.randomize + ")";
  return std::make_unique<CriteoDatasetSource>(data_, indices(split), std::move(config), std::move(name));
}

std::vector<int64_t> criteo_counts(const CriteoDatasetConfig& config) {
  const std::string processed = criteo_processed_path(config);
  ensure_processed(config, processed);
  const npy::NpzReader npz(processed);
  npy::Header h;
  std::vector<int64_t> counts = npy::read_integers(npz, "counts", &h);
  STRATA_CHECK(counts.size() == static_cast<std::size_t>(kSparse), "criteo processed file ", quote_path(processed),
               ", member 'counts': shape ", h.shape_string(), ", expected (26,)");
  return counts;
}

}  // namespace strata::emb
