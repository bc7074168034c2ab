#include "expctl/spec/field_table.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "expctl/catalog/catalog.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::spec {

namespace {

using T = FieldType;
using H = Hashing;

constexpr double k_inf = std::numeric_limits<double>::infinity();
// Counts of steps, samples and epochs: large enough for any real run, small enough that
// products such as steps * batch size cannot overflow 64 bits.
constexpr double k_max_count = 1e9;

constexpr Range any() {
  return {};
}
constexpr Range at_least(double min) {
  return {min, k_inf, false, false};
}
constexpr Range above(double min, double max = k_inf) {
  return {min, max, true, false};
}
constexpr Range between(double min, double max) {
  return {min, max, false, false};
}
constexpr Range unit_interval_open_top() {
  return {0, 1, false, true};
}

constexpr ListSize items(size_t min, size_t max) {
  return {min, max};
}
constexpr ListSize no_items() {
  return {0, 0};
}

// The choice lists that come from the catalog (catalog/catalog.hpp), built once; the table below is
// built on first use, after them (never during another file's static initialisation).
const std::string& dataset_choices() {
  static const std::string choices = catalog::choice_list(catalog::datasets());
  return choices;
}
const std::string& model_choices() {
  static const std::string choices = catalog::choice_list(catalog::models());
  return choices;
}
const std::string& loss_choices() {
  static const std::string choices = catalog::choice_list(catalog::losses());
  return choices;
}

// The table. Columns: path, type, default (YAML), choices, range, list size, hashing, doc,
// derived-default doc. Documentation order; sections stay together.
std::span<const Field> table() {
  // One row per field, laid out by hand (a field's lines together): clang-format would reflow the
  // whole table on any change to a row, so it leaves the table alone (scripts/format_check.sh).
  // clang-format off
  static const Field k_fields[] = {
    {"name", T::string, "\"\"", "", any(), no_items(), H::excluded, "Display name of the experiment.",
     "the spec file's name without extension"},
    {"description", T::string, "\"\"", "", any(), no_items(), H::excluded, "Free text: what the experiment is for.",
     ""},
    {"tags", T::string_list, "[]", "", any(), items(0, 32), H::excluded, "Labels for selecting runs later.", ""},
    {"env", T::string, "\"\"", "", any(), no_items(), H::profile_content,
     "Pinned-stack profile (TOML, e.g. `envs/debian12-cpu.toml`); a relative path is looked up in the spec's "
     "directory, then in each parent directory. Empty: no pinned stack. Its parsed content, not its path, is hashed.",
     ""},
    {"container.image", T::image, "\"\"", "", any(), no_items(), H::hashed,
     "Container image pinned by digest, `name@sha256:<64 hex>`; empty: none.", ""},
    {"seed", T::integer, "0", "", between(0, 4294967295.0), no_items(), H::hashed,
     "Seed of every random number generator (weights, data order, dropout).", ""},
    {"determinism", T::choice, "strict", "strict|relaxed", any(), no_items(), H::hashed,
     "`strict`: deterministic kernels and a fixed reduction order, so a rerun is bitwise identical; `relaxed`: "
     "allow faster non-deterministic kernels.",
     ""},

    {"distributed.nnodes", T::integer, "1", "", between(1, 1024), no_items(), H::hashed, "Number of hosts.", ""},
    {"distributed.nproc_per_node", T::integer, "1", "", between(1, 1024), no_items(), H::hashed,
     "Ranks (processes) per host; world size = nnodes * nproc_per_node.", ""},
    {"distributed.backend", T::choice, "auto", "auto|gloo|nccl", any(), no_items(), H::hashed,
     "Collective backend; `auto`: nccl when CUDA GPUs are present, else gloo (CPU only).", ""},
    {"distributed.bucket_cap_mb", T::floating, "25", "", above(0, 1024), no_items(), H::hashed,
     "Gradient bucket size in MiB for the all-reduce (changes the summation order).", ""},
    {"distributed.grad_compression", T::choice, "none", "none|fp16|powersgd", any(), no_items(), H::hashed,
     "Compress gradients before the all-reduce (`fp16`: cast to half and back; `powersgd`: PyTorch's powerSGD_hook, "
     "low-rank factors of each matrix with error feedback, after `powersgd_warmup_steps` of plain all-reduce).",
     ""},
    {"distributed.powersgd_rank", T::integer, "1", "", between(1, 1024), no_items(), H::hashed_unless_default,
     "powersgd: rank of each gradient matrix's approximation (PyTorch's matrix_approximation_rank); higher is more "
     "exact and sends more. Hashed when not the default, so it left earlier hashes alone.",
     ""},
    {"distributed.powersgd_warmup_steps", T::integer, "10", "", between(0, k_max_count), no_items(),
     H::hashed_unless_default,
     "powersgd: optimizer steps of plain all-reduce before compression and error feedback start (PyTorch's "
     "start_powerSGD_iter). Hashed when not the default, so it left earlier hashes alone.",
     ""},
    {"distributed.allreduce", T::choice, "auto", "auto|gloo", any(), no_items(), H::hashed_unless_default,
     "How CPU ranks all-reduce: `auto`: through shared memory among the ranks of a host (hierarchical across "
     "hosts: shared memory, then Gloo between one rank per host), Gloo where a host has one rank; `gloo`: Gloo's "
     "ring. A world of one runs no collective at all (`none`). The run records which one ran (`summary.allreduce`): "
     "it fixes the summation order.",
     ""},
    {"distributed.timeout_s", T::integer, "1800", "", between(1, 604800), no_items(), H::excluded,
     "Seconds a collective or the rendezvous may wait before the run fails.", ""},
    {"distributed.monitored_barrier_every", T::integer, "0", "", between(0, k_max_count), no_items(), H::excluded,
     "Debug switch: every this many steps all ranks meet in Gloo's monitoredBarrier, which fails naming each rank that does not arrive within timeout_s (finds desynchronised ranks early; costs one barrier each time); 0: off. Gloo only.",
     ""},
    {"distributed.master_port", T::integer, "0", "", between(0, 65535), no_items(), H::excluded,
     "TCP port of the rendezvous store on the first host; 0: pick a free one.", ""},
    {"distributed.max_restarts", T::integer, "0", "", between(0, 100), no_items(), H::excluded,
     "When a rank dies (killed, crashed, exited non-zero, stopped answering), stop this node's ranks and restart "
     "them all from the newest checkpoint every rank holds, under the same run id, up to this many times "
     "(torchrun's --max_restarts); each restart is an invocation of the run with its cause. Not after a "
     "divergence, an interrupt or a store failure. One node only: with several, Slurm's requeue restarts the job "
     "(docs/slurm.md). Not hashed: a restart continues bit for bit, so it cannot change results.",
     ""},

    {"data.dataset", T::choice, "fashion-mnist", dataset_choices(), any(), no_items(), H::hashed,
     "Training and evaluation data: `fashion-mnist`, `mnist`, `cifar10` (packaged files under `root`), `synthetic` "
     "(generated), `npy` (your own NumPy arrays, docs/models.md), `imagefolder` (folders of JPEG and PNG "
     "files, docs/data.md) or `tokens` (a token stream per split in windows of `block_size`, docs/models.md).",
     ""},
    {"data.root", T::string, "\"\"", "", any(), no_items(), H::excluded,
     "Directory holding a packaged dataset's files; a location, so not hashed: the files' content is (each file's "
     "SHA-256 joins the spec hash; a missing file joins as absent).",
     "`/usr/share/datasets/<dataset>` (empty for synthetic)"},
    {"data.train_inputs", T::string, "\"\"", "", any(), no_items(), H::file_content,
     "npy: the training inputs, a C-ordered `.npy` array of float32, float16 or uint8 (uint8 is scaled to [0, 1]), "
     "or int64, int32 or uint16 ids (token ids: int64 to the model, never scaled), whose first dimension is the "
     "sample. tokens: the training token stream, a 1-d `.npy` of int64, int32 or uint16 ids or a raw uint16 "
     "`.bin`. A path relative to the spec's folder; its content is hashed, not its path.",
     ""},
    {"data.train_targets", T::string, "\"\"", "", any(), no_items(), H::file_content,
     "npy: the training targets, one per sample: int64, int32 or uint16 class indices (`train.loss: "
     "cross_entropy`; `[N, T]` for a sequence's tokens) or float32 values (`mse`). Content hashed.",
     ""},
    {"data.eval_inputs", T::string, "\"\"", "", any(), no_items(), H::file_content,
     "npy: the evaluation inputs, shaped like the training inputs. tokens: the evaluation token stream. Content "
     "hashed.",
     ""},
    {"data.eval_targets", T::string, "\"\"", "", any(), no_items(), H::file_content,
     "npy: the evaluation targets. Content hashed.", ""},
    {"data.train_dir", T::string, "\"\"", "", any(), no_items(), H::folder_content,
     "imagefolder: the training images, one sub-folder per class (classes sorted by name, as torchvision's "
     "ImageFolder), JPEG and PNG files. A path relative to the spec's folder; the digest of its class names, "
     "file names, sizes and contents is hashed, not its path.",
     ""},
    {"data.eval_dir", T::string, "\"\"", "", any(), no_items(), H::folder_content,
     "imagefolder: the evaluation images, laid out as train_dir with the same classes. Content hashed.", ""},
    {"data.image_size", T::integer_list, "[32, 32]", "", between(1, 4096), items(2, 2), H::hashed_unless_default,
     "imagefolder: `[height, width]` of the model's inputs: each image is resized (bilinear, aspect kept) until "
     "it covers that size, then centre-cropped to it (torchvision's Resize + CenterCrop).",
     ""},
    {"data.mean", T::float_list, "[]", "", between(-1e6, 1e6), items(0, 3), H::hashed_unless_default,
     "imagefolder: per-channel (R, G, B) mean subtracted from pixels scaled to [0, 1]; empty: ImageNet's "
     "(0.485, 0.456, 0.406).",
     ""},
    {"data.std", T::float_list, "[]", "", above(0, 1e6), items(0, 3), H::hashed_unless_default,
     "imagefolder: per-channel standard deviation the centred pixels are divided by; empty: ImageNet's "
     "(0.229, 0.224, 0.225).",
     ""},
    {"data.augment.random_resized_crop", T::boolean, "false", "", any(), no_items(), H::hashed_unless_default,
     "imagefolder, training only: a random region (8-100 % of the area, aspect 3/4-4/3) resized to image_size "
     "(torchvision's RandomResizedCrop) instead of the centre crop. Every random choice is a function of "
     "(seed, epoch, sample): reruns are bitwise equal with any number of loader threads.",
     ""},
    {"data.augment.random_crop_padding", T::integer, "0", "", between(0, 1024), no_items(), H::hashed_unless_default,
     "imagefolder, training only: pad this many zero pixels on each side and crop image_size at a random "
     "offset (torchvision's RandomCrop(size, padding)); 0: off.",
     ""},
    {"data.augment.hflip", T::boolean, "false", "", any(), no_items(), H::hashed_unless_default,
     "imagefolder, training only: mirror each sample with probability 0.5 (RandomHorizontalFlip).", ""},
    {"data.on_bad_image", T::choice, "fail", "fail|skip", any(), no_items(), H::hashed_unless_default,
     "imagefolder: a file that does not decode (corrupt, truncated, not an image): `fail` stops the run naming "
     "it; `skip` trains on the next good sample of the set in its place and lists the file in the run folder's "
     "skipped-images.txt (their count is the summary's `skipped_images`).",
     ""},
    {"data.loader_threads", T::integer, "0", "", between(0, 256), no_items(), H::excluded,
     "imagefolder: threads per rank that decode and augment ahead of training; 0: the rank's share of the "
     "machine's cores, less one for training (at least 1). Results do not depend on it.",
     ""},
    {"data.prefetch_batches", T::integer, "4", "", between(1, 1024), no_items(), H::excluded,
     "imagefolder: batches the loader threads may decode ahead of the one training uses.", ""},
    {"data.batch_size", T::integer, "64", "", between(1, 65536), no_items(), H::hashed,
     "Samples per rank per micro-batch; the global batch is batch_size * world size * grad_accum_steps.", ""},
    {"data.shuffle", T::boolean, "true", "", any(), no_items(), H::hashed,
     "Reshuffle the training set every epoch (seeded by `seed` and the epoch).", ""},
    {"data.drop_last", T::boolean, "false", "", any(), no_items(), H::hashed,
     "Drop the last incomplete batch of an epoch instead of padding the shard.", ""},
    {"data.normalize", T::boolean, "true", "", any(), no_items(), H::hashed,
     "Standardise inputs with the dataset's mean and standard deviation.", ""},
    {"data.block_size", T::integer, "0", "", between(0, 1e7), no_items(), H::hashed_unless_default,
     "tokens only: the tokens of one window (the model's context length); the stream is cut into windows of "
     "block_size + 1 tokens, inputs the first block_size, targets the last (docs/models.md).",
     ""},
    {"data.num_samples", T::integer, "1024", "", between(1, 1e7), no_items(), H::hashed,
     "Synthetic dataset only: number of training samples.", ""},
    {"data.num_classes", T::integer, "10", "", between(2, 10000), no_items(), H::hashed,
     "Synthetic dataset only: number of classes.", ""},
    {"data.input_shape", T::integer_list, "[1, 28, 28]", "", between(1, 4096), items(1, 3), H::hashed,
     "Synthetic dataset only: shape of one sample, `[features]` or `[channels, height, width]`.", ""},

    {"model.arch", T::choice, "mlp", model_choices(), any(), no_items(), H::hashed,
     "Model family: `mlp` (fully connected, ReLU), `cnn` (convolution blocks and a linear head) or `torchscript` "
     "(your own `torch.jit.script` module in `model.file`).",
     ""},
    {"model.file", T::string, "\"\"", "", any(), no_items(), H::file_content,
     "torchscript: the scripted module, `torch.jit.script(model).save(\"model.pt\")` (docs/models.md). A path "
     "relative to the spec's folder; the SHA-256 of its bytes is hashed, not its path.",
     ""},
    {"model.hidden_sizes", T::integer_list, "[256, 128]", "", between(1, 65536), items(1, 16), H::hashed,
     "mlp: width of each hidden layer.", ""},
    {"model.channels", T::integer_list, "[32, 64]", "", between(1, 4096), items(1, 8), H::hashed,
     "cnn: output channels of each block (5x5 convolution with same padding, ReLU, 2x2 max-pool).", ""},
    {"model.dense", T::integer, "0", "", between(0, 65536), no_items(), H::hashed,
     "cnn: width of a hidden dense layer between the blocks and the linear head; 0: none.", ""},
    {"model.dropout", T::floating, "0", "", unit_interval_open_top(), no_items(), H::hashed,
     "Dropout probability after each hidden layer or block.", ""},

    {"optim.name", T::choice, "sgd", "sgd|adamw", any(), no_items(), H::hashed, "Optimizer.", ""},
    {"optim.lr", T::floating, "0.01", "", above(0, 10), no_items(), H::hashed, "Peak learning rate.", ""},
    {"optim.momentum", T::floating, "0.9", "", unit_interval_open_top(), no_items(), H::hashed,
     "sgd: momentum factor (0: plain SGD).", ""},
    {"optim.nesterov", T::boolean, "false", "", any(), no_items(), H::hashed,
     "sgd: Nesterov momentum (needs momentum > 0).", ""},
    {"optim.weight_decay", T::floating, "0", "", between(0, 1), no_items(), H::hashed,
     "Weight decay (L2 for sgd, decoupled for adamw).", ""},
    {"optim.betas", T::float_list, "[0.9, 0.999]", "", unit_interval_open_top(), items(2, 2), H::hashed,
     "adamw: coefficients of the running averages of the gradient and its square.", ""},
    {"optim.eps", T::floating, "1e-8", "", above(0, 1), no_items(), H::hashed,
     "adamw: term added to the denominator for numerical stability.", ""},

    {"schedule.name", T::choice, "constant", "constant|step|cosine", any(), no_items(), H::hashed,
     "Learning-rate schedule after warm-up.", ""},
    {"schedule.warmup_steps", T::integer, "0", "", between(0, k_max_count), no_items(), H::hashed,
     "Optimizer steps of linear warm-up from 0 to `optim.lr`.", ""},
    {"schedule.step_size", T::integer, "1000", "", between(1, k_max_count), no_items(), H::hashed,
     "step: multiply the learning rate by `gamma` every this many optimizer steps.", ""},
    {"schedule.gamma", T::floating, "0.1", "", above(0, 1), no_items(), H::hashed, "step: decay factor.", ""},
    {"schedule.min_lr", T::floating, "0", "", at_least(0), no_items(), H::hashed,
     "cosine: learning rate at the end of training (at most `optim.lr`).", ""},

    {"train.epochs", T::integer, "0", "", between(0, 100000), no_items(), H::hashed,
     "Passes over the training set; set this or `max_steps`, not both.", "1 when `max_steps` is 0, else 0"},
    {"train.max_steps", T::integer, "0", "", between(0, k_max_count), no_items(), H::hashed,
     "Optimizer steps to train for; 0: use `epochs`.", ""},
    {"train.loss", T::choice, "cross_entropy", loss_choices(), any(), no_items(), H::hashed_unless_default,
     "`cross_entropy` (classification, accuracy reported), `mse` (regression against float targets) or `model` (a "
     "torchscript module whose `forward(inputs, targets)` returns the loss).",
     ""},
    {"train.grad_accum_steps", T::integer, "1", "", between(1, 1024), no_items(), H::hashed,
     "Micro-batches accumulated per optimizer step.", ""},
    {"train.amp.enabled", T::boolean, "false", "", any(), no_items(), H::hashed,
     "Automatic mixed precision (autocast; a GradScaler for fp16).", ""},
    {"train.amp.dtype", T::choice, "bf16", "bf16|fp16", any(), no_items(), H::hashed,
     "Autocast dtype; `fp16` needs CUDA (backend nccl or auto).", ""},
    {"train.grad_clip_norm", T::floating, "0", "", at_least(0), no_items(), H::hashed,
     "Clip the global gradient L2 norm to this value; 0: off.", ""},
    {"train.nonfinite", T::choice, "fail", "fail|skip", any(), no_items(), H::excluded,
     "A step whose loss is NaN or Inf on any rank: `fail` ends the run as `diverged` (exit 1, every step before it "
     "stored); `skip` skips that optimizer step on every rank, as AMP's GradScaler does, and ends the run as "
     "`diverged` after 100 such steps in a row. Not hashed: it changes nothing while the loss stays finite, and "
     "every skipped step is recorded (`skipped`, summary.skipped_steps).",
     ""},
    {"train.eval_every", T::integer, "0", "", between(0, k_max_count), no_items(), H::hashed,
     "Evaluate every this many optimizer steps; 0: only at the end. Hashed: it decides the eval series that "
     "`compare` reads.",
     ""},
    {"train.checkpoint_every", T::integer, "0", "", between(0, k_max_count), no_items(), H::excluded,
     "Write a checkpoint every this many optimizer steps; 0: only at the end.", ""},
    {"train.checkpoint_every_s", T::floating, "600", "", between(0, k_max_count), no_items(), H::excluded,
     "Also write a checkpoint once this many seconds of training have passed since the last one, so a killed run "
     "loses at most that much (`expctl resume` continues from it); 0: off.", ""},

    {"program.command", T::string_list, "[]", "", any(), items(0, 256), H::hashed_unless_default,
     "Run this program on every rank instead of the built-in trainer: its argv (argv[0] is looked up in PATH, "
     "relative paths from `program.workdir`), launched with torchrun's environment (docs/program.md). "
     "`{params.NAME}`, `{seed}` and `{run_id}` are replaced; `{{` and `}}` are literal braces. Empty: the built-in "
     "trainer, configured by `model`, `data`, `optim`, `schedule` and `train`, which a program spec may not set "
     "(nor the trainer's fields of `distributed` and `metrics`) and does not hold.",
     ""},
    {"program.params", T::param_map, "{}", "", any(), no_items(), H::hashed_unless_default,
     "The program's parameters, declared here: any names with scalar or list values (`lr: 0.1`), hashed; `--set "
     "program.params.lr=0.2`, sweep axes and a suite's `set:` give a declared one another value, never add one. "
     "The program reads them through the placeholders, "
     "`expctl.params()` or the JSON file named by `EXPCTL_PARAMS_FILE`.",
     ""},
    {"program.files", T::string_list, "[]", "", any(), items(0, 256), H::files_content,
     "Paths or globs, relative to the spec's directory, of the files whose content makes the program what it is "
     "(scripts, modules, configs): their bytes are hashed, so editing the script changes the spec hash.",
     "the script the command names (its first relative argument that is a file)"},
    {"program.inputs", T::string_list, "[]", "", any(), items(0, 256), H::files_content,
     "Data files or folders the program reads, relative to the spec's directory: their content is hashed (a "
     "folder by every file under it, with the digests data specs keep), so a changed data file changes the spec "
     "hash.",
     ""},
    {"program.workdir", T::string, "\"\"", "", any(), no_items(), H::excluded,
     "Directory the ranks start in; relative to the spec's directory. A location, so not hashed.",
     "the spec's directory"},
    {"program.env", T::string_map, "{}", "", any(), no_items(), H::hashed_unless_default,
     "Extra environment variables for every rank (`NAME: value`), hashed. expctl's own and torchrun's variables "
     "cannot be overridden here.",
     ""},
    {"program.sandbox", T::boolean, "false", "", any(), no_items(), H::excluded,
     "Run the ranks in expctl's sandbox (Landlock, docs/program.md#the-sandbox): they may write only the run's "
     "folder (their checkpoints and $TMPDIR are in it), /dev/shm and `program.writable`; reads and the network stay "
     "open. Off by default. Not hashed: it changes where the program may write, not what it computes.",
     ""},
    {"program.writable", T::string_list, "[]", "", any(), items(0, 64), H::excluded,
     "With `program.sandbox`, further folders (or files) the ranks may write, relative to the spec's directory "
     "(a folder is created when missing). Locations, so not hashed.",
     ""},

    {"metrics.log_every", T::integer, "10", "", between(1, k_max_count), no_items(), H::excluded,
     "Print a progress line every this many optimizer steps when the console is not a terminal (every step is recorded in the store).", ""},
    {"metrics.tensorboard", T::string, "\"\"", "", any(), no_items(), H::excluded,
     "Also write the run's metrics as TensorBoard event files, live, under this directory: <dir>/<run id>/rank<R>/ per rank and <dir>/<run id>/job/ for the job-wide series (`expctl run --tensorboard DIR` sets it); a location, so not hashed. A relative path is taken from the directory `expctl run` starts in.",
     "none"},

    // Metric names, defaults and the threshold grammar follow compare's metric table
    // (compare/thresholds.hpp), which interprets them.
    {"regression.samples_per_sec", T::threshold, "-5%", "", any(), no_items(), H::excluded,
     "`compare`: a drop of training throughput beyond this is a regression.", ""},
    {"regression.step_time_ms_p50", T::threshold, "+5%", "", any(), no_items(), H::excluded,
     "`compare`: a rise of the median optimizer-step time beyond this is a regression.", ""},
    {"regression.step_time_ms_p95", T::threshold, "+5%", "", any(), no_items(), H::excluded,
     "`compare`: a rise of the 95th-percentile step time (stragglers, stalls) beyond this is a regression.", ""},
    {"regression.comm_wait_fraction", T::threshold, "+5pp", "", any(), no_items(), H::excluded,
     "`compare`: a rise of the share of step time spent waiting for the all-reduce (0..1) beyond this is a "
     "regression.",
     ""},
    {"regression.final_train_loss", T::threshold, "+2%", "", any(), no_items(), H::excluded,
     "`compare`: a rise of the final training loss beyond this is a regression.", ""},
    {"regression.eval_loss", T::threshold, "+2%", "", any(), no_items(), H::excluded,
     "`compare`: a rise of the final evaluation loss beyond this is a regression.", ""},
    {"regression.eval_accuracy", T::threshold, "-0.5pp", "", any(), no_items(), H::excluded,
     "`compare`: a drop of the evaluation accuracy (a fraction, 0..1) beyond this is a regression; `pp` are "
     "percentage points.",
     ""},
  };
  // clang-format on
  return k_fields;
}

// Names people bring from other frameworks (PyTorch, Lightning, Hydra configs), mapped to ours so
// that "did you mean" can point from e.g. "learning_rate" to "lr".
struct Synonym {
  std::string_view section;
  std::string_view name;
  std::string_view field;
};

const Synonym k_synonyms[] = {
    {"optim", "learning_rate", "lr"},
    {"optim", "optimizer", "name"},
    {"", "optimizer", "optim"},
    {"", "scheduler", "schedule"},
    {"schedule", "warmup", "warmup_steps"},
    {"train", "steps", "max_steps"},
    {"train", "accumulate_grad_batches", "grad_accum_steps"},
    {"train", "num_epochs", "epochs"},
    {"train", "clip_grad_norm", "grad_clip_norm"},
    {"data", "batch", "batch_size"},
    {"data", "path", "root"},
    {"data", "data_dir", "root"},
    {"distributed", "world_size", "nproc_per_node"},
    {"distributed", "num_nodes", "nnodes"},
};

std::string format_bound(double value) {
  return value == k_inf ? "inf" : fmt::format("{}", value);
}

std::string range_text(const Range& range) {
  const bool has_min = range.min != -k_inf;
  const bool has_max = range.max != k_inf;
  if (has_min && has_max) {
    return fmt::format("{} {} x {} {}", format_bound(range.min),
                       range.min_open ? "<" : "<=", range.max_open ? "<" : "<=", format_bound(range.max));
  }
  if (has_min) {
    return fmt::format("{} {}", range.min_open ? ">" : ">=", format_bound(range.min));
  }
  if (has_max) {
    return fmt::format("{} {}", range.max_open ? "<" : "<=", format_bound(range.max));
  }
  return "";
}

std::string allowed_text(const Field& field) {
  switch (field.type) {
    case T::choice: {
      std::string text;
      for (const std::string& choice : choices_of(field)) {
        text += (text.empty() ? "`" : ", `") + choice + "`";
      }
      return text;
    }
    case T::image:
      return "`name@sha256:<64 hex>` or empty";
    case T::threshold:
      return "`\"-5%\"` (relative), `\"-0.5pp\"` (points) or a number (absolute)";
    case T::param_map:
      return "names to scalars or lists";
    case T::string_map:
      return "names to strings";
    case T::param_value:
      return "a scalar or a list";
    case T::string_list:
    case T::integer_list:
    case T::float_list: {
      std::string size = field.size.min == field.size.max ? fmt::format("{} items", field.size.min)
                                                          : fmt::format("{}..{} items", field.size.min, field.size.max);
      const std::string each = range_text(field.range);
      return each.empty() ? size : size + ", each " + each;
    }
    default:
      return range_text(field.range);
  }
}

std::string_view hashing_text(Hashing hashing) {
  switch (hashing) {
    case H::hashed:
      return "yes";
    case H::excluded:
      return "no";
    case H::profile_content:
    case H::file_content:
    case H::folder_content:
      return "content";
    case H::hashed_unless_default:
      return "unless default";
    case H::files_content:
      return "file content";
  }
  return "";
}

std::string default_text(const Field& field) {
  if (!field.default_doc.empty()) {
    return std::string(field.default_doc);
  }
  return "`" + std::string(field.default_yaml) + "`";
}

// Markdown cells must not contain a bare "|".
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  }
  return out;
}

}  // namespace

std::span<const Field> fields() {
  return table();
}

const Field* find_field(std::string_view path) {
  for (const Field& field : table()) {
    if (field.path == path) {
      return &field;
    }
  }
  return nullptr;
}

bool valid_entry_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || std::isdigit(static_cast<unsigned char>(name.front()))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

const Field* find_map_field(std::string_view path, std::string* entry) {
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos) {
    return nullptr;
  }
  const Field* map = find_field(path.substr(0, dot));
  const std::string_view name = path.substr(dot + 1);
  if (map == nullptr || (map->type != T::param_map && map->type != T::string_map) || name.empty()) {
    return nullptr;
  }
  if (entry != nullptr) {
    *entry = std::string(name);
  }
  return map;
}

const Field& map_entry_field(const Field& map) {
  static const Field k_param_entry{"program.params.*", T::param_value, "0", "", any(), items(0, 1024), H::hashed,
                                   "One program parameter.", ""};
  static const Field k_env_entry{"program.env.*", T::string, "\"\"", "", any(), no_items(), H::hashed,
                                 "One environment variable.", ""};
  EXPCTL_ASSERT(map.type == T::param_map || map.type == T::string_map, "{} is not a mapping field", map.path);
  return map.type == T::param_map ? k_param_entry : k_env_entry;
}

bool is_section(std::string_view path) {
  const std::string prefix = std::string(path) + ".";
  return std::ranges::any_of(table(),
                     [&](const Field& field) { return util::starts_with(field.path, prefix); });
}

std::vector<std::string> child_names(std::string_view section) {
  const std::string prefix = section.empty() ? "" : std::string(section) + ".";
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const Field& field : table()) {
    if (!util::starts_with(field.path, prefix)) {
      continue;
    }
    const std::string_view rest = field.path.substr(prefix.size());
    std::string name(rest.substr(0, rest.find('.')));
    if (seen.insert(name).second) {
      names.push_back(std::move(name));
    }
  }
  return names;
}

std::vector<std::string> suggestion_candidates(std::string_view section) {
  std::vector<std::string> names = child_names(section);
  for (const Synonym& synonym : k_synonyms) {
    if (synonym.section == section) {
      names.emplace_back(synonym.name);
    }
  }
  return names;
}

std::string suggestion_for(std::string_view section, const std::string& candidate) {
  for (const Synonym& synonym : k_synonyms) {
    if (synonym.section == section && synonym.name == candidate) {
      return std::string(synonym.field);
    }
  }
  return candidate;
}

std::optional<std::string> suggest_field_path(const std::string& path) {
  const size_t dot = path.rfind('.');
  const std::string section = dot == std::string::npos ? "" : path.substr(0, dot);
  if (section.empty() || is_section(section)) {
    const std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
    if (const auto name = util::closest_match(leaf, suggestion_candidates(section))) {
      const std::string real = suggestion_for(section, *name);
      return section.empty() ? real : section + "." + real;
    }
    return std::nullopt;
  }
  std::vector<std::string> paths;
  for (const Field& field : fields()) {
    paths.emplace_back(field.path);
  }
  return util::closest_match(path, paths);
}

std::vector<std::string> choices_of(const Field& field) {
  return util::split(field.choices, '|');
}

std::string_view type_name(FieldType type) {
  switch (type) {
    case T::string:
      return "string";
    case T::integer:
      return "integer";
    case T::floating:
      return "float";
    case T::boolean:
      return "bool";
    case T::choice:
      return "choice";
    case T::string_list:
      return "list of strings";
    case T::integer_list:
      return "list of integers";
    case T::float_list:
      return "list of floats";
    case T::image:
      return "image reference";
    case T::threshold:
      return "threshold";
    case T::param_map:
      return "mapping";
    case T::string_map:
      return "mapping of strings";
    case T::param_value:
      return "scalar or list";
  }
  return "value";
}

std::string render_field_table_markdown() {
  std::string out = std::string(k_table_begin) + "\n\n";
  out += "| Key | Type | Default | Allowed | Hashed | Meaning |\n";
  out += "|---|---|---|---|---|---|\n";
  for (const Field& field : table()) {
    out +=
        fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", field.path, type_name(field.type), cell(default_text(field)),
                    cell(allowed_text(field)), hashing_text(field.hashing), cell(field.doc));
  }
  out += "\n" + std::string(k_table_end) + "\n";
  return out;
}

}  // namespace expctl::spec
