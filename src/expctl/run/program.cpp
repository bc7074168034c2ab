#include "expctl/run/program.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <unistd.h>

#include <fmt/format.h>

#include "expctl/compare/comparison.hpp"
#include "expctl/launch/control_channel.hpp"
#include "expctl/launch/environment.hpp"
#include "expctl/launch/shm_segments.hpp"
#include "expctl/run/program_protocol.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/find_executable.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::run {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A program that writes garbage gets this many warnings per rank; the rest are counted in the summary.
constexpr int k_warnings_per_rank = 5;

std::vector<std::string> command_of(const json& values) {
  return values.at("program").at("command").get<std::vector<std::string>>();
}

std::string path_variable(const json& values) {
  const auto& env = values.at("program").at("env");
  if (env.contains("PATH")) {
    return env.at("PATH").get<std::string>();
  }
  const char* path = std::getenv("PATH");
  return path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
}

bool executable_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error) && ::access(path.c_str(), X_OK) == 0;
}

// The values the command's placeholders take; {run_id} only once the run exists.
spec::PlaceholderValues placeholders_of(const json& values, std::string run_id = {}) {
  spec::PlaceholderValues placeholders;
  placeholders.params = values.at("program").at("params");
  placeholders.seed = values.at("seed").get<std::int64_t>();
  placeholders.run_id = std::move(run_id);
  return placeholders;
}

// What the rank will run for `program` started in `workdir`, or why nothing.
std::optional<std::string> program_problem(const std::string& program, const fs::path& workdir,
                                           const std::string& path) {
  if (program.find('/') != std::string::npos) {
    const fs::path file = fs::path(program).is_absolute() ? fs::path(program) : workdir / program;
    std::error_code error;
    if (!fs::exists(file, error)) {
      return fmt::format("{} does not exist (looked for {})", util::quoted(program), file.lexically_normal().string());
    }
    if (!executable_file(file)) {
      return fmt::format("{} is not an executable file: chmod +x it, or run it through its interpreter "
                         "(e.g. [python3, {}])",
                         util::quoted(program), program);
    }
    return std::nullopt;
  }
  if (util::find_executable(program, path)) {
    return std::nullopt;
  }
  return fmt::format("{} is not found in PATH ({}): install it, or give its full path", util::quoted(program), path);
}

}  // namespace

std::optional<util::sandbox::Writable> program_sandbox(const json& values, const fs::path& spec_file,
                                                       const ProgramLaunch& where, int rank) {
  const json& program = values.at("program");
  if (!program.value("sandbox", false) || util::sandbox::mode_from_environment() == util::sandbox::Mode::off ||
      util::sandbox::landlock_abi() == 0) {
    return std::nullopt;  // check_sandbox said so before the run was recorded, or refused it
  }
  util::sandbox::Writable writable{.folders = {where.run_dir, where.checkpoint_dir, launch::shm_segment_directory()},
                                   .files = {},
                                   .described = "the run's folder and program.writable"};
  const fs::path spec_dir = fs::absolute(spec_file).parent_path();
  for (const auto& entry : program.value("writable", json::array())) {
    const fs::path path = (spec_dir / entry.get<std::string>()).lexically_normal();
    std::error_code error;
    (fs::is_directory(path, error) || !fs::exists(path, error) ? writable.folders : writable.files).push_back(path);
  }
  writable.folders.push_back(where.run_dir / "tmp" / fmt::format("rank-{}", rank));  // last: $TMPDIR
  return writable;
}

fs::path program_workdir(const json& values, const fs::path& spec_file) {
  const fs::path spec_dir = fs::absolute(spec_file).parent_path();
  const std::string workdir = values.at("program").at("workdir").get<std::string>();
  return (workdir.empty() ? spec_dir : spec_dir / workdir).lexically_normal();
}

void check_program_launchable(const json& values, const fs::path& spec_file) {
  const fs::path workdir = program_workdir(values, spec_file);
  std::error_code error;
  if (!fs::is_directory(workdir, error)) {
    throw util::UsageError(fmt::format("{}: program.workdir {} is not a directory: create it or fix the path "
                                       "(it is relative to the spec's directory)",
                                       spec_file.string(), workdir.string()));
  }
  for (const auto& [name, value] : values.at("program").at("env").items()) {
    if (std::find(std::begin(k_program_variables), std::end(k_program_variables), name) !=
        std::end(k_program_variables)) {
      throw util::UsageError(fmt::format("{}: program.env sets {}, which expctl sets for every rank: remove it "
                                         "(docs/program.md lists what a rank gets)",
                                         spec_file.string(), name));
    }
  }
  // argv[0] may be a parameter itself ("{params.python}").
  const std::string program = spec::substitute_placeholders(command_of(values).front(), placeholders_of(values));
  if (const auto problem = program_problem(program, workdir, path_variable(values))) {
    throw util::UsageError(
        fmt::format("{}: cannot run program.command[0]: {}; no rank was started", spec_file.string(), *problem));
  }
}

std::vector<launch::RankSpec> program_rank_specs(const launch::LaunchPlan& plan, const json& values,
                                                 const fs::path& spec_file, const ProgramLaunch& where) {
  const std::string& run_id = where.run_id;
  const fs::path program_dir = where.run_dir / "program";
  const fs::path python_dir = program_dir / "python";
  const fs::path params_file = program_dir / "params.json";
  const fs::path& checkpoint_dir = where.checkpoint_dir;
  std::error_code error;
  fs::create_directories(python_dir / "expctl", error);
  fs::create_directories(checkpoint_dir, error);
  for (const auto& [file, content] :
       {std::pair{params_file, values.at("program").at("params").dump(2) + "\n"},
        std::pair{python_dir / "expctl" / "__init__.py", std::string(python_module_source())}}) {
    if (auto written = util::write_file_atomic(file, content); !written) {
      throw util::LaunchError(fmt::format("cannot write {}: {}", file.string(), written.error().message));
    }
  }
  const auto placeholders = placeholders_of(values, run_id);
  std::vector<std::string> argv;
  for (const std::string& argument : command_of(values)) {
    argv.push_back(spec::substitute_placeholders(argument, placeholders));
  }
  // execvpe would search expctl's own PATH: the rank is given the file program.env's PATH finds.
  if (argv.front().find('/') == std::string::npos) {
    if (const auto found = util::find_executable(argv.front(), path_variable(values))) {
      argv.front() = found->string();
    }
  }
  launch::EnvOverrides common;
  for (const auto& [name, value] : values.at("program").at("env").items()) {
    common[name] = value.get<std::string>();
  }
  const std::string user_pythonpath = common.contains("PYTHONPATH") && common.at("PYTHONPATH")
                                          ? *common.at("PYTHONPATH")
                                          : launch::lookup(launch::current_environment(), "PYTHONPATH").value_or("");
  common["PYTHONPATH"] = python_dir.string() + (user_pythonpath.empty() ? "" : ":" + user_pythonpath);
  const std::string seed = std::to_string(placeholders.seed);
  common["EXPCTL_SEED"] = seed;
  common["PYTHONHASHSEED"] = seed;
  common["EXPCTL_RUN_ID"] = run_id;
  common["TORCHELASTIC_RUN_ID"] = run_id;
  common["EXPCTL_CHECKPOINT_DIR"] = checkpoint_dir.string();
  common["EXPCTL_PARAMS_FILE"] = params_file.string();
  common[launch::k_metrics_fd_variable] = std::to_string(launch::k_control_fd);
  common["EXPCTL_RESUME"] = where.resume ? std::optional<std::string>("1") : std::nullopt;
  common["EXPCTL_RENDEZVOUS_FILE"] = std::nullopt;  // the built-in trainer's FileStore: not torch's
  if (where.store == StoreHost::rank0) {
    // One node: rank 0 hosts the store (torch's env:// rendezvous without an agent).
    common["TORCHELASTIC_USE_AGENT_STORE"] = std::nullopt;
    common["TORCHELASTIC_RESTART_COUNT"] = std::nullopt;
  } else if (where.store == StoreHost::expctl) {
    // expctl hosts it, as torchrun's agent does: torch then joins as a client under the prefix of
    // this attempt (torch.distributed.rendezvous reads both).
    common["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    common["TORCHELASTIC_RESTART_COUNT"] = "0";
  }
  const fs::path workdir = program_workdir(values, spec_file);
  std::vector<launch::RankSpec> ranks;
  for (const launch::PlannedRank& planned : plan.ranks) {
    launch::EnvOverrides env = planned.env;
    for (const auto& [name, value] : common) {
      env[name] = value;
    }
    auto sandbox = program_sandbox(values, spec_file, where, planned.rank);
    if (sandbox) {
      env["TMPDIR"] = sandbox->folders.back().string();
    }
    ranks.push_back({planned.rank, argv, std::move(env), workdir, launch::ControlProtocol::lines, std::move(sandbox)});
  }
  return ranks;
}

std::vector<store::MetricPoint> logged_step_points(int rank, std::int64_t step,
                                                   const std::vector<std::pair<std::string, double>>& values,
                                                   std::optional<double> time, std::optional<double> previous_time) {
  std::vector<store::MetricPoint> points;
  std::optional<double> samples;
  bool has_step_time = false;
  bool has_rate = false;
  for (const auto& [name, value] : values) {
    if (name == "samples") {
      samples = value;  // becomes samples_per_sec, as the built-in trainer reports it
      continue;
    }
    has_step_time = has_step_time || name == compare::k_step_time_series;
    has_rate = has_rate || name == compare::k_throughput_series;
    points.push_back({rank, step, name, value});
  }
  const bool timed = time && previous_time && *time >= *previous_time;
  const double seconds = timed ? *time - *previous_time : 0.0;
  if (timed && !has_step_time) {
    points.push_back({rank, step, compare::k_step_time_series, seconds * 1000.0});
  }
  if (timed && seconds > 0.0 && samples && !has_rate) {
    points.push_back({rank, step, compare::k_throughput_series, *samples / seconds});
  }
  return points;
}

void ProgramRecords::on_line(int rank, std::string_view line) {
  auto decoded = decode_program_line(line);
  if (!decoded) {
    ++m_skipped;
    if (++m_warnings[rank] <= k_warnings_per_rank) {
      m_observer.note(fmt::format("warning: rank {} wrote a line that is not the metrics protocol ({}); skipped{}",
                                  rank, decoded.error(),
                                  m_warnings[rank] == k_warnings_per_rank ? " (further ones are only counted)" : ""),
                      true);
    }
    return;
  }
  if (decoded->kind == ProgramLine::Kind::heartbeat) {
    return;  // a sign of life: the supervisor has counted it already
  }
  if (decoded->kind == ProgramLine::Kind::modules) {
    m_modules.insert(decoded->modules.begin(), decoded->modules.end());
    return;
  }
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double time = decoded->time.value_or(now);
  const auto previous = m_last_time.find(rank);
  auto points = logged_step_points(rank, decoded->step, decoded->values, time,
                                   previous == m_last_time.end() ? std::nullopt : std::optional(previous->second));
  m_last_time[rank] = time;
  ++m_steps;
  if (m_keep) {
    m_points.insert(m_points.end(), points.begin(), points.end());
  }
  if (m_recorder != nullptr) {
    m_recorder->on_logged_step(rank, decoded->step, std::move(points));
  }
}

std::vector<std::string> unhashed_modules(const std::set<std::string>& modules, const json& values,
                                          const fs::path& spec_file) {
  const fs::path spec_dir = fs::absolute(spec_file).parent_path();
  const auto real = [](const fs::path& path) {
    std::error_code error;
    const fs::path canonical = fs::weakly_canonical(path, error);
    return error ? path.lexically_normal() : canonical;
  };
  std::set<fs::path> files;
  std::vector<fs::path> folders;
  const json& program = values.at("program");
  if (auto hashed = spec::program_files(spec_dir, program.at("files").get<std::vector<std::string>>(),
                                        program.at("command").get<std::vector<std::string>>())) {
    for (const spec::ProgramFile& file : *hashed) {
      files.insert(real(spec_dir / file.path));
    }
  }
  for (const std::string& input : program.value("inputs", std::vector<std::string>{})) {
    const fs::path path = real(fs::path(input).is_absolute() ? fs::path(input) : spec_dir / input);
    std::error_code error;
    if (fs::is_directory(path, error)) {
      folders.push_back(path);
    } else {
      files.insert(path);
    }
  }
  const fs::path real_dir = real(spec_dir);
  std::vector<std::string> out;
  for (const std::string& module : modules) {
    const fs::path path = real(module);
    const auto under = [&path](const fs::path& folder) {
      const fs::path relative = path.lexically_relative(folder);
      return !relative.empty() && *relative.begin() != "..";
    };
    if (files.contains(path) || std::any_of(folders.begin(), folders.end(), under)) {
      continue;
    }
    out.push_back(under(real_dir) ? path.lexically_relative(real_dir).generic_string() : path.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace expctl::run
