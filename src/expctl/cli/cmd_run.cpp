// `expctl run SPEC`: validate, hold the machine against the pinned stack, record the run, launch
// and supervise this node's ranks, stream their metrics into the store, print the summary.
// The runner's contract (records, summary fields, multi-node, external launchers) is docs/run.md.

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_run.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/launch/rank_identity.hpp"

namespace expctl::cli {
namespace {

struct RunOptions {
  std::string spec;
  std::vector<std::string> overrides;
  bool allow_drift = false;
  std::string format = "text";
  int nnodes = 0;  // 0: the spec's distributed.nnodes
  int node_rank = 0;
  std::string master_addr;
  int master_port = -1;  // -1: the spec's distributed.master_port
  std::vector<std::string> tags;
};

/// --nnodes changes the world size, so it enters the spec (and its hash) like a --set would.
spec::LoadOptions load_options(const RunOptions& options) {
  spec::LoadOptions load{options.overrides};
  if (options.nnodes > 0) {
    load.overrides.push_back(fmt::format("distributed.nnodes={}", options.nnodes));
  }
  return load;
}

void print_drift(const StackCheck& stack, const std::string& spec_file) {
  std::cerr << env::render_verify_table(stack.rows);
  std::cerr << fmt::format(
      "expctl: error: {}: this machine does not match the pinned stack ({} of {} pins differ): fix the "
      "environment, or pass --allow-drift to run anyway and record the drift on the run\n",
      spec_file, stack.drifted().size(), stack.rows.size());
}

void run_run(const RunOptions& options, GlobalOptions& globals) {
  // Validation first: a bad spec exits 2 before anything is recorded.
  const spec::Spec spec = spec::load_spec(options.spec, load_options(options));
  const OutputFormat format = options.format == "json" ? OutputFormat::json : OutputFormat::text;
  const StackCheck stack = check_pinned_stack(spec);
  const auto drift = stack.drifted();
  if (!drift.empty() && !options.allow_drift) {
    print_drift(stack, options.spec);
    globals.result = util::ExitCode::mismatch;
    return;
  }
  if (launch::detect_launcher(launch::current_environment())) {
    auto tags = spec.get_string_list("tags");
    tags.insert(tags.end(), options.tags.begin(), options.tags.end());
    globals.result = run_as_external_rank(spec, tags, stack, format, globals);
    return;
  }
  // The rendezvous is prepared before anything is recorded: a port in use leaves no trace.
  NodeLaunch launch{static_cast<int>(spec.get_int("distributed.nnodes")), options.node_rank, options.master_addr,
                    options.master_port >= 0 ? options.master_port
                                             : static_cast<int>(spec.get_int("distributed.master_port"))};
  auto rendezvous = host_rendezvous(launch, spec.values());
  store::Store store = open_store(globals, store::OpenMode::read_write);
  store.put_spec(spec.hash(), spec.canonical(), spec.get_string("name"));
  store.put_environment(stack.fingerprint_hash, stack.fingerprint.dump());
  Invocation invocation;
  invocation.resolved.spec = spec.values();
  // Absolute: `resume` may run from another directory and fingerprints the spec's folder again.
  invocation.resolved.spec_file = std::filesystem::absolute(options.spec).string();
  invocation.resolved.launch = launch;
  invocation.drift = drift;
  invocation.format = format;
  invocation.rendezvous = std::move(rendezvous);
  invocation.run = store.create_run({spec.hash(), stack.fingerprint_hash, spec.get_string("name"), std::nullopt});
  for (const auto& tag : spec.get_string_list("tags")) {
    store.add_tag(invocation.run.id, tag);
  }
  for (const auto& tag : options.tags) {
    store.add_tag(invocation.run.id, tag);
  }
  // Drift accepted with --allow-drift stays visible in `list --tag` and in the summary.
  for (const auto& row : drift) {
    store.add_tag(invocation.run.id, "drift:" + row.key);
  }
  if (invocation.resolved.launch.nnodes > 1) {
    store.add_tag(invocation.run.id, fmt::format("node:{}", options.node_rank));
  }
  write_resolved_run(invocation.run.run_dir, invocation.resolved);
  globals.result = supervise_run(store, invocation, globals);
}

void setup_run(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand(
      "run",
      "Run an experiment: validate the spec, check the pinned stack, record the run, train on\n"
      "distributed.nproc_per_node local ranks (fail-fast supervision, per-rank logs in the run\n"
      "folder), store every step's metrics and print the summary. Ctrl-C checkpoints and stops\n"
      "(exit 130; continue with `expctl resume RUN`). Several hosts: run it on each with\n"
      "--nnodes/--node-rank/--master-addr/--master-port. Under torchrun/mpirun/srun it acts as\n"
      "one rank (global rank 0 records). Decoded datasets are cached in $EXPCTL_CACHE_DIR, else\n"
      "~/.cache/expctl (EXPCTL_CACHE_DIR=none turns that off). Details: docs/run.md.\n"
      "Example: expctl run experiments/quickstart.yaml --set train.max_steps=50");
  command->add_option("spec", options->spec, "Spec file (YAML)")->required();
  command->add_option("--set", options->overrides, "Override a field: --set key.path=value (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_flag("--allow-drift", options->allow_drift,
                    "Run although the machine differs from the pinned stack; each drifted pin is recorded\n"
                    "as a tag drift:<field> and under summary.drift");
  command->add_option("--nnodes", options->nnodes, "Number of hosts (default: the spec's distributed.nnodes)")
      ->check(CLI::Range(1, 1024));
  command->add_option("--node-rank", options->node_rank, "This host's index, 0..nnodes-1 (default 0)")
      ->check(CLI::Range(0, 1023));
  command->add_option("--master-addr", options->master_addr,
                      "Host of node 0, whose expctl run hosts the rendezvous store (needed with --nnodes > 1)");
  command->add_option("--master-port", options->master_port,
                      "Port of node 0's rendezvous store (default: the spec's distributed.master_port). A single\n"
                      "node needs none: its ranks meet in a private file store and nothing listens")
      ->check(CLI::Range(0, 65535));
  command->add_option("--tag", options->tags, "Tag the run (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_format_option(command, options->format);
  command->callback([options, globals] { run_run(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(run, 20, setup_run);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
