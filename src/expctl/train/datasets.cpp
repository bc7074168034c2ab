#include "expctl/train/datasets.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <memory>

#include "expctl/train/decoded_file.hpp"
#include "expctl/train/image_folder_dataset.hpp"
#include "expctl/train/npy_file.hpp"
#include <fmt/ranges.h>
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;
namespace fs = std::filesystem;

constexpr std::uint32_t k_idx_images_magic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr std::uint32_t k_idx_labels_magic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr std::int64_t k_cifar_side = 32;
constexpr std::int64_t k_cifar_record = 1 + 3 * k_cifar_side * k_cifar_side;  // label byte + CHW pixels

std::uint32_t big_endian_u32(const SharedBytes& bytes, std::size_t offset) {
  return (std::uint32_t{bytes[offset]} << 24) | (std::uint32_t{bytes[offset + 1]} << 16) |
         (std::uint32_t{bytes[offset + 2]} << 8) | std::uint32_t{bytes[offset + 3]};
}

// Checks an IDX header and the payload size; returns the dimensions.
std::vector<std::int64_t> idx_dimensions(const SharedBytes& bytes, const fs::path& path,
                                         std::uint32_t magic, const char* kind) {
  const std::size_t rank = magic & 0xFFU;
  const std::size_t header = 4 + 4 * rank;
  EXPCTL_CHECK(bytes.size() >= 4 && big_endian_u32(bytes, 0) == magic, TrainError,
               "{}: not an IDX {} file (magic 0x{:08x}, expected 0x{:08x})", path.string(), kind,
               bytes.size() >= 4 ? big_endian_u32(bytes, 0) : 0U, magic);
  EXPCTL_CHECK(bytes.size() >= header, TrainError, "{}: truncated IDX header ({} bytes)", path.string(),
               bytes.size());
  std::vector<std::int64_t> dims;
  std::int64_t payload = 1;
  for (std::size_t i = 0; i < rank; ++i) {
    dims.push_back(big_endian_u32(bytes, 4 + 4 * i));
    payload *= dims.back();
  }
  EXPCTL_CHECK(static_cast<std::int64_t>(bytes.size() - header) == payload, TrainError,
               "{}: truncated or padded: the header promises {} bytes of {} but the file has {}", path.string(),
               payload, kind, bytes.size() - header);
  return dims;
}

at::Tensor bytes_to_tensor(const std::uint8_t* data, std::vector<std::int64_t> sizes) {
  return at::from_blob(const_cast<std::uint8_t*>(data), sizes, at::kByte).clone();
}

// The float32 of each byte value for single-channel pixels: x / 255, then (x - mean) / std when
// `normalization` is given. The tensor operations of the general path (`.to(kFloat).div_(255)`
// and `normalize`) are applied to the 256 possible byte values; looking the pixels up in that
// table gives bit for bit the same floats (each operation is exact per element, so it does not
// matter whether it runs on 256 values or 47 million).
at::Tensor pixel_lookup(const Normalization* normalization) {
  auto table = at::arange(256, at::TensorOptions().dtype(at::kByte)).to(at::kFloat).div_(255.0);
  if (normalization != nullptr) {
    EXPCTL_CHECK(normalization->mean.size() == 1 && normalization->std.size() == 1, TrainError,
                 "normalisation has {} means for images with 1 channel", normalization->mean.size());
    table.sub_(at::tensor(normalization->mean)).div_(at::tensor(normalization->std));
  }
  return table;
}

// The bytes as a uint8 tensor that keeps them alive (no copy of a mapped cache entry).
at::Tensor wrap_bytes(const SharedBytes& bytes, std::size_t offset, std::vector<std::int64_t> sizes) {
  return at::from_blob(
      const_cast<std::uint8_t*>(bytes.data() + offset), sizes, [owner = bytes.owner()](void*) {},
      at::TensorOptions().dtype(at::kByte));
}

// One pass on the CPU: each requested sample's bytes through the table into the batch.
at::Tensor decode_rows_cpu(const at::Tensor& pixels, const at::Tensor& lookup, const at::Tensor& index) {
  const auto sample = pixels.numel() / std::max<std::int64_t>(1, pixels.size(0));
  auto sizes = pixels.sizes().vec();
  sizes[0] = index.size(0);
  auto images = at::empty(sizes, at::kFloat);
  const auto rows = index.contiguous();
  const auto* wanted = rows.data_ptr<std::int64_t>();
  const auto* bytes = pixels.data_ptr<std::uint8_t>();
  const auto* table = lookup.data_ptr<float>();
  float* out = images.data_ptr<float>();
  for (std::int64_t row = 0; row < rows.size(0); ++row) {
    EXPCTL_ASSERT(wanted[row] >= 0 && wanted[row] < pixels.size(0), "sample {} of a set of {}", wanted[row],
                  pixels.size(0));
    const std::uint8_t* from = bytes + wanted[row] * sample;
    for (std::int64_t i = 0; i < sample; ++i) {
      out[i] = table[from[i]];
    }
    out += sample;
  }
  return images;
}

void check_labels(const at::Tensor& labels, std::int64_t num_classes, const fs::path& path) {
  const auto bad = (labels >= num_classes).nonzero();
  EXPCTL_CHECK(bad.size(0) == 0, TrainError, "{}: label {} at index {} is outside 0..{}", path.string(),
               bad.size(0) > 0 ? labels[bad[0][0]].item<std::int64_t>() : 0,
               bad.size(0) > 0 ? bad[0][0].item<std::int64_t>() : 0, num_classes - 1);
}

// Prefers "<name>.gz", as Debian ships it, and falls back to the uncompressed name.
fs::path find_idx(const fs::path& root, const std::string& name) {
  const auto gz = root / (name + ".gz");
  return fs::exists(gz) || !fs::exists(root / name) ? gz : root / name;
}

// Integer ids as int64 values: int16 elements are uint16 ids (LibTorch 1.13 has no uint16; int16
// arrays are refused by load_npy), masked back to 0 .. 65535.
at::Tensor ids_as_int64(const at::Tensor& ids) {
  switch (ids.scalar_type()) {
    case at::kLong:
      return ids;
    case at::kShort:
      return ids.to(at::kInt).bitwise_and_(0xFFFF).to(at::kLong);
    default:
      return ids.to(at::kLong);
  }
}

}  // namespace

namespace {

TensorDataset load_idx_files(const fs::path& images, const fs::path& labels, std::int64_t num_classes,
                       const Normalization* normalization) {
  const auto image_bytes = read_decompressed(images);
  const auto image_dims = idx_dimensions(image_bytes, images, k_idx_images_magic, "images");
  const auto label_bytes = read_decompressed(labels);
  const auto label_dims = idx_dimensions(label_bytes, labels, k_idx_labels_magic, "labels");
  EXPCTL_CHECK(image_dims[0] == label_dims[0], TrainError, "{}: {} labels, but {} has {} images", labels.string(),
               label_dims[0], images.string(), image_dims[0]);
  TensorDataset dataset({}, bytes_to_tensor(label_bytes.data() + 8, {label_dims[0]}).to(at::kLong), num_classes,
                        wrap_bytes(image_bytes, 16, {image_dims[0], 1, image_dims[1], image_dims[2]}),
                        pixel_lookup(normalization));
  check_labels(dataset.labels, num_classes, labels);
  return dataset;
}

}  // namespace

std::vector<std::int64_t> TensorDataset::sample_shape() const {
  const auto& data = pixels.defined() ? pixels : images;
  return {data.sizes().begin() + 1, data.sizes().end()};
}

at::Tensor TensorDataset::rows(const at::Tensor& index) const {
  if (!pixels.defined()) {
    auto selected = images.index_select(0, index);
    // Mapped arrays are converted per batch, never whole: float16/float64 to float32, integer ids
    // to int64 (int16 elements are uint16 ids: load_npy refuses int16 arrays).
    if (selected.scalar_type() == at::kFloat) {
      return selected;
    }
    return at::isIntegralType(selected.scalar_type(), /*includeBool=*/false) ? ids_as_int64(selected)
                                                                             : selected.to(at::kFloat);
  }
  if (pixels.device().is_cpu()) {
    return decode_rows_cpu(pixels, lookup, index);
  }
  const auto bytes = pixels.index_select(0, index);
  return lookup.index_select(0, bytes.flatten().to(at::kLong)).view(bytes.sizes());
}

at::Tensor TensorDataset::all_images() const {
  return pixels.defined() ? rows(at::arange(size(), at::TensorOptions().dtype(at::kLong).device(pixels.device())))
                          : images;
}

std::int64_t TensorDataset::largest_class() const {
  return labels.numel() == 0 ? -1 : labels.max().item<std::int64_t>();
}

void TensorDataset::move_to(const at::Device& device) {
  for (auto* tensor : {&images, &labels, &pixels, &lookup}) {
    if (tensor->defined()) {
      *tensor = tensor->to(device);
    }
  }
}

TensorDataset TensorDataset::to(const at::Device& device) const {
  TensorDataset moved = *this;
  moved.move_to(device);
  return moved;
}

TensorDataset load_idx(const fs::path& images, const fs::path& labels, std::int64_t num_classes) {
  return load_idx_files(images, labels, num_classes, nullptr);
}

TensorDataset load_cifar10(const fs::path& root, bool train) {
  const fs::path dir = fs::exists(root / "cifar-10-batches-bin") ? root / "cifar-10-batches-bin" : root;
  std::vector<fs::path> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) {
      files.push_back(dir / fmt::format("data_batch_{}.bin", i));
    }
  } else {
    files.push_back(dir / "test_batch.bin");
  }
  std::vector<at::Tensor> images;
  std::vector<at::Tensor> labels;
  for (const auto& file : files) {
    const auto bytes = read_decompressed(file);
    const auto size = static_cast<std::int64_t>(bytes.size());
    EXPCTL_CHECK(size > 0 && size % k_cifar_record == 0, TrainError,
                 "{}: truncated or corrupt: {} bytes is not a whole number of {}-byte CIFAR-10 records",
                 file.string(), size, k_cifar_record);
    const auto records = bytes_to_tensor(bytes.data(), {size / k_cifar_record, k_cifar_record});
    labels.push_back(records.select(1, 0).to(at::kLong));
    check_labels(labels.back(), 10, file);
    images.push_back(records.narrow(1, 1, k_cifar_record - 1)
                         .reshape({-1, 3, k_cifar_side, k_cifar_side})
                         .to(at::kFloat)
                         .div_(255.0));
  }
  return {at::cat(images), at::cat(labels), 10};
}

TensorDataset make_synthetic(std::int64_t size, std::int64_t num_classes, const std::vector<std::int64_t>& shape,
                       std::uint64_t seed, std::uint64_t stream) {
  EXPCTL_CHECK(size > 0 && num_classes > 1 && !shape.empty() && shape.size() <= 3, TrainError,
               "synthetic data needs size > 0, at least 2 classes and a [features] or [C, H, W] shape");
  auto prototype_generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::int64_t> prototype_shape{num_classes};
  prototype_shape.insert(prototype_shape.end(), shape.begin(), shape.end());
  const auto prototypes = at::randn(prototype_shape, prototype_generator);
  // Splits share the prototypes (the task) but draw their own samples.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed * 0x9E3779B97F4A7C15ULL + 1 + stream);
  auto labels = at::randint(num_classes, {size}, generator, at::TensorOptions().dtype(at::kLong));
  std::vector<std::int64_t> image_shape{size};
  image_shape.insert(image_shape.end(), shape.begin(), shape.end());
  // Noise as strong as the signal keeps the task learnable but not trivial.
  auto images = prototypes.index_select(0, labels) + at::randn(image_shape, generator);
  return {images, labels, num_classes};
}

void normalize(TensorDataset& dataset, const Normalization& normalization) {
  const auto channels = dataset.images.size(1);
  EXPCTL_CHECK(static_cast<std::int64_t>(normalization.mean.size()) == channels &&
                   normalization.std.size() == normalization.mean.size(),
               TrainError, "normalisation has {} means for images with {} channels", normalization.mean.size(),
               channels);
  const auto mean = at::tensor(normalization.mean).view({1, channels, 1, 1});
  const auto std = at::tensor(normalization.std).view({1, channels, 1, 1});
  dataset.images.sub_(mean).div_(std);
}

namespace {

at::ScalarType torch_dtype(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::float32:
      return at::kFloat;
    case NpyDtype::float16:
      return at::kHalf;
    case NpyDtype::float64:
      return at::kDouble;
    case NpyDtype::uint8:
      return at::kByte;
    case NpyDtype::int32:
      return at::kInt;
    case NpyDtype::int64:
      return at::kLong;
    case NpyDtype::uint16:
      return at::kShort;  // LibTorch 1.13 has no uint16: the bits as int16, widened by ids_as_int64()
  }
  return at::kFloat;
}

bool is_integer_ids(NpyDtype dtype) {
  return dtype == NpyDtype::int64 || dtype == NpyDtype::int32 || dtype == NpyDtype::uint16;
}

// The mapped elements as a tensor that keeps the mapping alive (read-only: nothing writes to it).
at::Tensor wrap_array(const NpyArray& array) {
  return at::from_blob(
      const_cast<std::uint8_t*>(array.data()), array.header.shape, [owner = array.bytes.owner()](void*) {},
      at::TensorOptions().dtype(torch_dtype(array.header.dtype)));
}

}  // namespace

TensorDataset load_npy(const fs::path& inputs_file, const fs::path& targets_file) {
  const NpyArray inputs = map_npy(inputs_file);
  const NpyArray targets = map_npy(targets_file);
  const auto& in = inputs.header;
  const auto& out = targets.header;
  EXPCTL_CHECK(!in.shape.empty() && in.shape[0] > 0, TrainError,
               "{}: an array of shape ({}) has no samples: the first dimension is the sample", inputs_file.string(),
               fmt::join(in.shape, ", "));
  EXPCTL_CHECK(!out.shape.empty() && out.shape[0] == in.shape[0], TrainError,
               "{}: {} targets for {} inputs in {}: the arrays' first dimensions must be equal", targets_file.string(),
               out.shape.empty() ? 0 : out.shape[0], in.shape[0], inputs_file.string());
  EXPCTL_CHECK(out.dtype != NpyDtype::uint8 && out.dtype != NpyDtype::float16, TrainError,
               "{}: targets of dtype {} are not supported: int64, int32 or uint16 class indices, or float32 values",
               targets_file.string(), npy_descr(out.dtype));
  TensorDataset dataset;
  const auto raw_inputs = wrap_array(inputs);
  if (in.dtype == NpyDtype::uint8) {
    dataset.pixels = raw_inputs;  // bytes scaled to [0, 1] per batch, as torchvision's ToTensor does
    dataset.lookup = pixel_lookup(nullptr);
  } else {
    dataset.images = raw_inputs;  // ids (tokens, categories) become int64 per batch, never scaled (rows())
  }
  const auto raw_targets = wrap_array(targets);
  const bool classes = is_integer_ids(out.dtype);
  dataset.labels = classes ? ids_as_int64(raw_targets).clone() : raw_targets.to(at::kFloat).clone();
  if (classes) {
    const auto minimum = dataset.labels.min().item<std::int64_t>();
    EXPCTL_CHECK(minimum >= 0, TrainError, "{}: class index {} is negative: classes are 0 .. classes - 1",
                 targets_file.string(), minimum);
    dataset.classes = dataset.labels.max().item<std::int64_t>() + 1;
  } else {
    dataset.classes = dataset.labels.numel() / dataset.labels.size(0);  // values per sample
  }
  return dataset;
}

namespace {

class TokenStreamDataset final : public Dataset {
 public:
  TokenStreamDataset(at::Tensor tokens, std::int64_t block_size, std::int64_t largest)
      : m_tokens(std::move(tokens)), m_block(block_size), m_largest(largest) {}

  std::int64_t size() const override { return (m_tokens.size(0) - 1) / m_block; }
  std::vector<std::int64_t> sample_shape() const override { return {m_block}; }
  std::int64_t num_classes() const override { return m_largest + 1; }
  bool class_targets() const override { return true; }
  std::int64_t largest_class() const override { return m_largest; }
  at::Tensor inputs(const at::Tensor& index) const override { return windows(index, 0); }
  at::Tensor targets(const at::Tensor& index) const override { return windows(index, 1); }
  at::Device device() const override { return m_tokens.device(); }
  void move_to(const at::Device& device) override { m_tokens = m_tokens.to(device); }

 private:
  // [n, T] int64: the T tokens of each window `index`, from its first (`shift` 0) or second (1).
  at::Tensor windows(const at::Tensor& index, std::int64_t shift) const {
    const auto offsets = at::arange(shift, shift + m_block, index.options());
    const auto positions = (index * m_block).unsqueeze(1) + offsets.unsqueeze(0);
    return ids_as_int64(m_tokens.index_select(0, positions.reshape({-1}))).view({index.size(0), m_block});
  }

  at::Tensor m_tokens;  // 1-d, mapped: int64, int32, or int16 holding uint16 ids
  std::int64_t m_block;
  std::int64_t m_largest;
};

// The stream as a 1-d tensor over its mapping.
at::Tensor map_token_stream(const fs::path& path) {
  if (path.extension() == ".bin") {
    const SharedBytes bytes = map_file(path, "a token stream");
    EXPCTL_CHECK(bytes.size() % 2 == 0, TrainError,
                 "{}: {} bytes is not a whole number of uint16 tokens: a .bin token stream is raw little-endian "
                 "uint16 ids (np.array(ids, dtype=np.uint16).tofile(path))",
                 path.string(), bytes.size());
    return at::from_blob(
        const_cast<std::uint8_t*>(bytes.data()), {static_cast<std::int64_t>(bytes.size() / 2)},
        [owner = bytes.owner()](void*) {}, at::TensorOptions().dtype(at::kShort));
  }
  const NpyArray array = map_npy(path);
  EXPCTL_CHECK(array.header.shape.size() == 1 && is_integer_ids(array.header.dtype), TrainError,
               "{}: a token stream is one flat array of int64, int32 or uint16 ids, not a {} array of shape ({}): "
               "save ids.reshape(-1).astype(np.uint16)",
               path.string(), npy_descr(array.header.dtype), fmt::join(array.header.shape, ", "));
  return wrap_array(array);
}

}  // namespace

std::unique_ptr<Dataset> load_token_stream(const fs::path& stream, std::int64_t block_size) {
  EXPCTL_CHECK(block_size > 0, TrainError, "data.dataset tokens needs data.block_size > 0");
  const auto tokens = map_token_stream(stream);
  EXPCTL_CHECK(tokens.size(0) > block_size, TrainError,
               "{}: {} tokens, fewer than one window of data.block_size {} + 1", stream.string(), tokens.size(0),
               block_size);
  // The ids' range, a chunk at a time (no int64 copy of the whole stream).
  std::int64_t smallest = 0;
  std::int64_t largest = 0;
  constexpr std::int64_t k_chunk = 1 << 22;
  for (std::int64_t begin = 0; begin < tokens.size(0); begin += k_chunk) {
    const auto chunk = ids_as_int64(tokens.narrow(0, begin, std::min(k_chunk, tokens.size(0) - begin)));
    smallest = std::min(smallest, chunk.min().item<std::int64_t>());
    largest = std::max(largest, chunk.max().item<std::int64_t>());
  }
  EXPCTL_CHECK(smallest >= 0, TrainError, "{}: token id {} is negative: ids are 0 .. vocabulary size - 1",
               stream.string(), smallest);
  return std::make_unique<TokenStreamDataset>(tokens, block_size, largest);
}

std::unique_ptr<Dataset> load_dataset(const DatasetOptions& options) {
  const fs::path root = options.root.empty() ? default_dataset_root(options.kind) : options.root;
  const std::string split = options.train ? "train" : "t10k";
  switch (options.kind) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
    {
      const auto normalization = default_normalization(options.kind);
      return std::make_unique<TensorDataset>(
          load_idx_files(find_idx(root, split + "-images-idx3-ubyte"), find_idx(root, split + "-labels-idx1-ubyte"),
                         10, options.normalize ? &normalization : nullptr));
    }
    case DatasetKind::cifar10:
    {
      auto dataset = std::make_unique<TensorDataset>(load_cifar10(root, options.train));
      if (options.normalize) {
        normalize(*dataset, default_normalization(options.kind));
      }
      return dataset;
    }
    case DatasetKind::synthetic:
      return std::make_unique<TensorDataset>(make_synthetic(options.synthetic_size, options.synthetic_classes,
                                                            options.synthetic_shape, options.seed,
                                                            options.train ? 0 : 1));
    case DatasetKind::npy:
      return std::make_unique<TensorDataset>(options.train ? load_npy(options.train_inputs, options.train_targets)
                                                           : load_npy(options.eval_inputs, options.eval_targets));
    case DatasetKind::imagefolder:
      return load_image_folder(options);
    case DatasetKind::tokens:
      return load_token_stream(options.train ? options.train_inputs : options.eval_inputs, options.block_size);
  }
  EXPCTL_ASSERT(false, "dataset kind {} has no loader", static_cast<int>(options.kind));
  return nullptr;
}

std::pair<at::Tensor, at::Tensor> gather_batch(const Dataset& dataset, const std::vector<std::int64_t>& indices,
                                               std::size_t begin, std::size_t count) {
  EXPCTL_ASSERT(begin + count <= indices.size(), "batch [{}, {}) past {} indices", begin, begin + count,
                indices.size());
  // index_select wants its index on the data's device (a CPU index into CUDA data is an error);
  // .to() is a no-op on the CPU and a copy of the indices, not a view of `indices`, on a GPU.
  const auto rows = at::from_blob(const_cast<std::int64_t*>(indices.data() + begin),
                                  {static_cast<std::int64_t>(count)}, at::kLong)
                        .to(dataset.device());
  return {dataset.inputs(rows), dataset.targets(rows)};
}

}  // namespace expctl::train
