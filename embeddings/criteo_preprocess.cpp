// The reference's Criteo preprocessing (getCriteoAdData): the raw TSV parsed in parallel chunks
// and written as its processed arrays, and the file names of a data set (criteo_dataset.h).

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
    struct stat st{};
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
  if (field == 0)
    std::snprintf(buf, n, "label");
  else if (field <= kDense)
    std::snprintf(buf, n, "I%lld", static_cast<long long>(field));
  else
    std::snprintf(buf, n, "C%lld", static_cast<long long>(field - kDense));
}

/// What every parse task shares.
struct ParseContext {
  const std::vector<std::string>* paths = nullptr;
  const std::vector<std::unique_ptr<MappedFile>>* files = nullptr;
  std::vector<int64_t> day_starts;  // global line of each day's first line, plus the total
  std::vector<uint64_t> drop;       // bit g: the line's draw is < rate (dropped when its label is 0)
  int64_t max_ind_range = -1;
  int32_t* y = nullptr;  // raw-line-indexed outputs (compacted after sub-sampling)
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
    throw Error(::strata::detail::format_message("criteo ", quote_path(path_), " line ", line_, ", column ", name, ": ",
                                                 quote_field(text), " ", why));
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
      if (static_cast<unsigned>(c - '0') < 10u)
        d = static_cast<unsigned>(c - '0');
      else if (static_cast<unsigned>((c | 0x20) - 'a') < 6u)
        d = static_cast<unsigned>((c | 0x20) - 'a') + 10;
      else
        break;
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
  const bool drop =
      label == 0 && !ctx.drop.empty() && ((ctx.drop[static_cast<std::size_t>(global >> 6)] >> (global & 63)) & 1);
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
                                  ctx.day_starts.begin()) -
             1;
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
      for (const auto& [day, lines] : states[c].kept_per_day)
        out.total_per_file[static_cast<std::size_t>(day)] += lines;
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

}  // namespace strata::emb
