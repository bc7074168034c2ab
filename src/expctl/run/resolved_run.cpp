#include "expctl/run/resolved_run.hpp"

namespace expctl::run {

void write_resolved_run(const std::filesystem::path& run_dir, const ResolvedRun& run) {
  spec::ResolvedDocument document;
  document.spec = run.spec;
  document.inputs = run.inputs;
  document.spec_file = run.spec_file;
  document.launch = {run.node.nnodes, run.node.node_rank, run.node.master_addr, run.node.master_port};
  spec::write_resolved_file(run_dir, document);
}

ResolvedRun read_resolved_run(const std::filesystem::path& run_dir) {
  spec::ResolvedDocument document = spec::read_resolved_file(run_dir);
  ResolvedRun run;
  run.spec = std::move(document.spec);
  run.recorded_spec = std::move(document.recorded_spec);
  run.inputs = std::move(document.inputs);
  run.spec_file = std::move(document.spec_file);
  run.node.nnodes = document.launch.nnodes;
  run.node.node_rank = document.launch.node_rank;
  run.node.master_addr = std::move(document.launch.master_addr);
  run.node.master_port = document.launch.master_port;
  run.node.nproc_per_node = document.nproc_per_node;
  return run;
}

}  // namespace expctl::run
