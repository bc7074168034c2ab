#include "expctl/launch/slurm_job.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/subprocess.hpp"

namespace expctl::launch::slurm {

namespace {

using util::LaunchError;

constexpr std::array<std::pair<JobState, std::string_view>, 15> k_states{{
    {JobState::pending, "PENDING"},
    {JobState::configuring, "CONFIGURING"},
    {JobState::running, "RUNNING"},
    {JobState::suspended, "SUSPENDED"},
    {JobState::completing, "COMPLETING"},
    {JobState::completed, "COMPLETED"},
    {JobState::failed, "FAILED"},
    {JobState::cancelled, "CANCELLED"},
    {JobState::timeout, "TIMEOUT"},
    {JobState::preempted, "PREEMPTED"},
    {JobState::node_fail, "NODE_FAIL"},
    {JobState::out_of_memory, "OUT_OF_MEMORY"},
    {JobState::boot_fail, "BOOT_FAIL"},
    {JobState::deadline, "DEADLINE"},
    {JobState::requeued, "REQUEUED"},
}};

std::optional<long> to_number(std::string_view text) {
  long value = 0;
  const auto* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || at != end || text.empty()) {
    return std::nullopt;
  }
  return value;
}

// A key of `scontrol show job`: letters first, then letters, digits and ':', '/', '_', '.'
// ("AllocNode:Sid", "CPUs/Task", "ReqB:S:C:T", "MCS_label").
bool is_key(std::string_view word) {
  if (word.empty() || std::isalpha(static_cast<unsigned char>(word.front())) == 0) {
    return false;
  }
  for (const char c : word) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != ':' && c != '/' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

// Key=Value pairs separated by blanks or newlines. A word without a key of its own continues the
// previous value ("Reason=... (with spaces)", "Command=/path/with two words"): values may hold spaces.
std::map<std::string, std::string> pairs(std::string_view text) {
  std::map<std::string, std::string> fields;
  std::string* last = nullptr;
  std::size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])) != 0) {
      ++at;
    }
    std::size_t end = at;
    while (end < text.size() && std::isspace(static_cast<unsigned char>(text[end])) == 0) {
      ++end;
    }
    const std::string_view word = text.substr(at, end - at);
    at = end;
    if (word.empty()) {
      break;
    }
    const auto equals = word.find('=');
    if (equals != std::string_view::npos && is_key(word.substr(0, equals))) {
      last = &fields.insert_or_assign(std::string(word.substr(0, equals)), std::string(word.substr(equals + 1)))
                  .first->second;
    } else if (last != nullptr) {
      *last += " ";
      *last += word;
    }
  }
  return fields;
}

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

}  // namespace

JobState parse_state(std::string_view text) {
  const std::string_view word = text.substr(0, text.find_first_of(" +"));
  for (const auto& [state, name] : k_states) {
    if (word == name) {
      return state;
    }
  }
  return JobState::unknown;
}

std::string_view state_name(JobState state) {
  for (const auto& [known, name] : k_states) {
    if (known == state) {
      return name;
    }
  }
  return "UNKNOWN";
}

bool is_final(JobState state) {
  switch (state) {
    case JobState::pending:
    case JobState::configuring:
    case JobState::running:
    case JobState::suspended:
    case JobState::completing:
    case JobState::requeued:
    case JobState::unknown:
      return false;
    default:
      return true;
  }
}

std::optional<std::chrono::seconds> parse_duration(std::string_view text) {
  if (text == "UNLIMITED" || text == "INFINITE" || text == "Partition_Limit") {
    return std::nullopt;
  }
  const auto bad = [&] {
    return LaunchError(
        fmt::format("slurm: \"{}\" is not a Slurm duration ([D-]HH:MM:SS, MM:SS, minutes, UNLIMITED)", text));
  };
  long days = 0;
  std::string_view rest = text;
  const bool has_days = rest.find('-') != std::string_view::npos;
  if (has_days) {
    const auto value = to_number(rest.substr(0, rest.find('-')));
    if (!value) {
      throw bad();
    }
    days = *value;
    rest = rest.substr(rest.find('-') + 1);
  }
  std::vector<long> parts;
  while (true) {
    const auto colon = rest.find(':');
    const auto value = to_number(rest.substr(0, colon));
    if (!value || *value < 0) {
      throw bad();
    }
    parts.push_back(*value);
    if (colon == std::string_view::npos) {
      break;
    }
    rest = rest.substr(colon + 1);
  }
  long seconds = 0;
  if (has_days) {  // D-HH, D-HH:MM, D-HH:MM:SS
    if (parts.size() > 3) {
      throw bad();
    }
    const long scale[] = {3600, 60, 1};
    for (std::size_t i = 0; i < parts.size(); ++i) {
      seconds += parts[i] * scale[i];
    }
    seconds += days * 86400;
  } else if (parts.size() == 1) {  // minutes
    seconds = parts[0] * 60;
  } else if (parts.size() == 2) {  // MM:SS
    seconds = parts[0] * 60 + parts[1];
  } else if (parts.size() == 3) {  // HH:MM:SS
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
  } else {
    throw bad();
  }
  return std::chrono::seconds(seconds);
}

JobInfo parse_job(std::string_view text) {
  JobInfo job;
  job.fields = pairs(text);
  const auto field = [&](const char* key) -> const std::string* {
    const auto found = job.fields.find(key);
    return found == job.fields.end() ? nullptr : &found->second;
  };
  const std::string* id = field("JobId");
  const std::string* state = field("JobState");
  if (id == nullptr || state == nullptr) {
    throw LaunchError(fmt::format("slurm: `scontrol show job` gave no {} (its output began \"{}\")",
                                  id == nullptr ? "JobId" : "JobState", first_line(std::string(text.substr(0, 120)))));
  }
  job.id = *id;
  job.state_text = *state;
  job.state = parse_state(*state);
  if (const auto* reason = field("Reason")) {
    job.reason = *reason;
  }
  if (const auto* restarts = field("Restarts")) {
    job.restarts = static_cast<int>(to_number(*restarts).value_or(0));
  }
  if (const auto* requeue = field("Requeue")) {
    job.requeue = *requeue == "1";
  }
  if (const auto* exit = field("ExitCode")) {  // "code:signal"
    const auto colon = exit->find(':');
    if (const auto code = to_number(std::string_view(*exit).substr(0, colon))) {
      job.exit_code = static_cast<int>(*code);
    }
    if (const auto signal =
            colon == std::string::npos ? std::nullopt : to_number(std::string_view(*exit).substr(colon + 1))) {
      job.exit_signal = static_cast<int>(*signal);
    }
  }
  if (const auto* nodes = field("NodeList"); nodes != nullptr && *nodes != "(null)") {
    job.node_list = *nodes;
  }
  const auto duration = [&](const char* key) -> std::optional<std::chrono::seconds> {
    const std::string* value = field(key);
    if (value == nullptr) {
      return std::nullopt;
    }
    try {
      return parse_duration(*value);
    } catch (const util::Failure&) {
      return std::nullopt;  // "INVALID", "N/A": not known, which is not an error of the job
    }
  };
  job.run_time = duration("RunTime");
  job.time_limit = duration("TimeLimit");
  return job;
}

std::vector<std::size_t> parse_task_ids(std::string_view text) {
  const auto bad = [&] { return LaunchError(fmt::format("slurm: \"{}\" is not an array's task ids", text)); };
  std::string_view list = text.substr(0, text.find('%'));
  std::vector<std::size_t> ids;
  while (!list.empty()) {
    const std::string_view item = list.substr(0, list.find(','));
    list = item.size() == list.size() ? std::string_view() : list.substr(item.size() + 1);
    const auto dash = item.find('-');
    const auto first = to_number(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : to_number(item.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || *last - *first > 1000000) {
      throw bad();
    }
    for (long id = *first; id <= *last; ++id) {
      ids.push_back(static_cast<std::size_t>(id));
    }
  }
  if (ids.empty()) {
    throw bad();
  }
  return ids;
}

std::string parse_submitted(std::string_view output) {
  std::string_view id = output.substr(0, output.find_first_of(";\n"));
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back())) != 0) {
    id.remove_suffix(1);
  }
  if (id.empty() || !to_number(id)) {
    throw LaunchError(fmt::format("slurm: sbatch --parsable printed no job id (it printed \"{}\")",
                                  first_line(std::string(output.substr(0, 120)))));
  }
  return std::string(id);
}

StopCause stop_cause(const JobInfo& job, std::chrono::seconds signal_lead, int restarts_at_start) {
  // Slurm counts a requeue at once, while the job is still COMPLETING (seen on 22.05): the one sure
  // sign that it starts again.
  if (restarts_at_start >= 0 && job.restarts > restarts_at_start) {
    return StopCause::requeued;
  }
  const bool near_limit =
      job.time_limit && job.run_time && *job.run_time + signal_lead + std::chrono::seconds(60) >= *job.time_limit;
  switch (job.state) {
    case JobState::timeout:
    case JobState::deadline:
      return StopCause::time_limit;
    case JobState::preempted:
      return StopCause::preempted;
    case JobState::node_fail:
    case JobState::boot_fail:
      return StopCause::node_failure;
    case JobState::requeued:
    case JobState::pending:  // asked after `scontrol requeue` made it pending again
      return StopCause::requeued;
    case JobState::failed:
    case JobState::out_of_memory:
      return StopCause::failed;
    case JobState::completed:
      return StopCause::none;
    case JobState::cancelled:
    case JobState::completing:
      // Being torn down and not requeued: scancel (or a preemption that cancels); the time limit
      // itself when that is where the job stands.
      return near_limit && job.state == JobState::completing ? StopCause::time_limit : StopCause::cancelled;
    default:
      break;
  }
  // A job still running that was signalled: the time limit is near when no more than the
  // signal's lead, plus the minute by which Slurm may send it early (sbatch(1) --signal), is left;
  // otherwise the signal came from a preemption's warning (or a person: scancel --signal).
  return near_limit ? StopCause::time_limit : StopCause::preempted;
}

std::string_view stop_cause_name(StopCause cause) {
  switch (cause) {
    case StopCause::none:
      return "none";
    case StopCause::time_limit:
      return "time limit";
    case StopCause::preempted:
      return "preempted";
    case StopCause::node_failure:
      return "node failure";
    case StopCause::cancelled:
      return "cancelled";
    case StopCause::requeued:
      return "requeued";
    case StopCause::failed:
      return "failed";
  }
  return "none";
}

std::string render_run_script(const RunScript& script) {
  std::string text = "#!/bin/bash\n";
  text += fmt::format("# expctl run {}: written by `expctl run --slurm`; the job starts (or resumes) that run.\n",
                      script.run_id);
  const auto directive = [&text](const std::string& option) { text += "#SBATCH " + option + "\n"; };
  directive("--job-name=" + script.job_name);
  directive(fmt::format("--nodes={}", script.nodes));
  directive("--ntasks-per-node=1");  // expctl's supervisor, which starts the node's ranks
  directive(fmt::format("--cpus-per-task={}", script.ranks_per_node * script.cpus_per_rank));
  if (!script.time_limit.empty()) {
    directive("--time=" + script.time_limit);
  }
  if (!script.partition.empty()) {
    directive("--partition=" + script.partition);
  }
  if (!script.account.empty()) {
    directive("--account=" + script.account);
  }
  // SIGTERM, not SIGUSR1: NCCL catches SIGUSR1 (submitit moved off it). What the signal meant is
  // read from the job's state and times (stop_cause), never from the signal.
  directive(fmt::format("--signal=TERM@{}", script.signal_lead.count()));
  directive("--requeue");
  directive("--open-mode=append");
  directive("--output=" + script.output);
  directive("--chdir=" + script.working_dir);
  for (const auto& line : script.directives) {
    directive(line);
  }
  text += "set -eu\n";
  if (script.needs_team_server) {
    text +=
        "[ -n \"${EXPCTL_DB:-}\" ] || { echo \"expctl: error: EXPCTL_DB (the team server) is not in the job's "
        "environment: submit without --export=NONE (sbatch hands the submitting environment over)\" >&2; exit 2; }\n";
  }
  std::string command =
      fmt::format("exec srun --nodes={} --ntasks-per-node=1 --cpus-per-task={} --kill-on-bad-exit=1 {}", script.nodes,
                  script.ranks_per_node * script.cpus_per_rank, util::shell_quote(script.executable));
  for (const auto& option : script.global_options) {
    command += " " + util::shell_quote(option);
  }
  command += fmt::format(" slurm_job {} --signal-lead {}", script.run_id, script.signal_lead.count());
  if (script.allow_drift) {
    command += " --allow-drift";
  }
  text += command + "\n";
  return text;
}

Client::Client(std::map<std::string, std::optional<std::string>> env, std::chrono::seconds timeout)
    : m_env(std::move(env)), m_timeout(timeout) {}

std::string Client::run(const std::vector<std::string>& argv, bool allow_invalid_job) const {
  const auto result = util::run_capture(argv, {.env = m_env, .timeout = m_timeout});
  // run_capture says a program it could not execute as exit 127 with "exec failed" on stderr.
  if (!result || (result->exit_code == 127 && result->err.find("exec failed") != std::string::npos)) {
    throw LaunchError(
        fmt::format("slurm: cannot run {}: {} (is Slurm's client installed? apt-get install slurm-client)",
                    argv.front(), result ? first_line(result->err) : result.error().message));
  }
  if (result->timed_out) {
    throw LaunchError(fmt::format("slurm: {} did not answer within {} s: is slurmctld up? (scontrol ping)",
                                  argv.front(), m_timeout.count()));
  }
  if (result->exit_code != 0) {
    if (allow_invalid_job && result->err.find("Invalid job id") != std::string::npos) {
      return {};
    }
    throw LaunchError(fmt::format("slurm: {} failed (exit {}): {}", argv.front(), result->exit_code,
                                  first_line(result->err.empty() ? result->out : result->err)));
  }
  return result->out;
}

std::string Client::submit(const std::filesystem::path& script, const std::vector<std::string>& args) const {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(script.string());
  return parse_submitted(run(argv));
}

std::optional<JobInfo> Client::query(const std::string& job) const {
  auto records = show_all(job);
  return records.empty() ? std::nullopt : std::optional<JobInfo>(std::move(records.front()));
}

std::vector<JobInfo> Client::show_all(const std::string& job) const {
  const std::string shown = run({"scontrol", "show", "job", "-o", job}, /*allow_invalid_job=*/true);
  std::vector<JobInfo> records;
  std::size_t at = 0;
  while (at < shown.size()) {
    const auto end = std::min(shown.find('\n', at), shown.size());
    const std::string_view line = std::string_view(shown).substr(at, end - at);
    if (line.find("JobId=") != std::string_view::npos) {
      records.push_back(parse_job(line));
    }
    at = end + 1;
  }
  return records;
}

void Client::cancel(const std::string& job, const std::string& signal, bool full) const {
  std::vector<std::string> argv{"scancel"};
  if (!signal.empty()) {
    argv.push_back("--signal=" + signal);
    argv.push_back(full ? "--full" : "--batch");
  }
  argv.push_back(job);
  run(argv);
}

void Client::requeue(const std::string& job) const {
  run({"scontrol", "requeue", job});
}

}  // namespace expctl::launch::slurm
