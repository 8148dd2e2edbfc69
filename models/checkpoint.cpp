#include "models/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/factories.h"
#include "core/file.h"
#include "core/pin_set.h"
#include "core/text.h"

namespace strata {

// Note [Checkpoint file format]
// All integers little-endian.
//   header (32 bytes): magic "STRATACK" (8) | u32 version | u32 reserved (0) | u64 payload bytes |
//                      u64 FNV-1a 64 checksum of the payload
//   payload: u32 metadata count, then per entry: string key, string value
//            u64 tensor count, then per tensor: u8 section (0 model, 1 optimizer), string key,
//            u8 dtype (DType's value), u32 rank, i64 sizes[rank], the elements (contiguous,
//            numel * itemsize bytes)
//   string: u32 length, bytes (no terminator)
// The checksum covers every payload byte, so truncation and corruption are told apart from a
// foreign file by the header alone, before anything is parsed. Readers refuse versions they do
// not know (newer files are not half-read).
//
// Note [Streaming checkpoints]
// The format needs nothing that is known only at the end except the header's payload size and
// checksum: CheckpointWriter writes a zeroed header, streams the payload through a bounded buffer
// (hashing as it goes; the entry count is announced up front), and writes the header last, before
// the fsync and the rename. CheckpointReader checks the header, hashes the payload in bounded
// chunks, then indexes the entries (key, dtype, shape, file offset) without reading their
// elements, which callers fetch whole or in pieces. So a checkpoint of embedding tables larger
// than DRAM is written and read holding at most one chunk of them. save_checkpoint and
// load_checkpoint are the writer and the reader applied to whole StateDicts: one mechanism, one
// format (version 1, unchanged).
//
// Note [Stale checkpoint temporaries]
// A save writes `.<name>.tmp.<pid>.<n>` next to `<name>` and renames it over `<name>` when it is
// complete (AtomicFile, Note [Atomic file writes] in core/file.h). A process killed mid-save
// (SIGKILL, the OOM killer, a node failure) leaves that temporary behind, and every later kill
// leaves another. Each save therefore first removes the temporaries of the same `<name>` whose
// process no longer runs (kill(pid, 0) fails with ESRCH), saying so on stderr in one line. A
// temporary of a live process (another save in progress) and
// one of this process are left alone.
static_assert(std::endian::native == std::endian::little,
              "checkpoint.cpp writes tensor bytes as they are in memory, which must be little-endian");

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'C', 'K'};
constexpr std::size_t kHeaderBytes = 32;
constexpr uint64_t kFnvBasis = 1469598103934665603ull;
// The writer's buffer of small items, and the reader's checksum and index chunks.
constexpr std::size_t kIoBufferBytes = std::size_t{1} << 20;

uint64_t fnv1a64(uint64_t h, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
void put(std::string& out, T value) {
  char b[sizeof(T)];
  std::memcpy(b, &value, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s, const std::string& where) {
  STRATA_CHECK(s.size() <= UINT32_MAX, where, ": a string of ", s.size(), " bytes is too long");
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

std::string errno_text() { return std::strerror(errno); }

/// "PID" when `name` is "<prefix><PID>.<N>" with decimal PID and N, else 0.
pid_t temporary_owner(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return 0;
  const std::string rest = name.substr(prefix.size());
  const auto dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || dot + 1 == rest.size() || dot > 9) return 0;
  const auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(std::string_view(rest).substr(0, dot)) || !digits(std::string_view(rest).substr(dot + 1))) return 0;
  return static_cast<pid_t>(std::stol(rest.substr(0, dot)));
}

/// Note [Stale checkpoint temporaries].
void remove_stale_temporaries(const std::filesystem::path& dir, const std::string& name, const std::string& where) {
  namespace fs = std::filesystem;
  const std::string prefix = AtomicFile::temporary_prefix(name);
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    const pid_t pid = temporary_owner(entry, prefix);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // running, or not ours to judge
    if (::unlink(it->path().c_str()) == 0)
      std::fprintf(stderr, "%s: removed the stale temporary file %s (its process %d no longer runs)\n", where.c_str(),
                   quote_path(it->path().string()).c_str(), static_cast<int>(pid));
  }
}

}  // namespace

// ---- CheckpointWriter --------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(const std::string& path, const CheckpointMetadata& metadata, uint64_t entries)
    : path_(path), entries_left_(entries), hash_(kFnvBasis) {
  STRATA_CHECK(!path.empty(), "save_checkpoint: the path is empty");
  where_ = "save_checkpoint(" + quote_path(path) + ")";
  STRATA_CHECK(path.find('\0') == std::string::npos, where_, ": the path contains a NUL byte");
  std::error_code ec;
  STRATA_CHECK(!std::filesystem::is_directory(path, ec), where_, ": is a directory (expected a file name)");
  std::string head;
  put<uint32_t>(head, static_cast<uint32_t>(metadata.size()));
  for (const auto& [k, v] : metadata) {
    put_string(head, k, where_);
    put_string(head, v, where_);
  }
  put<uint64_t>(head, entries);

  namespace fs = std::filesystem;
  const fs::path target(path);
  remove_stale_temporaries(target.has_parent_path() ? target.parent_path() : fs::path("."), target.filename().string(),
                           where_);
  file_ = std::make_unique<AtomicFile>(path, "save_checkpoint");  // Note [Atomic file writes]
  const std::string zeros(kHeaderBytes, '\0');                    // the header is written last (finish)
  file_->write(zeros);
  put_raw(head.data(), head.size());
}

CheckpointWriter::~CheckpointWriter() = default;  // an unfinished file_ removes its temporary

void CheckpointWriter::put_raw(const void* data, std::size_t n) {
  STRATA_CHECK(file_ != nullptr, where_, ": the writer has finished or failed");
  hash_ = fnv1a64(hash_, static_cast<const char*>(data), n);
  payload_bytes_ += n;
  try {
    file_->write(data, n);
  } catch (const Error&) {
    file_.reset();  // it removed its temporary
    throw;
  }
}

void CheckpointWriter::begin(CheckpointSection section, const std::string& key, DType dtype, const Dims& sizes) {
  STRATA_CHECK(entry_bytes_left_ == 0, where_, ": entry ", quote_field(entry_key_), " is incomplete (",
               entry_bytes_left_, " bytes missing) when entry ", quote_field(key), " begins");
  STRATA_CHECK(entries_left_ > 0, where_, ": entry ", quote_field(key), " is one more than the entries announced");
  std::string head;
  put<uint8_t>(head, static_cast<uint8_t>(section));
  put_string(head, key, where_);
  put<uint8_t>(head, static_cast<uint8_t>(dtype));
  put<uint32_t>(head, static_cast<uint32_t>(sizes.size()));
  for (int64_t s : sizes) put<int64_t>(head, s);
  put_raw(head.data(), head.size());
  --entries_left_;
  entry_key_ = key;
  entry_bytes_left_ = static_cast<uint64_t>(checked_numel(sizes, "save_checkpoint")) * itemsize(dtype);
}

void CheckpointWriter::write(const void* data, std::size_t n) {
  STRATA_CHECK(n <= entry_bytes_left_, where_, ": entry ", quote_field(entry_key_), " is given ", n, " bytes but has ",
               entry_bytes_left_, " left");
  put_raw(data, n);
  entry_bytes_left_ -= n;
}

void CheckpointWriter::add(CheckpointSection section, const std::string& key, const Tensor& t) {
  STRATA_CHECK(t.defined(), where_, ": entry ", quote_field(key), " is an undefined tensor");
  begin(section, key, t.dtype(), t.sizes());
  const Tensor c = t.contiguous();
  if (c.nbytes() == 0) return;
  PinSet pins;
  pins.add(c, AccessMode::Read);
  pins.acquire();
  write(c.data_ptr(), c.nbytes());
}

void CheckpointWriter::finish() {
  STRATA_CHECK(entry_bytes_left_ == 0 && entries_left_ == 0, where_, ": ", entries_left_,
               " announced entries were not written and entry ", quote_field(entry_key_), " misses ", entry_bytes_left_,
               " bytes");
  STRATA_CHECK(file_ != nullptr, where_, ": the writer has finished or failed");
  std::string header(kMagic, sizeof kMagic);
  put<uint32_t>(header, kCheckpointVersion);
  put<uint32_t>(header, 0);
  put<uint64_t>(header, payload_bytes_);
  put<uint64_t>(header, hash_);
  std::unique_ptr<AtomicFile> file = std::move(file_);  // finished, or failed: either way no more writes
  file->write_at(header.data(), header.size(), 0);
  file->commit();  // fsync, rename over the path, fsync of the directory
}

void save_checkpoint(const std::string& path, const StateDict& model, const StateDict& optimizer,
                     const CheckpointMetadata& metadata) {
  STRATA_CHECK(!path.empty(), "save_checkpoint: the path is empty");
  const std::string where = "save_checkpoint(" + quote_path(path) + ")";
  // Undefined entries are refused before the temporary file exists.
  for (const auto* dict : {&model, &optimizer})
    for (const auto& [key, t] : *dict)
      STRATA_CHECK(t.defined(), where, ": ", dict == &model ? "model" : "optimizer", " entry ", quote_field(key),
                   " is an undefined tensor");
  CheckpointWriter w(path, metadata, model.size() + optimizer.size());
  for (const auto& [key, t] : model) w.add(CheckpointSection::Model, key, t);
  for (const auto& [key, t] : optimizer) w.add(CheckpointSection::Optimizer, key, t);
  w.finish();
}

// ---- CheckpointReader --------------------------------------------------------------------------

namespace {

/// Bounds-checked sequential reader over the payload (which already passed the checksum), through
/// a bounded buffer.
class PayloadCursor {
 public:
  PayloadCursor(int fd, const std::string& where, uint64_t pos, uint64_t end)
      : fd_(fd), where_(where), pos_(pos), end_(end) {}
  uint64_t pos() const { return pos_; }
  void need(uint64_t n) const {
    STRATA_CHECK(n <= end_ - pos_, where_, ": the file is corrupt (an entry at byte ", pos_,
                 " runs past the end of the payload)");
  }
  void skip(uint64_t n) {
    need(n);
    pos_ += n;
  }
  template <typename T>
  T get() {
    T v;
    get_bytes(&v, sizeof(T));
    return v;
  }
  std::string get_string() {
    const auto n = get<uint32_t>();
    need(n);
    std::string s(n, '\0');
    get_bytes(s.data(), n);
    return s;
  }

 private:
  void get_bytes(void* dst, std::size_t n) {
    need(n);
    if (pos_ < buf_pos_ || pos_ + n > buf_pos_ + buf_.size()) {
      if (n > kIoBufferBytes / 2) {  // large: straight from the file
        read_at(dst, n);
        pos_ += n;
        return;
      }
      buf_.resize(static_cast<std::size_t>(std::min<uint64_t>(kIoBufferBytes, end_ - pos_)));
      buf_pos_ = pos_;
      read_at(buf_.data(), buf_.size());
    }
    std::memcpy(dst, buf_.data() + (pos_ - buf_pos_), n);
    pos_ += n;
  }
  void read_at(void* dst, std::size_t n) const;

  int fd_;
  const std::string& where_;
  uint64_t pos_, end_;
  std::string buf_;
  uint64_t buf_pos_ = 0;
};

/// Reads exactly `n` bytes at `offset` of `fd`; throws naming the path and the offset otherwise.
void pread_all(int fd, const std::string& where, uint64_t offset, void* dst, std::size_t n) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    STRATA_CHECK(got > 0, where, ": reading ", n, " bytes at byte ", offset, " failed (",
                 got == 0 ? std::string("the file ends there; was it truncated while being read?") : errno_text(), ")");
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<std::size_t>(got);
  }
}

void PayloadCursor::read_at(void* dst, std::size_t n) const { pread_all(fd_, where_, pos_, dst, n); }

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path) : path_(path) {
  where_ = "load_checkpoint(" + quote_path(path) + ")";
  // Says "no such file", "is a directory" or "permission denied" (Note [Opening files named by the user]).
  file_ = open_file_for_reading(path, "load_checkpoint");
  try {
    check_header_and_checksum();
    index_entries();
  } catch (...) {
    std::fclose(file_);
    throw;
  }
}

CheckpointReader::~CheckpointReader() { std::fclose(file_); }

void CheckpointReader::check_header_and_checksum() {
  const int fd = ::fileno(file_);
  struct stat st{};
  STRATA_CHECK(::fstat(fd, &st) == 0, where_, ": cannot stat the file (", errno_text(), ")");
  file_bytes_ = static_cast<uint64_t>(st.st_size);
  STRATA_CHECK(file_bytes_ > 0, where_, ": the file is truncated (it is empty)");
  char header[kHeaderBytes];
  const std::size_t head = static_cast<std::size_t>(std::min<uint64_t>(file_bytes_, kHeaderBytes));
  pread_all(fd, where_, 0, header, head);
  const std::size_t magic_seen = std::min(head, sizeof kMagic);
  STRATA_CHECK(std::memcmp(header, kMagic, magic_seen) == 0, where_,
               ": not a Strata checkpoint (the file does not start with the magic \"STRATACK\")");
  STRATA_CHECK(file_bytes_ >= kHeaderBytes, where_, ": the file is truncated (", file_bytes_,
               " bytes, shorter than the ", kHeaderBytes, "-byte header)");
  uint32_t version;
  uint64_t payload_bytes, checksum;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&payload_bytes, header + 16, 8);
  std::memcpy(&checksum, header + 24, 8);
  STRATA_CHECK(version == kCheckpointVersion, where_, ": unsupported format version ", version,
               " (this build of Strata reads version ", kCheckpointVersion,
               version > kCheckpointVersion ? "; the file was written by a newer Strata)" : ")");
  const uint64_t have = file_bytes_ - kHeaderBytes;
  STRATA_CHECK(payload_bytes <= have, where_, ": the file is truncated (", file_bytes_, " bytes, the header announces ",
               kHeaderBytes + payload_bytes, ")");
  STRATA_CHECK(payload_bytes == have, where_, ": the file is corrupt (", have - payload_bytes,
               " bytes after the end of the payload)");
  std::string chunk(static_cast<std::size_t>(std::min<uint64_t>(kIoBufferBytes, have)), '\0');
  uint64_t h = kFnvBasis;
  for (uint64_t at = kHeaderBytes; at < file_bytes_;) {
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(chunk.size(), file_bytes_ - at));
    pread_all(fd, where_, at, chunk.data(), n);
    h = fnv1a64(h, chunk.data(), n);
    at += n;
  }
  STRATA_CHECK(h == checksum, where_, ": checksum mismatch (the file is corrupt: its ", have,
               " payload bytes from byte ", kHeaderBytes, " do not hash to the header's checksum)");
}

namespace {

/// numel × itemsize of `e`, refusing sizes whose product overflows or exceeds the rest of the payload.
uint64_t entry_bytes(const CheckpointEntry& e, const PayloadCursor& r) {
  uint64_t n = itemsize(e.dtype);
  if (std::find(e.sizes.begin(), e.sizes.end(), 0) != e.sizes.end()) return 0;
  for (int64_t s : e.sizes) {
    const bool overflow = __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n);
    if (overflow) r.need(~uint64_t{0});
  }
  r.need(n);
  return n;
}

}  // namespace

void CheckpointReader::index_entries() {
  PayloadCursor r(::fileno(file_), where_, kHeaderBytes, file_bytes_);
  const auto n_meta = r.get<uint32_t>();
  for (uint32_t i = 0; i < n_meta; ++i) {
    std::string k = r.get_string();
    std::string v = r.get_string();
    metadata_.emplace_back(std::move(k), std::move(v));
  }
  const auto n_tensors = r.get<uint64_t>();
  for (uint64_t i = 0; i < n_tensors; ++i) {
    CheckpointEntry e;
    const uint64_t at = r.pos();
    const auto section = r.get<uint8_t>();
    e.key = r.get_string();
    const auto dtype_code = r.get<uint8_t>();
    STRATA_CHECK(section <= 1 && dtype_code < kNumDTypes, where_, ": the file is corrupt (entry ", quote_field(e.key),
                 " at byte ", at, " has section ", int(section), " and dtype code ", int(dtype_code), ")");
    const auto rank = r.get<uint32_t>();
    r.need(static_cast<uint64_t>(rank) * 8);
    for (uint32_t d = 0; d < rank; ++d) {
      const auto s = r.get<int64_t>();
      STRATA_CHECK(s >= 0, where_, ": the file is corrupt (entry ", quote_field(e.key), " at byte ", at, " has size ",
                   s, ")");
      e.sizes.push_back(s);
    }
    e.section = static_cast<CheckpointSection>(section);
    e.dtype = static_cast<DType>(dtype_code);
    e.nbytes = entry_bytes(e, r);
    e.offset = r.pos();
    r.skip(e.nbytes);
    entries_.push_back(std::move(e));
  }
  STRATA_CHECK(r.pos() == file_bytes_, where_, ": the file is corrupt (", file_bytes_ - r.pos(),
               " unparsed payload bytes from byte ", r.pos(), ")");
}

const CheckpointEntry* CheckpointReader::find(CheckpointSection section, std::string_view key) const {
  for (const CheckpointEntry& e : entries_)
    if (e.section == section && e.key == key) return &e;
  return nullptr;
}

void CheckpointReader::read(const CheckpointEntry& e, uint64_t from, void* dst, std::size_t n) const {
  STRATA_CHECK(from <= e.nbytes && n <= e.nbytes - from, where_, ": bytes [", from, ", ", from + n, ") of entry ",
               quote_field(e.key), " asked, it has ", e.nbytes);
  pread_all(::fileno(file_), where_, e.offset + from, dst, n);
}

Tensor CheckpointReader::tensor(const CheckpointEntry& e) const {
  Tensor t = empty(e.sizes, {e.dtype, nullptr});
  if (e.nbytes == 0) return t;
  PinSet pins;
  pins.add(t, AccessMode::Write);
  pins.acquire();
  read(e, 0, t.data_ptr(), static_cast<std::size_t>(e.nbytes));
  return t;
}

Checkpoint load_checkpoint(const std::string& path) {
  const CheckpointReader r(path);
  Checkpoint ck;
  ck.metadata = r.metadata();
  for (const CheckpointEntry& e : r.entries())
    (e.section == CheckpointSection::Model ? ck.model : ck.optimizer).emplace_back(e.key, r.tensor(e));
  return ck;
}

}  // namespace strata
