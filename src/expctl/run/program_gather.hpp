#pragma once
/// Program runs whose ranks more than one `expctl` process supervises — several nodes started with
/// `--nnodes`, or one process per rank under torchrun, mpirun, srun or Kubeflow — meet once more at
/// the end: every other supervisor hands its ranks' logged steps and how they ended to the one that
/// records the run (node 0, or global rank 0), over the job's rendezvous store. It is the program's
/// counterpart of the built-in trainer's all-gather at the end (docs/run.md, "Several hosts"): a
/// program's steps never pass through expctl's collectives, so its supervisors carry them.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "expctl/store/store.hpp"

namespace expctl::run {

/// How one rank of a part ended.
struct PartRank {
  int rank = 0;
  store::RunStatus status = store::RunStatus::completed;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string host;
  std::int64_t pid = 0;
};

/// What one supervisor hands over.
struct ProgramPart {
  int index = 0;  ///< node rank (--nnodes) or global rank (external launcher)
  std::vector<store::MetricPoint> points;
  std::vector<PartRank> ranks;
  std::string root_cause;  ///< empty when its ranks completed
  std::int64_t steps_logged = 0;
  std::int64_t lines_skipped = 0;
  /// An external launcher's rank: the end of its log (it has no run folder of its own), which the
  /// run of record keeps as logs/rank-N.log. Empty for a node's part (its logs are in its own run).
  std::string log;
};

/// The most of a rank's log a part carries (its end).
inline constexpr std::size_t k_part_log_bytes = 1 << 20;

/// The key a part is handed over under.
std::string part_key(int index);
/// The key rank 0 publishes the run under (external launchers: the others learn its id).
inline constexpr const char* k_program_run_key = "expctl/program/run";

/// A part as one JSON text and back (pure). Non-finite values are kept: "nan", "inf", "-inf";
/// bytes of the log that are not UTF-8 become U+FFFD.
std::string part_text(const ProgramPart& part);
/// Throws nlohmann::json::exception for a text that is not a part.
ProgramPart part_from_text(const std::string& text);

/// The most a part's text may hold: a peer that reaches the job's store (any host that reaches
/// MASTER_PORT) must not make the recording supervisor parse without bound. 256 MiB carries about
/// five million points.
inline constexpr std::size_t k_max_part_bytes = std::size_t{256} << 20;

/// The part handed over under part_key(index) by a job of `world_size` ranks, checked before it
/// is trusted (docs/run.md, "Several hosts"): at most k_max_part_bytes; its own index is `index`
/// (it names the log file written); every point's and rank row's rank in [0, world_size), steps
/// and pids not negative, metric names valid_metric_name; the log at most k_part_log_bytes. The
/// error says in a few words what is wrong.
tl::expected<ProgramPart, std::string> checked_part(const std::string& text, int index, int world_size);

}  // namespace expctl::run
