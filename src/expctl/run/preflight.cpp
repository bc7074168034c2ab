#include "expctl/run/preflight.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/env/probes.hpp"
#include "expctl/env/profile.hpp"
#include "expctl/launch/write_all.hpp"
#include "expctl/run/train_options.hpp"
#include "expctl/spec/profile.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/sandbox.hpp"
#include "expctl/util/temporary_folder.hpp"

namespace expctl::run {

namespace {

struct CheckOutcome {
  bool failed = false;
  util::ExitCode exit_code = util::ExitCode::ok;
  std::string message;
};

// The model is code: it runs in a child of this process, sandboxed there (util/sandbox.hpp), so
// that `expctl run`'s supervisor and `expctl validate` keep their own freedom to write. The child
// is a fork without exec (the plugin is loaded; one forward and backward on the CPU need no other
// thread) and answers on a pipe: "" for success, else the exit code and the message.
CheckOutcome check_in_child(const train::TrainerConfig& config, const std::filesystem::path& temporary) {
  int answer[2];
  EXPCTL_CHECK(::pipe2(answer, O_CLOEXEC) == 0, util::TrainError, "cannot check the model: pipe: {}",
               std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(answer[0]);
    ::setenv("TMPDIR", temporary.c_str(), 1);
    std::string reply;
    try {
      train::plugin::check_training(config);
    } catch (const util::Failure& error) {
      reply = fmt::format("{}\n{}", static_cast<int>(error.exit_code()), error.what());
    } catch (const std::exception& error) {
      reply = fmt::format("{}\n{}", static_cast<int>(util::ExitCode::run_failed), error.what());
    }
    (void)launch::write_all_ignoring_sigpipe(answer[1], reply);
    ::_exit(0);  // no atexit handlers, no static destructors: they are the parent's
  }
  const int fork_error = errno;
  ::close(answer[1]);
  if (pid < 0) {
    ::close(answer[0]);
    throw util::TrainError(fmt::format("cannot check the model: fork: {}", std::strerror(fork_error)));
  }
  std::string reply;
  char buffer[4096];
  for (ssize_t n = 0; (n = ::read(answer[0], buffer, sizeof buffer)) != 0;) {
    if (n > 0) {
      reply.append(buffer, static_cast<std::size_t>(n));
    } else if (errno != EINTR) {
      break;
    }
  }
  ::close(answer[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    return {true, util::ExitCode::usage,
            fmt::format("the model check (one forward and backward on two samples) was killed by signal {} ({}): "
                        "the model file or the data crashes LibTorch",
                        WTERMSIG(status), ::strsignal(WTERMSIG(status)))};
  }
  if (reply.empty()) {
    return {};
  }
  const auto newline = reply.find('\n');
  return {true, static_cast<util::ExitCode>(std::atoi(reply.substr(0, newline).c_str())),
          newline == std::string::npos ? reply : reply.substr(newline + 1)};
}

}  // namespace

std::string check_sandbox(const nlohmann::json& values, std::string_view what, const Warn& warn, bool external_rank) {
  const auto mode = util::sandbox::mode_from_environment();
  if (mode == util::sandbox::Mode::off) {
    return "off";
  }
  const bool program = spec::has_program(values);
  if (program && !values.at("program").value("sandbox", false)) {
    EXPCTL_CHECK(mode != util::sandbox::Mode::require, util::UsageError,
                 "--sandbox=require: the spec runs a program and program.sandbox is false: set program.sandbox: true "
                 "(listing what else it writes in program.writable), or pass --sandbox=auto");
    return "off (program.sandbox is false)";  // the spec's choice (docs/program.md): nothing to say
  }
  std::string why;
  if (util::sandbox::landlock_abi() == 0) {
    why = util::sandbox::describe_availability();
  } else if (external_rank && !program) {
    // This process is the rank and, on rank 0, records the run into the store: it keeps its rights.
    why = "under an external launcher each rank is an `expctl run` that trains in its own process";
  } else {
    return util::sandbox::describe_availability();
  }
  EXPCTL_CHECK(mode != util::sandbox::Mode::require, util::UsageError,
               "--sandbox=require: {}; pass --sandbox=auto to run unsandboxed", why);
  static bool said = false;  // one line a process (validate checks many files)
  if (!std::exchange(said, true)) {
    warn(fmt::format("warning: {} is not sandboxed: {} (docs/models.md#the-sandbox)", what, why));
  }
  return "not sandboxed: " + why;
}

bool needs_preflight(const spec::Spec& spec) {
  if (spec::has_program(spec.values())) {
    return false;  // the program loads its own model and data
  }
  return spec.get_string("model.arch") == "torchscript" || spec.get_string("data.dataset") == "npy" ||
         spec.get_string("data.dataset") == "tokens";
}

void check_backend(const spec::Spec& spec, std::optional<int> gpu_count) {
  if (spec::has_program(spec.values()) || spec.get_string("distributed.backend") != "nccl") {
    return;
  }
  if (const auto& path = spec.env_profile_path()) {
    const env::Profile profile = env::load_profile(*path, spec::display_path(*path));
    for (const env::Pin& pin : profile.pins) {
      const bool cuda_pin = pin.field == "gpu.nccl" || pin.field == "gpu.cuda_runtime" ||
                            pin.field == "software.libtorch_cuda";
      if (cuda_pin && pin.pattern.kind() == env::VersionPattern::Kind::none) {
        throw util::UsageError(fmt::format(
            "distributed.backend nccl contradicts the spec's env profile {}, which pins {} = \"none\" (line {}): use "
            "distributed.backend gloo (or auto) with this profile, or a profile for a CUDA stack",
            profile.file, pin.key, pin.line));
      }
    }
  }
  if (!gpu_count) {
    env::Fingerprint fingerprint;
    env::probes::probe_gpu(fingerprint, {});
    const nlohmann::json* count = fingerprint.find("gpu.count");
    gpu_count = count != nullptr && count->is_number_integer() ? count->get<int>() : 0;
  }
  if (*gpu_count == 0) {
    throw util::UsageError(
        "distributed.backend nccl needs a CUDA GPU, and this machine has none (gpu.count 0 in `expctl env`): use "
        "distributed.backend gloo, or auto (nccl where there are GPUs, gloo elsewhere)");
  }
}

void preflight_training(const spec::Spec& spec, const Warn& warn) {
  check_backend(spec);
  if (!needs_preflight(spec)) {
    return;
  }
  (void)check_sandbox(spec.values(), "the model check", warn);
  auto config = train_options(spec.values(), launch::RankIdentity{}, spec.input_paths());
  config.sandbox = util::sandbox::mode_from_environment();
  train::plugin::require();  // loaded here: the child has no thread that could finish loading it
  const util::TemporaryFolder temporary("expctl-check-");
  config.sandbox_writable = {.folders = {temporary.path()}, .files = {}, .described = "its temporary folder"};
  const CheckOutcome outcome = check_in_child(config, temporary.path());
  if (outcome.failed) {
    // Before a run exists, what the model or the data gets wrong is the user's input to fix.
    throw util::TrainError(outcome.message,
                           outcome.exit_code == util::ExitCode::run_failed ? util::ExitCode::usage : outcome.exit_code);
  }
}

}  // namespace expctl::run
