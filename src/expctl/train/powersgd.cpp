#include "expctl/train/powersgd.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>

#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

// PyTorch's PowerSGDState(random_seed=0): a fixed constant, not the spec's seed, so Q never
// touches (or depends on) the training's random streams. std::mt19937_64's output is fixed by the
// standard: the same on every rank, compiler and rerun.
constexpr std::uint64_t k_q_seed_stream = 0;
constexpr std::uint64_t k_q_seed_modulus = 1'000'000'000;  // state.rng.randint(1_000_000_000)

std::int64_t numel_of(const std::vector<std::int64_t>& shape) {
  std::int64_t numel = 1;
  for (const auto size : shape) {
    numel *= size;
  }
  return numel;
}

}  // namespace

void orthogonalize_columns(at::Tensor& matrix, double epsilon) {
  if (!matrix.is_contiguous()) {
    // The norms and dot products reduce in an order that follows the strides: on a row-major
    // copy, a transposed view (a rank-major factor) gets the same bits as a row-major one.
    auto dense = matrix.contiguous();
    orthogonalize_columns(dense, epsilon);
    matrix.copy_(dense);
    return;
  }
  const auto columns = matrix.size(1);
  for (std::int64_t i = 0; i < columns; ++i) {
    auto column = matrix.narrow(1, i, 1);
    const auto norm = at::norm(column);
    if (epsilon != 0.0) {
      column.div_(norm + epsilon);
    } else if (norm.item<double>() == 0.0) {
      column.zero_();  // PyTorch's intent for a vanishing column (its try/except never fires)
    } else {
      column.div_(norm);
    }
    if (i + 1 < columns) {
      auto rest = matrix.narrow(1, i + 1, columns - i - 1);
      rest.sub_(at::sum(column * rest, /*dim=*/0) * column);
    }
  }
}

PowerSgd::PowerSgd(Communicator& comm, std::vector<std::vector<std::vector<std::int64_t>>> shapes,
                   PowerSgdOptions options)
    : m_comm(comm), m_options(options), m_seeds(k_q_seed_stream) {
  EXPCTL_CHECK(options.rank >= 1, TrainError,
               "powersgd rank must be at least 1, found {}: set distributed.powersgd_rank to 1 or more", options.rank);
  EXPCTL_CHECK(options.warmup_steps >= 0, TrainError,
               "powersgd warm-up must not be negative, found {}: set distributed.powersgd_warmup_steps to 0 or more",
               options.warmup_steps);
  for (const auto& bucket : shapes) {
    m_buckets.push_back(plan(bucket));
  }
}

// PyTorch's step I: a tensor is compressed when it has >= 2 dimensions and its factors are
// smaller than itself by more than min_compression_rate (_should_compress).
PowerSgd::Bucket PowerSgd::plan(const std::vector<std::vector<std::int64_t>>& shapes) const {
  Bucket bucket;
  for (const auto& shape : shapes) {
    const auto numel = numel_of(shape);
    const auto rows = shape.empty() ? 0 : shape.front();
    const auto cols = rows > 0 ? numel / rows : 0;
    const auto rank = std::min({rows, cols, m_options.rank});
    const bool worth = shape.size() >= 2 && numel > 0 &&
                       static_cast<double>((rows + cols) * rank) * m_options.min_compression_rate <
                           static_cast<double>(numel);
    if (worth) {
      bucket.matrices.push_back({bucket.elements, rows, cols, rank, rank <= m_options.rank_major_max});
    } else {
      bucket.whole.push_back({bucket.elements, numel});
    }
    bucket.elements += numel;
  }
  return bucket;
}

void PowerSgd::reset() {
  for (auto& bucket : m_buckets) {
    bucket.p = bucket.q = bucket.error = at::Tensor();
  }
}

const at::Tensor& PowerSgd::error(std::size_t b) const {
  return m_buckets.at(b).error;
}

std::size_t PowerSgd::compressed_count(std::size_t b) const {
  return m_buckets.at(b).matrices.size();
}

// The k-th compressed gradient as an n x m view of the bucket.
at::Tensor PowerSgd::matrix_of(const Bucket& bucket, std::size_t k) const {
  const auto& matrix = bucket.matrices[k];
  return bucket.flat.narrow(0, matrix.offset, matrix.rows * matrix.cols).view({matrix.rows, matrix.cols});
}

// The k-th matrix's P (left: n x r) or Q (m x r) inside the bucket's one flat P or Q tensor: a
// transposed view when it is stored rank-major, which the products (mm_out) and Gram-Schmidt take
// as it is (mm_out picks the BLAS call from the strides).
at::Tensor PowerSgd::factor(const at::Tensor& memory, const Bucket& bucket, std::size_t k, bool left) const {
  std::int64_t offset = 0;
  for (std::size_t j = 0; j < k; ++j) {
    offset += (left ? bucket.matrices[j].rows : bucket.matrices[j].cols) * bucket.matrices[j].rank;
  }
  const auto& matrix = bucket.matrices[k];
  const auto length = left ? matrix.rows : matrix.cols;
  const auto stored = memory.narrow(0, offset, length * matrix.rank);
  return matrix.rank_major ? stored.view({matrix.rank, length}).t() : stored.view({length, matrix.rank});
}

std::int64_t PowerSgd::launch(std::size_t b, const at::Tensor& flat) {
  at::NoGradGuard no_grad;
  auto& bucket = m_buckets.at(b);
  bucket.flat = flat;
  add_error(bucket);
  prepare_q(bucket);
  for (std::size_t k = 0; k < bucket.matrices.size(); ++k) {
    auto p = factor(bucket.p, bucket, k, true);
    at::mm_out(p, matrix_of(bucket, k), factor(bucket.q, bucket, k, false));
  }
  bucket.exact = gather_whole(bucket);
  return start(bucket.exact, bucket.exact_pending, b, "uncompressed part") +
         start(bucket.p, bucket.p_pending, b, "PowerSGD P");
}

// Error feedback: the gradient plus last step's error is what gets compressed; `error` holds that
// input until decompress subtracts the approximation from it.
void PowerSgd::add_error(Bucket& bucket) {
  std::int64_t total = 0;
  for (const auto& matrix : bucket.matrices) {
    total += matrix.rows * matrix.cols;
  }
  if (!bucket.error.defined()) {
    bucket.error = at::zeros({total}, bucket.flat.options());
  }
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < bucket.matrices.size(); ++k) {
    auto matrix = matrix_of(bucket, k);
    auto error = bucket.error.narrow(0, offset, matrix.numel()).view_as(matrix);
    matrix.add_(error);
    error.copy_(matrix);
    offset += matrix.numel();
  }
}

// Warm start: last step's Q, orthogonalised again; the first compressed step draws Q from a
// generator seeded by the seed stream (torch.manual_seed(state.rng.randint(...)) in a forked RNG:
// here a local generator, so the global one and the training's random stream stay untouched).
void PowerSgd::prepare_q(Bucket& bucket) {
  std::int64_t p_size = 0;
  std::int64_t q_size = 0;
  for (const auto& matrix : bucket.matrices) {
    p_size += matrix.rows * matrix.rank;
    q_size += matrix.cols * matrix.rank;
  }
  const bool fresh = !bucket.q.defined();
  c10::optional<at::Generator> generator;
  if (fresh) {
    bucket.p = at::empty({p_size}, bucket.flat.options());
    bucket.q = at::empty({q_size}, bucket.flat.options());
    generator = at::make_generator<at::CPUGeneratorImpl>(m_seeds() % k_q_seed_modulus);
  }
  for (std::size_t k = 0; k < bucket.matrices.size(); ++k) {
    auto q = factor(bucket.q, bucket, k, false);
    if (fresh) {
      q.copy_(at::randn(q.sizes(), generator, at::TensorOptions().dtype(q.scalar_type())));  // on the CPU, as PyTorch
    }
    orthogonalize_columns(q, m_options.epsilon);
  }
}

// The uncompressed gradients and the bucket's tail (vote slots), as one flat tensor.
at::Tensor PowerSgd::gather_whole(const Bucket& bucket) const {
  std::vector<at::Tensor> parts;
  for (const auto& segment : bucket.whole) {
    parts.push_back(bucket.flat.narrow(0, segment.offset, segment.length));
  }
  parts.push_back(bucket.flat.narrow(0, bucket.elements, bucket.flat.numel() - bucket.elements));
  return at::cat(parts);
}

void PowerSgd::scatter_whole(Bucket& bucket) {
  bucket.exact.div_(m_comm.world_size());  // PyTorch: SUM, then divide
  std::int64_t offset = 0;
  for (const auto& segment : bucket.whole) {
    bucket.flat.narrow(0, segment.offset, segment.length).copy_(bucket.exact.narrow(0, offset, segment.length));
    offset += segment.length;
  }
  const auto tail = bucket.flat.numel() - bucket.elements;
  bucket.flat.narrow(0, bucket.elements, tail).copy_(bucket.exact.narrow(0, offset, tail));
}

std::int64_t PowerSgd::exchange_q(std::size_t b) {
  at::NoGradGuard no_grad;
  auto& bucket = m_buckets.at(b);
  wait(bucket.exact_pending);
  scatter_whole(bucket);
  wait(bucket.p_pending);
  for (std::size_t k = 0; k < bucket.matrices.size(); ++k) {
    auto p = factor(bucket.p, bucket, k, true);
    orthogonalize_columns(p, m_options.epsilon);  // no division by the world size: it is normalised
    auto q = factor(bucket.q, bucket, k, false);
    at::mm_out(q, matrix_of(bucket, k).t(), p);
  }
  return start(bucket.q, bucket.q_pending, b, "PowerSGD Q");
}

void PowerSgd::decompress(std::size_t b) {
  at::NoGradGuard no_grad;
  auto& bucket = m_buckets.at(b);
  wait(bucket.q_pending);
  bucket.q.div_(m_comm.world_size());
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < bucket.matrices.size(); ++k) {
    auto matrix = matrix_of(bucket, k);
    at::mm_out(matrix, factor(bucket.p, bucket, k, true), factor(bucket.q, bucket, k, false).t());
    bucket.error.narrow(0, offset, matrix.numel()).view_as(matrix).sub_(matrix);
    offset += matrix.numel();
  }
  bucket.flat = bucket.exact = at::Tensor();
  // An Inf or NaN on any rank reaches every rank's Q (it is all-reduced), so every rank decides
  // alike to forget Q and its error: kept, they would poison every later step.
  if (!at::isfinite(bucket.q).all().item<bool>()) {
    bucket.p = bucket.q = bucket.error = at::Tensor();
  }
}

// An empty tensor is not sent (a bucket of biases has no P): every rank skips the same ones.
std::int64_t PowerSgd::start(at::Tensor& tensor, std::optional<PendingCollective>& pending, std::size_t b,
                             const char* what) {
  pending.reset();
  if (tensor.numel() == 0) {
    return 0;
  }
  pending = m_comm.allreduce_async(tensor, fmt::format("allreduce of bucket {} ({})", b, what));
  return static_cast<std::int64_t>(tensor.nbytes());
}

void PowerSgd::wait(std::optional<PendingCollective>& pending) {
  if (pending) {
    m_comm.wait(*pending);
  }
  pending.reset();
}

}  // namespace expctl::train
