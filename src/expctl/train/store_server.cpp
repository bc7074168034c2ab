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

struct StoreClient::Impl {
  std::string address;
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreClient::StoreClient(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout)
    : m_impl(std::make_unique<Impl>()) {
  m_impl->address = fmt::format("{}:{}", host, port);
  auto options = compat::tcp_store_options(/*is_server=*/false, port, /*world_size=*/0, timeout);
  options.numWorkers = c10::nullopt;
  options.waitWorkers = false;
  try {
    m_impl->store = c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    throw util::TrainError(fmt::format("cannot reach the job's store at {}: {}", m_impl->address,
                                       message.substr(0, message.find('\n'))));
  }
}

StoreClient::~StoreClient() = default;

void StoreClient::set(const std::string& key, const std::string& value) {
  try {
    m_impl->store->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& error) {
    const std::string message = error.what();
    throw util::TrainError(fmt::format("cannot write to the job's store at {}: {}", m_impl->address,
                                       message.substr(0, message.find('\n'))));
  }
}

std::optional<std::string> StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  try {
    m_impl->store->wait({key}, timeout);
    const auto bytes = m_impl->store->get(key);
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception&) {
    return std::nullopt;  // timed out, or the store is gone: the caller names what is missing
  }
}

}  // namespace expctl::train
