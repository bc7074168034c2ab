#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/support_run.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "expctl/cli/support_store.hpp"
#include "expctl/compare/statistics.hpp"
#include "expctl/env/diff.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/env/profile.hpp"
#include "expctl/launch/launch_plan.hpp"
#include "expctl/launch/rank_identity.hpp"
#include "expctl/launch/supervisor.hpp"
#include "expctl/spec/profile.hpp"
#include "expctl/train/store_server.hpp"
#include "expctl/train/torch_info.hpp"
#include "expctl/train/worker.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/malloc_tuning.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::cli {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Time since this process started (not since main): loading LibTorch's shared libraries is part
// of what a user waits for before the first step, so it is counted.

double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Field 22 (starttime, clock ticks after boot) comes after the parenthesised command name.
  const auto close = text.rfind(')');
  timespec now{};
  if (close == std::string::npos || clock_gettime(CLOCK_BOOTTIME, &now) != 0) {
    return 0.0;
  }
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int index = 3; index <= 22 && fields >> field; ++index) {
  }
  const double started = std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return std::max(0.0, static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9 - started);
}

/// The steady-clock instant this process started.
SteadyClock::time_point process_start() {
  static const SteadyClock::time_point start =
      SteadyClock::now() - std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(seconds_since_process_start()));
  return start;
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::string host_name() {
  char buffer[256] = {};
  return ::gethostname(buffer, sizeof buffer - 1) == 0 ? std::string(buffer) : std::string("localhost");
}

// ---------------------------------------------------------------------------------------------
// Console: rank 0's lines and every rank's errors, plus a progress line redrawn in place when
// stderr is a terminal (then rank 0's periodic "step" lines are replaced by it).

class Console {
 public:
  explicit Console(bool quiet) : m_terminal(::isatty(STDERR_FILENO) == 1), m_quiet(quiet) {}

  void line(std::string_view text) {
    if (m_quiet && text.find("error") == std::string_view::npos) {
      return;  // -q: only errors
    }
    if (m_terminal && text.starts_with("[rank 0] step ")) {
      return;
    }
    clear_progress();
    std::cerr << text << '\n';
    draw_progress();
  }

  void set_total(std::int64_t total) { m_total = total; }

  void step(const json& record, int world_size) {
    if (!m_terminal || m_quiet) {
      return;
    }
    const auto now = SteadyClock::now();
    const auto step = record.value("step", std::int64_t{0});
    if (!m_first) {
      m_first = now;
      m_first_step = step;
    }
    if (now - m_last_draw < std::chrono::milliseconds(100) && step != m_total) {
      return;
    }
    m_last_draw = now;
    const double elapsed = std::chrono::duration<double>(now - *m_first).count();
    const auto done = step - m_first_step;
    const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(m_total - step) : 0.0;
    m_progress = fmt::format("epoch {} step {}/{} loss {:.4f} samples/s {:.0f} eta {}", record.value("epoch", 0),
                             step, m_total, record.value("loss", 0.0),
                             record.value("samples_per_sec", 0.0) * world_size, train::eta_text(eta));
    std::cerr << "\r\033[K" << m_progress << std::flush;
  }

  /// Ends the progress line so that what follows starts on a fresh line.
  void finish() {
    if (!m_progress.empty()) {
      std::cerr << '\n' << std::flush;
      m_progress.clear();
    }
  }

 private:
  void clear_progress() {
    if (!m_progress.empty()) {
      std::cerr << "\r\033[K";
    }
  }
  void draw_progress() {
    if (!m_progress.empty()) {
      std::cerr << m_progress;
    }
    std::cerr << std::flush;
  }

  bool m_terminal;
  bool m_quiet;
  std::int64_t m_total = 0;
  std::optional<SteadyClock::time_point> m_first;
  std::int64_t m_first_step = 0;
  SteadyClock::time_point m_last_draw{};
  std::string m_progress;
};

// ---------------------------------------------------------------------------------------------
// Records -> store. Metric points are buffered and written in one transaction per batch, so a
// fast run costs a few transactions a second, not one per step.

/// Per-step metric names and how each is read from a step record.
struct StepMetricField {
  const char* name;
  const char* field;
  double scale;
};
constexpr StepMetricField k_step_metrics[] = {
    {"loss", "loss", 1.0},
    {"lr", "lr", 1.0},
    {"grad_scale", "grad_scale", 1.0},
    {"step_time_ms", "step_time_s", 1000.0},
    {"comm_wait_ms", "comm_wait_s", 1000.0},
    {"samples_per_sec", "samples_per_sec", 1.0},
};

constexpr std::size_t k_batch_points = 4096;
constexpr auto k_batch_interval = std::chrono::milliseconds(500);

class RunRecorder {
 public:
  RunRecorder(store::Store* store, std::string run_id, std::filesystem::path run_dir, Console& console,
              SteadyClock::time_point start)
      : m_store(store), m_run_id(std::move(run_id)), m_run_dir(std::move(run_dir)), m_console(console),
        m_start(start) {}

  void on_record(int rank, std::string_view payload) {
    json record = json::parse(payload, nullptr, false);
    if (record.is_discarded() || !record.is_object()) {
      return;  // not ours: the protocol lets ranks send other records
    }
    const std::string kind = record.value("t", "");
    if (kind == "step") {
      on_step(rank, record);
    } else if (kind == "eval" && rank == 0) {
      const auto step = record.value("step", std::int64_t{0});
      m_points.push_back({0, step, "eval_loss", record.value("loss", 0.0)});
      m_points.push_back({0, step, "eval_accuracy", record.value("accuracy", 0.0)});
    } else if (kind == "checkpoint") {
      on_checkpoint(record);
    } else if (kind == "remote_steps" && rank == 0) {
      on_remote_steps(record);
    } else if (kind == "start" && rank == 0) {
      m_world_size = record.value("world_size", 1);
      m_console.set_total(record.value("total_steps", std::int64_t{0}));
    }
    if (m_points.size() >= k_batch_points || SteadyClock::now() - m_last_flush >= k_batch_interval) {
      flush();
    }
  }

  void flush() {
    m_last_flush = SteadyClock::now();
    if (m_points.empty() || m_store == nullptr) {
      m_points.clear();
      return;
    }
    m_store->append_metrics(m_run_id, m_points);
    m_points.clear();
  }

  /// Seconds from process start to the beginning of rank 0's first optimizer step.
  std::optional<double> time_to_first_step() const { return m_time_to_first_step; }

 private:
  void push_step(int rank, const json& record) {
    const auto step = record.value("step", std::int64_t{0});
    for (const auto& metric : k_step_metrics) {
      m_points.push_back({rank, step, metric.name, record.value(metric.field, 0.0) * metric.scale});
    }
    m_points.push_back({rank, step, "skipped", record.value("skipped", false) ? 1.0 : 0.0});
  }

  void on_step(int rank, const json& record) {
    push_step(rank, record);
    if (rank == 0) {
      if (!m_time_to_first_step) {
        m_time_to_first_step = seconds_since(m_start) - record.value("step_time_s", 0.0);
      }
      m_console.step(record, m_world_size);
    }
  }

  // Rows in the worker's "remote_steps" column order, stored like that rank's own step records.
  void on_remote_steps(const json& record) {
    static constexpr const char* k_columns[] = {"step",       "epoch",       "loss",        "lr",
                                                "grad_scale", "skipped",     "step_time_s", "comm_wait_s",
                                                "samples_per_sec"};
    const int rank = record.value("rank", -1);
    if (rank <= 0 || !record.contains("rows") || !record["rows"].is_array()) {
      return;
    }
    for (const auto& row : record["rows"]) {
      if (!row.is_array() || row.size() != std::size(k_columns)) {
        continue;
      }
      json step;
      for (std::size_t i = 0; i < std::size(k_columns); ++i) {
        step[k_columns[i]] = row[i];
      }
      step["skipped"] = row[5].get<double>() != 0.0;
      push_step(rank, step);
    }
  }

  void on_checkpoint(const json& record) {
    if (m_store == nullptr) {
      return;
    }
    const std::filesystem::path path = record.value("path", "");
    const auto relative = path.lexically_relative(m_run_dir);
    m_store->add_artifact(m_run_id, {relative.empty() ? path.string() : relative.string(),
                                     record.value("sha256", ""), record.value("size_bytes", std::int64_t{0})});
  }

  store::Store* m_store;
  std::string m_run_id;
  std::filesystem::path m_run_dir;
  Console& m_console;
  SteadyClock::time_point m_start;
  std::vector<store::MetricPoint> m_points;
  SteadyClock::time_point m_last_flush = SteadyClock::now();
  std::optional<double> m_time_to_first_step;
  int m_world_size = 1;
};

// ---------------------------------------------------------------------------------------------
// Finishing: status, exit code, root cause, artifacts, summary, output.

struct Verdict {
  store::RunStatus status = store::RunStatus::completed;
  util::ExitCode exit_code = util::ExitCode::ok;
  std::string root_cause;
};

store::RunStatus store_status(launch::RunStatus status) {
  switch (status) {
    case launch::RunStatus::completed:
      return store::RunStatus::completed;
    case launch::RunStatus::failed:
      return store::RunStatus::failed;
    case launch::RunStatus::interrupted:
      return store::RunStatus::interrupted;
  }
  return store::RunStatus::failed;
}

util::ExitCode exit_code_of(store::RunStatus status) {
  switch (status) {
    case store::RunStatus::completed:
      return util::ExitCode::ok;
    case store::RunStatus::interrupted:
      return util::ExitCode::interrupted;
    default:
      return util::ExitCode::run_failed;
  }
}

constexpr std::size_t k_root_cause_lines = 10;

std::string root_cause_text(const launch::Outcome& outcome) {
  if (!outcome.root_cause) {
    return outcome.interrupt_signal ? fmt::format("interrupted by {}", launch::signal_name(*outcome.interrupt_signal))
                                    : std::string();
  }
  std::string text = outcome.root_cause->description;
  const auto& lines = outcome.root_cause->last_lines;
  if (!lines.empty()) {
    text += outcome.root_cause->rank ? fmt::format("\nlast lines of rank {}:", *outcome.root_cause->rank)
                                     : std::string("\nlast lines:");
    const auto first = lines.size() > k_root_cause_lines ? lines.size() - k_root_cause_lines : 0;
    for (auto index = first; index < lines.size(); ++index) {
      text += "\n  " + lines[index];
    }
  }
  return text;
}

Verdict verdict_of(const launch::Outcome& outcome) {
  Verdict verdict;
  verdict.status = store_status(outcome.status);
  verdict.exit_code = exit_code_of(verdict.status);
  verdict.root_cause = root_cause_text(outcome);
  return verdict;
}

store::RunStatus rank_status(const launch::RankExit& exit) {
  if (exit.exit_code == 0) {
    return store::RunStatus::completed;
  }
  return exit.exit_code == launch::k_interrupted_exit_code ? store::RunStatus::interrupted : store::RunStatus::failed;
}

void record_log_artifacts(store::Store& store, const store::RunRecord& run) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run.run_dir / "logs", error)) {
    if (entry.path().extension() != ".log") {
      continue;
    }
    const auto sha = util::sha256_file(entry.path());
    if (sha) {
      store.add_artifact(run.id, {entry.path().lexically_relative(run.run_dir).string(), *sha,
                                  static_cast<std::int64_t>(entry.file_size(error))});
    }
  }
}

std::string number_text(const json& value, const char* format) {
  return value.is_number() ? fmt::format(fmt::runtime(format), value.get<double>()) : std::string("-");
}

void print_summary(const store::RunRecord& run, const json& summary, OutputFormat format) {
  if (format == OutputFormat::json) {
    json document = json_envelope("run");
    document["run"] = run_json(run);
    document["summary"] = summary;
    print_json(document);
    return;
  }
  std::cout << fmt::format("run {} {}", run.id, store::to_string(run.status));
  if (!run.root_cause.empty()) {
    std::cout << ": " << run.root_cause;
  }
  std::cout << '\n';
  std::cout << fmt::format("  final train loss  {}\n", number_text(summary.value("final_train_loss", json()), "{:.4f}"));
  std::cout << fmt::format("  eval accuracy     {}\n", number_text(summary.value("eval_accuracy", json()), "{:.4f}"));
  std::cout << fmt::format("  samples/s         {} (median after {} warm-up steps)\n",
                           number_text(summary.value("samples_per_sec", json()), "{:.0f}"),
                           summary.value("warmup_steps", 0));
  std::cout << fmt::format("  wall time         {} (first step after {})\n",
                           duration_text(summary.value("wall_time_s", json()).is_number()
                                             ? std::optional<double>(summary["wall_time_s"].get<double>())
                                             : std::nullopt),
                           duration_text(summary.value("time_to_first_step_s", json()).is_number()
                                             ? std::optional<double>(summary["time_to_first_step_s"].get<double>())
                                             : std::nullopt));
  std::cout << fmt::format("  run folder        {}\n", run.run_dir.string());
}

json drift_json(const std::vector<env::VerifyRow>& drift) { return env::verify_rows_json(drift); }

/// Finishes the run in the store, writes the summary and prints it; returns the exit code.
util::ExitCode conclude(store::Store& store, const Invocation& invocation, const Verdict& verdict,
                        std::optional<double> time_to_first_step) {
  const auto& run = invocation.run;
  store.finish_run(run.id, verdict.status, util::to_int(verdict.exit_code), verdict.root_cause);
  record_log_artifacts(store, run);
  json previous = json::parse(run.summary_json, nullptr, false);
  if (!previous.is_object() || !invocation.resume) {
    previous = json::object();
  }
  json summary = compute_summary(store, run.id, previous, seconds_since(process_start()),
                                 invocation.resume ? std::nullopt : time_to_first_step);
  const json& distributed = invocation.resolved.spec.at("distributed");
  summary["world_size"] = distributed.at("nnodes").get<std::int64_t>() * distributed.at("nproc_per_node").get<std::int64_t>();
  if (!invocation.drift.empty()) {
    summary["drift"] = drift_json(invocation.drift);
  }
  store.set_summary(run.id, summary.dump());
  const auto finished = store.run(run.id);
  print_summary(finished ? *finished : run, summary, invocation.format);
  return verdict.exit_code;
}

std::filesystem::path self_executable() { return std::filesystem::read_symlink("/proc/self/exe"); }

store::RankRecord new_rank(int rank, const std::string& host, pid_t pid) {
  store::RankRecord record;
  record.rank = rank;
  record.host = host;
  record.pid = pid;
  return record;
}


void record_ranks(store::Store& store, const Invocation& invocation, const launch::LaunchPlan& plan,
                  const std::vector<pid_t>& pids) {
  std::map<int, bool> known;
  for (const auto& rank : store.ranks(invocation.run.id)) {
    known[rank.rank] = true;
  }
  const std::string host = host_name();
  for (std::size_t index = 0; index < plan.ranks.size() && index < pids.size(); ++index) {
    const int rank = plan.ranks[index].rank;
    if (known.contains(rank)) {
      store.update_rank(invocation.run.id, rank, store::RunStatus::running, std::nullopt, std::nullopt);
    } else {
      store.add_rank(invocation.run.id, new_rank(rank, host, pids[index]));
    }
  }
}

launch::LaunchRequest launch_request_for(const NodeLaunch& launch, const json& spec) {
  launch::LaunchRequest request;
  request.nnodes = launch.nnodes;
  request.node_rank = launch.node_rank;
  request.nproc_per_node = static_cast<int>(spec.at("distributed").at("nproc_per_node").get<std::int64_t>());
  request.master_addr = launch.master_addr;
  request.master_port = launch.master_port;
  return request;
}

launch::LaunchPlan plan_for(const Invocation& invocation) {
  auto request = launch_request_for(invocation.resolved.launch, invocation.resolved.spec);
  if (invocation.rendezvous) {
    request.rendezvous_file = invocation.rendezvous->file.string();
  }
  return launch::make_launch_plan(request);
}

}  // namespace

Rendezvous::~Rendezvous() {
  if (!file.empty()) {
    std::error_code ignored;
    std::filesystem::remove(file, ignored);  // normally the last rank's FileStore removed it already
  }
}

std::shared_ptr<Rendezvous> host_rendezvous(NodeLaunch& launch, const json& spec) {
  launch::validate_launch_request(launch_request_for(launch, spec));
  auto rendezvous = std::make_shared<Rendezvous>();
  if (launch.nnodes == 1) {
    std::error_code error;
    const auto directory = std::filesystem::temp_directory_path(error);
    std::string name = ((error ? std::filesystem::path("/tmp") : directory) / "expctl-rendezvous-XXXXXX").string();
    const int fd = ::mkstemp(name.data());  // 0600: only this user's processes can join
    if (fd < 0) {
      throw util::UsageError(fmt::format("cannot create the rendezvous file {}: {}; set TMPDIR to a writable "
                                         "directory",
                                         name, std::strerror(errno)));
    }
    ::close(fd);
    rendezvous->file = name;
    return rendezvous;
  }
  if (launch.node_rank != 0) {
    return rendezvous;
  }
  const auto timeout = std::chrono::seconds(spec.at("distributed").at("timeout_s").get<std::int64_t>());
  try {
    rendezvous->server =
        std::make_unique<train::StoreServer>(static_cast<std::uint16_t>(launch.master_port), timeout);
    launch.master_port = rendezvous->server->port();
    return rendezvous;
  } catch (const util::TrainError& error) {
    throw util::UsageError(error.what());
  }
}

train::WorkerPlacement placement_of(const launch::RankIdentity& identity) {
  train::WorkerPlacement placement;
  placement.rank = identity.rank;
  placement.world_size = identity.world_size;
  placement.local_rank = identity.local_rank;
  placement.master_addr = identity.master_addr;
  placement.master_port = identity.master_port;
  placement.store_hosted_by_launcher = identity.agent_store;
  placement.rendezvous_file = identity.rendezvous_file;
  return placement;
}

// ---------------------------------------------------------------------------------------------

void write_resolved_run(const std::filesystem::path& run_dir, const ResolvedRun& run) {
  const json document = {{"spec", run.spec},
                         {"spec_file", run.spec_file},
                         {"launch",
                          {{"nnodes", run.launch.nnodes},
                           {"node_rank", run.launch.node_rank},
                           {"master_addr", run.launch.master_addr},
                           {"master_port", run.launch.master_port}}}};
  const auto path = run_dir / k_resolved_file;
  if (auto written = util::write_file_atomic(path, document.dump(2) + "\n"); !written) {
    throw util::StoreError(fmt::format("{}: cannot write the resolved spec: {}", path.string(),
                                       written.error().message),
                           util::ExitCode::run_failed);
  }
}

ResolvedRun read_resolved_run(const std::filesystem::path& run_dir) {
  const auto path = run_dir / k_resolved_file;
  const auto text = util::read_file(path);
  if (!text) {
    throw util::UsageError(fmt::format("{}: cannot read the resolved spec ({}): is this a run folder?",
                                       path.string(), text.error().message));
  }
  const json document = json::parse(*text, nullptr, false);
  if (document.is_discarded() || !document.contains("spec") || !document.contains("launch")) {
    throw util::UsageError(fmt::format("{}: not a resolved spec written by expctl run", path.string()));
  }
  ResolvedRun run;
  run.spec = document.at("spec");
  run.spec_file = document.value("spec_file", "");
  const json& launch = document.at("launch");
  run.launch.nnodes = launch.value("nnodes", 1);
  run.launch.node_rank = launch.value("node_rank", 0);
  run.launch.master_addr = launch.value("master_addr", "");
  run.launch.master_port = launch.value("master_port", 0);
  return run;
}

std::vector<env::VerifyRow> StackCheck::drifted() const {
  std::vector<env::VerifyRow> result;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(result), [](const env::VerifyRow& row) { return !row.ok; });
  return result;
}

namespace {

// What a run's fingerprint is collected with: the experiment's directory for the code state,
// LibTorch's build facts, the spec's determinism settings.
env::FingerprintOptions fingerprint_options(const std::filesystem::path& spec_file, const json& spec) {
  env::FingerprintOptions options;
  options.code_directory = std::filesystem::absolute(spec_file).parent_path();
  options.torch_fields = train::torch_build_fields;
  options.determinism.seed = spec.at("seed").get<std::int64_t>();
  options.determinism.deterministic_algorithms = spec.at("determinism").get<std::string>() == "strict";
  return options;
}

}  // namespace

std::vector<env::DiffRow> resume_drift(const store::Store& store, const store::RunRecord& run,
                                       const ResolvedRun& resolved) {
  const auto text = run.environment_hash ? store.environment(*run.environment_hash) : std::nullopt;
  if (!text) {
    return {};  // recorded before fingerprints existed: nothing to hold the machine against
  }
  const auto recorded = env::Fingerprint::from_json(json::parse(*text), fmt::format("run {}'s fingerprint", run.id));
  auto options = fingerprint_options(resolved.spec_file, resolved.spec);
  // Record the same variables as the first invocation did (its profile's pins among them).
  if (const json* vars = recorded.find("env.vars"); vars != nullptr && vars->is_object()) {
    for (const auto& [name, value] : vars->items()) {
      options.extra_env_names.push_back(name);
    }
  }
  auto rows = env::diff_fingerprints(recorded, env::collect_fingerprint(options));
  std::erase_if(rows, [](const env::DiffRow& row) { return !row.hashed; });
  return rows;
}

StackCheck check_pinned_stack(const spec::Spec& spec) {
  std::optional<env::Profile> profile;
  if (const auto& path = spec.env_profile_path()) {
    profile = env::load_profile(*path, spec::display_path(*path));
  }
  env::FingerprintOptions options = fingerprint_options(spec.file(), spec.values());
  if (profile) {
    options.extra_env_names = profile->env_names();
  }
  const env::Fingerprint fingerprint = env::collect_fingerprint(options);
  StackCheck check;
  check.fingerprint = fingerprint.to_json();
  check.fingerprint_hash = fingerprint.hash();
  if (profile) {
    check.rows = env::verify_profile(*profile, fingerprint);
  }
  if (const std::string image = spec.get_string("container.image"); !image.empty()) {
    check.rows.push_back(env::verify_image_pin(image, fingerprint));
  }
  return check;
}

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

std::atomic<bool>& training_started() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {
// Before the first step there is nothing to checkpoint, and a rank waiting in rendezvous would
// only wait for a peer that is stopping too: leave at once (_exit is async-signal-safe).
extern "C" void set_stop_flag(int /*signal*/) {
  if (!training_started().load()) {
    ::_exit(launch::k_interrupted_exit_code);
  }
  stop_requested().store(true);
}
}  // namespace

void mark_training_started(const json& record) {
  if (record.value("t", "") == "step") {
    training_started().store(true);
  }
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = set_stop_flag;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    sigaction(signal, &action, nullptr);
  }
}

util::ExitCode supervise_run(store::Store& store, const Invocation& invocation, const GlobalOptions& globals) {
  const auto start = process_start();
  const auto& run = invocation.run;
  const launch::LaunchPlan plan = plan_for(invocation);
  std::vector<std::string> argv = {self_executable().string(), "worker", "--run-dir", run.run_dir.string()};
  if (invocation.resume) {
    argv.emplace_back("--resume");
  }
  Console console(globals.quiet);
  RunRecorder recorder(&store, run.id, run.run_dir, console, start);

  launch::SupervisorOptions options;
  options.log_dir = run.run_dir / "logs";
  options.grace_period = std::chrono::seconds(3);
  options.heartbeat_timeout = std::chrono::seconds(60);
  options.console = [&console](std::string_view line) { console.line(line); };
  options.on_record = [&recorder](int rank, std::string_view payload) { recorder.on_record(rank, payload); };
  options.on_rank_exit = [&store, &run](const launch::RankExit& exit) {
    store.update_rank(run.id, exit.rank, rank_status(exit),
                      exit.exit_code >= 0 ? std::optional<int>(exit.exit_code) : std::nullopt,
                      exit.signal != 0 ? std::optional<int>(exit.signal) : std::nullopt);
  };
  if (!globals.quiet) {
    std::cerr << fmt::format("run {} {}: {} rank(s) on this node, world size {}, logs in {}\n", run.id,
                             invocation.resume ? "resumed" : "started", plan.ranks.size(), plan.world_size,
                             options.log_dir.string());
  }
  launch::Outcome outcome;
  try {
    launch::Supervisor supervisor(options);
    supervisor.start(launch::rank_specs(plan, argv));
    record_ranks(store, invocation, plan, supervisor.pids());
    outcome = supervisor.wait();
  } catch (const util::Failure& error) {
    console.finish();
    recorder.flush();
    Verdict verdict{store::RunStatus::failed, util::ExitCode::run_failed, error.what()};
    conclude(store, invocation, verdict, recorder.time_to_first_step());
    return util::ExitCode::run_failed;
  }
  console.finish();
  recorder.flush();
  return conclude(store, invocation, verdict_of(outcome), recorder.time_to_first_step());
}

util::ExitCode run_as_external_rank(const spec::Spec& spec, const std::vector<std::string>& tags,
                                    const StackCheck& stack, OutputFormat format, const GlobalOptions& globals) {
  const auto identity = launch::detect_launcher(launch::current_environment());
  install_stop_handlers();
  util::log::debug(util::tune_malloc_for_training());
  train::WorkerRequest request;
  request.spec = spec.values();
  request.placement = placement_of(*identity);
  request.report_steps_from_rank = 1;  // only rank 0 records: it reports every other rank's steps
  // stdout carries the summary (JSON with --format json); progress goes to stderr.
  const auto print_line = [](const std::string& line) { std::cerr << line << std::endl; };
  if (identity->rank != 0) {
    // Only global rank 0 records; the others train and log to their launcher's output.
    const auto result = train::run_worker(request, mark_training_started, print_line, &stop_requested());
    return result.interrupted ? util::ExitCode::interrupted : util::ExitCode::ok;
  }
  store::Store store = open_store(globals, store::OpenMode::read_write);
  store.put_spec(spec.hash(), spec.canonical(), spec.get_string("name"));
  store.put_environment(stack.fingerprint_hash, stack.fingerprint.dump());
  Invocation invocation;
  invocation.run = store.create_run({spec.hash(), stack.fingerprint_hash, spec.get_string("name"), std::nullopt});
  invocation.resolved.spec = spec.values();
  invocation.resolved.spec_file = spec.file().string();
  invocation.resolved.launch.nnodes = identity->world_size / std::max(1, identity->local_world_size);
  invocation.resolved.launch.node_rank = identity->node_rank;
  invocation.resolved.launch.master_addr = identity->master_addr;
  invocation.resolved.launch.master_port = identity->master_port;
  invocation.drift = stack.drifted();
  invocation.format = format;
  for (const auto& tag : tags) {
    store.add_tag(invocation.run.id, tag);
  }
  store.add_tag(invocation.run.id, "launcher:" + identity->launcher);
  write_resolved_run(invocation.run.run_dir, invocation.resolved);
  store.add_rank(invocation.run.id, new_rank(0, host_name(), ::getpid()));
  request.checkpoint_dir = invocation.run.run_dir / "checkpoints";
  Console console(globals.quiet);
  RunRecorder recorder(&store, invocation.run.id, invocation.run.run_dir, console, process_start());
  Verdict verdict;
  try {
    const auto result = train::run_worker(
        request,
        [&recorder](const json& record) {
          mark_training_started(record);
          recorder.on_record(0, record.dump());
        },
        print_line,
        &stop_requested());
    if (result.interrupted) {
      verdict = {store::RunStatus::interrupted, util::ExitCode::interrupted, "interrupted by a signal"};
    }
  } catch (const util::Failure& error) {
    verdict = {store::RunStatus::failed, util::ExitCode::run_failed, fmt::format("rank 0: {}", error.what())};
  }
  console.finish();
  recorder.flush();
  store.update_rank(invocation.run.id, 0, verdict.status, util::to_int(verdict.exit_code), std::nullopt);
  return conclude(store, invocation, verdict, recorder.time_to_first_step());
}

// ---------------------------------------------------------------------------------------------
// Summary.

std::string loss_curve_sha256(const std::vector<double>& losses) {
  std::string bytes;
  bytes.reserve(losses.size() * 4);
  for (const double loss : losses) {
    const auto value = static_cast<float>(loss);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (int shift = 0; shift < 32; shift += 8) {
      bytes.push_back(static_cast<char>((bits >> shift) & 0xFFU));  // little-endian on any host
    }
  }
  return util::sha256_hex(bytes);
}

std::int64_t warmup_steps(std::int64_t steps) { return std::min<std::int64_t>(10, steps / 10); }

namespace {

/// step -> value per rank, for one metric.
std::map<std::int64_t, std::vector<double>> by_step(const store::Store& store, const std::string& run_id,
                                                    const std::string& name) {
  std::map<std::int64_t, std::vector<double>> result;
  for (const auto& point : store.metrics(run_id, {.name = name, .rank = std::nullopt})) {
    result[point.step].push_back(point.value);
  }
  return result;
}

json or_null(const std::vector<double>& values, double (*statistic)(std::span<const double>)) {
  return values.empty() ? json(nullptr) : json(statistic(values));
}

double p50(std::span<const double> values) { return compare::percentile(values, 50.0); }
double p95(std::span<const double> values) { return compare::percentile(values, 95.0); }

}  // namespace

json compute_summary(const store::Store& store, const std::string& run_id, const json& previous,
                     double invocation_wall_s, std::optional<double> time_to_first_step_s) {
  std::vector<double> losses;
  for (const auto& point : store.metrics(run_id, {.name = "loss", .rank = 0})) {
    losses.push_back(point.value);
  }
  const auto steps = static_cast<std::int64_t>(losses.size());
  const auto warmup = warmup_steps(steps);
  const auto step_times = by_step(store, run_id, "step_time_ms");
  const auto waits = by_step(store, run_id, "comm_wait_ms");
  const auto throughput = by_step(store, run_id, "samples_per_sec");
  // After warm-up: the slowest rank's step time (a step ends when the last rank's gradients are
  // in), the sum of every rank's samples/s, and the share of all ranks' time spent waiting.
  std::vector<double> slowest;
  std::vector<double> global_rate;
  double wait_total = 0.0;
  double time_total = 0.0;
  std::size_t ranks_recorded = 0;
  for (const auto& [step, values] : step_times) {
    ranks_recorded = std::max(ranks_recorded, values.size());
    if (step <= warmup) {
      continue;
    }
    slowest.push_back(*std::max_element(values.begin(), values.end()));
    time_total += std::accumulate(values.begin(), values.end(), 0.0);
    if (const auto found = waits.find(step); found != waits.end()) {
      wait_total += std::accumulate(found->second.begin(), found->second.end(), 0.0);
    }
    if (const auto found = throughput.find(step); found != throughput.end()) {
      global_rate.push_back(std::accumulate(found->second.begin(), found->second.end(), 0.0));
    }
  }
  json eval_loss = nullptr;
  json eval_accuracy = nullptr;
  if (const auto points = store.metrics(run_id, {.name = "eval_accuracy", .rank = 0}); !points.empty()) {
    eval_accuracy = points.back().value;
  }
  if (const auto points = store.metrics(run_id, {.name = "eval_loss", .rank = 0}); !points.empty()) {
    eval_loss = points.back().value;
  }
  json summary = json::object();
  summary["final_train_loss"] = losses.empty() ? json(nullptr) : json(losses.back());
  summary["eval_loss"] = eval_loss;
  summary["eval_accuracy"] = eval_accuracy;
  summary["samples_per_sec"] = or_null(global_rate, compare::median);
  summary["step_time_ms_p50"] = or_null(slowest, p50);
  summary["step_time_ms_p95"] = or_null(slowest, p95);
  summary["comm_wait_fraction"] = time_total > 0.0 ? json(wait_total / time_total) : json(nullptr);
  summary["loss_curve_sha256"] = losses.empty() ? json(nullptr) : json(loss_curve_sha256(losses));
  summary["steps"] = steps;
  summary["warmup_steps"] = warmup;
  summary["ranks_recorded"] = ranks_recorded;
  summary["wall_time_s"] = previous.value("wall_time_s", 0.0) + invocation_wall_s;
  summary["time_to_first_step_s"] =
      time_to_first_step_s ? json(*time_to_first_step_s) : previous.value("time_to_first_step_s", json(nullptr));
  summary["invocations"] = previous.value("invocations", 0) + 1;
  return summary;
}

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
