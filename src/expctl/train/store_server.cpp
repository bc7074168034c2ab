#include "expctl/train/store_server.hpp"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "expctl/train/compat.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreServer::StoreServer(std::uint16_t port, std::chrono::milliseconds timeout) : m_impl(std::make_unique<Impl>()) {
  auto options = compat::tcp_store_options(/*is_server=*/true, port, /*world_size=*/0, timeout);
  options.numWorkers = c10::nullopt;  // ranks come and go with their own key exchange
  options.waitWorkers = false;        // do not block the launcher until every rank has joined
  try {
    // The host is only used by the server's own client connection.
    m_impl->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    throw util::TrainError(fmt::format(
        "cannot host the rendezvous store on port {}: {}; choose another --master-port (or 0 for a free one)",
        port, message.substr(0, message.find('\n'))));
  }
}

StoreServer::~StoreServer() = default;

std::uint16_t StoreServer::port() const {
  return m_impl->store->getPort();
}

}  // namespace expctl::train
