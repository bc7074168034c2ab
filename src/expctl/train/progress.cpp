#include <algorithm>

#include <fmt/format.h>

#include "expctl/catalog/catalog.hpp"
#include "expctl/train/dataset_info.hpp"
#include "expctl/train/npy_file.hpp"
#include "expctl/train/worker.hpp"
#include "expctl/util/image_folder.hpp"

// The torch-free part of worker.hpp: the launcher sizes a run and words its ETA without
// loading the LibTorch plugin.

namespace expctl::train {

std::int64_t training_set_size(const DatasetOptions& data) {
  switch (data.kind) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
    case DatasetKind::cifar10:
      return dataset_info(data.kind).train_samples;  // a fixed set: its catalog row says
    case DatasetKind::synthetic:
      return data.synthetic_size;
    case DatasetKind::npy: {
      const auto inputs = map_npy(data.train_inputs);  // the header only is read: the rest stays mapped
      return inputs.header.shape.empty() ? 0 : inputs.header.shape[0];
    }
    case DatasetKind::tokens: {
      // Windows of block_size + 1 tokens, each starting where the last one's inputs end.
      const std::int64_t tokens =
          data.train_inputs.extension() == ".bin"
              ? static_cast<std::int64_t>(map_file(data.train_inputs, "a token stream").size() / 2)
              : [&] {
                  const auto stream = map_npy(data.train_inputs);
                  return stream.header.shape.empty() ? 0 : stream.header.shape[0];
                }();
      return data.block_size > 0 ? std::max<std::int64_t>(0, tokens - 1) / data.block_size : 0;
    }
    case DatasetKind::imagefolder: {
      const auto index = util::index_image_folder(data.train_dir);  // listed, not read
      return index ? static_cast<std::int64_t>(index->samples.size()) : 0;
    }
  }
  return 0;
}

std::string eta_text(double seconds) {
  const auto total = static_cast<std::int64_t>(seconds + 0.5);
  if (total >= 3600) {
    return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
  }
  if (total >= 60) {
    return fmt::format("{}m{:02}s", total / 60, total % 60);
  }
  return fmt::format("{}s", total);
}

}  // namespace expctl::train
