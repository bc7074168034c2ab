#pragma once
/// Value types of the results store. Other modules (launch, compare, report, cli) build and read
/// these without touching the database: this header includes nothing of SQLite. Every member has
/// an initializer, so designated initializers (`RunFilter{.tag = "x"}`) may leave any out.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::store {

/// Life cycle of a run (and of each of its ranks). Stored as text; the schema CHECKs the values.
/// `diverged`: stopped because the loss became NaN or infinite. `lost` is never stored: a run
/// stored as `running` is read back as `lost` when its owner process is gone (see
/// derive_run_status in store.hpp). On a team server, a run that a node ships is `lost` only when
/// that node said so (ship_state.lost): only the node can tell a dead run from one not shipped yet.
/// `queued`: recorded, waiting for a scheduler's job to start it (`run --slurm`), owned by no
/// process; a requeued job's run waits as `queued` again, its root cause saying why.
enum class RunStatus { running, completed, failed, interrupted, diverged, lost, queued };

/// Every status with its stored spelling, in enum order (the CHECK constraint and --help use it).
inline constexpr std::string_view k_run_status_names[] = {"running",  "completed", "failed", "interrupted",
                                                          "diverged", "lost",      "queued"};

/// The stored spelling of `status` ("running", ...).
std::string_view to_string(RunStatus status);

/// Parses a stored or user-given status; nullopt when it is none of k_run_status_names.
std::optional<RunStatus> parse_run_status(std::string_view text);

/// Whether a run in `status` is over for now: neither running nor waiting in a scheduler's queue
/// (`lost` counts as over: nothing runs it). What watch, cancel, gc and a Slurm follower wait for.
constexpr bool has_ended(RunStatus status) {
  return status != RunStatus::running && status != RunStatus::queued;
}

/// The one grammar of a run id: "YYYYMMDD-HHMMSS-xxxxxx" (digits, a dash, digits, a dash, six
/// lowercase hex digits), as the store makes them. An id read from anywhere — a store, a server,
/// a merge input, a ship batch — names a folder only after this check (Store::run_folder): a row
/// whose id is "../../x" would otherwise make `gc` delete, and `merge` or `export` write, outside
/// the runs folder.
bool is_run_id(std::string_view text);
/// True for a non-empty prefix of some run id (what a selector may give instead of the whole id).
bool is_run_id_prefix(std::string_view text);
/// "…: \"../x\" is not a run id (YYYYMMDD-HHMMSS-xxxxxx)…": the one message for an id that fails
/// the grammar, `where` saying where it was read.
std::string invalid_run_id_text(std::string_view id, std::string_view where);

/// The wall clock run times are taken from (stored as UTC text, see format_utc).
using Clock = std::chrono::system_clock;

/// UTC ISO-8601 with milliseconds, "2026-11-29T22:31:18.042Z": sorts as text in time order.
std::string format_utc(Clock::time_point time);

/// Parses format_utc's output (milliseconds optional); nullopt for anything else.
std::optional<Clock::time_point> parse_utc(std::string_view text);

/// What the runner knows when it records a new run. The spec must already be in the store
/// (put_spec), and so must the environment when one is given (put_environment).
struct NewRun {
  std::string spec_hash{};                        ///< 64 hex, a key of the specs table
  std::optional<std::string> environment_hash{};  ///< fingerprint hash, or none when not taken
  std::string name{};                             ///< human name, usually the spec's `name`
  std::optional<Clock::time_point> started_at{};  ///< default: now (set it to import older runs)
  /// Recorded `queued`, owned by no process: a scheduler's job starts it (Store::start_queued_run).
  bool queued = false;
};

/// One run as stored. Times are UTC ISO-8601 (format_utc).
struct RunRecord {
  std::string id{};  ///< "20261129-223118-3fa9c2": sorts in creation order, unique per store
  std::string spec_hash{};
  std::optional<std::string> environment_hash{};
  std::string name{};
  RunStatus status = RunStatus::running;
  std::string started_at{};
  std::optional<std::string> ended_at{};      ///< none while running
  std::optional<int> exit_code{};             ///< none while running
  std::string root_cause{};                   ///< why it failed or stopped; empty when it did not
  std::filesystem::path run_dir{};            ///< absolute: <runs root>/<id> (Store::runs_dir)
  std::string summary_json = "{}";            ///< a JSON object written by the runner; "{}" until then
  std::vector<std::string> tags{};            ///< sorted
  std::optional<std::string> owner{};         ///< "host:pid" of the process that ran it last; none in old stores
  std::optional<std::string> heartbeat_at{};  ///< when that process last said it was alive

  /// Seconds from start to end, or to `now` while the run has no end (to its last heartbeat when
  /// it is lost); nullopt when a time is unreadable.
  std::optional<double> duration_seconds(Clock::time_point now = Clock::now()) const;
};

/// One rank (process) of a run.
struct RankRecord {
  int rank = 0;
  std::string host{};
  std::optional<std::int64_t> pid{};
  std::optional<std::string> environment_hash{};  ///< the rank's own fingerprint, when taken
  RunStatus status = RunStatus::running;
  std::optional<int> exit_code{};  ///< set when it exited
  std::optional<int> signal{};     ///< set when a signal killed it
};

/// One metric value of one rank at one step. NaN and ±Inf are values like any other: they read
/// back as written (SQLite stores a NaN as NULL, which reads back as NaN).
struct MetricPoint {
  int rank = 0;
  std::int64_t step = 0;
  std::string name{};
  double value = 0.0;
};

/// Per-metric overview for `show`: counts over every rank; first/last from the lowest rank.
struct MetricSeriesInfo {
  std::string name{};
  std::int64_t points = 0;  ///< over all ranks
  int ranks = 0;            ///< how many ranks logged it
  int first_rank = 0;       ///< the rank first_*/last_* come from (the lowest that logged it)
  std::int64_t first_step = 0;
  double first_value = 0.0;
  std::int64_t last_step = 0;
  double last_value = 0.0;
};

/// A file a run produced (checkpoint, log, report), relative to the run folder.
struct ArtifactRecord {
  std::string path{};  ///< relative to RunRecord::run_dir, e.g. "checkpoints/step-400.pt"
  std::string sha256{};
  std::int64_t size_bytes = 0;
};

/// A stored experiment spec: hash -> canonical form (what was hashed).
struct SpecRecord {
  std::string hash{};       ///< 64 lowercase hex digits
  std::string name{};       ///< the spec's `name` when it was first recorded
  std::string canonical{};  ///< the canonical JSON that was hashed (also the run folder's spec.json)
};

/// Filter for list_runs; every set field must match. Results are newest first.
struct RunFilter {
  std::optional<RunStatus> status{};
  std::optional<std::string> tag{};
  std::string spec_hash_prefix{};  ///< lowercase hex, empty: any
  std::size_t limit = 0;           ///< 0: no limit
};

/// Selects metric points; unset fields match everything. Points come ordered by name, rank, step.
struct MetricFilter {
  std::optional<std::string> name{};
  std::optional<int> rank{};
};

}  // namespace expctl::store
