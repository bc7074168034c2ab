#include "expctl/run/resolved_run.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

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

namespace {

// An integer of the document in [low, high], or nullopt (absent: `fallback`).
std::optional<int> int_field(const json& object, const char* key, int fallback, int low, int high) {
  const auto found = object.find(key);
  if (found == object.end()) {
    return fallback;
  }
  if (!found->is_number_integer()) {
    return std::nullopt;
  }
  if (found->is_number_unsigned() ? found->get<std::uint64_t>() > std::uint64_t(high)
                                  : found->get<std::int64_t>() < low || found->get<std::int64_t>() > high) {
    return std::nullopt;
  }
  return static_cast<int>(found->get<std::int64_t>());
}

}  // namespace

// Every field is checked for the type and range expctl writes: a resolved.json edited by hand or
// damaged threw nlohmann's type and out-of-range errors out of `resume` and `worker`, and a port of
// 1e300 was converted to int (undefined behaviour) before (found by fuzz_resolved_run).
ResolvedRun read_resolved_run(const std::filesystem::path& run_dir) {
  const auto path = run_dir / k_resolved_file;
  const auto text = util::read_file(path);
  if (!text) {
    throw util::UsageError(fmt::format("{}: cannot read the resolved spec ({}): is this a run folder?",
                                       path.string(), text.error().message));
  }
  const auto refuse = [&path](std::string_view why) {
    return util::UsageError(
        fmt::format("{}: not a resolved spec written by expctl run ({}): run the spec again with expctl run",
                    path.string(), why));
  };
  const json document = json::parse(*text, nullptr, false);
  if (document.is_discarded() || !document.is_object()) {
    throw refuse("not a JSON object");
  }
  const auto spec = document.find("spec");
  const auto launch = document.find("launch");
  if (spec == document.end() || !spec->is_object() || launch == document.end() || !launch->is_object()) {
    throw refuse("\"spec\" and \"launch\" must be objects");
  }
  ResolvedRun run;
  run.spec = *spec;
  const auto distributed = run.spec.find("distributed");
  const auto nproc_per_node = distributed == run.spec.end() || !distributed->is_object()
                                  ? std::nullopt
                                  : int_field(*distributed, "nproc_per_node", 0, 1, std::numeric_limits<int>::max());
  if (nproc_per_node.value_or(0) == 0) {
    throw refuse("spec.distributed.nproc_per_node must be a whole number of at least 1");
  }
  if (const auto inputs = document.find("inputs"); inputs != document.end()) {
    if (!inputs->is_object()) {
      throw refuse("\"inputs\" must be an object");
    }
    run.inputs = *inputs;
  }
  if (const auto spec_file = document.find("spec_file"); spec_file != document.end()) {
    if (!spec_file->is_string()) {
      throw refuse("\"spec_file\" must be a string");
    }
    run.spec_file = spec_file->get<std::string>();
  }
  const auto nnodes = int_field(*launch, "nnodes", 1, 1, std::numeric_limits<int>::max());
  const auto node_rank = int_field(*launch, "node_rank", 0, 0, std::numeric_limits<int>::max());
  const auto master_port = int_field(*launch, "master_port", 0, 0, 65535);
  if (!nnodes || !node_rank || !master_port || *node_rank >= *nnodes) {
    throw refuse("launch.nnodes, node_rank and master_port must be whole numbers, node_rank below nnodes, the "
                 "port at most 65535");
  }
  const auto master_addr = launch->find("master_addr");
  if (master_addr != launch->end() && !master_addr->is_string()) {
    throw refuse("launch.master_addr must be a string");
  }
  run.node.nnodes = *nnodes;
  run.node.node_rank = *node_rank;
  run.node.master_addr = master_addr == launch->end() ? "" : master_addr->get<std::string>();
  run.node.master_port = *master_port;
  run.node.nproc_per_node = *nproc_per_node;
  return run;
}

}  // namespace expctl::run
