#include "expctl/train/plugin.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <future>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "expctl/train/load_trim.hpp"
#include "expctl/train/plugin_api.hpp"
#include "expctl/train/plugin_cache.hpp"
#include "expctl/util/build_info.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"

namespace expctl::train::plugin {
namespace {

namespace fs = std::filesystem;
using util::TrainError;

struct Loaded {
  const Api* api = nullptr;
  fs::path path;
  std::string error;
};

std::vector<fs::path> candidates() {
  if (const char* chosen = std::getenv("EXPCTL_TRAIN_PLUGIN"); chosen != nullptr && *chosen != '\0') {
    return {chosen};
  }
  std::error_code error;
  const auto directory = fs::read_symlink("/proc/self/exe", error).parent_path();
  std::vector<fs::path> paths = {directory / "../lib/expctl" / k_file_name, directory / k_file_name};
#ifdef EXPCTL_TRAIN_PLUGIN_BUILD_PATH
  paths.emplace_back(EXPCTL_TRAIN_PLUGIN_BUILD_PATH);
#endif
  return paths;
}

fs::path first_existing(const std::vector<fs::path>& paths) {
  for (const auto& path : paths) {
    if (std::error_code error; fs::is_regular_file(path, error)) {
      return path.lexically_normal();
    }
  }
  return {};
}

std::string missing_message(const std::vector<fs::path>& paths) {
#ifndef EXPCTL_TRAIN_PLUGIN_BUILD_PATH
  if (std::getenv("EXPCTL_TRAIN_PLUGIN") == nullptr) {
    return "this expctl was built without LibTorch (EXPCTL_WITH_TORCH=OFF), so it cannot train: "
           "rebuild it with libtorch-dev installed";
  }
#endif
  std::vector<std::string> names;
  for (const auto& path : paths) {
    names.push_back(path.lexically_normal().string());
  }
  return fmt::format("the training plugin is missing (looked for {}): reinstall expctl (bin/expctl and "
                     "lib/expctl/{} belong together) or set EXPCTL_TRAIN_PLUGIN to the file",
                     fmt::join(names, ", "), k_file_name);
}

void close_all(const std::vector<void*>& handles) {
  for (void* handle : handles) {
    ::dlclose(handle);
  }
}

// Says why LibTorch loads whole and closes the stand-ins opened so far; nullptr, for open_trimmed.
void* give_up_trimming(const std::vector<void*>& stubs, const std::string& why) {
  util::log::warn("loading LibTorch whole: " + why);
  close_all(stubs);
  return nullptr;
}

// The plugin loaded with trim::plan's stand-ins opened first, or nullptr (then load it whole):
// no stand-ins to use, or a trimmed load that failed, whose stand-ins are closed again.
void* open_trimmed(const fs::path& path) {
  const auto plan = trim::plan(path);
  if (!plan.whole_because.empty()) {
    util::log::debug(fmt::format("loading LibTorch whole: {}", plan.whole_because));
  }
  std::vector<void*> stubs;
  for (const auto& stub : plan.stubs) {
    void* handle = ::dlopen(stub.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      return give_up_trimming(stubs, fmt::format("{}: rebuild or reinstall expctl to restore its torch-stubs/, "
                                                 "or set EXPCTL_TORCH_TRIM=off",
                                                 ::dlerror()));
    }
    stubs.push_back(handle);
  }
  if (stubs.empty()) {
    return nullptr;
  }
  void* plugin = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    return give_up_trimming(
        stubs, fmt::format("its trimmed load failed ({}): rebuild expctl, or set EXPCTL_TORCH_TRIM=off", ::dlerror()));
  }
  util::log::debug(fmt::format("LibTorch loaded without the {} libraries it never uses ({})", stubs.size(),
                               trim::stub_directory(path).string()));
  return plugin;
}

const Api* open_api(const fs::path& path) {
  void* handle = open_trimmed(path);
  if (handle == nullptr) {
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  EXPCTL_CHECK(handle != nullptr, TrainError,
               "cannot load the training plugin: {}: install LibTorch's runtime libraries or reinstall expctl",
               ::dlerror());
  auto* entry = reinterpret_cast<expctl_train_plugin_entry>(::dlsym(handle, k_entry_symbol));
  EXPCTL_CHECK(entry != nullptr, TrainError,
               "{} is not an expctl training plugin (it has no {}): point EXPCTL_TRAIN_PLUGIN at {}",
               path.string(), k_entry_symbol, k_file_name);
  return entry();
}

void check_build(const Api& api, const fs::path& path) {
  const bool same = api.build_id == build_id() && api.config_size == sizeof(TrainerConfig) &&
                    api.result_size == sizeof(WorkerResult);
  EXPCTL_CHECK(same, TrainError,
               "the training plugin {} comes from another build ({}; this expctl: {}): reinstall expctl so "
               "that both come from one build",
               path.string(), api.build_id, build_id());
}

Loaded load() {
  Loaded loaded;
  try {
    const auto paths = candidates();
    loaded.path = first_existing(paths);
    EXPCTL_CHECK(!loaded.path.empty(), TrainError, "{}", missing_message(paths));
    const Api* api = open_api(loaded.path);
    check_build(*api, loaded.path);
    api->set_log_level(util::log::level());
    loaded.api = api;
  } catch (const util::Failure& error) {
    loaded.error = error.what();
  }
  return loaded;
}

// Loading always happens on a thread of its own, so preload() and require() share one path.
struct Loading {
  std::mutex mutex;
  std::shared_future<Loaded> state;
};

Loading& loading_state() {
  static Loading loading;
  return loading;
}

std::shared_future<Loaded> loading() {
  Loading& shared = loading_state();
  const std::lock_guard lock(shared.mutex);
  if (!shared.state.valid()) {
    shared.state = std::async(std::launch::async, load).share();
  }
  return shared.state;
}

// Each caller reads through its own copy of the future (get() on one shared object from several
// threads is a race); the static one keeps the state, and so `loaded`, alive.
const Api& api() {
  const auto future = loading();
  const Loaded& loaded = future.get();
  EXPCTL_CHECK(loaded.api != nullptr, TrainError, "{}", loaded.error);
  return *loaded.api;
}

// The cache entry, read once per process: `expctl run` asks whether there is one, then its
// fingerprint takes the fields.
const std::optional<TorchFields>& cached_fields() {
  static const std::optional<TorchFields> fields = []() -> std::optional<TorchFields> {
    const fs::path plugin = first_existing(candidates());
    return plugin.empty() ? std::nullopt : cached_torch_fields(plugin);
  }();
  return fields;
}

}  // namespace

std::string build_id() {
  const auto& info = util::build_info();
  return fmt::format("{} {} {} {} torch {}", info.version, info.git_commit, info.compiler, info.build_type,
                     info.torch_version);
}

void preload() { (void)loading(); }

void settle() noexcept {
  Loading& shared = loading_state();
  std::shared_future<Loaded> state;
  {
    const std::lock_guard lock(shared.mutex);
    state = shared.state;
  }
  if (state.valid()) {
    state.wait();
  }
}

void require() { (void)api(); }

std::filesystem::path location() {
  const auto future = loading();
  return future.get().path;
}

WorkerResult run_worker(const TrainerConfig& config, MetricSink& sink, const LineSink& on_line,
                        const std::atomic<bool>* stop) {
  return api().run_worker(config, sink, on_line, stop);
}

std::map<std::string, std::string> torch_build_fields() {
  if (const auto& cached = cached_fields()) {
    return *cached;
  }
  auto fields = api().torch_build_fields();
  cache_torch_fields(location(), fields);
  return fields;
}

bool torch_build_fields_cached() { return cached_fields().has_value(); }

void check_training(const TrainerConfig& config) { api().check_training(config); }

StoreServer::StoreServer(std::uint16_t port, std::chrono::milliseconds timeout)
    : m_handle(api().open_store(port, timeout)) {}

StoreServer::~StoreServer() { api().close_store(m_handle); }

std::uint16_t StoreServer::port() const { return api().store_port(m_handle); }

StoreClient::StoreClient(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout)
    : m_handle(api().connect_store(host, port, timeout)) {}

StoreClient::~StoreClient() { api().disconnect_store(m_handle); }

void StoreClient::set(const std::string& key, const std::string& value) { api().store_set(m_handle, key, value); }

std::optional<std::string> StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  return api().store_get(m_handle, key, timeout);
}

}  // namespace expctl::train::plugin
