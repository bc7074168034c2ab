// expctl's image-folder loader alone, as one rank sees it: each epoch, a seeded permutation of
// the folder (the rank's half with --ranks 2 --rank R) announced with upcoming(), then drawn in
// batches. Prints one JSON line: images/s over the epochs after the first (--warmup 1), and the
// same counted from the first. bench/image_pipeline.sh runs two at once against PyTorch's
// DataLoader with as many workers.
//   expctl_image_loader_bench DIR --size 32 --threads 1 --batch 64 --epochs 3 [--augment]
//                             [--ranks 2 --rank 0] [--prefetch 4]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "expctl/train/datasets.hpp"

int main(int argc, char** argv) {
  using namespace expctl::train;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [--size N] [--threads N] [--batch N] [--epochs N] [--augment] "
                         "[--ranks N --rank R] [--prefetch N]\n", argv[0]);
    return 2;
  }
  DatasetOptions options;
  options.kind = DatasetKind::imagefolder;
  options.train = true;
  options.train_dir = argv[1];
  options.loader_threads = 1;
  options.batch_size = 64;
  std::int64_t epochs = 3;
  int ranks = 1;
  int rank = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto next = [&] { return std::stoll(argv[++i]); };
    if (arg == "--size") {
      options.image.height = options.image.width = static_cast<std::uint32_t>(next());
    } else if (arg == "--threads") {
      options.loader_threads = static_cast<int>(next());
    } else if (arg == "--batch") {
      options.batch_size = next();
    } else if (arg == "--epochs") {
      epochs = next();
    } else if (arg == "--prefetch") {
      options.prefetch_batches = next();
    } else if (arg == "--ranks") {
      ranks = static_cast<int>(next());
    } else if (arg == "--rank") {
      rank = static_cast<int>(next());
    } else if (arg == "--augment") {
      options.image.crop_padding = 4;
      options.image.hflip = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  at::set_num_threads(1);  // one thread of training per rank, as in the benchmark
  const auto dataset = load_dataset(options);
  const auto n = dataset->size();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto after_first = start;
  std::int64_t images = 0;
  std::int64_t images_after_first = 0;
  double checksum = 0.0;
  for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
    const auto perm = at::randperm(n, at::TensorOptions().dtype(at::kLong)
                                          .device(at::kCPU)).contiguous();
    std::vector<std::int64_t> order(perm.data_ptr<std::int64_t>(), perm.data_ptr<std::int64_t>() + n);
    std::vector<std::int64_t> shard;
    for (std::size_t i = static_cast<std::size_t>(rank); i < order.size(); i += static_cast<std::size_t>(ranks)) {
      shard.push_back(order[i]);
    }
    dataset->upcoming(epoch, shard);
    for (std::size_t begin = 0; begin + static_cast<std::size_t>(options.batch_size) <= shard.size();
         begin += static_cast<std::size_t>(options.batch_size)) {
      const auto [inputs, targets] = gather_batch(*dataset, shard, begin, static_cast<std::size_t>(options.batch_size));
      checksum += inputs[0][0][0][0].item<float>() + static_cast<double>(targets[0].item<std::int64_t>());
      images += inputs.size(0);
      if (epoch > 0) {
        images_after_first += inputs.size(0);
      }
    }
    if (epoch == 0) {
      after_first = Clock::now();
    }
  }
  const auto end = Clock::now();
  const double all_s = std::chrono::duration<double>(end - start).count();
  const double steady_s = std::chrono::duration<double>(end - after_first).count();
  std::printf("{\"images_per_s\": %.1f, \"images_per_s_all_epochs\": %.1f, \"images\": %lld, \"checksum\": %.3f}\n",
              epochs > 1 ? static_cast<double>(images_after_first) / steady_s : static_cast<double>(images) / all_s,
              static_cast<double>(images) / all_s, static_cast<long long>(images), checksum);
  return 0;
}
