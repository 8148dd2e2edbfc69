#include "models/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
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
static_assert(std::endian::native == std::endian::little,
              "checkpoint.cpp writes tensor bytes as they are in memory, which must be little-endian");

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'C', 'K'};
constexpr std::size_t kHeaderBytes = 32;

uint64_t fnv1a64(const char* data, std::size_t n) {
  uint64_t h = 1469598103934665603ull;
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

void put_tensors(std::string& out, uint8_t section, const StateDict& dict, const char* what,
                 const std::string& where) {
  for (const auto& [key, t] : dict) {
    STRATA_CHECK(t.defined(), where, ": ", what, " entry ", quote_field(key), " is an undefined tensor");
    put<uint8_t>(out, section);
    put_string(out, key, where);
    put<uint8_t>(out, static_cast<uint8_t>(t.dtype()));
    put<uint32_t>(out, static_cast<uint32_t>(t.dim()));
    for (int64_t s : t.sizes()) put<int64_t>(out, s);
    const Tensor c = t.contiguous();
    const std::size_t n = c.nbytes();
    if (n == 0) continue;
    PinSet pins;
    pins.add(c, AccessMode::Read);
    pins.acquire();
    out.append(static_cast<const char*>(c.data_ptr()), n);
  }
}

/// Bounds-checked reader over the payload (which already passed the checksum).
struct Reader {
  const std::string& buf;
  std::size_t pos;
  const std::string& where;  // "load_checkpoint('<path>')"
  void need(std::size_t n) {
    STRATA_CHECK(n <= buf.size() - pos, where, ": the file is corrupt (an entry at byte ", pos,
                 " runs past the end of the payload)");
  }
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, buf.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string get_string() {
    const auto n = get<uint32_t>();
    need(n);
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
};

std::string errno_text() { return std::strerror(errno); }

/// Writes all of `data` to `fd`; false on error (errno set).
bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

void save_checkpoint(const std::string& path, const StateDict& model, const StateDict& optimizer,
                     const CheckpointMetadata& metadata) {
  STRATA_CHECK(!path.empty(), "save_checkpoint: the path is empty");
  const std::string where = "save_checkpoint(" + quote_path(path) + ")";
  STRATA_CHECK(path.find('\0') == std::string::npos, where, ": the path contains a NUL byte");
  std::error_code ec;
  STRATA_CHECK(!std::filesystem::is_directory(path, ec), where, ": is a directory (expected a file name)");
  std::string payload;
  put<uint32_t>(payload, static_cast<uint32_t>(metadata.size()));
  for (const auto& [k, v] : metadata) {
    put_string(payload, k, where);
    put_string(payload, v, where);
  }
  put<uint64_t>(payload, static_cast<uint64_t>(model.size() + optimizer.size()));
  put_tensors(payload, 0, model, "model", where);
  put_tensors(payload, 1, optimizer, "optimizer", where);

  std::string header(kMagic, sizeof kMagic);
  put<uint32_t>(header, kCheckpointVersion);
  put<uint32_t>(header, 0);
  put<uint64_t>(header, payload.size());
  put<uint64_t>(header, fnv1a64(payload.data(), payload.size()));

  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  static std::atomic<uint64_t> counter{0};
  std::string tmp_name(".");
  tmp_name.append(target.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  tmp_name.append(".").append(std::to_string(counter.fetch_add(1)));
  const fs::path tmp = dir / tmp_name;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  STRATA_CHECK(fd >= 0, where, ": cannot create the temporary file ", quote_path(tmp.string()), ": ",
               errno_text());
  const bool ok = write_all(fd, header.data(), header.size()) && write_all(fd, payload.data(), payload.size()) &&
                  ::fsync(fd) == 0;
  const std::string write_error = ok ? "" : errno_text();
  const bool closed = ::close(fd) == 0;
  if (!ok || !closed) {
    const std::string err = ok ? errno_text() : write_error;
    ::unlink(tmp.c_str());
    STRATA_CHECK(false, where, ": writing the temporary file ", quote_path(tmp.string()), " failed: ", err,
                 " (the previous file, if any, is untouched)");
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    STRATA_CHECK(false, where, ": renaming the temporary file over it failed: ", err,
                 " (the previous file, if any, is untouched)");
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  const std::string where = "load_checkpoint(" + quote_path(path) + ")";
  // Says "no such file", "is a directory" or "permission denied" (Note [Opening files named by the user]).
  const std::string buf = read_file(path, "load_checkpoint");

  STRATA_CHECK(!buf.empty(), where, ": the file is truncated (it is empty)");
  const std::size_t magic_seen = std::min(buf.size(), sizeof kMagic);
  STRATA_CHECK(std::memcmp(buf.data(), kMagic, magic_seen) == 0, where,
               ": not a Strata checkpoint (the file does not start with the magic \"STRATACK\")");
  STRATA_CHECK(buf.size() >= kHeaderBytes, where, ": the file is truncated (", buf.size(),
               " bytes, shorter than the ", kHeaderBytes, "-byte header)");
  Reader header{buf, sizeof kMagic, where};
  const auto version = header.get<uint32_t>();
  header.get<uint32_t>();
  const auto payload_bytes = header.get<uint64_t>();
  const auto checksum = header.get<uint64_t>();
  STRATA_CHECK(version == kCheckpointVersion, where, ": unsupported format version ", version,
               " (this build of Strata reads version ", kCheckpointVersion,
               version > kCheckpointVersion ? "; the file was written by a newer Strata)" : ")");
  const std::size_t have = buf.size() - kHeaderBytes;
  STRATA_CHECK(payload_bytes <= have, where, ": the file is truncated (", buf.size(),
               " bytes, the header announces ", kHeaderBytes + payload_bytes, ")");
  STRATA_CHECK(payload_bytes == have, where, ": the file is corrupt (", have - payload_bytes,
               " bytes after the end of the payload)");
  STRATA_CHECK(fnv1a64(buf.data() + kHeaderBytes, have) == checksum, where,
               ": checksum mismatch (the file is corrupt)");

  Checkpoint ck;
  Reader r{buf, kHeaderBytes, where};
  const auto n_meta = r.get<uint32_t>();
  for (uint32_t i = 0; i < n_meta; ++i) {
    std::string k = r.get_string();
    std::string v = r.get_string();
    ck.metadata.emplace_back(std::move(k), std::move(v));
  }
  const auto n_tensors = r.get<uint64_t>();
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const auto section = r.get<uint8_t>();
    std::string key = r.get_string();
    const auto dtype_code = r.get<uint8_t>();
    STRATA_CHECK(section <= 1 && dtype_code < kNumDTypes, where,
                 ": the file is corrupt (entry ", quote_field(key), " has section ", int(section), " and dtype code ",
                 int(dtype_code), ")");
    const auto rank = r.get<uint32_t>();
    r.need(static_cast<std::size_t>(rank) * 8);
    Dims sizes;
    for (uint32_t d = 0; d < rank; ++d) {
      const auto s = r.get<int64_t>();
      STRATA_CHECK(s >= 0, where, ": the file is corrupt (entry ", quote_field(key), " has size ", s, ")");
      sizes.push_back(s);
    }
    const auto dtype = static_cast<DType>(dtype_code);
    const int64_t numel = checked_numel(sizes, "load_checkpoint");
    const std::size_t nbytes = static_cast<std::size_t>(numel) * itemsize(dtype);
    r.need(nbytes);
    Tensor t = empty(sizes, {dtype, nullptr});
    if (nbytes > 0) {
      PinSet pins;
      pins.add(t, AccessMode::Write);
      pins.acquire();
      std::memcpy(t.data_ptr(), buf.data() + r.pos, nbytes);
    }
    r.pos += nbytes;
    (section == 0 ? ck.model : ck.optimizer).emplace_back(std::move(key), std::move(t));
  }
  STRATA_CHECK(r.pos == buf.size(), where, ": the file is corrupt (", buf.size() - r.pos,
               " unparsed payload bytes)");
  return ck;
}

}  // namespace strata
