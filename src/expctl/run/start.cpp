// `expctl run SPEC`: validation, the pinned stack, and which lifecycle runs the spec: this node's
// ranks supervised (supervised.cpp), or this process as one rank of an external launcher
// (external.cpp, program_external.cpp). Nothing is recorded before the spec and the machine pass.

#include <fmt/format.h>

#include "expctl/launch/launch_plan.hpp"
#include "expctl/launch/rank_identity.hpp"
#include "expctl/run/lifecycle.hpp"
#include "expctl/run/preflight.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/train/plugin.hpp"

namespace expctl::run {
namespace {

using namespace lifecycle;

RunResult refused_for_pins(const StackCheck& stack, const RunRequest& request) {
  RunResult result;
  result.exit_code = util::ExitCode::mismatch;
  result.pin_rows = stack.rows;
  result.refusal = fmt::format(
      "{}: this machine does not match the pinned stack ({} of {} pins differ): fix the environment, or pass "
      "--allow-drift to run anyway and record the drift on the run",
      request.spec_file.string(), stack.drifted().size(), stack.rows.size());
  return result;
}

RunResult start_run(const RunRequest& request, RunObserver& observer) {
  const SteadyClock::time_point started = invocation_start();
  // Validation first: a bad spec exits 2 before anything is recorded.
  const spec::Spec spec = spec::load_spec(request.spec_file, load_options(request));
  const auto identity = launch::detect_launcher(launch::current_environment());
  const Warn warn = [&observer](const std::string& text) { observer.note(text, true); };
  const std::string sandbox = check_sandbox(spec.values(), "the run", warn, identity.has_value());
  preflight_training(spec, warn);  // a model file or arrays: an input error exits 2 before anything starts
  Invocation invocation;
  invocation.started = started;
  invocation.observer = &observer;
  invocation.strict_inputs = request.strict_inputs;
  invocation.sandbox = sandbox;
  invocation.program = spec::has_program(spec.values());
  if (invocation.program) {
    check_program_launchable(spec.values(), request.spec_file);  // exit 2 before any rank starts
  }
  std::optional<launch::HeldRanks> held;
  if (!identity && invocation.program) {
    invocation.resolved.spec = resolved_values(spec, request.tensorboard);
    invocation.resolved.spec_file = std::filesystem::absolute(request.spec_file).string();
    invocation.resolved.node = node_of(request, spec);
    prepare_program_nodes(invocation);  // several nodes: node 0 hosts the store (a port in use: exit 2)
    plan_node(invocation);
  } else if (!identity) {
    invocation.resolved.spec = resolved_values(spec, request.tensorboard);
    invocation.resolved.inputs = spec.input_paths();
    // Absolute: `resume` may run from another directory and fingerprints the spec's folder again.
    invocation.resolved.spec_file = std::filesystem::absolute(request.spec_file).string();
    invocation.resolved.node = node_of(request, spec);
    // The rendezvous is prepared before anything is recorded: a port in use leaves no trace.
    invocation.rendezvous = host_rendezvous(invocation.resolved.node, timeout_of(invocation.resolved.spec));
    plan_node(invocation);
    // The ranks start now and load LibTorch while the stack is fingerprinted and the run
    // recorded; they learn the run's folder once it exists. A refusal below kills them.
    held.emplace(launch::rank_specs(invocation.plan, worker_argv("-", false)));
  }
  // The supervisor itself needs LibTorch only for its build facts (the fingerprint), which are
  // cached after the first run: then it never loads it.
  if (!train::plugin::torch_build_fields_cached()) {
    train::plugin::preload();  // LibTorch starts up while the stack is fingerprinted
  }
  const StackCheck stack = check_pinned_stack(spec);
  if (!stack.drifted().empty() && !request.allow_drift) {
    return refused_for_pins(stack, request);
  }
  if (identity) {
    return invocation.program ? run_program_as_external_rank(invocation.started, request, spec, stack, *identity)
                              : run_as_external_rank(invocation.started, request, spec, stack, *identity);
  }
  invocation.drift = stack.drifted();
  store::Store store = request.open_store();
  invocation.run = record_new_run(store, spec, &stack, request.tags, invocation.resolved);
  return supervise(store, invocation, std::move(held));
}

}  // namespace

// --nnodes changes the world size, so it enters the spec (and its hash) like a --set would.
spec::LoadOptions lifecycle::load_options(const RunRequest& request) {
  return {request.overrides, request.nnodes > 0 ? std::optional<std::int64_t>(request.nnodes) : std::nullopt};
}

launch::LaunchRequest lifecycle::node_of(const RunRequest& request, const spec::Spec& spec) {
  launch::LaunchRequest node;
  node.nnodes = static_cast<int>(spec.get_int("distributed.nnodes"));
  node.nproc_per_node = static_cast<int>(spec.get_int("distributed.nproc_per_node"));
  node.node_rank = request.node_rank;
  node.master_addr = request.master_addr;
  node.master_port =
      request.master_port >= 0 ? request.master_port : static_cast<int>(spec.get_int("distributed.master_port"));
  return node;
}

RunResult run_spec(const RunRequest& request) {
  RunObserver& observer = lifecycle::observer_or_silent(request.observer);
  RunResult result = start_run(request, observer);
  observer.result(result);
  return result;
}

}  // namespace expctl::run
