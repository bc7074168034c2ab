#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/support_result.hpp"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/support_store.hpp"
#include "expctl/compare/run_summary.hpp"
#include "expctl/run/result_document.hpp"
#include "expctl/store/ship_pending.hpp"

namespace expctl::cli {
namespace {

using nlohmann::json;

std::string number_text(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string("-");
}

void print_summary_text(const store::RunRecord& run, const compare::RunSummary& summary) {
  std::cout << fmt::format("run {} {}", run.id, store::to_string(run.status));
  if (!run.root_cause.empty()) {
    std::cout << ": " << run.root_cause;
  }
  std::cout << '\n';
  std::cout << fmt::format("  final train loss  {}\n", number_text(summary.final_train_loss, "{:.4f}"));
  std::cout << fmt::format("  eval accuracy     {}\n", number_text(summary.eval_accuracy, "{:.4f}"));
  std::cout << fmt::format("  samples/s         {} (median after {} warm-up steps)\n",
                           number_text(summary.samples_per_sec, "{:.0f}"), summary.warmup_steps);
  std::cout << fmt::format("  wall time         {} (first step after {})\n", duration_text(summary.wall_time_s),
                           duration_text(summary.time_to_first_step_s));
  std::cout << fmt::format("  run folder        {}\n", run.run_dir.string());
  if (run.status == store::RunStatus::interrupted || run.status == store::RunStatus::lost) {
    // Under an external launcher (torchrun, srun) only global rank 0 knows the run and writes
    // checkpoints: a run of several ranks has no step every rank holds, which resume needs.
    if (run::external_launcher(run) && summary.ranks_recorded > 1) {
      std::cout << "  continue with     a new run: ranks an external launcher started cannot be resumed yet "
                   "(only rank 0 writes checkpoints; docs/slurm.md)\n";
    } else {
      std::cout << fmt::format("  continue with     expctl resume {}\n", run.id);
    }
  }
}

void print_refusal(const run::RunResult& result) {
  if (!result.pin_rows.empty()) {
    std::cerr << env::render_verify_table(result.pin_rows);
  }
  if (!result.stack_drift.empty()) {
    std::cerr << env::render_diff(result.stack_drift, "recorded", "this machine");
  }
  std::cerr << "expctl: error: " << result.refusal << '\n';
}

}  // namespace

util::ExitCode print_run_result(const run::RunResult& result, OutputFormat format) {
  if (!result.refusal.empty()) {
    print_refusal(result);
    return result.exit_code;
  }
  if (!result.run) {
    return result.exit_code;  // a rank other than 0 under an external launcher: nothing to report
  }
  if (format == OutputFormat::json) {
    print_json(
        run::encode_result(json_envelope(std::string(run::k_result_kind)), run_json(*result.run), result.summary));
  } else {
    print_summary_text(*result.run, compare::summary_from_json(result.summary));
  }
  return result.exit_code;
}

run::OpenStore store_opener(const GlobalOptions& globals) {
  if (store_is_file(globals)) {
    return [globals] { return open_store(globals, store::OpenMode::read_write); };
  }
  GlobalOptions local = globals;
  local.db_path = globals.local_db;
  return [local] { return open_store(local, store::OpenMode::read_write); };
}

run::OpenStore team_store_opener(const GlobalOptions& globals) {
  if (store_is_file(globals)) {
    return {};
  }
  return [globals] { return open_store(globals, store::OpenMode::read_only); };
}

std::unique_ptr<store::BackgroundShipper> start_shipper(const GlobalOptions& globals, double ship_wait_s) {
  if (store_is_file(globals)) {
    return nullptr;
  }
  const bool quiet = globals.quiet;
  return std::make_unique<store::BackgroundShipper>(
      globals.local_db, globals.db_path,
      [quiet](const std::string& note) {
        if (!quiet) {
          std::cerr << "expctl: note: " << note << '\n';
        }
      },
      std::chrono::seconds(2), std::chrono::milliseconds(static_cast<std::int64_t>(ship_wait_s * 1000.0)));
}

void finish_shipper(store::BackgroundShipper* shipper, const GlobalOptions& globals, double ship_wait_s) {
  if (shipper == nullptr) {
    return;
  }
  const store::BackgroundShipper::Leftover left = shipper->finish();
  if (left.caught_up()) {
    std::error_code ignored;
    std::filesystem::remove(store::pending_marker(globals.local_db), ignored);  // this run's shipper sent it all
    return;
  }
  const std::string why = left.problem ? fmt::format("it is away: {}", *left.problem)
                                       : fmt::format("the last pass ran out of its {:g} s (--ship-wait)", ship_wait_s);
  store::mark_pending(globals.local_db, why);
  // Said under --quiet too: the team's view is not what this node holds until this ships.
  std::cerr << fmt::format(
      "expctl: note: {}{} point(s) of {} run(s) recorded in {} are not on the team store yet "
      "({}); the next expctl command on this node that reads the team store ships them in the background, or "
      "run `expctl sync` (a `sync --follow` service does it always: docs/store.md)\n",
      left.exact ? "" : "up to ", left.points_behind, left.runs_behind, globals.local_db, why);
}

void ship_now(const GlobalOptions& globals) {
  const auto shipper = start_shipper(globals, k_default_ship_wait_s);
  finish_shipper(shipper.get(), globals, k_default_ship_wait_s);
}

void add_ship_wait_option(CLI::App* command, double& seconds) {
  command
      ->add_option("--ship-wait", seconds,
                   "With a team server as --db: how long the run's exit waits for its last shipping pass while\n"
                   "the server is away (seconds, default 5); what is left ships later (one line says so)")
      ->check(CLI::Range(0.0, 86400.0))
      ->option_text("SECONDS");
}

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
