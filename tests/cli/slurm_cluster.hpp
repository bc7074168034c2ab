#pragma once
// A real single-node Slurm for a test: scripts/slurm-throwaway.sh starts munged, slurmctld and
// slurmd in a temporary folder (about a second) and the destructor cancels the cluster's jobs and
// stops it. Without Slurm's packages or root the test is reported as skipped, never passed, and
// fails when EXPCTL_REQUIRE_SLURM=1 or EXPCTL_REQUIRE_ALL=1 (.ci/run sets both).

#include <cstdlib>
#include <string>
#include <vector>

#include "run_helpers.hpp"

#include "expctl/launch/slurm_job.hpp"

namespace expctl::test::cli {

class ThrowawaySlurm {
 public:
  /// `nodes` > 1: that many nodes n1..nN, each a slurmd of its own on this machine
  /// (EXPCTL_SLURM_NODES), so that a job's tasks really run on several Slurm nodes.
  explicit ThrowawaySlurm(int nodes = 1) {
    const auto started = util::run_capture(
        {script(), "start", m_cluster.string()},
        {.env = {{"EXPCTL_SLURM_NODES", std::to_string(nodes)}}, .timeout = std::chrono::seconds(60)});
    REQUIRE(started.has_value());
    if (started->exit_code == 0) {
      std::string conf = started->out;
      while (!conf.empty() && conf.back() == '\n') {
        conf.pop_back();
      }
      m_conf = conf.substr(conf.rfind('\n') == std::string::npos ? 0 : conf.rfind('\n') + 1);
    } else if (started->exit_code == 2) {
      m_unavailable = started->err;  // packages missing, or not root: said in one line
    } else {
      FAIL("scripts/slurm-throwaway.sh start failed (exit " << started->exit_code << "):\n" << started->err);
    }
  }
  ~ThrowawaySlurm() {
    if (!m_conf.empty()) {
      (void)util::run_capture({script(), "stop", m_cluster.string()}, {.timeout = std::chrono::seconds(60)});
    }
  }
  ThrowawaySlurm(const ThrowawaySlurm&) = delete;
  ThrowawaySlurm& operator=(const ThrowawaySlurm&) = delete;

  /// True when the cluster runs; otherwise reports the test skipped (or fails it under
  /// EXPCTL_REQUIRE_SLURM=1) and returns false.
  bool available() const {
    if (!m_conf.empty()) {
      return true;
    }
    const char* required = std::getenv("EXPCTL_REQUIRE_SLURM");
    if (required != nullptr && std::string(required) == "1") {
      FAIL("EXPCTL_REQUIRE_SLURM=1 but no throwaway Slurm could start: " << m_unavailable);
    }
    skip("slurm", "no Slurm here (" + m_unavailable + ")");
    return false;
  }

  /// expctl's own Slurm client (launch/slurm_job.hpp), against this cluster.
  launch::slurm::Client jobs() const { return launch::slurm::Client({{"SLURM_CONF", m_conf}}); }

  /// The SLURM_CONF of this cluster.
  const std::string& conf() const { return m_conf; }

  /// A Slurm client command (sbatch, squeue, scontrol...) against this cluster.
  util::SubprocessResult client(const std::vector<std::string>& argv) const {
    const auto result = util::run_capture(
        argv, {.env = {{"SLURM_CONF", m_conf}, {"EXPCTL_DB", std::nullopt}}, .timeout = std::chrono::seconds(60)});
    REQUIRE(result.has_value());
    return *result;
  }

  /// Submits a batch script (sbatch --parsable) and returns the job id.
  std::string submit(const fs::path& script_file) const { return jobs().submit(script_file); }

  /// Waits until the job has left the queue (squeue no longer lists it) and returns the JobState
  /// that `scontrol show job` keeps for it (MinJobAge=600 in the throwaway's configuration).
  std::string wait_for(const std::string& job, std::chrono::seconds limit = std::chrono::seconds(120)) const {
    REQUIRE(eventually([&] { return client({"squeue", "-h", "-j", job, "-o", "%i"}).out.empty(); }, limit));
    const auto info = jobs().query(job);
    REQUIRE(info.has_value());
    return std::string(launch::slurm::state_name(info->state));
  }

 private:
  static std::string script() { return (source_dir() / "scripts" / "slurm-throwaway.sh").string(); }

  TempDir m_dir;
  fs::path m_cluster = m_dir / "cluster";
  std::string m_conf;
  std::string m_unavailable;
};

}  // namespace expctl::test::cli
