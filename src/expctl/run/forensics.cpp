#include "expctl/run/forensics.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/subprocess.hpp"

namespace expctl::run {
namespace {

namespace fs = std::filesystem;

bool on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((fs::path(dir) / tool).c_str(), X_OK) == 0) {
      return true;
    }
  }
  return false;
}

// "step=42 phase=comm_wait bucket=0" -> {step: 42, phase: comm_wait, bucket: 0}
std::map<std::string, std::string> fields_of(const std::string& payload) {
  std::map<std::string, std::string> fields;
  std::istringstream words(payload);
  for (std::string word; words >> word;) {
    const auto equals = word.find('=');
    if (equals != std::string::npos) {
      fields[word.substr(0, equals)] = word.substr(equals + 1);
    }
  }
  return fields;
}

std::string where_text(const std::string& payload) {
  const auto fields = fields_of(payload);
  const auto step = fields.find("step");
  const auto phase = fields.find("phase");
  const auto bucket = fields.find("bucket");
  if (step == fields.end() || phase == fields.end()) {
    return payload;
  }
  return fmt::format("at step {} in {}{}", step->second, phase->second,
                     bucket == fields.end() ? "" : " on bucket " + bucket->second);
}

}  // namespace

std::vector<std::string> stack_command(pid_t pid) {
  if (on_path("eu-stack")) {
    return {"eu-stack", "-p", std::to_string(pid)};
  }
  if (on_path("gdb")) {
    return {"gdb", "-batch", "-nx", "-p", std::to_string(pid), "-ex", "thread apply all bt"};
  }
  return {};
}

StackCapture save_native_stack(const fs::path& run_dir, int rank, pid_t pid) {
  const auto command = stack_command(pid);
  if (command.empty()) {
    return {std::nullopt, "no native stack: install elfutils (eu-stack) or gdb to have it saved"};
  }
  const auto result = util::run_capture(command, {.timeout = k_stack_timeout});
  if (!result || result->out.empty()) {
    return {std::nullopt, fmt::format("no native stack: {} could not read process {}{}", command.front(), pid,
                                      result ? ": " + result->err.substr(0, result->err.find('\n')) : "")};
  }
  const fs::path relative = fs::path("logs") / fmt::format("rank-{}.stack.txt", rank);
  const std::string text = fmt::format("# {} (rank {}, pid {})\n{}", fmt::join(command, " "), rank, pid, result->out);
  if (!util::write_file_atomic(run_dir / relative, text)) {
    return {std::nullopt, fmt::format("no native stack: cannot write {}", (run_dir / relative).string())};
  }
  return {relative, fmt::format("its native stack is in {}", (run_dir / relative).string())};
}

std::string heartbeats_text(const std::map<int, std::string>& heartbeats) {
  std::string text;
  for (const auto& [rank, payload] : heartbeats) {
    text += fmt::format("{}rank {} {}", text.empty() ? "; last heartbeats: " : ", ", rank, where_text(payload));
  }
  return text;
}

void allow_parent_to_trace() {
  // Fails harmlessly where Yama is not built in (EINVAL): then ptrace needs nothing of us.
  (void)::prctl(PR_SET_PTRACER, static_cast<unsigned long>(::getppid()), 0, 0, 0);
}

}  // namespace expctl::run
