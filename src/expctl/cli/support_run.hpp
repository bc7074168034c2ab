#pragma once
/// The runner shared by `expctl run`, `expctl resume` and `expctl worker`: the resolved run file
/// in the run folder, the pinned-stack check, launching and supervising this node's ranks while
/// recording what they report, and the run summary. The process that supervises is the only one
/// that writes the database; ranks talk to it through their control channels.

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/cli/command.hpp"
#include "expctl/env/diff.hpp"
#include "expctl/env/verify.hpp"
#include "expctl/launch/rank_identity.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/store/store.hpp"
#include "expctl/train/worker.hpp"

namespace expctl::train {
class StoreServer;
}

namespace expctl::cli {

/// Name of the file in a run folder that holds the resolved spec and how the node was launched.
inline constexpr const char* k_resolved_file = "resolved.json";

/// How this node takes part (`--nnodes/--node-rank/--master-addr/--master-port`).
struct NodeLaunch {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  ///< empty: loopback (single node)
  int master_port = 0;      ///< 0: a free port (single node)
};

/// What the ranks (and `expctl resume`) read back from the run folder.
struct ResolvedRun {
  nlohmann::json spec;  ///< spec::Spec::values(): every field, defaults filled in
  std::string spec_file;
  NodeLaunch launch;
};

/// Writes `run` atomically to `run_dir`/resolved.json. Throws StoreError when it cannot.
void write_resolved_run(const std::filesystem::path& run_dir, const ResolvedRun& run);
/// Reads `run_dir`/resolved.json. Throws UsageError naming the file when missing or malformed.
ResolvedRun read_resolved_run(const std::filesystem::path& run_dir);

/// The machine held against the spec's pinned stack and image pin.
struct StackCheck {
  nlohmann::json fingerprint;  ///< Fingerprint::to_json()
  std::string fingerprint_hash;
  std::vector<env::VerifyRow> rows;  ///< one per pin; empty when nothing is pinned
  /// The rows that do not hold.
  std::vector<env::VerifyRow> drifted() const;
};

/// Collects this machine's fingerprint and verifies the spec's profile and image pin.
StackCheck check_pinned_stack(const spec::Spec& spec);

/// Before a resume: this machine's fingerprint against the one `run` was recorded with (the
/// variables recorded then are recorded again). Returns the differing fields that enter the
/// fingerprint hash; empty when the stack is the same (or the run has no recorded fingerprint).
std::vector<env::DiffRow> resume_drift(const store::Store& store, const store::RunRecord& run,
                                       const ResolvedRun& resolved);

/// Signals SIGINT/SIGTERM/SIGHUP set this flag (install_stop_handlers); ranks poll it per step.
std::atomic<bool>& stop_requested();
/// Set once this rank has finished its first optimizer step (mark_training_started).
std::atomic<bool>& training_started();
/// Sets training_started() when `record` is a worker's step record.
void mark_training_started(const nlohmann::json& record);
/// Installs handlers for SIGINT/SIGTERM/SIGHUP: before the first step they end the process with
/// exit code 130 (nothing to checkpoint yet, and a rank in rendezvous would only wait for peers
/// that stop too); after it they set stop_requested(), for a graceful stop after the step.
void install_stop_handlers();

/// Everything `run`/`resume` need to drive one invocation of a recorded run.
struct Invocation {
  store::RunRecord run;
  ResolvedRun resolved;
  bool resume = false;
  std::vector<env::VerifyRow> drift;  ///< drifted pins accepted with --allow-drift
  OutputFormat format = OutputFormat::text;
  /// Where this node's ranks meet (see host_rendezvous).
  std::shared_ptr<struct Rendezvous> rendezvous;
};

/// Where this node's ranks meet, held for as long as they run.
struct Rendezvous {
  /// Several nodes, node 0: the TCPStore every rank joins (train/store_server.hpp).
  std::unique_ptr<train::StoreServer> server;
  /// A single node: the file of the c10d FileStore the ranks share (private to this user, in the
  /// temporary directory; nothing listens on the network). Removed with this object.
  std::filesystem::path file;
  Rendezvous() = default;
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;
  ~Rendezvous();
};

/// Prepares the rendezvous before anything is recorded. A single node: a fresh FileStore file.
/// Node 0 of several: the TCPStore on `launch.master_port`; a port in use is an input error
/// (exit 2). Other nodes: nothing to host (their ranks join node 0's store).
std::shared_ptr<Rendezvous> host_rendezvous(NodeLaunch& launch, const nlohmann::json& spec);

/// Launches this node's ranks (`expctl worker`) under the fail-fast supervisor, streams their
/// records into `store` in batches, records rank ends, finishes the run (completed, failed with
/// the root cause, or interrupted), writes and prints the summary. Returns the exit code.
util::ExitCode supervise_run(store::Store& store, const Invocation& invocation, const GlobalOptions& globals);

/// Where a rank started by `launcher` stands, for the trainer.
train::WorkerPlacement placement_of(const launch::RankIdentity& identity);

/// Runs this process as one rank of a job started by an external launcher (torchrun --no-python,
/// mpirun, srun): global rank 0 records the run into the store (its own metrics, the summary);
/// other ranks train and log only. Returns the exit code.
util::ExitCode run_as_external_rank(const spec::Spec& spec, const std::vector<std::string>& tags,
                                    const StackCheck& stack, OutputFormat format, const GlobalOptions& globals);

/// The summary of a run computed from its stored metrics (fields in docs/run.md).
/// `previous` is the summary stored before this invocation ({} for a fresh run).
nlohmann::json compute_summary(const store::Store& store, const std::string& run_id, const nlohmann::json& previous,
                               double invocation_wall_s, std::optional<double> time_to_first_step_s);

/// SHA-256 (hex) of the losses as consecutive float32 little-endian bit patterns.
std::string loss_curve_sha256(const std::vector<double>& losses);

/// Optimizer steps treated as warm-up (left out of throughput and step-time statistics):
/// min(10, steps / 10).
std::int64_t warmup_steps(std::int64_t steps);

}  // namespace expctl::cli
