// Datasets: IDX (gzip or plain), CIFAR-10 binary and synthetic data load correctly, and every
// broken file is an error that names the file.
#include <torch/torch.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include <fstream>

#include "expctl/train/datasets.hpp"
#include "expctl/util/error.hpp"
#include "support/test_support.hpp"

namespace {

using namespace expctl::train;
namespace fs = std::filesystem;

std::string be32(std::uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
          static_cast<char>(value)};
}

// Three 2x2 images with pixels 0..11 and labels 7, 0, 9.
std::string idx_images() {
  std::string bytes = be32(0x803) + be32(3) + be32(2) + be32(2);
  for (int i = 0; i < 12; ++i) {
    bytes.push_back(static_cast<char>(i * 20));
  }
  return bytes;
}

std::string idx_labels(std::uint8_t first = 7) {
  return be32(0x801) + be32(3) + std::string{static_cast<char>(first), 0, 9};
}

fs::path write_gzip(const fs::path& path, const std::string& content) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, content.data(), static_cast<unsigned>(content.size())) == static_cast<int>(content.size()));
  gzclose(file);
  return path;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("datasets: gzip IDX files load as [N,1,H,W] floats in [0,1] with int64 labels", "[train][data]") {
  expctl::test::TempDir dir;
  const auto images = write_gzip(dir / "img.gz", idx_images());
  const auto labels = write_gzip(dir / "lbl.gz", idx_labels());
  const auto data = load_idx(images, labels);
  CHECK(data.images.sizes() == torch::IntArrayRef{3, 1, 2, 2});
  CHECK(data.images.scalar_type() == torch::kFloat);
  CHECK(data.images[1][0][1][1].item<float>() == Approx(140.0 / 255.0));
  CHECK(torch::equal(data.labels, torch::tensor({7, 0, 9}, torch::kLong)));
  CHECK(data.size() == 3);
  // Uncompressed files read the same.
  const auto plain = load_idx(dir.write("img", idx_images()), dir.write("lbl", idx_labels()));
  CHECK(torch::equal(plain.images, data.images));
}

TEST_CASE("datasets: a missing file is named", "[train][data]") {
  expctl::test::TempDir dir;
  const auto labels = write_gzip(dir / "lbl.gz", idx_labels());
  CHECK_THROWS_WITH(load_idx(dir / "nope.gz", labels), (dir / "nope.gz").string() + ": no such file");
}

TEST_CASE("datasets: truncated and corrupt gzip files are named", "[train][data]") {
  expctl::test::TempDir dir;
  const auto labels = write_gzip(dir / "lbl.gz", idx_labels());
  const auto full = read_all(write_gzip(dir / "full.gz", idx_images()));
  const auto cut = dir.write("cut.gz", full.substr(0, full.size() - 12));
  CHECK_THROWS_WITH(load_idx(cut, labels),
                    cut.string() + ": corrupt or truncated gzip data (unexpected end of file)");
  auto damaged = full;
  for (std::size_t i = 12; i < damaged.size() - 8; ++i) {
    damaged[i] = static_cast<char>(damaged[i] ^ 0x5A);
  }
  const auto bad = dir.write("bad.gz", damaged);
  CHECK_THROWS_WITH(load_idx(bad, labels), Catch::StartsWith(bad.string() + ": corrupt or truncated gzip data ("));
}

TEST_CASE("datasets: IDX headers, sizes, counts and labels are checked", "[train][data]") {
  expctl::test::TempDir dir;
  const auto images = dir.write("img", idx_images());
  const auto labels = dir.write("lbl", idx_labels());
  const auto short_images = dir.write("short", idx_images().substr(0, 26));
  CHECK_THROWS_WITH(load_idx(short_images, labels),
                    short_images.string() + ": truncated or padded: the header promises 12 bytes of images but "
                                            "the file has 10");
  CHECK_THROWS_WITH(load_idx(labels, labels),
                    labels.string() + ": not an IDX images file (magic 0x00000801, expected 0x00000803)");
  const auto two_labels = dir.write("two", be32(0x801) + be32(2) + std::string{1, 2});
  CHECK_THROWS_WITH(load_idx(images, two_labels),
                    two_labels.string() + ": 2 labels, but " + images.string() + " has 3 images");
  const auto bad_label = dir.write("bad", idx_labels(12));
  CHECK_THROWS_WITH(load_idx(images, bad_label), bad_label.string() + ": label 12 at index 0 is outside 0..9");
}

TEST_CASE("datasets: CIFAR-10 binary batches load as [N,3,32,32]; a partial record is named", "[train][data]") {
  expctl::test::TempDir dir;
  std::string records;
  for (int label : {3, 8}) {
    records.push_back(static_cast<char>(label));
    records.append(3 * 32 * 32, static_cast<char>(label * 10));
  }
  dir.write("cifar-10-batches-bin/test_batch.bin", records);
  const auto data = load_cifar10(dir.path(), false);
  CHECK(data.images.sizes() == torch::IntArrayRef{2, 3, 32, 32});
  CHECK(torch::equal(data.labels, torch::tensor({3, 8}, torch::kLong)));
  CHECK(data.images[1][2][31][31].item<float>() == Approx(80.0 / 255.0));
  const auto cut = dir.write("cifar-10-batches-bin/test_batch.bin", records.substr(0, records.size() - 1));
  CHECK_THROWS_WITH(load_cifar10(dir.path(), false),
                    cut.string() + ": truncated or corrupt: 6145 bytes is not a whole number of 3073-byte CIFAR-10 "
                                   "records");
  CHECK_THROWS_WITH(load_cifar10(dir.path(), true),
                    (dir / "cifar-10-batches-bin" / "data_batch_1.bin").string() + ": no such file");
}

TEST_CASE("datasets: synthetic data is seeded, and its splits share one task", "[train][data]") {
  const auto a = make_synthetic(64, 4, {1, 3, 3}, 11, 0);
  const auto b = make_synthetic(64, 4, {1, 3, 3}, 11, 0);
  const auto test = make_synthetic(64, 4, {1, 3, 3}, 11, 1);
  CHECK(torch::equal(a.images, b.images));
  CHECK(torch::equal(a.labels, b.labels));
  CHECK_FALSE(torch::equal(a.images, test.images));
  // Same prototypes: class means of the two splits are close; another seed's are not.
  const auto other = make_synthetic(64, 4, {1, 3, 3}, 12, 0);
  const auto class_mean = [](const Dataset& d, int c) { return d.images.index({d.labels == c}).mean(0); };
  CHECK((class_mean(a, 0) - class_mean(test, 0)).abs().mean().item<float>() <
        (class_mean(a, 0) - class_mean(other, 0)).abs().mean().item<float>());
  CHECK(a.labels.max().item<std::int64_t>() < 4);
  CHECK(make_synthetic(8, 2, {5}, 1).images.sizes() == torch::IntArrayRef{8, 5});  // [features] samples
}

TEST_CASE("datasets: normalisation and batch gathering", "[train][data]") {
  Dataset data{torch::full({4, 1, 2, 2}, 0.5F), torch::tensor({0, 1, 2, 3}, torch::kLong), 4};
  normalize(data, Normalization{{0.25F}, {0.5F}});
  CHECK(torch::allclose(data.images, torch::full({4, 1, 2, 2}, 0.5F)));
  CHECK_THROWS_WITH(normalize(data, default_normalization(DatasetKind::cifar10)),
                    "normalisation has 3 means for images with 1 channels");
  const std::vector<std::int64_t> order{3, 1, 0, 2};
  const auto [x, y] = gather_batch(data, order, 1, 2);
  CHECK(x.size(0) == 2);
  CHECK(torch::equal(y, torch::tensor({1, 0}, torch::kLong)));
  CHECK(parse_dataset_kind("fashion-mnist") == DatasetKind::fashion_mnist);
  CHECK_THROWS_WITH(parse_dataset_kind("imagenet"),
                    "unknown dataset \"imagenet\": use fashion-mnist, mnist, cifar10 or synthetic");
}

TEST_CASE("datasets: Debian's Fashion-MNIST test split, when installed", "[train][data]") {
  DatasetOptions options;
  options.train = false;
  const auto root = default_dataset_root(DatasetKind::fashion_mnist);
  if (!fs::exists(root / "t10k-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist not installed; skipped");
    return;
  }
  const auto data = load_dataset(options);
  CHECK(data.images.sizes() == torch::IntArrayRef{10000, 1, 28, 28});
  CHECK(torch::equal(torch::bincount(data.labels), torch::full({10}, 1000, torch::kLong)));
  CHECK(std::abs(data.images.mean().item<float>()) < 0.05F);   // normalised with 0.2860 / 0.3530
  CHECK(std::abs(data.images.std().item<float>() - 1.0F) < 0.05F);
}
