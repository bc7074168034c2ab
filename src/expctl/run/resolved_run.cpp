#include "expctl/run/resolved_run.hpp"

#include <fmt/format.h>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {

using nlohmann::json;

void write_resolved_run(const std::filesystem::path& run_dir, const ResolvedRun& run) {
  const json document = {{"spec", run.spec},
                         {"inputs", run.inputs},
                         {"spec_file", run.spec_file},
                         {"launch",
                          {{"nnodes", run.node.nnodes},
                           {"node_rank", run.node.node_rank},
                           {"master_addr", run.node.master_addr},
                           {"master_port", run.node.master_port}}}};
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
  run.inputs = document.value("inputs", json::object());
  run.spec_file = document.value("spec_file", "");
  const json& launch = document.at("launch");
  run.node.nnodes = launch.value("nnodes", 1);
  run.node.node_rank = launch.value("node_rank", 0);
  run.node.master_addr = launch.value("master_addr", "");
  run.node.master_port = launch.value("master_port", 0);
  return run;
}

launch::LaunchRequest node_request(const ResolvedRun& run) {
  auto request = run.node;
  request.nproc_per_node = static_cast<int>(run.spec.at("distributed").at("nproc_per_node").get<std::int64_t>());
  return request;
}

}  // namespace expctl::run
