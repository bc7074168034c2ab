#pragma once
// Helpers of the CLI tests that run the real binary on real processes: a temporary store, a
// command in the background (killed and reaped by its owner, never by name), polling.
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/test_support.hpp"
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "expctl/store/store.hpp"

namespace expctl::test::cli {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string tiny_spec() { return (test::source_dir() / "experiments" / "tiny-synthetic.yaml").string(); }

/// Polls `condition` every 20 ms for up to `limit`; true once it holds.
inline bool eventually(const std::function<bool()>& condition, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

inline std::string read_text(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// One rank's stored series of a run, by step.
inline std::map<std::int64_t, double> series(const store::Store& db, const std::string& run, const std::string& name,
                                             int rank) {
  std::map<std::int64_t, double> values;
  for (const auto& point : db.metrics(run, {.name = name, .rank = rank})) {
    values[point.step] = point.value;
  }
  return values;
}

inline bool process_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

/// A command running in the background (its own process group), output to files. The destructor
/// kills the group and reaps the process if it is still running.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const fs::path& output_prefix) {
    m_out = output_prefix.string() + ".out";
    m_err = output_prefix.string() + ".err";
    m_pid = ::fork();
    REQUIRE(m_pid >= 0);
    if (m_pid == 0) {
      ::setpgid(0, 0);
      ::unsetenv("EXPCTL_DB");
      const int out = ::open(m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      std::vector<char*> args;
      for (const auto& arg : argv) {
        args.push_back(const_cast<char*>(arg.c_str()));
      }
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Background() {
    if (m_pid > 0 && !m_status) {
      ::kill(-m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  pid_t pid() const { return m_pid; }
  /// Exit code (128 + signal when killed); -1 when it is still running after `limit`.
  int wait(std::chrono::seconds limit = std::chrono::seconds(120)) {
    eventually(
        [this] {
          int status = 0;
          if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
            m_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          }
          return m_status.has_value();
        },
        limit);
    return m_status.value_or(-1);
  }
  std::string out() const { return read_text(m_out); }
  std::string err() const { return read_text(m_err); }

 private:
  pid_t m_pid = -1;
  std::optional<int> m_status;
  std::string m_out;
  std::string m_err;
};

/// A temporary results store and the commands that use it.
struct RunDir {
  test::TempDir dir;
  fs::path db = dir / "results" / "expctl.db";

  util::SubprocessResult expctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--db", db.string()});
    return run_expctl(args);
  }
  std::vector<std::string> argv(std::vector<std::string> args) const {
    args.insert(args.begin(), {test::expctl_binary(), "--db", db.string()});
    return args;
  }
  store::Store open() const { return store::Store::open(db, store::OpenMode::read_only); }
  /// The only run in the store, once it exists.
  std::optional<store::RunRecord> only_run() const {
    if (!fs::exists(db)) {
      return std::nullopt;
    }
    try {
      const auto runs = open().list_runs();
      return runs.size() == 1 ? std::optional(runs.front()) : std::nullopt;
    } catch (const util::StoreError&) {
      return std::nullopt;  // expctl is still creating the database
    }
  }
};

inline json parse_stdout(const util::SubprocessResult& result) {
  INFO(result.out << result.err);
  return json::parse(result.out);
}

inline const char* const k_summary_fields[] = {"final_train_loss", "eval_accuracy",     "samples_per_sec",
                                        "step_time_ms_p50", "step_time_ms_p95",  "comm_wait_fraction",
                                        "loss_curve_sha256", "wall_time_s",      "time_to_first_step_s"};

/// Waits until rank 0 has logged its first progress line, so the run is mid-training.
inline void wait_for_training(const store::RunRecord& run) {
  REQUIRE(eventually([&] { return read_text(run.run_dir / "logs" / "rank-0.log").find("step ") != std::string::npos; }));
}

inline std::string sha_of(const json& document) { return document.at("summary").at("loss_curve_sha256").get<std::string>(); }

/// A port on 127.0.0.1 nobody listens on (bound, read back, released).
inline std::string closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return std::to_string(ntohs(address.sin_port));
}

/// Starts the `expctl run` of `args` (RunDir::argv's arguments), waits until rank 0 trains, stops it
/// with SIGINT and returns the interrupted run once `expctl run` exited 130.
inline store::RunRecord interrupt_when_training(const RunDir& d, const std::vector<std::string>& args) {
  Background expctl(d.argv(args), d.dir / "interrupted");
  std::optional<store::RunRecord> run;
  REQUIRE(eventually([&] { return (run = d.only_run()).has_value(); }));
  wait_for_training(*run);
  REQUIRE(::kill(expctl.pid(), SIGINT) == 0);
  const int code = expctl.wait();
  INFO(expctl.out() << expctl.err());
  REQUIRE(code == 130);
  return *run;
}

/// Waits until the only run of the store trains, and returns it.
inline store::RunRecord start_training(const RunDir& d) {
  std::optional<store::RunRecord> run;
  REQUIRE(eventually([&] { return (run = d.only_run()).has_value(); }));
  wait_for_training(*run);
  return *run;
}

/// The process id a rank of `run` wrote into its folder (logs/rank-N.pid; a restarted rank writes
/// its own).
inline pid_t rank_pid(const store::RunRecord& run, int rank) {
  return static_cast<pid_t>(std::stol(read_text(run.run_dir / "logs" / ("rank-" + std::to_string(rank) + ".pid"))));
}

/// The steps at which every one of `ranks` ranks has written a checkpoint index in `dir` (the
/// index is written after the checkpoint file is in place).
inline std::vector<std::int64_t> steps_held_by_all(const fs::path& dir, int ranks) {
  std::map<std::int64_t, int> holders;
  if (!fs::is_directory(dir)) {
    return {};
  }
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored)) {
    const std::string name = entry.path().filename().string();
    const auto step_at = name.find("-step");
    if (name.starts_with("rank") && name.ends_with(".json") && step_at != std::string::npos) {
      ++holders[std::stoll(name.substr(step_at + 5))];
    }
  }
  std::vector<std::int64_t> steps;
  for (const auto& [step, count] : holders) {
    if (count == ranks) {
      steps.push_back(step);
    }
  }
  return steps;
}

/// True when `dir` holds a checkpoint of `rank` ("rank<R>-step<S>.pt").
inline bool has_checkpoint(const fs::path& dir, int rank) {
  const std::string prefix = "rank" + std::to_string(rank) + "-step";
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && entry.path().extension() == ".pt") {
      return true;
    }
  }
  return false;
}

}  // namespace expctl::test::cli
