#include "expctl/run/outcome.hpp"

#include "expctl/run/forensics.hpp"

#include <fmt/format.h>

namespace expctl::run {
namespace {

constexpr std::size_t k_root_cause_lines = 10;

bool diverged_rank_failed(const launch::Outcome& outcome) {
  if (!outcome.root_cause || !outcome.root_cause->rank) {
    return false;
  }
  for (const auto& exit : outcome.ranks) {
    if (exit.rank == *outcome.root_cause->rank) {
      return exit.signal == 0 && exit.exit_code == launch::k_diverged_exit_code;
    }
  }
  return false;
}

std::string last_lines_text(const launch::RootCause& cause) {
  std::vector<std::string> lines;
  for (const auto& line : cause.last_lines) {
    if (!is_log_noise(line)) {
      lines.push_back(line);
    }
  }
  if (lines.empty()) {
    return {};
  }
  std::string text = cause.rank ? fmt::format("\nlast lines of rank {}:", *cause.rank) : std::string("\nlast lines:");
  const auto first = lines.size() > k_root_cause_lines ? lines.size() - k_root_cause_lines : 0;
  for (auto index = first; index < lines.size(); ++index) {
    text += "\n  " + lines[index];
  }
  return text;
}

// "; last steps: rank 0 at 812, rank 1 at 640" for a rank that stopped answering.
std::string last_steps_text(const launch::Outcome& outcome, const std::map<int, std::int64_t>& last_steps) {
  if (!outcome.root_cause || last_steps.empty() ||
      outcome.root_cause->description.find("stopped answering") == std::string::npos) {
    return {};
  }
  std::string text;
  for (const auto& [rank, step] : last_steps) {
    text += fmt::format("{}rank {} at {}", text.empty() ? "; last steps: " : ", ", rank, step);
  }
  return text;
}

// Where every rank was when one stopped answering: their last heartbeats (step, phase, bucket),
// else the last step each reported.
std::string where_ranks_were(const launch::Outcome& outcome, const std::map<int, std::int64_t>& last_steps) {
  if (outcome.root_cause && !outcome.root_cause->heartbeats.empty() &&
      outcome.root_cause->description.find("stopped answering") != std::string::npos) {
    return heartbeats_text(outcome.root_cause->heartbeats);
  }
  return last_steps_text(outcome, last_steps);
}

}  // namespace

store::RunStatus store_status(launch::RunStatus status) {
  switch (status) {
    case launch::RunStatus::completed:
      return store::RunStatus::completed;
    case launch::RunStatus::interrupted:
      return store::RunStatus::interrupted;
    case launch::RunStatus::failed:
      break;
  }
  return store::RunStatus::failed;
}

util::ExitCode exit_code_of(store::RunStatus status) {
  switch (status) {
    case store::RunStatus::completed:
      return util::ExitCode::ok;
    case store::RunStatus::interrupted:
    case store::RunStatus::queued:  // stopped, to start again when its job does
      return util::ExitCode::interrupted;
    default:
      return util::ExitCode::run_failed;
  }
}

store::RunStatus rank_status(const launch::RankExit& exit) {
  if (exit.signal == 0 && (exit.exit_code == 0 || exit.exit_code == launch::k_interrupted_exit_code)) {
    return exit.exit_code == 0 ? store::RunStatus::completed : store::RunStatus::interrupted;
  }
  return exit.signal == 0 && exit.exit_code == launch::k_diverged_exit_code ? store::RunStatus::diverged
                                                                           : store::RunStatus::failed;
}

bool is_log_noise(std::string_view line) {
  if (line.starts_with("[rank ")) {
    line.remove_prefix(std::min(line.size(), line.find("] ") + 2));
  }
  if (line.find("Logging before InitGoogleLogging()") != std::string_view::npos) {
    return true;
  }
  // glog: "W1201 09:12:15.123456 12345 file.cc:12] ..."; c10's "[W socket.cpp:601] ...".
  const bool glog = line.size() > 6 && std::string_view("IWEF").find(line[0]) != std::string_view::npos &&
                    std::isdigit(static_cast<unsigned char>(line[1])) != 0 && line.find("] ") != std::string_view::npos;
  const bool c10 = line.starts_with("[W ") || line.starts_with("[I ");
  return glog || c10;
}

std::string root_cause_text(const launch::Outcome& outcome) {
  if (!outcome.root_cause) {
    return outcome.interrupt_signal ? fmt::format("interrupted by {}", launch::signal_name(*outcome.interrupt_signal))
                                    : std::string();
  }
  return outcome.root_cause->description + last_lines_text(*outcome.root_cause);
}

std::string divergence_text(const Divergence& divergence) {
  std::string ranks;
  for (const auto& [rank, loss] : divergence.losses) {
    ranks += fmt::format("{}rank {}: {}", ranks.empty() ? "" : ", ", rank, loss);
  }
  return fmt::format("the loss is not finite at step {} ({})", divergence.step, ranks);
}

Verdict verdict_of(const launch::Outcome& outcome, const std::optional<Divergence>& divergence,
                   const std::map<int, std::int64_t>& last_steps) {
  Verdict verdict;
  verdict.status = store_status(outcome.status);
  verdict.exit_code = exit_code_of(verdict.status);
  verdict.root_cause = root_cause_text(outcome);
  if (const auto steps = where_ranks_were(outcome, last_steps); !steps.empty()) {
    verdict.root_cause.insert(outcome.root_cause->description.size(), steps);
  }
  if (verdict.status == store::RunStatus::failed && diverged_rank_failed(outcome)) {
    verdict.status = store::RunStatus::diverged;
    verdict.root_cause =
        (divergence ? divergence_text(*divergence) : outcome.root_cause->description) +
        ": lower optim.lr, set train.grad_clip_norm, or set train.nonfinite=skip to skip such steps";
  }
  return verdict;
}

}  // namespace expctl::run
