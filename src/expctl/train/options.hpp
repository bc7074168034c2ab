#pragma once
/// Every option of one rank's training, as plain values: what `run::train_options` maps the spec
/// onto (the only place where spec keys meet training) and what the trainer, datasets, models,
/// optimizers, the process group and DDP read. This header includes no LibTorch, so the run
/// module builds a rank's configuration without compiling torch.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "expctl/launch/rank_identity.hpp"
#include "expctl/train/image_transform.hpp"
#include "expctl/train/records.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/sandbox.hpp"

namespace expctl::train {

// ---------------------------------------------------------------------------------------------
// Data

/// The spec's `data.dataset` (names: catalog/catalog.cpp; a test ties the two).
enum class DatasetKind { fashion_mnist, mnist, cifar10, synthetic, npy, imagefolder, tokens };

/// Parses "fashion-mnist", "mnist", "cifar10", "synthetic", "npy", "imagefolder" or "tokens"; throws TrainError
/// otherwise.
DatasetKind parse_dataset_kind(const std::string& text);
/// The spec spelling of `kind`.
const char* dataset_name(DatasetKind kind);

/// Per-channel mean and standard deviation of pixels scaled to [0, 1].
struct Normalization {
  std::vector<float> mean;
  std::vector<float> std;
  bool operator==(const Normalization&) const = default;
};

/// The catalog row's (e.g. Fashion-MNIST 0.2860/0.3530); synthetic data is left as is (0/1).
Normalization default_normalization(DatasetKind kind);

/// The spec's `data.on_bad_image`: what an image that does not decode does to the run.
enum class BadImagePolicy {
  fail,  ///< the run fails, naming the file
  skip,  ///< the next good sample of the set takes its place; the file is reported
};
/// Parses "fail" or "skip"; throws TrainError otherwise.
BadImagePolicy parse_bad_image_policy(const std::string& text);

/// Where a dataset is looked for when the spec gives no root: its catalog row's (Debian's
/// dataset-fashion-mnist installs /usr/share/datasets/fashion-mnist).
std::filesystem::path default_dataset_root(DatasetKind kind);

/// What to load.
struct DatasetOptions {
  DatasetKind kind = DatasetKind::fashion_mnist;
  std::filesystem::path root;  ///< empty: default_dataset_root(kind)
  bool train = true;           ///< training split, else the test split
  bool normalize = true;
  // Synthetic data only:
  std::int64_t synthetic_size = 1024;
  std::int64_t synthetic_classes = 10;
  std::vector<std::int64_t> synthetic_shape = {1, 28, 28};
  std::uint64_t seed = 0;
  // npy only: the arrays of each split (train/npy_file.hpp).
  std::filesystem::path train_inputs;
  std::filesystem::path train_targets;
  std::filesystem::path eval_inputs;
  std::filesystem::path eval_targets;
  // tokens only: the token streams are train_inputs and eval_inputs; a sample is a window of
  // block_size + 1 tokens (train/datasets.hpp, load_token_stream).
  std::int64_t block_size = 0;
  // imagefolder only (train/image_folder_dataset.hpp): the folders of each split, what a sample
  // goes through (its normalisation included: `normalize` false leaves mean 0 and std 1), what a
  // bad file does, and the loader threads.
  std::filesystem::path train_dir;
  std::filesystem::path eval_dir;
  ImageTransform image;
  BadImagePolicy on_bad_image = BadImagePolicy::fail;
  int loader_threads = 0;            ///< 0: the rank's share of the cores, less one (at least 1)
  std::int64_t prefetch_batches = 4;
  std::int64_t batch_size = 64;      ///< how far ahead prefetch_batches reaches, in samples

  bool operator==(const DatasetOptions&) const = default;
};

// ---------------------------------------------------------------------------------------------
// Model

/// The spec's `model.arch` (names: catalog/catalog.cpp; a test ties the two).
enum class ModelKind { mlp, cnn, torchscript };

/// Parses "mlp", "cnn" or "torchscript"; throws TrainError otherwise.
ModelKind parse_model_kind(const std::string& text);
/// The spec spelling of `kind`.
const char* model_name(ModelKind kind);

/// The spec's `train.loss`: what a step minimises and what evaluation reports.
enum class LossKind {
  cross_entropy,  ///< logits against int64 class targets; eval: loss and accuracy
  mse,            ///< outputs against float targets of the same shape; eval: loss
  model,          ///< the module's forward(inputs, targets) returns the scalar loss; eval: loss
};
/// Parses "cross_entropy", "mse" or "model"; throws TrainError otherwise.
LossKind parse_loss_kind(const std::string& text);
/// The spec spelling of `kind`.
const char* loss_name(LossKind kind);

/// Architecture knobs (the spec's `model.*`); defaults fit Fashion-MNIST.
struct ModelOptions {
  ModelKind kind = ModelKind::mlp;
  /// One sample's shape: [C, H, W], or [features] for the mlp.
  std::vector<std::int64_t> input_shape = {1, 28, 28};
  std::int64_t num_classes = 10;
  /// mlp: widths of the hidden layers, each followed by ReLU (and dropout).
  std::vector<std::int64_t> hidden = {256, 128};
  /// cnn: output channels of each block "5x5 conv (same padding), ReLU, 2x2 max-pool (, dropout)";
  /// the default two blocks are the Fashion-MNIST benchmark's "2 Conv+pooling" shape.
  std::vector<std::int64_t> channels = {32, 64};
  /// cnn: width of a hidden dense layer before the linear head; 0: the head follows the blocks.
  std::int64_t dense = 0;
  /// Dropout probability after each hidden layer or block; 0: none.
  double dropout = 0.0;
  /// torchscript: the scripted module's file (absolute).
  std::filesystem::path file;

  bool operator==(const ModelOptions&) const = default;
};

// ---------------------------------------------------------------------------------------------
// Optimizer and schedule

/// The spec's `optim.name`.
enum class OptimizerKind { sgd, adamw };
/// Parses "sgd" or "adamw"; throws TrainError otherwise.
OptimizerKind parse_optimizer_kind(const std::string& text);

/// Optimizer hyper-parameters (unused ones are ignored by the other kind).
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::sgd;
  double lr = 0.01;
  double weight_decay = 0.0;
  double momentum = 0.0;  ///< sgd
  bool nesterov = false;  ///< sgd; needs momentum > 0
  double beta1 = 0.9;     ///< adamw
  double beta2 = 0.999;   ///< adamw
  double eps = 1e-8;      ///< adamw

  bool operator==(const OptimizerOptions&) const = default;
};

/// The spec's `optim.schedule`.
enum class ScheduleKind { constant, step, cosine };
/// Parses "constant", "step" or "cosine"; throws TrainError otherwise.
ScheduleKind parse_schedule_kind(const std::string& text);

/// A schedule over optimizer steps 0..total_steps-1.
struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::constant;
  std::int64_t warmup_steps = 0;  ///< lr rises linearly: base * (step + 1) / warmup_steps
  std::int64_t total_steps = 1;   ///< cosine decays to min_lr at this step
  std::int64_t step_size = 1;     ///< step: multiply by gamma every step_size steps after warm-up
  double gamma = 0.1;
  double min_lr = 0.0;            ///< cosine floor

  bool operator==(const ScheduleOptions&) const = default;
};

// ---------------------------------------------------------------------------------------------
// Process group and DDP

/// Which collective library to use; `auto_select` picks NCCL when it is compiled in and CUDA is
/// available, Gloo otherwise (the spec's `distributed.backend: auto`).
enum class BackendRequest { auto_select, gloo, nccl };

/// The collective library a Communicator actually runs on.
enum class Backend { gloo, nccl };

/// Name of a backend as written in specs and summaries ("gloo", "nccl").
const char* backend_name(Backend backend);

/// Parses "auto", "gloo" or "nccl"; throws TrainError naming the accepted values otherwise.
BackendRequest parse_backend_request(const std::string& text);

/// Resolves `auto_select`; throws TrainError when NCCL is requested but not available.
Backend resolve_backend(BackendRequest request);

/// How gradients and other CPU all-reduces travel (the spec's `distributed.allreduce`): `auto`
/// uses shared memory among the ranks of a host (hierarchical across hosts) when a host has two
/// ranks or more and the backend is Gloo, else the backend's own; `gloo` always Gloo's ring.
enum class AllreduceRequest { auto_select, gloo };
/// Parses "auto" or "gloo"; throws TrainError otherwise.
AllreduceRequest parse_allreduce_request(const std::string& text);

/// Where and how to rendezvous (torchrun's MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE contract).
struct ProcessGroupOptions {
  /// Who this rank is and where the ranks meet: rank, world size, MASTER_ADDR/PORT, whether the
  /// launcher hosts the TCPStore (every rank joins as a client; otherwise rank 0 hosts it), or a
  /// c10d FileStore path for ranks on one host (then nothing listens on the network).
  launch::RankIdentity placement{.master_addr = "127.0.0.1", .launcher = "none"};
  BackendRequest backend = BackendRequest::auto_select;
  AllreduceRequest allreduce = AllreduceRequest::auto_select;
  /// Applies to rendezvous and to every collective (the spec's `timeout_s`).
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  /// Overrides `timeout` for joining (the store and its key exchanges) when non-zero, e.g. a
  /// short collective timeout with ranks that start slowly.
  std::chrono::milliseconds rendezvous_timeout{0};
  /// Gloo worker threads per device (Python uses 2 per device).
  int gloo_threads = 2;
  /// Store key prefix, so several groups can share one store.
  std::string group_name = "expctl";
};

/// PyTorch's `kDefaultFirstBucketBytes`: a small first bucket so communication starts early in
/// backward instead of after 25 MiB of gradients.
inline constexpr std::int64_t k_default_first_bucket_bytes = 1024 * 1024;
/// PyTorch's default `bucket_cap_mb = 25` (MiB): large enough to amortise per-collective latency.
inline constexpr std::int64_t k_default_bucket_cap_bytes = 25 * 1024 * 1024;

/// How buckets travel: as they are, cast to float16 (the spec's `grad_compression: fp16`), or as
/// PowerSGD's low-rank factors (`powersgd`, train/powersgd.hpp).
enum class GradCompression { none, fp16, powersgd };

/// Parses "none", "fp16" or "powersgd"; throws TrainError otherwise.
GradCompression parse_grad_compression(const std::string& text);

/// PyTorch's PowerSGDState defaults for `matrix_approximation_rank`; warm-up is the spec's default.
inline constexpr std::int64_t k_default_powersgd_rank = 1;
inline constexpr std::int64_t k_default_powersgd_warmup_steps = 10;

/// Knobs of the reducer (the spec's `distributed.*`).
struct DdpOptions {
  std::int64_t first_bucket_bytes = k_default_first_bucket_bytes;
  std::int64_t bucket_cap_bytes = k_default_bucket_cap_bytes;
  GradCompression compression = GradCompression::none;
  /// powersgd: rank of each matrix's approximation (PyTorch's matrix_approximation_rank).
  std::int64_t powersgd_rank = k_default_powersgd_rank;
  /// powersgd: synchronised steps of plain all-reduce before compressing (start_powerSGD_iter).
  std::int64_t powersgd_warmup_steps = k_default_powersgd_warmup_steps;

  bool operator==(const DdpOptions&) const = default;
};

// ---------------------------------------------------------------------------------------------
// The trainer

/// Autocast dtype (the spec's `train.amp.dtype`).
enum class AmpDtype { bf16, fp16 };

/// How the TorchScript interpreter runs a scripted model. expctl sets both switches itself before
/// it loads a module, instead of inheriting LibTorch's defaults (which differ between versions and
/// which `torch._C` calls or environment variables of other tools change), and records them in the
/// run's fingerprint (`jit.*`), because both change what a step computes and how fast.
struct JitPolicy {
  /// The profiling executor (LibTorch's default since 1.7): the first forwards of each input shape
  /// profile and specialise the graph, so they are slow (the benchmarks skip 10 warm-up steps).
  bool profiling_executor = true;
  /// Tensor-expression (NNC) fusion of elementwise chains; it fuses on a GPU only (expctl never
  /// turns on fusion on the CPU). Off under AMP: autocast's casts inside a fusion group are what
  /// the fusers get wrong (bring-your-own-model.md), and it changes the numerics of fp16 steps.
  bool tensorexpr_fuser = true;

  bool operator==(const JitPolicy&) const = default;
};

/// The JIT policy of a run: none for built-in models (they never run the TorchScript interpreter).
std::optional<JitPolicy> jit_policy(ModelKind model, bool amp);

/// What a step whose loss is not finite (NaN or Inf on any rank) does (the spec's
/// `train.nonfinite`): `fail` ends the run as `diverged`; `skip` skips the optimizer step on every
/// rank (GradScaler's semantics) and goes on, up to k_max_consecutive_skips steps in a row.
enum class NonFinitePolicy { fail, skip };
/// Parses "fail" or "skip"; throws TrainError otherwise.
NonFinitePolicy parse_nonfinite_policy(const std::string& text);
/// With `skip`: this many non-finite steps in a row end the run as `diverged` all the same.
inline constexpr std::int64_t k_max_consecutive_skips = 100;

/// The loss stopped being finite (train.nonfinite=fail, or too many skipped steps in a row).
/// Every rank throws it after the same step: the non-finite votes travel with the gradients.
class DivergedError : public util::TrainError {
 public:
  DivergedError(std::int64_t step, std::string message) : util::TrainError(std::move(message)), m_step(step) {}
  std::int64_t step() const { return m_step; }

 private:
  std::int64_t m_step;
};

/// Everything one rank needs to train.
struct TrainerConfig {
  ProcessGroupOptions group;
  std::uint64_t seed = 0;
  bool strict_determinism = true;
  DatasetOptions data;  ///< `train` is ignored: both splits are loaded
  std::int64_t batch_size = 64;  ///< per rank, per micro-batch
  bool shuffle = true;
  bool drop_last = false;
  ModelOptions model;
  LossKind loss = LossKind::cross_entropy;
  OptimizerOptions optim;
  ScheduleOptions schedule;  ///< total_steps is filled in from epochs / max_steps
  std::int64_t epochs = 1;     ///< used when max_steps is 0
  std::int64_t max_steps = 0;
  std::int64_t grad_accum_steps = 1;
  bool amp = false;
  AmpDtype amp_dtype = AmpDtype::bf16;
  double grad_clip_norm = 0.0;  ///< 0: off
  NonFinitePolicy nonfinite = NonFinitePolicy::fail;
  std::int64_t eval_every = 0;  ///< 0: only at the end
  std::int64_t eval_batch_size = 1000;
  std::int64_t checkpoint_every = 0;  ///< 0: only at the end (and on interrupt)
  double checkpoint_every_s = 0;      ///< also once this many seconds passed since the last one; 0: off
  DdpOptions ddp;
  /// Folder for this rank's checkpoints (train/checkpoint_files.hpp); empty: no checkpoints.
  std::filesystem::path checkpoint_dir;
  /// The run these checkpoints belong to: written into each index, and a resume refuses a
  /// checkpoint another run wrote. Empty: not recorded or checked.
  std::string run_id;
  /// Where rank 0 writes the trained model when its kind has a file format PyTorch reads
  /// (torchscript: model.pt); empty: nowhere.
  std::filesystem::path artifact_dir;
  /// Continue from the newest checkpoint step that every rank holds intact (the ranks agree on
  /// it collectively); no checkpoint on any rank: start fresh.
  bool resume = false;
  /// Ranks at or above this one report their steps through rank 0: after the last step every
  /// rank's StepMetrics of this invocation are gathered to rank 0 (one collective) and handed to
  /// its sink's on_remote_steps. For ranks whose own records reach no store (other nodes, ranks
  /// under an external launcher). 0: nobody does (every rank's records are stored already).
  int report_steps_from_rank = 0;
  /// Progress lines every this many steps (rank 0; the spec's `metrics.log_every`).
  std::int64_t log_every = 10;
  /// Every this many steps, all ranks meet in Gloo's monitoredBarrier, which names the ranks that
  /// do not arrive in time (the spec's `distributed.monitored_barrier_every`, a debug switch for
  /// desynchronised ranks); 0: never.
  std::int64_t monitored_barrier_every = 0;
  /// Absolute path -> SHA-256 of the files whose content the spec hash covers (model.file, the
  /// npy arrays, a packaged dataset's files): a rank refuses a file that changed since the run was
  /// recorded. Empty: nothing checked (runs recorded before the digests existed).
  std::map<std::string, std::string> input_digests;
  /// Where the training thread is, for the rank's heartbeats (records.hpp); null: not reported.
  /// Not owned; outlives the training.
  Beacon* beacon = nullptr;
  /// The sandbox the model runs in (util/sandbox.hpp): applied in the thread that loads the model,
  /// just before it does, after the process group and the data are set up. The folders here are
  /// added to checkpoint_dir and artifact_dir; a private temporary folder belongs here too.
  util::sandbox::Writable sandbox_writable;
  util::sandbox::Mode sandbox = util::sandbox::Mode::off;
};

}  // namespace expctl::train
