// `expctl resume RUN`: continue an interrupted (or failed) run under the same run id, from each
// rank's last checkpoint, so that the finished run's metrics and loss_curve_sha256 equal those of
// an uninterrupted run.

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_run.hpp"
#include "expctl/cli/support_store.hpp"

namespace expctl::cli {
namespace {

struct ResumeOptions {
  std::string selector;
  std::string format = "text";
  bool allow_drift = false;
};

void run_resume(const ResumeOptions& options, GlobalOptions& globals) {
  store::Store store = open_store(globals, store::OpenMode::read_write);
  Invocation invocation;
  invocation.run = store.find_run(options.selector);
  const auto& run = invocation.run;
  if (run.status != store::RunStatus::interrupted && run.status != store::RunStatus::failed) {
    throw util::UsageError(fmt::format("run {} is {}: only an interrupted or failed run can be resumed", run.id,
                                       store::to_string(run.status)));
  }
  invocation.resolved = read_resolved_run(run.run_dir);
  // A resumed run continues bit for bit only on the stack it started on: hold the machine
  // against the run's recorded fingerprint, as `run` holds it against the pins.
  const auto drift = resume_drift(store, run, invocation.resolved);
  if (!drift.empty() && !options.allow_drift) {
    std::cerr << env::render_diff(drift, "recorded", "this machine");
    std::cerr << fmt::format(
        "expctl: error: run {} was recorded on a different stack ({} fingerprint field(s) differ): resume it "
        "where it started, or pass --allow-drift to continue anyway and record the drift on the run\n",
        run.id, drift.size());
    globals.result = util::ExitCode::mismatch;
    return;
  }
  if (invocation.resolved.launch.nnodes == 1) {
    invocation.resolved.launch.master_port = 0;  // the old port may be taken by now
  }
  invocation.rendezvous = host_rendezvous(invocation.resolved.launch, invocation.resolved.spec);
  invocation.resume = true;
  invocation.format = options.format == "json" ? OutputFormat::json : OutputFormat::text;
  store.resume_run(run.id);
  for (const auto& row : drift) {
    store.add_tag(run.id, "drift:" + row.field);
  }
  globals.result = supervise_run(store, invocation, globals);
}

void setup_resume(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ResumeOptions>();
  CLI::App* command = app.add_subcommand(
      "resume",
      "Continue an interrupted or failed run from its ranks' last checkpoints, under the same run id\n"
      "(the steps after the checkpoint are recorded again). The finished run equals an uninterrupted\n"
      "one: same metrics, same loss_curve_sha256. This machine's fingerprint must equal the one the run\n"
      "was recorded with (software, code, determinism...; exit 3 otherwise). Details: docs/run.md.\n"
      "Example: expctl resume 20261129-223118");
  command->add_option("run", options->selector, "Run id or a unique prefix of one")->required();
  command->add_flag("--allow-drift", options->allow_drift,
                    "Resume although this machine's fingerprint differs from the run's recorded one\n"
                    "(each differing field is recorded as a tag drift:<field>)");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_resume(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(resume, 21, setup_resume);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
