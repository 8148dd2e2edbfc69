#pragma once
/// @file
/// Checkpoints of DistributedDLRM that reshard (issue 28 item 4): a checkpoint written at N ranks
/// loads at any M, and training continues bitwise as it would have without the save and load.
/// DistributedDLRM::save and ::load (embeddings/dist/dist_dlrm.h) write and read it; this header
/// describes the layout and reads a manifest (for tools and tests).
///
/// Note [Resharding checkpoints]
/// A checkpoint is a directory of files in the one checkpoint format (models/checkpoint.h,
/// CheckpointWriter/Reader: checksummed, streamed in chunks, written atomically):
/// - `manifest` (rank 0): metadata "format" = "strata-dist-dlrm", "format_version" = "1",
///   "generation", "ranks" (the rank count it was written at), "steps", the model ("bottom_mlp",
///   "top_mlp" as "5-8-4", "interaction", "optimizer", "tables", "table.<t>.name/rows/dim"), the
///   settings it was trained with ("learning_rate", "seed", "chunks", "row_blocks", and "plan",
///   the writer's ShardPlan::to_json()), "files" and "file.<i>" (file names in the directory), and
///   the caller's extra keys; entries: "manifest.ranges" i64 [K, 4], one row per stored row range
///   (table, first row, end row, file index), sorted by table then row, covering each table's rows
///   exactly once; the MLP parameters (their state_dict names) and the dense optimizer's state
///   ("dense.<key>"), stored once.
/// - `g<G>-rank<r>-of<N>.ckpt` (rank r, generation G): the rows rank r holds of each table that is
///   not data-parallel, "emb_l.<t>.weight" f32 [rows, dim], and their optimizer state
///   "sparse.<t>.sum" (f32 [rows] for row-wise Adagrad, [rows, dim] for Adagrad, none for SGD) —
///   the same keys and layout as TieredDLRM's checkpoints, restricted to the range.
/// - `g<G>-replicated.ckpt` (rank 0, only when the plan has data-parallel tables): those tables
///   whole, once (every rank holds an identical replica).
/// Every file carries "generation" = G; a loader refuses a file of another generation.
/// Saving (collective): rank 0 creates the directory and picks G = 1 + the largest generation of
/// the files already there (shared with the others); each rank streams its own rows in chunks of
/// chunk_bytes (never a whole table on one rank) and commits its file under its new name; after
/// the ranks agree that every file is complete, rank 0 commits the manifest, the commit point; then
/// rank 0 removes the files (and dead temporaries) of other generations. A crash at any earlier
/// point leaves the previous manifest and the files it names untouched, so the previous checkpoint
/// loads; the next save cleans up. Each phase ends with an agreement (agree_on_every_rank, Note
/// [Agreed failures]), so a failure on one rank throws on every rank, naming that rank and its
/// error (which names the file). Concurrent saves into one directory are not supported.
/// Loading at M ranks (collective): every rank reads the manifest, checks the model against it
/// (table count, rows and dims, the MLP widths, the interaction and the optimizer kind, naming
/// the field; names, the learning rate, seed, chunks and row blocks may differ — the loading
/// model's learning rate then applies to the MLPs too, and chunks and row blocks must stay the
/// same for the continuation to be bitwise), and finds, for each table its
/// own plan holds rows [lo, hi) of, the ranges that overlap them and their files. It opens those
/// files (and only those), checks their format, generation and entries (dtype, shape), and the MLP
/// and dense optimizer state with nn::Module/Optimizer::check_state_dict; the ranks agree; only
/// then is anything written: the MLPs, the dense optimizer's state, the step count (the model's
/// and the sparse states'), and the rows with their state, streamed in chunks.
/// Why training then continues bitwise at any M: a step's results depend on the table rows, the
/// sparse accumulators, the MLPs, the dense optimizer's state and the fixed chunks and row blocks
/// (Note [Distributed DLRM step], Note [Rank-count-independent pooling]), never on which rank holds
/// a row; the checkpoint stores the first four exactly (f32 bits) and the plan only decides who
/// reads which bytes back.
/// Cost: opening a file checks its checksum over the whole file (CheckpointReader), so a rank
/// reads each file it needs once in full (chunked), besides the rows it copies: the files of
/// every stored range that overlaps its rows (a row-wise range of M ranks overlaps about N/M
/// stored ranges, at most two when M > N; a table-wise table one) and the replicated file when
/// there are data-parallel tables. Memory: one chunk of rows at a time.

#include <cstdint>
#include <string>
#include <vector>

#include "models/checkpoint.h"

namespace strata::emb {

/// One stored row range: rows [row_begin, row_end) of table `table` are in files[file].
struct DistCheckpointRange {
  int64_t table = 0;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  int64_t file = 0;
};

/// A checkpoint directory's manifest (Note [Resharding checkpoints]).
struct DistCheckpointManifest {
  std::string dir;
  int64_t generation = 0;
  /// The rank count the checkpoint was written at.
  int64_t ranks = 0;
  int64_t steps = 0;
  /// The table rows and dims, from "table.<t>.rows/dim".
  std::vector<int64_t> table_rows, table_dims;
  /// File names relative to `dir`.
  std::vector<std::string> files;
  /// Sorted by table, then row; each table's rows covered exactly once.
  std::vector<DistCheckpointRange> ranges;
  /// Every metadata key of the manifest (the caller's extra keys included).
  CheckpointMetadata metadata;
};

/// `dir`/manifest.
std::string dist_manifest_path(const std::string& dir);

/// Reads and checks the manifest of checkpoint directory `dir`: its file (the checkpoint format's
/// own errors: missing, truncated, corrupt), format and version, the integer fields, the file
/// names and the ranges (in range, sorted, covering each table exactly once). Throws strata::Error
/// naming the manifest's path and the field.
DistCheckpointManifest read_dist_manifest(const std::string& dir);

}  // namespace strata::emb
