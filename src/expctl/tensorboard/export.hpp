#pragma once
/// `expctl export tensorboard`: event files for recorded runs, read from the store through its
/// public API and written by LiveExport (see live_export.hpp for the layout and the wall times),
/// each run in its own folder `<out>/<run id>/`, so two runs of an A/B sit side by side under one
/// `tensorboard --logdir <out>`.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "expctl/store/store.hpp"
#include "expctl/tensorboard/live_export.hpp"

namespace expctl::tensorboard {

struct ExportOptions {
  /// Replace the event files an earlier export (or live writer) left in a run's folder; without
  /// it such files are refused (ExportError, exit 2), since TensorBoard would show both.
  bool overwrite = false;
};

/// What was written for one run.
struct ExportedRun {
  std::string run_id{};
  std::filesystem::path dir{};      ///< <out>/<run id>
  std::vector<WrittenFile> files{};  ///< rank folders in rank order, then job
  std::int64_t points() const;      ///< scalar values over every file
};

/// LiveOptions for an invocation that resumes `run` after its checkpoint at `resumed_from`: the
/// SessionLog START that hides the earlier files' later steps, and each rank's step times up to
/// the checkpoint as stored, so that wall times agree with a later export of the finished run.
LiveOptions resumed_options(const store::Store& store, const std::string& run_id, std::int64_t resumed_from,
                            int world_size);

/// Writes every run of `runs` under `out` (creating it), in the order given (a run given twice is
/// written once). Every run's folder is checked before anything is written. Throws ExportError:
/// exit 2 for event files in the way (see ExportOptions), exit 1 for a folder or file that cannot
/// be written.
std::vector<ExportedRun> export_runs(const store::Store& store, const std::vector<store::RunRecord>& runs,
                                     const std::filesystem::path& out, const ExportOptions& options = {});

}  // namespace expctl::tensorboard
