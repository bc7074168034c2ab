// `expctl export tensorboard RUN... -o DIR`: TensorBoard event files for recorded runs, each run in
// its own folder so that the two sides of an A/B sit side by side under one --logdir.
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/compare/selector.hpp"
#include "expctl/tensorboard/export.hpp"

namespace expctl::cli {
namespace {

struct ExportTensorboardOptions {
  std::vector<std::string> selectors;
  std::string output;
  bool overwrite = false;
  std::string format = "text";
};

std::vector<store::RunRecord> resolve_runs(const store::Store& db, const std::vector<std::string>& selectors) {
  std::vector<store::RunRecord> runs;
  for (const std::string& selector : selectors) {
    for (store::RunRecord& run : compare::resolve_group(db, selector)) {
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

std::int64_t total_points(const std::vector<tensorboard::ExportedRun>& exported) {
  std::int64_t total = 0;
  for (const auto& run : exported) {
    total += run.points();
  }
  return total;
}

std::size_t total_files(const std::vector<tensorboard::ExportedRun>& exported) {
  std::size_t total = 0;
  for (const auto& run : exported) {
    total += run.files.size();
  }
  return total;
}

nlohmann::json export_json(const std::vector<tensorboard::ExportedRun>& exported, const std::string& output) {
  nlohmann::json document = json_envelope("export");
  document["exporter"] = "tensorboard";
  document["output"] = output;
  document["points"] = total_points(exported);
  document["runs"] = nlohmann::json::array();
  for (const auto& run : exported) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& file : run.files) {
      files.push_back({{"path", file.path.string()}, {"points", file.points}});
    }
    document["runs"].push_back({{"id", run.run_id}, {"dir", run.dir.string()}, {"points", run.points()}, {"files", files}});
  }
  return document;
}

void print_text(const std::vector<tensorboard::ExportedRun>& exported, const std::string& output) {
  std::cout << fmt::format("wrote {} TensorBoard event file{} ({} points) under {}\n", total_files(exported),
                           total_files(exported) == 1 ? "" : "s", total_points(exported), output);
  for (const auto& run : exported) {
    if (run.files.empty()) {
      std::cout << fmt::format("  {}: no metrics recorded, nothing written\n", run.run_id);
    }
    for (const auto& file : run.files) {
      std::cout << fmt::format("  {}  {} points\n", file.path.string(), file.points);
    }
  }
  std::cout << fmt::format("open them with: tensorboard --logdir {}\n", output);
}

void run_export_tensorboard(const ExportTensorboardOptions& options, const GlobalOptions& globals) {
  const store::Store db = open_store(globals, store::OpenMode::read_only);
  const std::vector<store::RunRecord> runs = resolve_runs(db, options.selectors);
  const auto exported = tensorboard::export_runs(db, runs, options.output, {.overwrite = options.overwrite});
  if (options.format == "json") {
    print_json(export_json(exported, options.output));
  } else if (!globals.quiet) {
    print_text(exported, options.output);
  }
}

constexpr const char* k_tensorboard_help =
    "Write TensorBoard event files for recorded runs, to view their curves in TensorBoard or a tool that\n"
    "imports its files. Each run gets its own folder, so the two sides of an A/B sit side by side:\n"
    "  DIR/<run id>/rank<R>/  every per-step metric of rank R, tagged as stored (loss, lr, step_time_ms,\n"
    "                         comm_wait_ms, samples_per_sec, ...; eval_loss and eval_accuracy under rank0)\n"
    "  DIR/<run id>/job/      per step: samples_per_sec (sum over ranks), step_time_ms (slowest rank),\n"
    "                         comm_wait_fraction (sum of waits / sum of step times), loss (mean over ranks)\n"
    "Wall times are the run's start plus each rank's step times (the store keeps no per-step clock).\n"
    "RUN: a run id or unique prefix, tag:NAME, spec:HASHPREFIX, @latest, @latest~N, a spec file; A,B,C names\n"
    "several runs, all:tag:NAME every run with the tag (an A/B side: all:tag:ab:<name>:a). Event files already in a run's folder are refused unless --overwrite.\n"
    "View them on a machine with TensorBoard (pip install tensorboard; Debian 12 does not package it):\n"
    "  tensorboard --logdir DIR          then open http://localhost:6006\n"
    "or import them: wandb sync DIR/<run id>/rank0 (W&B), aim convert tensorboard --logdir DIR (Aim).\n"
    "Examples:\n"
    "  expctl export tensorboard @latest -o tb\n"
    "  expctl export tensorboard tag:baseline:quickstart @latest -o tb/ab --overwrite";

void setup_export(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  CLI::App* command = app.add_subcommand("export", "Export recorded runs to other tools' formats (tensorboard)");
  command->require_subcommand(1);
  auto options = std::make_shared<ExportTensorboardOptions>();
  CLI::App* tensorboard = command->add_subcommand("tensorboard", k_tensorboard_help);
  tensorboard->add_option("run", options->selectors, "Runs to export (selectors)")->required()->option_text("RUN...");
  tensorboard->add_option("-o,--output", options->output, "Folder to write into (created when missing)")
      ->required()
      ->option_text("DIR");
  tensorboard->add_flag("--overwrite", options->overwrite,
                        "Replace the event files an earlier export or live writer left in a run's folder");
  add_format_option(tensorboard, options->format);
  tensorboard->footer(exit_codes_footer() +
                      "export: 2 for an unknown run or event files in the way, 1 when a file cannot be written.\n");
  tensorboard->callback([options, globals] { run_export_tensorboard(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(export, 36, setup_export);

}  // namespace expctl::cli
