// Datasets: IDX (gzip or plain), CIFAR-10 binary and synthetic data load correctly, and every
// broken file is an error that names the file.
#include <torch/torch.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "expctl/train/datasets.hpp"
#include "expctl/train/decoded_file.hpp"
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

/// Sets an environment variable for the scope of a test, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : m_name(name) {
    if (const char* old = std::getenv(name)) {
      m_old = old;
    }
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (m_old) {
      ::setenv(m_name, m_old->c_str(), 1);
    } else {
      ::unsetenv(m_name);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* m_name;
  std::optional<std::string> m_old;
};

std::vector<fs::path> cache_entries(const fs::path& cache) {
  std::vector<fs::path> entries;
  if (fs::exists(cache / "decoded")) {
    for (const auto& entry : fs::directory_iterator(cache / "decoded")) {
      entries.push_back(entry.path());
    }
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

// An MNIST-style root holding a train split: 256 images of 1x1 pixels with the values 0..255.
void write_every_pixel_value(const fs::path& root) {
  std::string images = be32(0x803) + be32(256) + be32(1) + be32(1);
  std::string labels = be32(0x801) + be32(256);
  for (int value = 0; value < 256; ++value) {
    images.push_back(static_cast<char>(value));
    labels.push_back(static_cast<char>(value % 10));
  }
  write_gzip(root / "train-images-idx3-ubyte.gz", images);
  write_gzip(root / "train-labels-idx1-ubyte.gz", labels);
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

// Every sample's inputs, asked through the trainer's seam (in order).
torch::Tensor every_sample(const Dataset& data) {
  return data.inputs(torch::arange(data.size(), torch::TensorOptions().dtype(torch::kLong).device(data.device())));
}

TEST_CASE("datasets: gzip IDX files load as [N,1,H,W] floats in [0,1] with int64 labels", "[train][data]") {
  expctl::test::TempDir dir;
  const auto images = write_gzip(dir / "img.gz", idx_images());
  const auto labels = write_gzip(dir / "lbl.gz", idx_labels());
  const auto data = load_idx(images, labels);
  CHECK(data.all_images().sizes() == torch::IntArrayRef{3, 1, 2, 2});
  CHECK(data.all_images().scalar_type() == torch::kFloat);
  CHECK(data.all_images()[1][0][1][1].item<float>() == Approx(140.0 / 255.0));
  CHECK(torch::equal(data.labels, torch::tensor({7, 0, 9}, torch::kLong)));
  CHECK(data.size() == 3);
  // Uncompressed files read the same.
  const auto plain = load_idx(dir.write("img", idx_images()), dir.write("lbl", idx_labels()));
  CHECK(torch::equal(plain.all_images(), data.all_images()));
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

TEST_CASE(
    "datasets: a gzip file that inflates past the limit is refused naming the file and the setting, before "
    "it takes the memory",
    "[train][data]") {
  expctl::test::TempDir dir;
  const auto bomb = write_gzip(dir / "bomb.gz", std::string((3u << 20) + 1, '\0'));  // 3 MiB of zeros: 3 KiB of gzip
  CHECK(fs::file_size(bomb) < 16u << 10);
  ::setenv("EXPCTL_INFLATE_LIMIT_MB", "2", 1);
  CHECK(inflate_limit_bytes() == 2u << 20);
  CHECK_THROWS_WITH(read_decompressed(bomb),
                    bomb.string() +
                        ": inflates to more than 2 MiB, the limit for one data file (a gzip bomb, or a "
                        "larger file than expected): set EXPCTL_INFLATE_LIMIT_MB to raise it");
  ::setenv("EXPCTL_INFLATE_LIMIT_MB", "4", 1);
  CHECK(read_decompressed(bomb).size() == (3u << 20) + 1);
  ::setenv("EXPCTL_INFLATE_LIMIT_MB", "lots", 1);
  CHECK_THROWS_WITH(inflate_limit_bytes(), "EXPCTL_INFLATE_LIMIT_MB=lots is not a positive number of MiB");
  ::unsetenv("EXPCTL_INFLATE_LIMIT_MB");
  CHECK(inflate_limit_bytes() == k_default_inflate_limit_bytes);
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

TEST_CASE("datasets: CIFAR-10 binary batches load as N x 3 x 32 x 32 and a partial record is named", "[train][data]") {
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
  const auto class_mean = [](const TensorDataset& d, int c) { return d.images.index({d.labels == c}).mean(0); };
  CHECK((class_mean(a, 0) - class_mean(test, 0)).abs().mean().item<float>() <
        (class_mean(a, 0) - class_mean(other, 0)).abs().mean().item<float>());
  CHECK(a.labels.max().item<std::int64_t>() < 4);
  CHECK(make_synthetic(8, 2, {5}, 1).images.sizes() == torch::IntArrayRef{8, 5});  // [features] samples
}

TEST_CASE("datasets: normalisation and batch gathering", "[train][data]") {
  TensorDataset data(torch::full({4, 1, 2, 2}, 0.5F), torch::tensor({0, 1, 2, 3}, torch::kLong), 4);
  normalize(data, Normalization{{0.25F}, {0.5F}});
  CHECK(torch::allclose(data.images, torch::full({4, 1, 2, 2}, 0.5F)));
  CHECK_THROWS_WITH(normalize(data, default_normalization(DatasetKind::cifar10)),
                    "normalisation has 3 means for images with 1 channels");
  const std::vector<std::int64_t> order{3, 1, 0, 2};
  const auto [x, y] = gather_batch(data, order, 1, 2);
  CHECK(x.size(0) == 2);
  CHECK(torch::equal(y, torch::tensor({1, 0}, torch::kLong)));
  CHECK(parse_dataset_kind("fashion-mnist") == DatasetKind::fashion_mnist);
  CHECK_THROWS_WITH(
      parse_dataset_kind("imagenet"),
      "unknown dataset \"imagenet\": use fashion-mnist, mnist, cifar10, synthetic, npy, imagefolder or tokens");
}

TEST_CASE("datasets: Debian's Fashion-MNIST test split, when installed", "[train][data]") {
  DatasetOptions options;
  options.train = false;
  const auto root = default_dataset_root(DatasetKind::fashion_mnist);
  if (!fs::exists(root / "t10k-images-idx3-ubyte.gz")) {
    expctl::test::skip("fashion-mnist", "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)");
    return;
  }
  const auto data = load_dataset(options);
  const auto every = every_sample(*data);
  CHECK(data->size() == 10000);
  CHECK(data->num_classes() == 10);
  CHECK(data->class_targets());
  CHECK(data->largest_class() == 9);
  CHECK(every.sizes() == torch::IntArrayRef{10000, 1, 28, 28});
  CHECK(torch::equal(torch::bincount(data->targets(torch::arange(10000, torch::kLong))),
                     torch::full({10}, 1000, torch::kLong)));
  CHECK(std::abs(every.mean().item<float>()) < 0.05F);   // normalised with 0.2860 / 0.3530
  CHECK(std::abs(every.std().item<float>() - 1.0F) < 0.05F);
}

TEST_CASE("datasets: pixels are converted bit for bit as the general path does, for every byte value", "[train][data]") {
  expctl::test::TempDir dir;
  write_every_pixel_value(dir.path());
  for (const auto kind : {DatasetKind::fashion_mnist, DatasetKind::mnist}) {
    DatasetOptions options;
    options.kind = kind;
    options.root = dir.path();
    const auto fast = load_dataset(options);
    // The general path: bytes -> float, / 255, then normalize() with the dataset's constants.
    TensorDataset reference(torch::arange(256, torch::kByte).view({256, 1, 1, 1}).to(torch::kFloat).div_(255.0),
                            fast->targets(torch::arange(256, torch::kLong)), 10);
    normalize(reference, default_normalization(kind));
    CHECK(torch::equal(every_sample(*fast), reference.images));
    options.normalize = false;
    CHECK(torch::equal(every_sample(*load_dataset(options)),
                       torch::arange(256, torch::kByte).view({256, 1, 1, 1}).to(torch::kFloat).div_(255.0)));
  }
}

TEST_CASE("datasets: IDX images stay bytes, and a batch decodes only its rows, in the order asked", "[train][data]") {
  expctl::test::TempDir dir;
  const auto data = load_idx(write_gzip(dir / "img.gz", idx_images()), write_gzip(dir / "lbl.gz", idx_labels()));
  CHECK_FALSE(data.images.defined());
  CHECK(data.pixels.scalar_type() == torch::kByte);
  CHECK(data.sample_shape() == std::vector<std::int64_t>{1, 2, 2});
  const auto every = data.all_images();
  const auto index = torch::tensor({2, 0, 2}, torch::kLong);
  CHECK(torch::equal(data.rows(index), every.index_select(0, index)));
  const std::vector<std::int64_t> order{2, 1};
  const auto [batch, labels] = gather_batch(data, order, 0, 2);
  CHECK(torch::equal(batch, every.index_select(0, torch::tensor({2, 1}, torch::kLong))));
  CHECK(torch::equal(labels, torch::tensor({9, 0}, torch::kLong)));
  const auto moved = data.to(torch::Device(torch::kCPU));
  CHECK(torch::equal(moved.rows(index), data.rows(index)));
}

TEST_CASE("datasets: decoded gzip files are cached, checked against the gzip trailer, and never trusted blindly",
          "[train][data]") {
  expctl::test::TempDir dir;
  const fs::path cache = dir / "cache";
  ScopedEnv env("EXPCTL_CACHE_DIR", cache.string());
  REQUIRE(cache_directory() == cache);
  const auto images = write_gzip(dir / "img.gz", idx_images());
  const auto labels = write_gzip(dir / "lbl.gz", idx_labels());
  const auto first = load_idx(images, labels);
  const auto entries = cache_entries(cache);
  REQUIRE(entries.size() == 2);  // one decoded copy per gzip file
  // Each copy is the decoded bytes and an 8-byte footer ("xc32", CRC-32C).
  CHECK(read_all(entries[0]).size() + read_all(entries[1]).size() == idx_images().size() + idx_labels().size() + 16);

  SECTION("a second load reads the copies and gives the same tensors") {
    const auto second = load_idx(images, labels);
    CHECK(torch::equal(second.all_images(), first.all_images()));
    CHECK(torch::equal(second.labels, first.labels));
    CHECK(cache_entries(cache) == entries);
  }
  std::vector<std::string> originals;
  for (const auto& entry : entries) {
    originals.push_back(read_all(entry));
  }
  SECTION("a damaged copy (same length, one bit of the data or of the footer's CRC flipped) is decoded again "
          "and replaced") {
    const bool in_footer = GENERATE(false, true);
    for (const auto& entry : entries) {
      auto bytes = read_all(entry);
      const std::size_t at = in_footer ? bytes.size() - 1 : (bytes.size() - 8) / 2;
      bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
      std::ofstream(entry, std::ios::binary | std::ios::trunc) << bytes;
    }
    const auto again = load_idx(images, labels);
    CHECK(torch::equal(again.all_images(), first.all_images()));
    CHECK(torch::equal(again.labels, first.labels));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      CHECK(read_all(entries[i]) == originals[i]);
    }
  }
  SECTION("a copy without its footer is not used, and is rewritten with it") {
    for (const auto& entry : entries) {
      auto bytes = read_all(entry);
      std::ofstream(entry, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 8);
    }
    CHECK(torch::equal(load_idx(images, labels).all_images(), first.all_images()));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      CHECK(read_all(entries[i]) == originals[i]);
    }
  }
  SECTION("a truncated copy is not used, and is rewritten") {
    for (const auto& entry : entries) {
      fs::resize_file(entry, 3);
    }
    CHECK(torch::equal(load_idx(images, labels).all_images(), first.all_images()));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      CHECK(read_all(entries[i]) == originals[i]);
    }
  }
  SECTION("a replaced source file is a new entry, never the old copy") {
    auto changed = idx_images();
    changed[16] = static_cast<char>(255);
    fs::remove(images);
    write_gzip(images, changed);
    const auto reloaded = load_idx(images, labels);
    CHECK(reloaded.all_images()[0][0][0][0].item<float>() == 1.0F);
    // Normally a new key (new mtime/inode); were every stat field equal, the trailer's CRC differs.
    CHECK(load_idx(images, labels).all_images()[0][0][0][0].item<float>() == 1.0F);
  }
}

TEST_CASE("datasets: the cache can be turned off, and an unusable cache only costs speed", "[train][data]") {
  expctl::test::TempDir dir;
  const auto images = write_gzip(dir / "img.gz", idx_images());
  const auto labels = write_gzip(dir / "lbl.gz", idx_labels());
  {
    ScopedEnv env("EXPCTL_CACHE_DIR", "none");
    CHECK_FALSE(cache_directory().has_value());
    CHECK(load_idx(images, labels).size() == 3);
  }
  {
    const auto blocker = dir.write("a-file", "not a directory");
    ScopedEnv env("EXPCTL_CACHE_DIR", (blocker / "cache").string());
    CHECK(torch::equal(load_idx(images, labels).labels, torch::tensor({7, 0, 9}, torch::kLong)));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", (dir / "xdg").string());
    ScopedEnv env("EXPCTL_CACHE_DIR", "");
    CHECK(cache_directory() == dir / "xdg" / "expctl");
  }
  // Plain (uncompressed) files are read as they are: nothing to cache.
  ScopedEnv env("EXPCTL_CACHE_DIR", (dir / "plain-cache").string());
  load_idx(dir.write("img", idx_images()), dir.write("lbl", idx_labels()));
  CHECK(cache_entries(dir / "plain-cache").empty());
}

TEST_CASE("datasets: a cache entry is read into memory of its own, read-only, from a 2 MiB boundary", "[train][data]") {
  expctl::test::TempDir dir;
  std::string content(3 << 20, '\0');  // larger than one huge page, not a multiple of it
  for (std::size_t i = 0; i < content.size(); ++i) {
    content[i] = static_cast<char>((i * 7919) % 251);
  }
  const auto path = dir.write("entry.raw", content);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const auto whole = SharedBytes::read(fd, content.size());
  REQUIRE(whole.has_value());
  CHECK(std::string(reinterpret_cast<const char*>(whole->data()), whole->size()) == content);
  // The start of a huge page, so that the kernel can back it with 2 MiB pages (Dataset::rows'
  // gathers then miss the TLB far less often).
  CHECK(reinterpret_cast<std::uintptr_t>(whole->data()) % (std::uintptr_t{2} << 20) == 0);
  const auto prefix = whole->first(10);
  CHECK(prefix.size() == 10);
  CHECK(prefix.data() == whole->data());
  // Asking for more than the file holds is no copy at all (the caller decodes the source again).
  CHECK_FALSE(SharedBytes::read(fd, content.size() + 1).has_value());
  CHECK(SharedBytes::read(fd, 0)->size() == 0);
  ::close(fd);
  // The copy outlives the file: a replaced cache entry never changes bytes in use.
  fs::remove(path);
  CHECK(std::string(reinterpret_cast<const char*>(prefix.data()), prefix.size()) == content.substr(0, 10));
}

TEST_CASE("datasets: a token stream is windows of block_size that tile it, its uint16 ids int64 and unchanged",
          "[train][data]") {
  expctl::test::TempDir dir;
  // 41 uint16 ids from 40000: above int16's range, so a sign-extended id would show.
  std::string bytes;
  for (std::uint16_t i = 0; i < 41; ++i) {
    const auto id = static_cast<std::uint16_t>(40000 + i);
    bytes.push_back(static_cast<char>(id & 0xFF));
    bytes.push_back(static_cast<char>(id >> 8));
  }
  std::ofstream(dir / "train.bin", std::ios::binary) << bytes;
  const auto stream = load_token_stream(dir / "train.bin", 4);
  CHECK(stream->size() == 10);  // (41 - 1) / 4 windows
  CHECK(stream->sample_shape() == std::vector<std::int64_t>{4});
  CHECK(stream->class_targets());
  CHECK(stream->largest_class() == 40040);
  CHECK(stream->num_classes() == 40041);
  const auto index = torch::tensor({0, 2, 9}, torch::kLong);
  const auto inputs = stream->inputs(index);
  const auto targets = stream->targets(index);
  REQUIRE(inputs.scalar_type() == at::kLong);
  CHECK(at::equal(
      inputs,
      torch::tensor({40000, 40001, 40002, 40003, 40008, 40009, 40010, 40011, 40036, 40037, 40038, 40039}, torch::kLong)
          .view({3, 4})));
  CHECK(at::equal(targets, inputs + 1));  // each input's next token

  // Odd bytes, too short a stream, and a 2-d array are refused, naming the file.
  std::ofstream(dir / "odd.bin", std::ios::binary) << bytes.substr(0, 81);
  CHECK_THROWS_WITH(load_token_stream(dir / "odd.bin", 4), Catch::Contains("odd.bin: 81 bytes is not a whole number"));
  CHECK_THROWS_WITH(load_token_stream(dir / "train.bin", 41),
                    Catch::Contains("train.bin: 41 tokens, fewer than one window of data.block_size 41 + 1"));
}
