#pragma once
/// The names of stored metrics and of a run's summary keys, spelled once. Torch-free and in util,
/// the one module every producer (train's step record, the run engine's recorder and summary) and
/// every consumer (compare, tensorboard, sweep, nightly, the CLI) reaches. The step record's
/// fields are generated from train::step_fields, whose stored names are these; the summary's
/// typed form and its one codec are compare::RunSummary (compare/run_summary.hpp).

#include <string>
#include <string_view>

namespace expctl::util {

/// Per-step metrics as the store holds them (`metrics.name`), per rank unless said otherwise.
namespace metric {
inline constexpr const char* loss = "loss";  ///< training loss
inline constexpr const char* lr = "lr";
inline constexpr const char* grad_scale = "grad_scale";
inline constexpr const char* skipped = "skipped";                  ///< 1 for a step skipped (non-finite loss)
inline constexpr const char* step_time_ms = "step_time_ms";        ///< wall time of the step
inline constexpr const char* comm_wait_ms = "comm_wait_ms";        ///< wait for gradient all-reduce
inline constexpr const char* samples_per_sec = "samples_per_sec";  ///< this rank's throughput
inline constexpr const char* data_wait_ms = "data_wait_ms";
inline constexpr const char* forward_ms = "forward_ms";
inline constexpr const char* backward_ms = "backward_ms";
inline constexpr const char* optimizer_ms = "optimizer_ms";
inline constexpr const char* allreduce_bytes = "allreduce_bytes";
inline constexpr const char* eval_loss = "eval_loss";          ///< rank 0, at each evaluation
inline constexpr const char* eval_accuracy = "eval_accuracy";  ///< rank 0, at each evaluation
/// The rank's compute time over the median rank's (the recorder's, from 2 ranks; run/recorder.hpp).
inline constexpr const char* straggler_score = "straggler_score";
/// The rank's CPU use in percent of one core and its resident memory in MiB, its process and every
/// process under it, read by the supervisor about once a second (launch/process_usage.hpp) and
/// stored at the rank's step then, at most once a step.
inline constexpr const char* sys_cpu_percent = "sys_cpu_percent";
inline constexpr const char* sys_rss_mb = "sys_rss_mb";
/// Where NVML sees the rank's processes on a GPU (util/nvml.hpp): the mean utilization of the
/// devices they use (percent: the share of the last sample period a kernel ran) and the device
/// memory they hold (MiB), at the same steps as sys_cpu_percent.
inline constexpr const char* sys_gpu_percent = "sys_gpu_percent";
inline constexpr const char* sys_gpu_mem_mb = "sys_gpu_mem_mb";
/// Derived, never stored: the share of a step's time (all ranks together) spent waiting.
inline constexpr const char* comm_wait_fraction = "comm_wait_fraction";
}  // namespace metric

/// The keys of a run's summary (`runs.summary`, docs/run.md "Summary").
namespace summary_key {
inline constexpr const char* final_train_loss = "final_train_loss";
inline constexpr const char* eval_loss = "eval_loss";
inline constexpr const char* eval_accuracy = "eval_accuracy";
inline constexpr const char* samples_per_sec = "samples_per_sec";
inline constexpr const char* step_time_ms_p50 = "step_time_ms_p50";
inline constexpr const char* step_time_ms_p95 = "step_time_ms_p95";
inline constexpr const char* comm_wait_fraction = "comm_wait_fraction";
inline constexpr const char* loss_curve_sha256 = "loss_curve_sha256";
inline constexpr const char* steps = "steps";
inline constexpr const char* skipped_steps = "skipped_steps";
inline constexpr const char* warmup_steps = "warmup_steps";
inline constexpr const char* ranks_recorded = "ranks_recorded";
inline constexpr const char* wall_time_s = "wall_time_s";
inline constexpr const char* time_to_first_step_s = "time_to_first_step_s";
inline constexpr const char* invocations = "invocations";
inline constexpr const char* phases = "phases";
inline constexpr const char* allreduce = "allreduce";
inline constexpr const char* world_size = "world_size";
inline constexpr const char* drift = "drift";
inline constexpr const char* skipped_images = "skipped_images";
inline constexpr const char* program = "program";
/// Where the run's code could write (docs/models.md#the-sandbox), as the last invocation ran it:
/// "landlock ABI 7", "off", "off (program.sandbox is false)" or "not sandboxed: <why>".
inline constexpr const char* sandbox = "sandbox";
/// Under train.amp: how the last evaluation ran ("bf16 autocast", "bf16 autocast with gradients
/// on", "fp32 without autocast") and why not as training does (null when it did).
inline constexpr const char* eval_precision = "eval_precision";
inline constexpr const char* eval_fallback = "eval_fallback";
/// Steps the record lacks within the run's steps, judged by its logging stride: [[first, last], ...]
/// (run::missing_step_ranges); only present when some are.
inline constexpr const char* missing_steps = "missing_steps";
/// Why each invocation after a run's first started, by its number: {"2": "restart 1 of 2: rank 1 was
/// killed by SIGKILL after step 37; resumed from its checkpoint at step 30", "3": "expctl resume:
/// ..."}; only present when some invocation had one.
inline constexpr const char* invocation_causes = "invocation_causes";
}  // namespace summary_key

/// Tags expctl gives runs, where more than one module writes or reads them.
namespace tag {
/// A run a Slurm job made: "slurm-job:<job>"; one an array task made: "slurm-job:<array job>_<task>".
inline constexpr std::string_view slurm_job_prefix = "slurm-job:";
inline std::string slurm_job(std::string_view job) {
  return std::string(slurm_job_prefix) + std::string(job);
}
inline std::string slurm_array_task(std::string_view array_job, std::string_view task) {
  return slurm_job(std::string(array_job) + "_" + std::string(task));
}
}  // namespace tag

}  // namespace expctl::util
