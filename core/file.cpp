#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/text.h"

namespace strata {

namespace {

std::string reason_for(int err) {
  switch (err) {
    case ENOENT: return "no such file";
    case EISDIR: return "is a directory";
    case EACCES:
    case EPERM: return "permission denied";
    case ENOTDIR: return "a parent of it is not a directory";
    default: return std::strerror(err);
  }
}

/// Opens `path` read-only; returns the descriptor, or -1 with `why` set. A directory is refused.
int open_readable(const std::string& path, int extra_flags, std::string& why) {
  if (path.find('\0') != std::string::npos) {
    why = "the path contains a NUL byte";
    return -1;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | extra_flags);
  if (fd < 0) {
    why = reason_for(errno);
    return -1;
  }
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    why = reason_for(EISDIR);
    return -1;
  }
  return fd;
}

/// The directory part of `path` ("." when it has none).
std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string file_name_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

[[noreturn]] void throw_unreadable(const std::string& path, std::string_view what, const std::string& why) {
  throw Error(detail::format_message(what, ": cannot open ", quote_path(path), " (", why, ")"));
}

}  // namespace

std::string file_unreadable_reason(const std::string& path) {
  std::string why;
  const int fd = open_readable(path, O_NONBLOCK, why);
  if (fd >= 0) ::close(fd);
  return why;
}

void check_readable_file(const std::string& path, std::string_view what) {
  const std::string why = file_unreadable_reason(path);
  if (!why.empty()) throw_unreadable(path, what, why);
}

std::FILE* open_file_for_reading(const std::string& path, std::string_view what) {
  std::string why;
  const int fd = open_readable(path, 0, why);
  if (fd < 0) throw_unreadable(path, what, why);
  std::FILE* f = ::fdopen(fd, "rb");
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    throw_unreadable(path, what, reason_for(err));
  }
  return f;
}

void check_writable_file_path(const std::string& path, std::string_view what) {
  const auto refuse = [&](const std::string& why) {
    throw Error(detail::format_message(what, ": cannot write ", quote_path(path), " (", why, ")"));
  };
  if (path.empty()) refuse("the path is empty");
  if (path.find('\0') != std::string::npos) refuse("the path contains a NUL byte");
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) refuse(reason_for(EISDIR));
  const std::string dir = directory_of(path);
  static std::atomic<unsigned> counter{0};
  const std::string probe =
      dir + "/.strata-write-probe." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) refuse("its directory " + quote_path(dir) + " does not exist");
    refuse(err == EROFS ? std::string("read-only file system") : reason_for(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string read_file(const std::string& path, std::string_view what) {
  std::FILE* f = open_file_for_reading(path, what);
  std::string out;
  struct stat st{};
  if (::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode)) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, got);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed)
    throw Error(detail::format_message(what, ": reading ", quote_path(path), " failed (", reason_for(err), ")"));
  return out;
}

// ---- AtomicFile (Note [Atomic file writes]) ----------------------------------------------------------

namespace {

constexpr std::size_t kAtomicFileBuffer = std::size_t{1} << 20;

/// Writes all of [data, data + n) at `offset` (or appends when offset < 0), retrying on EINTR.
bool write_all(int fd, const char* data, std::size_t n, off_t offset = -1) {
  while (n > 0) {
    const ssize_t w = offset < 0 ? ::write(fd, data, n) : ::pwrite(fd, data, n, offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
    if (offset >= 0) offset += w;
  }
  return true;
}

}  // namespace

std::string AtomicFile::temporary_prefix(const std::string& path) {
  std::string prefix(".");
  prefix.append(file_name_of(path)).append(".tmp.");
  return prefix;
}

AtomicFile::AtomicFile(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  STRATA_CHECK(!path_.empty(), what_, ": the output path is empty");
  STRATA_CHECK(path_.find('\0') == std::string::npos, what_, ": cannot write ", quote_path(path_),
               " (the path contains a NUL byte)");
  static std::atomic<uint64_t> counter{0};
  const std::string dir = directory_of(path_);
  tmp_ = (dir == "/" ? "" : dir) + "/" + temporary_prefix(path_) + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw Error(detail::format_message(what_, ": cannot write ", quote_path(path_),
                                       ": cannot create the temporary file ", quote_path(tmp_), ": ",
                                       std::strerror(err)));
  }
  buffer_.reserve(kAtomicFileBuffer);
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::fail(std::string_view step, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  throw Error(detail::format_message(what_, ": cannot write ", quote_path(path_), ": ", step, " the temporary file ",
                                     quote_path(tmp_), " failed: ", std::strerror(err),
                                     " (the previous file, if any, is untouched)"));
}

void AtomicFile::flush() {
  if (!buffer_.empty() && !write_all(fd_, buffer_.data(), buffer_.size())) fail("writing", errno);
  buffer_.clear();
}

void AtomicFile::write(const void* data, std::size_t n) {
  STRATA_CHECK(fd_ >= 0, what_, ": ", quote_path(path_), " was already committed or failed");
  if (n == 0) return;
  const char* p = static_cast<const char*>(data);
  size_ += n;
  if (buffer_.size() + n <= kAtomicFileBuffer) {
    buffer_.append(p, n);
    return;
  }
  flush();
  if (n < kAtomicFileBuffer)
    buffer_.append(p, n);
  else if (!write_all(fd_, p, n))
    fail("writing", errno);
}

void AtomicFile::write_at(const void* data, std::size_t n, std::size_t offset) {
  STRATA_CHECK(fd_ >= 0, what_, ": ", quote_path(path_), " was already committed or failed");
  STRATA_CHECK(offset <= size_ && n <= size_ - offset, what_, ": writing ", n, " bytes at offset ", offset, " of the ",
               size_, " written so far");
  flush();
  if (!write_all(fd_, static_cast<const char*>(data), n, static_cast<off_t>(offset))) fail("writing", errno);
}

void AtomicFile::commit() {
  STRATA_CHECK(fd_ >= 0, what_, ": ", quote_path(path_), " was already committed or failed");
  flush();
  if (::fsync(fd_) != 0) fail("fsync of", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("closing", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("renaming", errno);
  // Make the rename itself durable.
  const int dfd = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomically(const std::string& path, std::string_view content, std::string_view what) {
  AtomicFile f(path, std::string(what));
  f.write(content);
  f.commit();
}

std::optional<std::size_t> free_disk_bytes(const std::string& path) {
  struct statvfs fs{};
  if (::statvfs(path.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<std::size_t>(fs.f_bavail) * static_cast<std::size_t>(fs.f_frsize);
}

}  // namespace strata
