#pragma once
/// @file
/// Checkpoints: a model's and an optimizer's StateDict plus string metadata in one file, written
/// atomically (Note [Checkpoint file format] in checkpoint.cpp). save_checkpoint/load_checkpoint
/// hold the whole contents in memory; CheckpointWriter/CheckpointReader are the same mechanism
/// (and the same format) for contents larger than memory, streamed in bounded chunks
/// (Note [Streaming checkpoints]).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/state_dict.h"

namespace strata {

class AtomicFile;  // core/file.h

/// Key/value strings stored with a checkpoint (e.g. {"epoch", "3"}).
using CheckpointMetadata = std::vector<std::pair<std::string, std::string>>;

/// The contents of a checkpoint file, in the order they were saved.
struct Checkpoint {
  StateDict model;
  StateDict optimizer;
  CheckpointMetadata metadata;
};

/// The format version this build writes and reads.
inline constexpr uint32_t kCheckpointVersion = 1;

/// The largest buffer the streaming reader and writer hold, and the chunk callers that stream
/// large entries should use (Note [Streaming checkpoints]).
inline constexpr std::size_t kCheckpointChunkBytes = std::size_t{64} << 20;

/// Writes `model`, `optimizer` and `metadata` to `path`: into a temporary file in the same
/// directory, fsync'ed, then renamed over `path` (and the directory fsync'ed), so a crash or an
/// error mid-save leaves any previous file at `path` intact. Every tensor must be defined; any
/// dtype and layout is accepted (stored contiguous, little-endian). Throws strata::Error naming
/// the path on failure. Removes stale temporaries of `path` first (Note [Stale checkpoint
/// temporaries]).
void save_checkpoint(const std::string& path, const StateDict& model, const StateDict& optimizer = {},
                     const CheckpointMetadata& metadata = {});

/// Reads a file written by save_checkpoint (or CheckpointWriter). Throws strata::Error naming the
/// path for a missing or unreadable file, a foreign file (bad magic), a newer or unknown format
/// version, a truncated file and a checksum mismatch.
Checkpoint load_checkpoint(const std::string& path);

/// Which StateDict of a Checkpoint an entry belongs to (the file's section byte).
enum class CheckpointSection : uint8_t { Model = 0, Optimizer = 1 };

/// Writes a checkpoint entry by entry; the elements of an entry may be supplied in pieces, so a
/// tensor larger than memory (an embedding table) is never materialized whole. Same file, same
/// atomicity and same errors as save_checkpoint (which is built on it):
///
///     CheckpointWriter w(path, metadata, /*entries=*/2);
///     w.add(CheckpointSection::Model, "w", tensor);
///     w.begin(CheckpointSection::Model, "table", DType::f32, {rows, d});
///     for (each chunk) w.write(chunk.data(), chunk_bytes);
///     w.finish();   // the file appears at `path` only now
///
/// A writer destroyed without finish() (an error, an exception in the caller) removes its
/// temporary file and leaves `path` as it was.
class CheckpointWriter {
 public:
  /// Removes stale temporaries of `path`, creates the temporary file and writes `metadata`.
  /// `entries` is the number of entries that will follow (checked by finish()).
  CheckpointWriter(const std::string& path, const CheckpointMetadata& metadata, uint64_t entries);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  /// One whole entry (`t` must be defined; stored contiguous).
  void add(CheckpointSection section, const std::string& key, const Tensor& t);
  /// Starts an entry of `sizes` elements of `dtype`; its numel × itemsize bytes follow through
  /// write(). The previous entry must be complete.
  void begin(CheckpointSection section, const std::string& key, DType dtype, const Dims& sizes);
  /// The next `n` bytes of the current entry's elements (little-endian, row-major).
  void write(const void* data, std::size_t n);
  /// Checks that every announced entry was written whole, writes the header, fsyncs and renames
  /// the temporary file over `path`, then fsyncs the directory.
  void finish();

  /// "save_checkpoint('<path>')", the prefix of this writer's errors.
  const std::string& where() const { return where_; }

 private:
  void put_raw(const void* data, std::size_t n);

  std::string path_, where_;
  std::unique_ptr<AtomicFile> file_;  // null once finished or failed
  uint64_t entries_left_;
  uint64_t entry_bytes_left_ = 0;
  std::string entry_key_;
  uint64_t payload_bytes_ = 0;
  uint64_t hash_;
};

/// One entry of a checkpoint file: where its elements are and what they are.
struct CheckpointEntry {
  CheckpointSection section = CheckpointSection::Model;
  std::string key;
  DType dtype = DType::f32;
  Dims sizes;
  uint64_t offset = 0;  ///< file offset of the first element byte
  uint64_t nbytes = 0;  ///< numel × itemsize
};

/// Reads a checkpoint file without loading its entries: the constructor checks the header and
/// the checksum (one pass over the file in bounded chunks) and indexes the entries; their
/// elements are read on demand, whole (tensor()) or in pieces (read()).
class CheckpointReader {
 public:
  /// Throws strata::Error `load_checkpoint('<path>'): ...` for every error load_checkpoint names.
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const { return path_; }
  /// "load_checkpoint('<path>')", the prefix of this reader's errors.
  const std::string& where() const { return where_; }
  const CheckpointMetadata& metadata() const { return metadata_; }
  /// Every entry, in file order.
  const std::vector<CheckpointEntry>& entries() const { return entries_; }
  /// The entry `key` of `section`, or nullptr.
  const CheckpointEntry* find(CheckpointSection section, std::string_view key) const;
  /// The entry's elements as a new contiguous tensor.
  Tensor tensor(const CheckpointEntry& e) const;
  /// Bytes [from, from + n) of the entry's elements into `dst`.
  void read(const CheckpointEntry& e, uint64_t from, void* dst, std::size_t n) const;

 private:
  void check_header_and_checksum();
  void index_entries();

  std::string path_, where_;
  std::FILE* file_ = nullptr;
  uint64_t file_bytes_ = 0;
  CheckpointMetadata metadata_;
  std::vector<CheckpointEntry> entries_;
};

}  // namespace strata
