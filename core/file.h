#pragma once
/// @file
/// Opening user-named files for reading, with errors that say why not; writing output files
/// atomically.
///
/// Note [Opening files named by the user]
/// Every file a user names (data files, checkpoints, trace files, flags' paths) is opened through
/// these functions, so a failure reads the same everywhere: `<what>: cannot open '<path>' (<why>)`,
/// where <why> tells "no such file" from "is a directory" from "permission denied" (fopen of a
/// directory succeeds on Linux and only the first read fails, which readers used to report as an
/// empty or corrupt file). A path holding a NUL byte is refused: the C library would open the
/// part before it. The path is quoted (Note [Quoting user data in messages]).

#include <cstdio>
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

/// Writes `content` to `path` atomically: `path.tmp`, fsync, rename(2), so a reader sees the old
/// file or the whole new one. Throws strata::Error `<what>: cannot write '<path>': <step> failed:
/// <reason>` (an empty path, a missing directory, no permission, a directory in the way) and
/// leaves no temporary file behind.
void write_file_atomically(const std::string& path, std::string_view content, std::string_view what);

/// Throws strata::Error `<what>: cannot write '<path>' (<reason>)` unless a file named `path` can
/// be created or replaced: the path is not a directory and its directory exists and takes a new
/// file (probed by creating and removing a temporary file there, so read-only file systems,
/// missing directories, parents that are files and permissions are all caught). For output paths
/// checked before a long job starts rather than at its end.
void check_writable_file_path(const std::string& path, std::string_view what);

}  // namespace strata
