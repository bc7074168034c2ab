#include "rank_launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "expctl/train/process_group.hpp"

namespace expctl::test {
namespace {

namespace fs = std::filesystem;

std::map<std::string, RankScenario>& scenarios() {
  static std::map<std::string, RankScenario> registry;
  return registry;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

// Everything a child needs is prepared before fork(): after it only async-signal-safe calls.
pid_t spawn_rank(const std::string& scenario, int rank, int world_size, unsigned port, const fs::path& dir) {
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    env_strings.emplace_back(*entry);
  }
  env_strings.push_back("EXPCTL_TEST_SCENARIO=" + scenario);
  env_strings.push_back(fmt::format("EXPCTL_TEST_RANK={}", rank));
  env_strings.push_back(fmt::format("EXPCTL_TEST_WORLD_SIZE={}", world_size));
  env_strings.push_back(fmt::format("EXPCTL_TEST_MASTER_PORT={}", port));
  env_strings.push_back("EXPCTL_TEST_DIR=" + dir.string());
  env_strings.push_back("OMP_NUM_THREADS=1");
  std::vector<char*> envp;
  for (auto& entry : env_strings) {
    envp.push_back(entry.data());
  }
  envp.push_back(nullptr);
  std::string name = "train rank worker";
  std::vector<char*> argv{const_cast<char*>(exe.c_str()), name.data(), nullptr};
  const std::string log = (dir / fmt::format("rank{}.log", rank)).string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
    if (::getppid() != parent) {
      ::_exit(125);
    }
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execve(exe.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

bool register_rank_scenario(const std::string& name, RankScenario scenario) {
  scenarios()[name] = std::move(scenario);
  return true;
}

std::vector<RankOutcome> run_ranks(const std::string& scenario, int world_size, const fs::path& dir,
                                   std::chrono::seconds deadline) {
  const unsigned port = train::pick_free_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world_size; ++rank) {
    pids.push_back(spawn_rank(scenario, rank, world_size, port, dir));
  }
  std::vector<RankOutcome> outcomes(static_cast<std::size_t>(world_size));
  std::vector<bool> done(pids.size(), false);
  const auto end = std::chrono::steady_clock::now() + deadline;
  std::size_t remaining = pids.size();
  while (remaining > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (!done[i] && ::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --remaining;
        outcomes[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > end) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
          done[i] = true;
          outcomes[i].timed_out = true;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int rank = 0; rank < world_size; ++rank) {
    outcomes[static_cast<std::size_t>(rank)].log = read_file(dir / fmt::format("rank{}.log", rank));
  }
  return outcomes;
}

std::string describe(const std::vector<RankOutcome>& outcomes) {
  std::string text;
  for (std::size_t rank = 0; rank < outcomes.size(); ++rank) {
    text += fmt::format("--- rank {} exit {}{}\n{}\n", rank, outcomes[rank].exit_code,
                        outcomes[rank].timed_out ? " (timed out)" : "", outcomes[rank].log);
  }
  return text;
}

void run_ranks_successfully(const std::string& scenario, int world_size, const std::filesystem::path& dir) {
  const auto outcomes = run_ranks(scenario, world_size, dir);
  INFO(describe(outcomes));
  for (const auto& outcome : outcomes) {
    REQUIRE(outcome.exit_code == 0);
  }
}

}  // namespace expctl::test

// The entry point of every rank process; hidden ("[.]") so normal runs and ctest skip it.
TEST_CASE("train rank worker", "[.]") {
  const std::string name = expctl::test::env_or("EXPCTL_TEST_SCENARIO", "");
  const auto found = expctl::test::scenarios().find(name);
  REQUIRE(found != expctl::test::scenarios().end());
  expctl::test::RankEnv env;
  env.rank = std::atoi(expctl::test::env_or("EXPCTL_TEST_RANK", "0"));
  env.world_size = std::atoi(expctl::test::env_or("EXPCTL_TEST_WORLD_SIZE", "1"));
  env.master_port = static_cast<unsigned>(std::atoi(expctl::test::env_or("EXPCTL_TEST_MASTER_PORT", "0")));
  env.dir = expctl::test::env_or("EXPCTL_TEST_DIR", ".");
  found->second(env);
}
