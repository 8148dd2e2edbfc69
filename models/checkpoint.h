#pragma once
/// @file
/// Checkpoints: a model's and an optimizer's StateDict plus string metadata in one file, written
/// atomically (Note [Checkpoint file format] in checkpoint.cpp).

#include <string>
#include <utility>
#include <vector>

#include "models/state_dict.h"

namespace strata {

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

/// Writes `model`, `optimizer` and `metadata` to `path`: into a temporary file in the same
/// directory, fsync'ed, then renamed over `path` (and the directory fsync'ed), so a crash or an
/// error mid-save leaves any previous file at `path` intact. Every tensor must be defined; any
/// dtype and layout is accepted (stored contiguous, little-endian). Throws strata::Error naming
/// the path on failure.
void save_checkpoint(const std::string& path, const StateDict& model, const StateDict& optimizer = {},
                     const CheckpointMetadata& metadata = {});

/// Reads a file written by save_checkpoint. Throws strata::Error naming the path for a missing or
/// unreadable file, a foreign file (bad magic), a newer or unknown format version, a truncated
/// file and a checksum mismatch.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace strata
