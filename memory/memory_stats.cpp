#include "memory/memory_stats.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "core/file.h"
#include "memory/heap.h"

namespace strata::memory {

// Note [Memory statistics are not a consistent cut]
// Every counter is its own relaxed atomic, so counting costs a few uncontended RMWs and never takes
// a lock (on_alloc/on_free run on every op). The price: snapshot() reads the counters one by one,
// so while other threads are counting, a snapshot may mix values from slightly different moments
// (e.g. moved_to_slow.count already incremented, its bytes not yet). Each individual counter is
// exact, and once the threads have quiesced (joined, or synchronized with the reader) the snapshot
// is exact. Per-heap peaks are exact too: `current` changes only through RMWs, whose results form
// one modification order, and the peak is the maximum over the post-allocation values of that order
// (frees only lower it). The timeline's samples read the two heaps' `current` separately, so a
// sample may pair the fast heap of one instant with the slow heap of the next: fine for a plot.

// Note [Occupancy timeline downsampling]
// A timeline must stay bounded however long the run, yet still show the whole run uniformly.
// Unlabeled samples closer than `min_interval` to the last stored one are not stored; only the
// latest such sample is remembered (the "tail": relaxed atomics, no lock) and appended when the
// timeline is read, so the curve ends at the last level it was given rather than at an older one.
// When the store is full, every other sample is dropped (the first and the last are always kept)
// and the minimum interval becomes max(average spacing of the kept samples, 2 × old interval), the
// doubling capped at the kept samples' time span. The kept history and the samples still to come
// then have the same density, so a long run keeps a uniform picture rather than a detailed start
// and a sparse end. Labeled samples (record with a label) bypass the rate limit but are thinned
// like the rest; the cap keeps a run that labels every sample (and so compacts without end) from
// growing the interval past the whole timeline, or overflowing it. Marks are thinned the same way
// when full. The stored samples never exceed max_samples - 1, so with the tail a reader sees at
// most max_samples.
//
// The timeline of a MemoryStats has the two heap counters as its *source*: a stored sample reads
// them under the timeline's lock (so stored samples follow the counters' order), and a rate-limited
// record only raises the tail's time. A reader of a timeline that is still recording gets, as the
// last sample, the counters' values at read time (if they differ from the last stored sample, or a
// rate-limited record came later). Passing values in instead would let a thread that read the
// counters before another thread's last free publish its stale values after it, so the curve could
// end at a level the heaps are not at; reading the source at the end makes it exact once the counting
// threads are quiescent. Disabling such a timeline stores one closing sample from the source.

namespace {

constexpr std::int64_t kNoSample = -(std::int64_t{1} << 62);  // "no sample stored yet"

void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// ns / 1e9 is correctly rounded (both exact), so 100000 ns prints as 0.0001.
double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

void append_seconds(std::string& out, std::int64_t ns) {
  // The shortest plain decimal (no exponent) that reads back to the same double.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, seconds(ns), std::chars_format::fixed);
  out.append(buf, end);
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not valid UTF-8.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

// Appends `s` as a JSON string literal; invalid UTF-8 becomes U+FFFD so the output always parses.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const std::size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  out += '"';
}

}  // namespace

// ---- OccupancyTimeline ---------------------------------------------------------------------------

OccupancyTimeline::OccupancyTimeline(TimelineConfig config) : config_(config) {
  STRATA_CHECK(config_.max_samples >= 8, "OccupancyTimeline: max_samples must be at least 8, got ",
               config_.max_samples);
  STRATA_CHECK(config_.max_marks >= 8, "OccupancyTimeline: max_marks must be at least 8, got ", config_.max_marks);
  STRATA_CHECK(std::isfinite(config_.min_interval_s) && config_.min_interval_s >= 0 && config_.min_interval_s < 1e9,
               "OccupancyTimeline: min_interval_s must be a finite number of seconds in [0, 1e9), got ",
               config_.min_interval_s);
  start_ns_.store(now_ns());
  min_interval_ns_.store(std::llround(config_.min_interval_s * 1e9));
  last_stored_ns_.store(kNoSample);
}

std::int64_t OccupancyTimeline::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void OccupancyTimeline::attach_source(const std::atomic<std::size_t>* fast, const std::atomic<std::size_t>* slow) {
  source_fast_ = fast;
  source_slow_ = slow;
}

void OccupancyTimeline::enable(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool was = enabled_.load(std::memory_order_relaxed);
  if (on && !was && samples_.empty() && marks_.empty()) {
    start_ns_.store(now_ns(), std::memory_order_relaxed);
  }
  if (!on && was && source_fast_ != nullptr && !samples_.empty()) {
    // Close the curve where recording ends: the source keeps changing, the timeline no longer.
    store_sample_locked(now_ns(), source_fast_->load(std::memory_order_relaxed),
                        source_slow_->load(std::memory_order_relaxed));
  }
  enabled_.store(on, std::memory_order_relaxed);
}

void OccupancyTimeline::set_capacity(std::size_t fast_bytes, std::size_t slow_bytes) {
  fast_capacity_.store(fast_bytes, std::memory_order_relaxed);
  slow_capacity_.store(slow_bytes, std::memory_order_relaxed);
}

void OccupancyTimeline::remember_tail(std::int64_t abs_ns, std::size_t fast, std::size_t slow) {
  if (source_fast_ != nullptr) {
    // Only the time matters: the values are read from the source when the timeline is read. Keep
    // the latest time, whichever thread gets here last.
    std::int64_t tail = tail_ns_.load(std::memory_order_relaxed);
    while (abs_ns > tail && !tail_ns_.compare_exchange_weak(tail, abs_ns, std::memory_order_relaxed)) {}
    return;
  }
  tail_fast_.store(fast, std::memory_order_relaxed);
  tail_slow_.store(slow, std::memory_order_relaxed);
  tail_ns_.store(abs_ns, std::memory_order_relaxed);
}

void OccupancyTimeline::record(std::size_t fast_bytes, std::size_t slow_bytes, std::string_view label) {
  if (!enabled()) return;
  const auto too_soon = [&](std::int64_t now) {
    return now - last_stored_ns_.load(std::memory_order_relaxed) < min_interval_ns_.load(std::memory_order_relaxed);
  };
  if (label.empty()) {
    // The common case: a lock-free rate-limit check (Note [Occupancy timeline downsampling]).
    const std::int64_t now = now_ns();
    if (too_soon(now)) {
      remember_tail(now, fast_bytes, slow_bytes);
      return;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Read the clock under the lock so stored times never decrease.
  const std::int64_t now = now_ns();
  if (label.empty() && too_soon(now)) {  // another thread stored a sample meanwhile
    remember_tail(now, fast_bytes, slow_bytes);
    return;
  }
  if (source_fast_ != nullptr) {
    // Read under the lock, so stored samples are in the order of the values they show.
    fast_bytes = source_fast_->load(std::memory_order_relaxed);
    slow_bytes = source_slow_->load(std::memory_order_relaxed);
  }
  store_sample_locked(now, fast_bytes, slow_bytes);
  if (!label.empty()) store_mark_locked(now, label);
}

void OccupancyTimeline::mark(std::string_view label) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  store_mark_locked(now_ns(), label);
}

void OccupancyTimeline::store_sample_locked(std::int64_t abs_ns, std::size_t fast, std::size_t slow) {
  if (samples_.size() + 1 >= config_.max_samples) downsample_samples_locked();
  if (samples_.size() == samples_.capacity()) {
    // Grow in chunks, never past the bound.
    samples_.reserve(std::min(config_.max_samples, std::max<std::size_t>(1024, 2 * samples_.size())));
  }
  const std::int64_t t = std::max<std::int64_t>(0, abs_ns - start_ns_.load(std::memory_order_relaxed));
  samples_.push_back({t, fast, slow});
  last_stored_ns_.store(abs_ns, std::memory_order_relaxed);
}

void OccupancyTimeline::downsample_samples_locked() {
  const std::size_t n = samples_.size();
  if (n < 3) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; i += 2) samples_[kept++] = samples_[i];
  if ((n - 1) % 2 != 0) samples_[kept++] = samples_[n - 1];  // the last one always stays
  dropped_samples_ += n - kept;
  samples_.resize(kept);
  const std::int64_t span = samples_.back().t_ns - samples_.front().t_ns;
  const std::int64_t average = span / static_cast<std::int64_t>(kept - 1);
  const std::int64_t old = min_interval_ns_.load(std::memory_order_relaxed);
  // Doubling is capped at the kept span: labeled samples bypass the rate limit, so a run that
  // labels every sample compacts without bound, and an interval longer than the whole timeline
  // means nothing (and doubling forever would overflow).
  min_interval_ns_.store(std::max(average, std::min(2 * old, span)), std::memory_order_relaxed);
}

void OccupancyTimeline::store_mark_locked(std::int64_t abs_ns, std::string_view label) {
  if (marks_.size() >= config_.max_marks) {
    const std::size_t n = marks_.size();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; i += 2, ++kept) {
      if (i != kept) marks_[kept] = std::move(marks_[i]);  // a self-move would empty the label
    }
    if ((n - 1) % 2 != 0) marks_[kept++] = std::move(marks_[n - 1]);
    dropped_marks_ += n - kept;
    marks_.resize(kept);
  }
  if (marks_.size() == marks_.capacity()) {
    marks_.reserve(std::min(config_.max_marks, std::max<std::size_t>(64, 2 * marks_.size())));
  }
  const std::int64_t t = std::max<std::int64_t>(0, abs_ns - start_ns_.load(std::memory_order_relaxed));
  marks_.push_back({t, std::string(label)});
}

void OccupancyTimeline::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  samples_.clear();
  marks_.clear();
  dropped_samples_ = 0;
  dropped_marks_ = 0;
  start_ns_.store(now_ns(), std::memory_order_relaxed);
  last_stored_ns_.store(kNoSample, std::memory_order_relaxed);
  tail_ns_.store(-1, std::memory_order_relaxed);
  min_interval_ns_.store(std::llround(config_.min_interval_s * 1e9), std::memory_order_relaxed);
}

std::vector<OccupancyTimeline::StoredSample> OccupancyTimeline::samples_with_tail_locked() const {
  std::vector<StoredSample> out = samples_;
  const std::int64_t start = start_ns_.load(std::memory_order_relaxed);
  const std::int64_t tail_abs = tail_ns_.load(std::memory_order_relaxed);
  if (out.empty()) return out;
  // A tail older than the start belongs to a cleared timeline; one not newer than the last stored
  // sample has been superseded by it.
  const bool newer_tail = tail_abs >= start && tail_abs - start > out.back().t_ns;
  if (source_fast_ == nullptr) {
    if (newer_tail) {
      out.push_back(
          {tail_abs - start, tail_fast_.load(std::memory_order_relaxed), tail_slow_.load(std::memory_order_relaxed)});
    }
    return out;
  }
  // With a source: while recording, end with the heaps' occupancy now, at the latest rate-limited
  // record's time. Comparing values (not only times) makes the end exact once the counting threads
  // have quiesced, whatever order their clock reads and counter updates interleaved in.
  if (!enabled()) return out;
  const std::size_t fast = source_fast_->load(std::memory_order_relaxed);
  const std::size_t slow = source_slow_->load(std::memory_order_relaxed);
  if (newer_tail || fast != out.back().fast || slow != out.back().slow) {
    out.push_back({newer_tail ? tail_abs - start : out.back().t_ns, fast, slow});
  }
  return out;
}

std::vector<TimelineSample> OccupancyTimeline::samples() const {
  std::vector<StoredSample> stored;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stored = samples_with_tail_locked();
  }
  std::vector<TimelineSample> out;
  out.reserve(stored.size());
  for (const auto& s : stored) out.push_back({seconds(s.t_ns), s.fast, s.slow});
  return out;
}

std::vector<TimelineMark> OccupancyTimeline::marks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TimelineMark> out;
  out.reserve(marks_.size());
  for (const auto& m : marks_) out.push_back({seconds(m.t_ns), m.label});
  return out;
}

double OccupancyTimeline::min_interval_s() const { return seconds(min_interval_ns_.load(std::memory_order_relaxed)); }

std::uint64_t OccupancyTimeline::dropped_samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_samples_;
}

std::uint64_t OccupancyTimeline::dropped_marks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_marks_;
}

std::string OccupancyTimeline::to_json() const {
  std::vector<StoredSample> samples;
  std::vector<StoredMark> marks;
  std::uint64_t dropped_samples = 0, dropped_marks = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    samples = samples_with_tail_locked();
    marks = marks_;
    dropped_samples = dropped_samples_;
    dropped_marks = dropped_marks_;
  }
  std::string out;
  out.reserve(256 + samples.size() * 40 + marks.size() * 32);
  out += "{\"version\":1,\"unit\":\"bytes\",\"time_unit\":\"s\",\"fast_capacity\":";
  const auto capacity = [&](std::size_t c) {
    if (c == 0) {
      out += "null";
    } else {
      append_number(out, c);
    }
  };
  capacity(fast_capacity_.load(std::memory_order_relaxed));
  out += ",\"slow_capacity\":";
  capacity(slow_capacity_.load(std::memory_order_relaxed));
  out += ",\"min_interval\":";
  append_seconds(out, min_interval_ns_.load(std::memory_order_relaxed));
  out += ",\"dropped_samples\":";
  append_number(out, dropped_samples);
  out += ",\"dropped_marks\":";
  append_number(out, dropped_marks);
  out += ",\"samples\":[";
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (i) out += ',';
    out += '[';
    append_seconds(out, samples[i].t_ns);
    out += ',';
    append_number(out, samples[i].fast);
    out += ',';
    append_number(out, samples[i].slow);
    out += ']';
  }
  out += "],\"marks\":[";
  for (std::size_t i = 0; i < marks.size(); ++i) {
    if (i) out += ',';
    out += '[';
    append_seconds(out, marks[i].t_ns);
    out += ',';
    append_json_string(out, marks[i].label);
    out += ']';
  }
  out += "]}";
  return out;
}

void OccupancyTimeline::save_json(const std::string& path) const {
  write_file_atomically(path, to_json() + "\n", "occupancy timeline");
}

// ---- MemoryStats ---------------------------------------------------------------------------------

MemoryStats::MemoryStats(TimelineConfig timeline_config) : timeline_(timeline_config) {
  timeline_.attach_source(&fast_.current, &slow_.current);
}

void MemoryStats::sample(std::string_view label) {
  // The timeline reads the counters itself (under its lock), so the values passed are unused.
  timeline_.record(0, 0, label);
}

void MemoryStats::on_alloc(Tier tier, std::size_t bytes) {
  Heap& h = heap(tier);
  h.allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t now = h.current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::size_t peak = h.peak.load(std::memory_order_relaxed);
  while (now > peak && !h.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  if (timeline_.enabled()) timeline_.record(0, 0);
}

void MemoryStats::on_free(Tier tier, std::size_t bytes) {
  Heap& h = heap(tier);
  std::size_t current = h.current.load(std::memory_order_relaxed);
  do {
    STRATA_ASSERT(current >= bytes, "memory stats: freeing ", bytes, " bytes from the ", tier_name(tier),
                  " heap, which has only ", current, " bytes in use (a free without its allocation?)");
  } while (!h.current.compare_exchange_weak(current, current - bytes, std::memory_order_relaxed));
  h.frees.fetch_add(1, std::memory_order_relaxed);
  if (timeline_.enabled()) timeline_.record(0, 0);
}

void MemoryStats::on_move(Tier from, Tier to, std::size_t bytes) {
  STRATA_CHECK(from != to, "memory stats: a move needs two different tiers, got ", tier_name(from), " -> ",
               tier_name(to));
  Counted& c = to == Tier::Slow ? to_slow_ : to_fast_;
  c.count.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void MemoryStats::on_copy_elided(std::size_t bytes) {
  elided_.count.fetch_add(1, std::memory_order_relaxed);
  elided_.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void MemoryStats::on_writeback_avoided(std::size_t bytes) {
  writeback_avoided_.count.fetch_add(1, std::memory_order_relaxed);
  writeback_avoided_.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void MemoryStats::on_direct_slow_read(std::size_t bytes) {
  direct_read_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void MemoryStats::on_direct_slow_write(std::size_t bytes) {
  direct_write_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void MemoryStats::set_slow_tier_mode(std::string description) {
  std::lock_guard<std::mutex> lock(mode_mutex_);
  slow_tier_mode_ = std::move(description);
}

std::string MemoryStats::slow_tier_mode() const {
  std::lock_guard<std::mutex> lock(mode_mutex_);
  return slow_tier_mode_;
}

MemoryStatsSnapshot MemoryStats::snapshot() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  const auto heap_counters = [&](const Heap& h) {
    return TierCounters{h.current.load(relaxed), h.peak.load(relaxed), h.allocations.load(relaxed),
                        h.frees.load(relaxed)};
  };
  const auto counted = [&](const Counted& c) { return CountedBytes{c.count.load(relaxed), c.bytes.load(relaxed)}; };
  MemoryStatsSnapshot s;
  s.moved_to_slow = counted(to_slow_);
  s.moved_to_fast = counted(to_fast_);
  s.copies_elided = counted(elided_);
  s.writebacks_avoided = counted(writeback_avoided_);
  s.direct_slow_read_bytes = direct_read_bytes_.load(relaxed);
  s.direct_slow_write_bytes = direct_write_bytes_.load(relaxed);
  s.fast = heap_counters(fast_);
  s.slow = heap_counters(slow_);
  return s;
}

void MemoryStats::reset() {
  for (Heap* h : {&fast_, &slow_}) {
    h->allocations.store(0);
    h->frees.store(0);
    h->peak.store(h->current.load());
  }
  for (Counted* c : {&to_slow_, &to_fast_, &elided_, &writeback_avoided_}) {
    c->count.store(0);
    c->bytes.store(0);
  }
  direct_read_bytes_.store(0);
  direct_write_bytes_.store(0);
}

void MemoryStats::reset_peaks() {
  for (Heap* h : {&fast_, &slow_}) h->peak.store(h->current.load());
}

std::string MemoryStats::to_json() const {
  const MemoryStatsSnapshot s = snapshot();
  const std::string mode = slow_tier_mode();
  std::string out = "{";
  const auto counted = [&](const char* key, const CountedBytes& c) {
    out += '"';
    out += key;
    out += "\":{\"count\":";
    append_number(out, c.count);
    out += ",\"bytes\":";
    append_number(out, c.bytes);
    out += "},";
  };
  counted("moved_to_slow", s.moved_to_slow);
  counted("moved_to_fast", s.moved_to_fast);
  counted("copies_elided", s.copies_elided);
  counted("writebacks_avoided", s.writebacks_avoided);
  out += "\"direct_slow_read_bytes\":";
  append_number(out, s.direct_slow_read_bytes);
  out += ",\"direct_slow_write_bytes\":";
  append_number(out, s.direct_slow_write_bytes);
  out += ",\"heaps\":{";
  for (Tier tier : {Tier::Fast, Tier::Slow}) {
    const TierCounters& h = s.heap(tier);
    if (tier == Tier::Slow) out += ',';
    out += '"';
    out += tier_name(tier);
    out += "\":{\"current_bytes\":";
    append_number(out, h.current_bytes);
    out += ",\"peak_bytes\":";
    append_number(out, h.peak_bytes);
    out += ",\"allocations\":";
    append_number(out, h.allocations);
    out += ",\"frees\":";
    append_number(out, h.frees);
    out += '}';
  }
  out += '}';
  if (!mode.empty()) {
    out += ",\"slow_tier_mode\":";
    append_json_string(out, mode);
  }
  out += '}';
  return out;
}

std::string MemoryStats::describe() const {
  const MemoryStatsSnapshot s = snapshot();
  const std::string mode = slow_tier_mode();
  std::string out = "memory statistics";
  if (!mode.empty()) out += " (slow tier: " + mode + ")";
  out += '\n';
  for (Tier tier : {Tier::Fast, Tier::Slow}) {
    const TierCounters& h = s.heap(tier);
    out += "  " + std::string(tier_name(tier)) + " heap: " + format_mib(h.current_bytes) + " in use, peak " +
           format_mib(h.peak_bytes) + " (" + std::to_string(h.allocations) + " allocations, " +
           std::to_string(h.frees) + " frees)\n";
  }
  const auto moves = [&](const char* what, const CountedBytes& c) {
    out += std::string("  ") + what + format_mib(c.bytes) + " in " + std::to_string(c.count) +
           (c.count == 1 ? " move\n" : " moves\n");
  };
  moves("moved fast -> slow: ", s.moved_to_slow);
  moves("moved slow -> fast: ", s.moved_to_fast);
  out += "  copies elided (clean evictions): " + std::to_string(s.copies_elided.count) + ", " +
         format_mib(s.copies_elided.bytes) + "\n";
  out += "  write-backs avoided (freed while fast): " + std::to_string(s.writebacks_avoided.count) + ", " +
         format_mib(s.writebacks_avoided.bytes) + "\n";
  out += "  direct slow-tier reads: " + format_mib(s.direct_slow_read_bytes) +
         ", writes: " + format_mib(s.direct_slow_write_bytes) + "\n";
  return out;
}

}  // namespace strata::memory
