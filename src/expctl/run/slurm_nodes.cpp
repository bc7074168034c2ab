// `expctl run --slurm` with distributed.nnodes > 1: which node of the job this `expctl slurm_job`
// is, where node 0's rendezvous listens, and this node's own run. Each node supervises its own
// ranks and records them in a run of its own (as `expctl run --nnodes N --node-rank I` does on
// each host): node 0's run is the one submitted; node I's is recorded by the job the first time
// it starts there, tagged `node:I` and `node-of:<node 0's run>`, and found by those tags when the
// job starts again after a requeue, so it is resumed under the same id too.

#include "expctl/run/slurm_nodes.hpp"

#include <fmt/format.h>

#include "expctl/launch/environment.hpp"
#include "expctl/launch/rank_identity.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::run::lifecycle {

int slurm_node_port(const std::string& job) {
  std::uint64_t number = 0;
  for (const char c : job) {
    if (c >= '0' && c <= '9') {
      number = number * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  return 20000 + static_cast<int>(number % 20000);
}

launch::LaunchRequest slurm_node(const launch::LaunchRequest& submitted, const std::string& job) {
  launch::LaunchRequest node = submitted;
  if (submitted.nnodes <= 1) {
    node.node_rank = 0;
    node.master_port = 0;  // one node: its ranks meet in a private store
    return node;
  }
  // This task, one per node, is what srun started: Slurm's word on it is read as for a rank srun
  // starts (SLURM_NODEID; MASTER_ADDR, else the first host of the step's node list; MASTER_PORT),
  // with the same one-line errors.
  const launch::EnvMap env = launch::current_environment();
  const auto task = launch::detect_launcher(env);
  if (!task || task->launcher != "slurm") {
    throw util::LaunchError(fmt::format(
        "job {} runs a run of {} nodes, but this `expctl slurm_job` is not an srun task ({}): the job script "
        "starts it through srun, one task per node; submit it again with `expctl resume RUN --slurm`",
        job, submitted.nnodes, task ? "started by " + task->launcher : "no SLURM_STEP_ID"));
  }
  node.node_rank = task->node_rank;
  node.master_addr = task->master_addr;
  if (env.contains("MASTER_PORT")) {
    node.master_port = task->master_port;
  } else if (node.master_port <= 0) {
    node.master_port = slurm_node_port(job);
  }
  return node;
}

std::string node_of_tag(const std::string& head_run) {
  return "node-of:" + head_run;
}

std::optional<std::string> head_of(const store::RunRecord& run) {
  const std::string prefix = node_of_tag("");
  for (const auto& tag : run.tags) {
    if (tag.starts_with(prefix)) {
      return tag.substr(prefix.size());
    }
  }
  return std::nullopt;
}

std::vector<store::RunRecord> node_runs(const store::Store& store, const std::string& head_run) {
  return store.list_runs({.tag = node_of_tag(head_run)});
}

store::RunRecord node_run(store::Store& store, const store::RunRecord& head, const ResolvedRun& resolved, int node_rank,
                          const std::string& job) {
  const std::string rank_tag = fmt::format("node:{}", node_rank);
  for (const auto& run : node_runs(store, head.id)) {
    if (std::find(run.tags.begin(), run.tags.end(), rank_tag) != run.tags.end()) {
      store.add_tag(run.id, util::tag::slurm_job(job));
      return store.run(run.id).value();
    }
  }
  // Its first start: recorded queued, as node 0's run was at submission; started below as that was.
  ResolvedRun own = resolved;
  own.node.node_rank = node_rank;
  std::vector<std::string> tags{node_of_tag(head.id), util::tag::slurm_job(job)};
  for (const auto& tag : head.tags) {
    if (!tag.starts_with("node:") && !tag.starts_with(util::tag::slurm_job_prefix) &&
        std::find(tags.begin(), tags.end(), tag) == tags.end()) {
      tags.push_back(tag);
    }
  }
  const spec::Spec spec = spec::rehash_values(own.spec, own.spec_file);
  auto run = record_new_run(store, spec, nullptr, tags, own);
  store.queue_run(run.id, fmt::format("node {} of run {}, Slurm job {}", node_rank, head.id, job));
  return store.run(run.id).value();
}

}  // namespace expctl::run::lifecycle
