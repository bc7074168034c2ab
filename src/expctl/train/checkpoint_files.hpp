#pragma once
/// Where a rank's checkpoints live and how they are told apart, verified and pruned, without
/// LibTorch (the run module checks them before it starts a resume).
///
/// A rank writes `rank<R>-step<S>.pt` (atomically) and then its index `rank<R>-step<S>.json`
/// ({"run_id", "rank", "step", "sha256", "size_bytes"}, atomically): a checkpoint exists once its
/// index does, and is intact when the file's size and SHA-256 match the index, its index names
/// the rank of its file name, and the run that verifies it wrote it (an index without a run id or
/// a rank is not intact). Each rank keeps its two
/// newest checkpoints, so while one rank writes step S the previous step is still complete on
/// every rank (a rank reaches step S only after every rank finished the collectives that follow
/// the previous checkpoint). A resume takes the newest step that every rank holds intact.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::train {

/// How many checkpoints a rank keeps (the newest and the one before it).
inline constexpr std::size_t k_checkpoints_kept = 2;

/// One checkpoint as its index describes it.
struct CheckpointFile {
  int rank = 0;
  std::int64_t step = 0;
  std::filesystem::path path;  ///< the .pt file
  std::string sha256;
  std::int64_t size_bytes = 0;
  std::string run_id;  ///< the run that wrote it; empty in indexes written before it was recorded
};

/// dir/rank<R>-step<S>.pt
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int rank, std::int64_t step);

/// Writes the index of `file` (after the .pt is in place); throws TrainError naming the path.
void write_checkpoint_index(const CheckpointFile& file);

/// The rank's checkpoints that have an index, newest step first.
std::vector<CheckpointFile> list_checkpoints(const std::filesystem::path& dir, int rank);

/// Empty when `file` is intact; otherwise what is wrong, naming the file ("...rank1-step20.pt:
/// SHA-256 differs from its index (the file is corrupt)").
/// With `run_id`, a checkpoint another run wrote is refused too, and so is one whose index names no
/// run (written before indexes named their run, or by hand): nothing tells it from another run's.
/// An index that names no rank is refused always.
std::string verify_checkpoint(const CheckpointFile& file, std::string_view run_id = {});

/// The rank's newest intact checkpoint, or nullopt; `problems` collects why newer ones were
/// passed over.
std::optional<CheckpointFile> newest_intact(const std::filesystem::path& dir, int rank,
                                            std::vector<std::string>* problems = nullptr,
                                            std::string_view run_id = {});

/// The rank's intact checkpoint of `step`, or nullopt (`problem` says why).
std::optional<CheckpointFile> intact_at(const std::filesystem::path& dir, int rank, std::int64_t step,
                                        std::string* problem = nullptr, std::string_view run_id = {});

/// Deletes the rank's checkpoints older than its k_checkpoints_kept newest (and files left by a
/// write that never completed). Best effort: a file that cannot be removed stays.
void prune_checkpoints(const std::filesystem::path& dir, int rank);

/// A rank's newest_resumable() when it has no intact checkpoint: it never completed one (no
/// index: the run ended during its first write, or before it), or every one fails its check.
inline constexpr std::int64_t k_no_checkpoint = -1;
inline constexpr std::int64_t k_none_intact = -2;

/// The rank's newest intact checkpoint step, or k_no_checkpoint / k_none_intact; `problems`
/// collects why newer ones were passed over.
std::int64_t newest_resumable(const std::filesystem::path& dir, int rank, std::vector<std::string>* problems,
                              std::string_view run_id = {});

/// The one rule for where ranks resume, applied by the engine before they start and by the
/// ranks themselves on their all-gathered newest_resumable() steps: the smallest of them. So
/// k_none_intact anywhere refuses the resume, else k_no_checkpoint anywhere sends every rank back
/// to step 0 (training is deterministic: the run still ends as an uninterrupted one would), else
/// the ranks continue after the newest step they all hold.
std::int64_t common_step(std::span<const std::int64_t> newest);

/// Where a resume of some ranks starts.
struct ResumePoint {
  std::optional<std::int64_t> step;  ///< the newest step every rank holds intact; nullopt: step 0
  /// Why no resume is possible: a rank's checkpoints are all damaged, or no common step is intact.
  std::string refusal;
  /// Why step 0 was chosen although some rank holds checkpoints, or which newer checkpoints were
  /// passed over (and why) on the way to `step`.
  std::string note;
};

/// What a resume of `ranks` starts from (common_step's rule), with the file that refuses it or
/// the rank that sends it back to step 0 named.
ResumePoint resume_point(const std::filesystem::path& dir, const std::vector<int>& ranks, std::string_view run_id = {});

}  // namespace expctl::train
