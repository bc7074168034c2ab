#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/support_result.hpp"

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/support_store.hpp"
#include "expctl/compare/run_summary.hpp"
#include "expctl/run/result_document.hpp"

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
    std::cout << fmt::format("  continue with     expctl resume {}\n", run.id);
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

std::unique_ptr<store::BackgroundShipper> start_shipper(const GlobalOptions& globals) {
  if (store_is_file(globals)) {
    return nullptr;
  }
  const bool quiet = globals.quiet;
  return std::make_unique<store::BackgroundShipper>(globals.local_db, globals.db_path, [quiet](const std::string& note) {
    if (!quiet) {
      std::cerr << "expctl: note: " << note << '\n';
    }
  });
}

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
