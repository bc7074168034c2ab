// `expctl resume RUN`: continue an interrupted (or failed) run under the same run id, from each
// rank's last checkpoint, so that the finished run's metrics and loss_curve_sha256 equal those of
// an uninterrupted run.

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_observer.hpp"
#include "expctl/cli/support_result.hpp"
#include "expctl/cli/support_slurm.hpp"

namespace expctl::cli {
namespace {

struct ResumeOptions {
  run::ResumeRequest request;
  std::string format = "text";
  double ship_wait_s = k_default_ship_wait_s;
  RunSlurmOptions slurm;
};

void run_resume(ResumeOptions options, GlobalOptions& globals) {
  options.request.open_store = store_opener(globals);
  options.request.open_team_store = team_store_opener(globals);
  if (options.slurm.submit) {
    run_on_slurm(options.slurm, globals, options.format == "json" ? OutputFormat::json : OutputFormat::text,
                 [&options](const run::SlurmSubmit& job) { return run::submit_resume_to_slurm(options.request, job); });
    return;
  }
  if (options.slurm.wait) {
    throw util::UsageError("--wait follows a Slurm job: give --slurm too");
  }
  TerminalObserver observer(globals.quiet, options.format == "json" ? OutputFormat::json : OutputFormat::text);
  options.request.observer = &observer;  // prints the result at the end
  // With a server as --db, once the run is checked; finish_shipper makes its last pass.
  std::unique_ptr<store::BackgroundShipper> shipper;
  options.request.on_checked = [&shipper, &globals, &options] {
    shipper = start_shipper(globals, options.ship_wait_s);
  };
  globals.result = run::resume_run(options.request).exit_code;
  finish_shipper(shipper.get(), globals, options.ship_wait_s);  // the last pass, and what it left
}

void setup_resume(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ResumeOptions>();
  CLI::App* command = app.add_subcommand(
      "resume",
      "Continue an interrupted, failed or lost run under the same run id, from the newest checkpoint\n"
      "step that every rank holds intact (size and SHA-256 checked; refused, naming the file, when none\n"
      "is intact; refused when the run has no checkpoint at all, unless --from-scratch)\n"
      "(the steps after the checkpoint are recorded again). The finished run equals an uninterrupted\n"
      "one: same metrics, same loss_curve_sha256. This machine's fingerprint must equal the one the run\n"
      "was recorded with (software, code, determinism...; exit 3 otherwise). Details: docs/run.md.\n"
      "RUN: a run id or unique prefix, @latest, @latest~N, tag:NAME (the newest run with the tag),\n"
      "spec:HASHPREFIX or a spec file (the newest run of it); docs/compare.md, Selecting runs.\n"
      "Examples: expctl resume 20261129-223118\n"
      "          expctl resume @latest");
  command->add_option("run", options->request.selector, "The run: any selector that names one run (see above)")->required()->option_text("RUN");
  add_sandbox_option(command);
  command->add_flag("--allow-drift", options->request.allow_drift,
                    "Resume although this machine's fingerprint differs from the run's recorded one\n"
                    "(each differing field is recorded as a tag drift:<field>)");
  command->add_flag("--from-scratch", options->request.from_scratch,
                    "When the run has no checkpoint (killed before its first; see train.checkpoint_every_s),\n"
                    "start it again from step 0 under the same id instead of refusing");
  add_format_option(command, options->format);
  add_ship_wait_option(command, options->ship_wait_s);
  add_run_slurm_options(command, options->slurm);
  command->callback([options, globals] { run_resume(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(resume, 21, setup_resume);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
