// The training plugin's one exported symbol (see train/plugin.hpp): the table of what the
// torch-free side calls. Everything else in libexpctl_train.so is hidden.
#include "expctl/train/plugin_api.hpp"
#include "expctl/train/store_server.hpp"
#include "expctl/train/torch_info.hpp"
#include "expctl/train/trainer.hpp"

namespace expctl::train::plugin {
namespace {

void set_log_level(util::log::Level level) { util::log::set_level(level); }

void* open_store(std::uint16_t port, std::chrono::milliseconds timeout) { return new train::StoreServer(port, timeout); }

std::uint16_t store_port(const void* store) { return static_cast<const train::StoreServer*>(store)->port(); }

void close_store(void* store) { delete static_cast<train::StoreServer*>(store); }

void* connect_store(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) {
  return new train::StoreClient(host, port, timeout);
}

void store_set(void* client, const std::string& key, const std::string& value) {
  static_cast<train::StoreClient*>(client)->set(key, value);
}

std::optional<std::string> store_get(void* client, const std::string& key, std::chrono::milliseconds timeout) {
  return static_cast<train::StoreClient*>(client)->get(key, timeout);
}

void disconnect_store(void* client) { delete static_cast<train::StoreClient*>(client); }

Api make_api() {
  static const std::string id = build_id();
  return Api{id.c_str(),        sizeof(TrainerConfig),     sizeof(WorkerResult), set_log_level,
             train::run_worker, train::torch_build_fields, open_store,           store_port,
             close_store,       train::check_training,     connect_store,        store_set,
             store_get,         disconnect_store};
}

}  // namespace
}  // namespace expctl::train::plugin

extern "C" __attribute__((visibility("default"))) const expctl::train::plugin::Api* expctl_train_plugin_v1() {
  static const expctl::train::plugin::Api api = expctl::train::plugin::make_api();
  return &api;
}
