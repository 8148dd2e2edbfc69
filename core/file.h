#pragma once
/// @file
/// Opening user-named files for reading, with errors that say why not; writing output files
/// atomically; the free space of a file system.
///
/// Note [Opening files named by the user]
/// Every file a user names (data files, checkpoints, trace files, flags' paths) is opened through
/// these functions, so a failure reads the same everywhere: `<what>: cannot open '<path>' (<why>)`,
/// where <why> tells "no such file" from "is a directory" from "permission denied" (fopen of a
/// directory succeeds on Linux and only the first read fails, which readers used to report as an
/// empty or corrupt file). A path holding a NUL byte is refused: the C library would open the
/// part before it. The path is quoted (Note [Quoting user data in messages]).

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

/// Why `path` cannot be opened for reading as a file: "" when it can, else "no such file", "is a
/// directory", "permission denied", "the path contains a NUL byte", or the system's reason.
/// Does not block on FIFOs.
std::string file_unreadable_reason(const std::string& path);

/// Throws strata::Error `<what>: cannot open '<path>' (<reason>)` unless `path` can be read.
void check_readable_file(const std::string& path, std::string_view what);

/// Opens `path` for binary reading; throws like check_readable_file when it cannot. The caller
/// closes the stream.
std::FILE* open_file_for_reading(const std::string& path, std::string_view what);

/// The whole content of `path`; throws like check_readable_file, or `<what>: reading '<path>'
/// failed (<reason>)`.
std::string read_file(const std::string& path, std::string_view what);

/// Note [Atomic file writes]
/// Every output file (checkpoints, .npz/.npy, Criteo binaries, plots, JSON reports) is written
/// through an AtomicFile: into a temporary file `.<name>.tmp.<pid>.<n>` in the same directory,
/// created with O_EXCL under a name unique to the process and the write (so two threads or
/// processes writing one path never share a temporary), fsync'ed, renamed over the path, and the
/// directory fsync'ed so the rename itself is durable. A reader sees the old file or the whole
/// new one, also after a crash; a failure, or an AtomicFile destroyed before commit(), removes the
/// temporary and leaves the old file as it was. A killed process leaves its temporary behind:
/// checkpoints remove those of dead processes (Note [Stale checkpoint temporaries]).
/// Errors read `<what>: cannot write '<path>': <step> the temporary file '<tmp>' failed: <reason>
/// (the previous file, if any, is untouched)`.
class AtomicFile {
 public:
  /// Creates the temporary file. Throws strata::Error (see the Note) for an empty path, a path
  /// with a NUL byte, a missing directory or no permission (a directory in the way: at commit()).
  AtomicFile(std::string path, std::string what);
  /// Without commit(): closes and removes the temporary file.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends `n` bytes (buffered). Throws, removing the temporary file, when the write fails.
  void write(const void* data, std::size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  /// Overwrites `n` bytes at `offset` of what was appended so far (a header known only at the end).
  void write_at(const void* data, std::size_t n, std::size_t offset);
  /// Bytes appended so far.
  std::size_t size() const { return size_; }
  /// Flushes, fsyncs, renames the temporary file over the path and fsyncs the directory. Throws,
  /// removing the temporary file, when a step fails.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return tmp_; }
  /// ".<name>.tmp." for `path`: the start of its temporaries' names.
  static std::string temporary_prefix(const std::string& path);

 private:
  void flush();
  [[noreturn]] void fail(std::string_view step, int err);

  std::string path_, what_, tmp_;
  std::string buffer_;
  std::size_t size_ = 0;
  int fd_ = -1;
};

/// Writes `content` to `path` through an AtomicFile (Note [Atomic file writes]); throws like it.
void write_file_atomically(const std::string& path, std::string_view content, std::string_view what);

/// Bytes an unprivileged writer may still put in the file system holding `path` (statvfs), or
/// nullopt when it cannot be asked (no such path).
std::optional<std::size_t> free_disk_bytes(const std::string& path);

/// Throws strata::Error `<what>: cannot write '<path>' (<reason>)` unless a file named `path` can
/// be created or replaced: the path is not a directory and its directory exists and takes a new
/// file (probed by creating and removing a temporary file there, so read-only file systems,
/// missing directories, parents that are files and permissions are all caught). For output paths
/// checked before a long job starts rather than at its end.
void check_writable_file_path(const std::string& path, std::string_view what);

}  // namespace strata
