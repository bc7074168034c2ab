#pragma once
/// `expctl serve`: a read-only HTTP dashboard over a store (docs/serve.md). The HTTP library
/// (Debian's cpp-httplib) stays in server.cpp; this header is plain types.
///
/// Every request passes security.hpp's checks and the token before a route runs. Routes read the
/// store through a small pool of read-only connections (one per request in flight, WAL readers
/// never block a writer) and answer the documents of the api module; pages and scripts are
/// embedded in the binary (assets.hpp), so no path of a request ever names a file.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/api/run_folder.hpp"
#include "expctl/store/store.hpp"
#include "expctl/sweep/sweep.hpp"

namespace expctl::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  ///< 0: a free port (tests)
  std::string token;  ///< required on every request
  /// How long the login cookie lasts (Max-Age); 0: until the browser closes (a session cookie).
  std::chrono::seconds login_lifetime{0};
  std::vector<std::string> allow_hosts;  ///< more names the Host header may carry (a proxy's)
  std::size_t max_connections = 512;     ///< connections served at once; more wait their turn
  std::size_t store_connections = 8;     ///< read-only store connections (requests in flight)
  api::FolderAccess folder{api::FolderPolicy::under_runs_root};
  /// Sweeps the sweep page shows (`expctl serve --sweep FILE`, loaded at start: a request never
  /// names a file), by name.
  std::vector<std::shared_ptr<const sweep::Sweep>> sweeps;
  /// Per sweep name: the folder of its Slurm arrays' records and task stores (sweep::array_dir),
  /// read for the points an array holds; none: the page shows the store's runs only.
  std::map<std::string, std::filesystem::path> array_dirs;
};

/// Opens one read-only connection to the store (called for each pooled connection).
using StoreOpener = std::function<store::Store()>;

class Server {
 public:
  Server(StoreOpener open, ServeOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds the listening socket; returns the port (the chosen one for port 0). Throws
  /// util::Failure naming the address when it cannot bind.
  int bind();
  /// Serves until stop(); returns when the listening socket is closed and requests are done.
  void run();
  /// Stops accepting and ends run() (from any thread or a signal-safe watcher).
  void stop();

  /// The bytes of one connection's answer to the bytes `raw_request` of one request, without a
  /// socket: the same parsing, limits, checks and routes as a connection from 127.0.0.1 to the
  /// bound port (before bind(): to ServeOptions::port). For the fuzz target and tests.
  std::string answer(std::string_view raw_request);

  /// Requests answered so far (tests and the bench).
  std::size_t requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace expctl::serve
