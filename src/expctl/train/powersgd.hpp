#pragma once
/// PowerSGD gradient compression (Vogels et al., 2019) with the semantics of PyTorch's
/// `powerSGD_hook` (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py): for the first
/// `warmup_steps` synchronised steps the reducer all-reduces as usual; after that, per bucket,
///   1. each parameter's local error of the previous step is added to its gradient;
///   2. each gradient of >= 2 dimensions that compression makes smaller by more than
///      `min_compression_rate` is viewed as a matrix M (shape[0] x numel / shape[0]); the rest (1-D
///      biases, small matrices) and the bucket's tail (the reducer's vote slots) are all-reduced
///      whole in one flat tensor and averaged;
///   3. P = M Q (Q warm-started from the previous step, orthogonalised; at the first compressed
///      step drawn from a fixed-seed generator, identical on every rank and every rerun), all Ps of
///      the bucket all-reduced as one tensor, orthogonalised (Gram-Schmidt), Q = M^T P, all Qs
///      all-reduced as one tensor and divided by the world size, M <- P Q^T;
///   4. the local error becomes input - approximation.
///
/// Departures from PyTorch, both deliberate: the error of the tensors all-reduced whole is kept
/// at zero (PyTorch stores local - average for them, which averages to zero over the ranks, so it
/// changes the result only by rounding; at zero their average stays exact and the vote slots are
/// never perturbed); orthogonalisation is Gram-Schmidt for every rank (PyTorch switches to QR for
/// rank > 2 in float32: the same column space). A column of zeros stays zero (what PyTorch's
/// `except ZeroDivisionError` means to do; tensor division never raises, so there it becomes NaN).
/// The state (errors, Qs, step counter) lives in memory only: checkpoints do not hold it.

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "expctl/train/process_group.hpp"

namespace expctl::train {

/// Knobs of the compressor (DdpOptions carries the first two from the spec).
struct PowerSgdOptions {
  std::int64_t rank = k_default_powersgd_rank;  ///< PyTorch's matrix_approximation_rank
  std::int64_t warmup_steps = k_default_powersgd_warmup_steps;  ///< start_powerSGD_iter
  double min_compression_rate = 2.0;  ///< compress only when (n + m) * rank * this < n * m
  double epsilon = 0.0;               ///< added to each column norm (orthogonalization_epsilon)
  /// Matrices compressed at this rank or lower keep their P and Q rank-major (r x n, r x m) in
  /// the flat factor tensors; higher ranks keep them n x r, m x r. Layout only: the products are
  /// the same BLAS arithmetic, bit for bit (test_powersgd.cpp proves it), but the BLAS loops then
  /// run along the long dimension. The three products of the benchmark mlp's 256 x 784 gradient,
  /// reference BLAS: 2.5x faster at rank 2, 1.3x at 4, 5 % slower at 8, 1.5x slower at 16;
  /// OpenBLAS: 1.2x and 1.4x faster at 2 and 4, 6-8 % slower at 8 and 16. 0: every matrix n x r.
  std::int64_t rank_major_max = 4;
};

/// Orthogonalises the columns of `matrix` (n x r) in place by Gram-Schmidt, PyTorch's
/// `_orthogonalize_gram_schmidt`: with epsilon 0 a column is divided by its norm (a zero column
/// stays zero), otherwise by norm + epsilon. The result's bits do not depend on the strides.
void orthogonalize_columns(at::Tensor& matrix, double epsilon);

/// The compressor of one reducer: per-bucket errors, P and Q factors, and the count of
/// synchronised steps. The three phases of a bucket run in order on every rank (launch while
/// backward runs, exchange_q and decompress at its end), so all ranks issue the same collectives.
class PowerSgd {
 public:
  /// `shapes[b]` lists bucket b's parameter shapes in bucket order, from element 0; elements of
  /// a bucket after its last parameter travel uncompressed. Throws TrainError for rank < 1.
  PowerSgd(Communicator& comm, std::vector<std::vector<std::vector<std::int64_t>>> shapes,
           PowerSgdOptions options);

  /// Whether this synchronised step compresses (warm-up is over).
  bool compressing() const { return m_steps >= m_options.warmup_steps; }
  /// Phase 1, when bucket `b` (`flat`) is complete: error feedback, P = M Q, and the all-reduces of
  /// the uncompressed part and of P start. Returns the bytes sent.
  std::int64_t launch(std::size_t b, const at::Tensor& flat);
  /// Phase 2: waits for both, writes the uncompressed average back, orthogonalises P, computes
  /// Q = M^T P and starts its all-reduce. Returns the bytes sent.
  std::int64_t exchange_q(std::size_t b);
  /// Phase 3: waits for Q and writes P Q^T / world size into the bucket; keeps the error. A Q that
  /// is not finite (a rank's gradient held Inf or NaN) is forgotten with the error, on every rank.
  void decompress(std::size_t b);
  /// Counts one synchronised step; call after every one, warm-up steps included.
  void end_step() { ++m_steps; }
  /// Forgets every error and Q (a non-finite step would otherwise poison them for good); the
  /// next compressed step starts from zero error and freshly drawn Qs.
  void reset();

  /// Synchronised steps counted so far.
  std::int64_t steps() const { return m_steps; }
  /// Bucket b's local error: input - approximation of each compressed matrix, concatenated in
  /// bucket order (undefined before its first compressed step).
  const at::Tensor& error(std::size_t b) const;
  /// Number of parameters of bucket b that are compressed.
  std::size_t compressed_count(std::size_t b) const;

 private:
  struct Matrix {
    std::int64_t offset, rows, cols, rank;
    bool rank_major;  // P and Q stored r x n and r x m (see PowerSgdOptions::rank_major_max)
  };
  struct Segment {
    std::int64_t offset, length;
  };
  struct Bucket {
    std::vector<Matrix> matrices;
    std::vector<Segment> whole;  // all-reduced uncompressed
    std::int64_t elements = 0;   // parameter elements; the rest of `flat` travels whole
    at::Tensor flat, exact, p, q, error;
    std::optional<PendingCollective> exact_pending, p_pending, q_pending;  // empty: nothing sent
  };

  Bucket plan(const std::vector<std::vector<std::int64_t>>& shapes) const;
  at::Tensor matrix_of(const Bucket& bucket, std::size_t k) const;
  at::Tensor factor(const at::Tensor& memory, const Bucket& bucket, std::size_t k, bool left) const;
  void add_error(Bucket& bucket);
  void prepare_q(Bucket& bucket);
  at::Tensor gather_whole(const Bucket& bucket) const;
  void scatter_whole(Bucket& bucket);
  std::int64_t start(at::Tensor& tensor, std::optional<PendingCollective>& pending, std::size_t b, const char* what);
  void wait(std::optional<PendingCollective>& pending);

  Communicator& m_comm;
  PowerSgdOptions m_options;
  std::vector<Bucket> m_buckets;
  std::mt19937_64 m_seeds;  // PyTorch's state.rng: one seed per first compressed step of a bucket
  std::int64_t m_steps = 0;
};

}  // namespace expctl::train
