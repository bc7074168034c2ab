// The image-folder dataset (train/image_folder_dataset.hpp) on Fashion-MNIST written as PNG and
// JPEG folders (tests/tools/image_folders.py): evaluation samples and labels equal torchvision's
// ImageFolder + Resize + CenterCrop + ToTensor + Normalize, float for float; training samples do
// not depend on the number of loader threads or on what was asked before; every kind of bad file
// stops with the file's name and the fix, or is replaced and reported with data.on_bad_image skip.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <numeric>

#include "expctl/train/datasets.hpp"
#include "expctl/util/error.hpp"
#include "support/byo_fixtures.hpp"

namespace {

using namespace expctl;
using namespace expctl::train;
namespace fs = std::filesystem;

DatasetOptions folder_options(const fs::path& train_dir, const fs::path& eval_dir, std::uint32_t side, bool train) {
  DatasetOptions options;
  options.kind = DatasetKind::imagefolder;
  options.train = train;
  options.train_dir = train_dir;
  options.eval_dir = eval_dir;
  options.image.height = side;
  options.image.width = side;
  options.seed = 5;
  options.batch_size = 16;
  options.loader_threads = 2;
  return options;
}

at::Tensor range_index(std::int64_t begin, std::int64_t end) { return at::arange(begin, end, at::kLong); }

}  // namespace

TEST_CASE("image folder: evaluation samples and labels equal torchvision's ImageFolder, float for float") {
  const fs::path fixtures = test::image_folder_fixtures();
  for (const auto& [set, side] : {std::pair<std::string, std::uint32_t>{"fmnist-png", 28}, {"rgb32-24", 24}}) {
    INFO(set);
    const fs::path folder = fixtures / (set == "rgb32-24" ? "rgb32" : set) / "eval";
    const auto dataset = load_dataset(folder_options(fixtures / "rgb32/train", folder, side, false));
    CHECK(dataset->size() == 200);
    CHECK(dataset->num_classes() == 10);
    CHECK(dataset->sample_shape() == std::vector<std::int64_t>{3, side, side});
    const auto expected = load_npy(fixtures / ("expected-" + set + "-x.npy"), fixtures / ("expected-" + set + "-y.npy"));
    const auto index = range_index(0, 48);
    const at::Tensor inputs = dataset->inputs(index);
    REQUIRE(inputs.sizes() == expected.rows(index).sizes());
    CHECK(at::equal(inputs, expected.rows(index)));
    CHECK(at::equal(dataset->targets(index), expected.labels));
    // The second evaluation reads the kept pixels: the same floats.
    CHECK(at::equal(dataset->inputs(index), inputs));
  }
}

TEST_CASE("image folder: training samples are the same with 1 and 3 loader threads, prefetched or not") {
  const fs::path fixtures = test::image_folder_fixtures();
  auto options = folder_options(fixtures / "rgb32/train", fixtures / "rgb32/eval", 24, true);
  options.image.random_resized_crop = true;
  options.image.crop_padding = 2;
  options.image.hflip = true;
  options.prefetch_batches = 2;
  std::vector<std::int64_t> order(602);
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.end());
  const auto draw = [&](int threads, std::int64_t epoch, bool announce) {
    options.loader_threads = threads;
    auto dataset = load_dataset(options);
    CHECK(dataset->size() == 602);  // 600 + the grey and the small image
    if (announce) {
      dataset->upcoming(epoch, order);
    }
    std::vector<at::Tensor> batches;
    for (std::size_t begin = 0; begin < 96; begin += 16) {
      const auto index = at::tensor(std::vector<std::int64_t>(order.begin() + static_cast<std::ptrdiff_t>(begin),
                                                              order.begin() + static_cast<std::ptrdiff_t>(begin) + 16),
                                    at::kLong);
      batches.push_back(dataset->inputs(index));
    }
    return at::cat(batches);
  };
  const at::Tensor one = draw(1, 3, true);
  CHECK(at::equal(draw(3, 3, true), one));
  CHECK(at::equal(draw(3, 3, false), draw(1, 3, false)));
  CHECK_FALSE(at::equal(draw(3, 4, true), one));  // another epoch: other crops and flips
  CHECK(one.isfinite().all().item<bool>());
}

TEST_CASE("image folder: a bad file stops the run naming it, or is replaced and reported with skip") {
  const fs::path fixtures = test::image_folder_fixtures();
  for (const std::string kind : {"corrupt", "truncated", "notimage"}) {
    INFO(kind);
    const fs::path train_dir = fixtures / ("bad-" + kind) / "train";
    auto options = folder_options(train_dir, fixtures / "rgb32/eval", 32, true);
    // The bad file is 00003.png of the class of training sample 3; find its index.
    auto good = load_dataset(folder_options(fixtures / "rgb32/train", fixtures / "rgb32/eval", 32, true));
    auto dataset = load_dataset(options);
    const auto all = range_index(0, dataset->size());
    try {
      (void)dataset->inputs(all);
      FAIL("a bad file was decoded");
    } catch (const util::TrainError& error) {
      const std::string what = error.what();
      CHECK_THAT(what, Catch::Contains("00003.png: ") && Catch::Contains("fix or remove the file, or set "
                                                                         "data.on_bad_image: skip"));
    }
    options.on_bad_image = BadImagePolicy::skip;
    dataset = load_dataset(options);
    const at::Tensor inputs = dataset->inputs(all);
    const at::Tensor targets = dataset->targets(all);
    REQUIRE(dataset->skipped().size() == 1);
    CHECK_THAT(dataset->skipped().front(), Catch::EndsWith("00003.png"));
    // The bad sample's place holds the next sample, with that sample's label; the rest as in the
    // intact folder.
    const at::Tensor expected_inputs = good->inputs(all);
    const at::Tensor expected_targets = good->targets(all);
    std::int64_t replaced = -1;
    for (std::int64_t i = 0; i < dataset->size(); ++i) {
      if (!at::equal(inputs[i], expected_inputs[i])) {
        REQUIRE(replaced == -1);
        replaced = i;
      }
    }
    REQUIRE(replaced >= 0);
    CHECK(at::equal(inputs[replaced], expected_inputs[replaced + 1]));
    CHECK(targets[replaced].item<std::int64_t>() == expected_targets[replaced + 1].item<std::int64_t>());
  }
}
