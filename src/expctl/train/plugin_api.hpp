#pragma once
/// The table the training plugin exports (train/plugin.hpp is its only user; plugin_entry.cpp
/// fills it). Both sides are compiled from one tree by one compiler, so C++ types cross it (the
/// caller's train::MetricSink too: the plugin calls it through the caller's vtable); the build id
/// and the struct sizes refuse a plugin from another build instead of crashing in it.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "expctl/train/options.hpp"
#include "expctl/train/worker.hpp"
#include "expctl/util/log.hpp"

namespace expctl::train::plugin {

/// The exported symbol: `extern "C" const Api* expctl_train_plugin_v1()`.
inline constexpr const char* k_entry_symbol = "expctl_train_plugin_v1";
/// The plugin's file name.
inline constexpr const char* k_file_name = "libexpctl_train.so";

struct Api {
  const char* build_id;          ///< build_id() of the plugin's build
  std::size_t config_size;       ///< sizeof(TrainerConfig) in the plugin
  std::size_t result_size;       ///< sizeof(WorkerResult) in the plugin
  void (*set_log_level)(util::log::Level level);
  WorkerResult (*run_worker)(const TrainerConfig&, MetricSink&, const LineSink&, const std::atomic<bool>*);
  std::map<std::string, std::string> (*torch_build_fields)();
  void* (*open_store)(std::uint16_t port, std::chrono::milliseconds timeout);
  std::uint16_t (*store_port)(const void* store);
  void (*close_store)(void* store);
  void (*check_training)(const TrainerConfig&);
  void* (*connect_store)(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
  void (*store_set)(void* client, const std::string& key, const std::string& value);
  std::optional<std::string> (*store_get)(void* client, const std::string& key, std::chrono::milliseconds timeout);
  void (*disconnect_store)(void* client);
};

/// "<version> <commit> <compiler> <build type> torch <version>": equal on both sides of one build.
std::string build_id();

}  // namespace expctl::train::plugin

extern "C" {
using expctl_train_plugin_entry = const expctl::train::plugin::Api* (*)();
}
