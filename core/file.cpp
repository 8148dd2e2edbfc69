#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

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
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    why = reason_for(EISDIR);
    return -1;
  }
  return fd;
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
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) refuse(reason_for(EISDIR));
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  static std::atomic<unsigned> counter{0};
  const std::string probe = dir + "/.strata-write-probe." + std::to_string(::getpid()) + "." +
                            std::to_string(counter.fetch_add(1));
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
  struct stat st {};
  if (::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode)) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, got);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw Error(detail::format_message(what, ": reading ", quote_path(path), " failed (", reason_for(err), ")"));
  return out;
}

void write_file_atomically(const std::string& path, std::string_view content, std::string_view what) {
  STRATA_CHECK(!path.empty(), what, ": the output path is empty");
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    STRATA_CHECK(false, what, ": cannot write ", quote_path(path), ": cannot create ", quote_path(tmp), ": ",
                 std::strerror(err));
  }
  const auto fail = [&](const char* step, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    STRATA_CHECK(false, what, ": cannot write ", quote_path(path), ": ", step, " ", quote_path(tmp),
                 " failed: ", std::strerror(err));
  };
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write to", errno);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync of", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    STRATA_CHECK(false, what, ": cannot write ", quote_path(path), ": closing ", quote_path(tmp),
                 " failed: ", std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    STRATA_CHECK(false, what, ": cannot write ", quote_path(path), ": renaming ", quote_path(tmp),
                 " to it failed: ", std::strerror(err));
  }
}

}  // namespace strata
