#pragma once
/// The image-folder dataset (`data.dataset: imagefolder`, docs/data.md): the files of
/// util::index_image_folder, decoded (train/image_file.hpp) and transformed
/// (train/image_transform.hpp) by a pool of loader threads per rank. The trainer tells it each
/// epoch's shard in draw order (Dataset::upcoming); the threads then work up to
/// `prefetch_batches` batches ahead of the batch training asks for, so the `data` phase only waits
/// for what they could not finish. A sample is a pure function of (file, seed, epoch, index): the
/// same with 1 or 16 threads, and the same after a resume.
///
/// Evaluation samples never change: their resized pixels are kept (as bytes, up to 512 MiB per
/// split), so only the first evaluation decodes.
///
/// A file that does not decode stops the run with its name and what to do, or, with
/// `data.on_bad_image: skip`, is replaced by the next sample of the set (in index order, wrapping)
/// that decodes, with that sample's label; the file is reported through skipped().

#include <memory>

#include "expctl/train/datasets.hpp"
#include "expctl/util/image_folder.hpp"

namespace expctl::train {

/// The split `options.train` names (train_dir or eval_dir), with `options.loader_threads` threads
/// (0: loader_threads_for(options, 1); the trainer resolves it with the host's ranks first).
std::unique_ptr<Dataset> load_image_folder(const DatasetOptions& options);

/// The loader threads `options.loader_threads` asks for: itself, or when 0 the host's cores
/// divided among its ranks, less one for each rank's training thread, at least 1.
int loader_threads_for(const DatasetOptions& options, int local_world_size);

}  // namespace expctl::train
