#pragma once
/// The training code reached through a plugin: LibTorch (~300 MB of shared libraries whose
/// static initialisers take 0.3–0.7 s) is linked into libexpctl_train.so only, which expctl
/// loads with dlopen the first time a command needs it. `--version`, `validate`, `hash`, `list`,
/// `show`, `compare` and every other command that does not train never load it.
///
/// The functions here have the signatures of their in-process counterparts (train/worker.hpp,
/// train/store_server.hpp, train/torch_info.hpp), which the plugin holds; they load the plugin
/// on first use and throw util::TrainError, naming the file and the fix, when it cannot be loaded.
/// Exceptions thrown inside the plugin (DivergedError, TrainError, ...) reach the caller as they
/// are: one libstdc++ is shared by both sides and type identity is compared by name.
///
/// Where the plugin is looked for, first match wins: $EXPCTL_TRAIN_PLUGIN (a file), then
/// <dir of expctl>/../lib/expctl/libexpctl_train.so (the installed layout), then
/// <dir of expctl>/libexpctl_train.so and the build tree's copy (a build directory).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "expctl/train/options.hpp"
#include "expctl/train/worker.hpp"

namespace expctl::train::plugin {

/// Starts loading the plugin on a background thread, so that LibTorch's start-up overlaps with
/// whatever the caller does next (spec parsing, environment probes); a later call of any
/// function below waits for it. Calling it again, or after the plugin is loaded, does nothing.
void preload();

/// Loads the plugin now (or waits for preload()); throws util::TrainError when it cannot.
void require();

/// Waits until a load that preload() started has ended; does nothing when none was started. The
/// process must not begin to exit while LibTorch is being loaded: exit runs the destructors of
/// the static objects LibTorch has constructed so far while the loading thread goes on
/// constructing others (a refused `expctl resume` died so: SIGSEGV in libtorch_cpu, or "Tried to
/// deregister a kernel for dispatch key QuantizedCPU but there are no kernels registered").
/// `cli::run` calls it on every way out.
void settle() noexcept;

/// The file that was (or would be) loaded, for messages and `expctl env`.
std::filesystem::path location();

/// train::run_worker, inside the plugin.
WorkerResult run_worker(const TrainerConfig& config, MetricSink& sink, const LineSink& on_line,
                        const std::atomic<bool>* stop);

/// train::torch_build_fields, inside the plugin; from the cache (train/plugin_cache.hpp) when
/// the plugin and its LibTorch are the files they were, without loading the plugin.
std::map<std::string, std::string> torch_build_fields();

/// Whether torch_build_fields() would answer from the cache (so need not wait for LibTorch).
bool torch_build_fields_cached();

/// train::check_training, inside the plugin.
void check_training(const TrainerConfig& config);

/// train::StoreServer (the rendezvous store the launcher hosts), inside the plugin.
class StoreServer {
 public:
  StoreServer(std::uint16_t port, std::chrono::milliseconds timeout);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  std::uint16_t port() const;

 private:
  void* m_handle;
};

/// train::StoreClient (a client of the job's store: the side channel of program runs), inside the plugin.
class StoreClient {
 public:
  StoreClient(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;
  void set(const std::string& key, const std::string& value);
  std::optional<std::string> get(const std::string& key, std::chrono::milliseconds timeout);

 private:
  void* m_handle;
};

}  // namespace expctl::train::plugin
