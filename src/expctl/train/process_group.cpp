#include "expctl/train/process_group.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/cuda.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

struct BackendName {
  BackendRequest request;
  const char* name;
};
constexpr BackendName k_backend_names[] = {
    {BackendRequest::auto_select, "auto"},
    {BackendRequest::gloo, "gloo"},
    {BackendRequest::nccl, "nccl"},
};

/// Closes a socket descriptor on scope exit.
struct SocketCloser {
  int fd;
  ~SocketCloser() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

std::string format_seconds(std::chrono::milliseconds duration) {
  return fmt::format("{:g} s", static_cast<double>(duration.count()) / 1000.0);
}

// Gloo reports its own timeouts as "Operation timed out!" (Work::wait with a limit) or
// "Timed out waiting ...ms for recv operation" (the group's timeout); both mean a peer never came.
bool is_timeout_message(const std::string& message) {
  return message.find("timed out") != std::string::npos || message.find("Timed out") != std::string::npos;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

c10::intrusive_ptr<compat::CollectiveBackend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const ProcessGroupOptions& options) {
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->timeout = options.timeout;
  // Same precedence as torch.distributed: GLOO_SOCKET_IFNAME names interfaces explicitly;
  // otherwise bind to the address that routes to the master (127.0.0.1 on a single node), which
  // avoids createDefaultDevice()'s dependence on a correct /etc/hosts.
  if (const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME"); interfaces != nullptr && *interfaces != 0) {
    for (const auto& name : util::split(interfaces, ',')) {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
  } else {
    gloo_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(options.master_addr)));
  }
  gloo_options->threads = static_cast<int>(gloo_options->devices.size()) * options.gloo_threads;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank, options.world_size, gloo_options);
}

#ifdef USE_C10D_NCCL
c10::intrusive_ptr<compat::CollectiveBackend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const ProcessGroupOptions& options) {
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->is_high_priority_stream = false;
  nccl_options->timeout = options.timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank, options.world_size, nccl_options);
}
#endif

}  // namespace

const char* backend_name(Backend backend) {
  return backend == Backend::nccl ? "nccl" : "gloo";
}

BackendRequest parse_backend_request(const std::string& text) {
  for (const auto& entry : k_backend_names) {
    if (text == entry.name) {
      return entry.request;
    }
  }
  throw TrainError(fmt::format("unknown distributed backend \"{}\": use auto, gloo or nccl", text));
}

Backend resolve_backend(BackendRequest request) {
  const bool nccl_usable = compat::k_have_nccl && torch::cuda::is_available();
  switch (request) {
    case BackendRequest::gloo:
      return Backend::gloo;
    case BackendRequest::nccl:
      EXPCTL_CHECK(nccl_usable, TrainError,
                   "distributed backend \"nccl\" needs a LibTorch built with NCCL and a CUDA device "
                   "(this build: NCCL {}, CUDA {}): use backend: gloo or auto",
                   compat::k_have_nccl ? "yes" : "no", torch::cuda::is_available() ? "yes" : "no");
      return Backend::nccl;
    case BackendRequest::auto_select:
      break;
  }
  return nccl_usable ? Backend::nccl : Backend::gloo;
}

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(host.c_str(), "9", &hints, &found);
  EXPCTL_CHECK(status == 0 && found != nullptr, TrainError, "cannot resolve master address \"{}\": {}", host,
               ::gai_strerror(status));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
  SocketCloser socket{::socket(found->ai_family, SOCK_DGRAM, 0)};
  EXPCTL_CHECK(socket.fd >= 0, TrainError, "cannot open a socket towards \"{}\"", host);
  // connect() on a UDP socket only selects the route and the local address; nothing is sent.
  EXPCTL_CHECK(::connect(socket.fd, found->ai_addr, found->ai_addrlen) == 0, TrainError,
               "no route to master address \"{}\"", host);
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  EXPCTL_ASSERT(::getsockname(socket.fd, reinterpret_cast<sockaddr*>(&local), &length) == 0, "getsockname");
  char text[INET6_ADDRSTRLEN] = {};
  const void* address = local.ss_family == AF_INET6
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
  EXPCTL_ASSERT(::inet_ntop(local.ss_family, address, text, sizeof(text)) != nullptr, "inet_ntop");
  return text;
}

std::uint16_t pick_free_port() {
  SocketCloser socket{::socket(AF_INET, SOCK_STREAM, 0)};
  EXPCTL_ASSERT(socket.fd >= 0, "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  EXPCTL_ASSERT(::bind(socket.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0, "bind");
  socklen_t length = sizeof(address);
  EXPCTL_ASSERT(::getsockname(socket.fd, reinterpret_cast<sockaddr*>(&address), &length) == 0, "getsockname");
  return ntohs(address.sin_port);
}

Communicator::Communicator(const ProcessGroupOptions& options)
    : m_rank(options.rank),
      m_world_size(options.world_size),
      m_backend(resolve_backend(options.backend)),
      m_device(c10::kCPU),
      m_timeout(options.timeout) {
  EXPCTL_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size, TrainError,
               "rank {} is outside a world of size {}: RANK must be in [0, WORLD_SIZE)", options.rank,
               options.world_size);
  const std::string endpoint = options.rendezvous_file.empty()
                                   ? fmt::format("{}:{}", options.master_addr, options.master_port)
                                   : options.rendezvous_file;
  const auto rendezvous_timeout =
      options.rendezvous_timeout.count() > 0 ? options.rendezvous_timeout : options.timeout;
  try {
    c10::intrusive_ptr<c10d::Store> base;
    if (!options.rendezvous_file.empty()) {
      base = c10::make_intrusive<c10d::FileStore>(options.rendezvous_file, options.world_size);
      base->setTimeout(rendezvous_timeout);
    } else {
      base = c10::make_intrusive<c10d::TCPStore>(
          options.master_addr, compat::tcp_store_options(options.rank == 0 && !options.store_hosted_by_launcher,
                                                         options.master_port, options.world_size, rendezvous_timeout));
    }
    m_store = c10::make_intrusive<c10d::PrefixStore>(options.group_name, base);
#ifdef USE_C10D_NCCL
    if (m_backend == Backend::nccl) {
      m_device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(options.local_rank));
      m_group = make_nccl(m_store, options);
      return;
    }
#endif
    m_group = make_gloo(m_store, options);
  } catch (const util::Failure&) {
    throw;
  } catch (const std::exception& error) {
    throw TrainError(fmt::format("rendezvous of rank {} of {} at {} failed: {}", options.rank, options.world_size,
                                 endpoint, first_line(error.what())));
  }
}

Communicator::~Communicator() = default;

PendingCollective Communicator::allreduce_async(at::Tensor& tensor, std::string what) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  ++m_issued;
  return PendingCollective{m_group->allreduce(tensors, options), std::move(what)};
}

PendingCollective Communicator::broadcast_async(at::Tensor& tensor, int root, std::string what) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.rootTensor = 0;
  ++m_issued;
  return PendingCollective{m_group->broadcast(tensors, options), std::move(what)};
}

void Communicator::wait(PendingCollective& pending) {
  EXPCTL_ASSERT(pending.work, "waiting on a collective that was never started ({})", pending.what);
  const auto start = std::chrono::steady_clock::now();
  try {
    pending.work->wait(m_timeout);
  } catch (const std::exception& error) {
    m_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string message = first_line(error.what());
    if (is_timeout_message(message)) {
      throw TrainError(fmt::format("{} timed out after {}: a peer rank stopped answering or issued a different "
                                   "collective",
                                   pending.what, format_seconds(m_timeout)));
    }
    throw TrainError(fmt::format("{} failed: {}", pending.what, message));
  }
  m_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  pending.work.reset();
}

void Communicator::allreduce(at::Tensor& tensor, std::string what) {
  auto pending = allreduce_async(tensor, std::move(what));
  wait(pending);
}

void Communicator::broadcast(at::Tensor& tensor, int root, std::string what) {
  auto pending = broadcast_async(tensor, root, std::move(what));
  wait(pending);
}

std::vector<at::Tensor> Communicator::allgather(const at::Tensor& tensor, std::string what) {
  std::vector<at::Tensor> inputs{tensor.to(m_device)};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int rank = 0; rank < m_world_size; ++rank) {
    outputs[0].push_back(at::empty_like(inputs[0]));
  }
  ++m_issued;
  PendingCollective pending{m_group->allgather(outputs, inputs), std::move(what)};
  wait(pending);
  return outputs[0];
}

void Communicator::barrier(std::string what) {
  c10d::BarrierOptions options;
  if (m_backend == Backend::nccl) {
    options.device_ids = {m_device.index()};
  }
  ++m_issued;
  PendingCollective pending{m_group->barrier(options), std::move(what)};
  wait(pending);
}

}  // namespace expctl::train
