#include "expctl/serve/server.hpp"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <httplib.h>

#include "expctl/api/compare.hpp"
#include "expctl/api/dashboard.hpp"
#include "expctl/api/group.hpp"
#include "expctl/api/runs.hpp"
#include "expctl/api/sweep.hpp"
#include "expctl/api/watch.hpp"
#include "expctl/compare/selector.hpp"
#include "expctl/serve/assets.hpp"
#include "expctl/serve/routes.hpp"
#include "expctl/serve/security.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::serve {

namespace {

using httplib::Request;
using httplib::Response;

/// One thread per connection, at most `limit` at once. cpp-httplib's default pool has
/// max(8, cores - 1) threads that each hold a connection for its whole life, so eight slow or idle
/// clients starve everyone else; threads cost ~10 KiB of touched stack each, so hundreds of
/// connections are cheap, and the head deadline and idle timeout end every one. At the limit the
/// accepting thread waits here for a free slot: the connections past the limit wait in the
/// kernel's listen queue (holding no descriptor and no memory of ours), not in a queue of ours.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(std::size_t limit) : m_limit(limit) {}

  void enqueue(std::function<void()> task) override {
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, [this] { return m_active < m_limit; });
    ++m_active;
    std::thread([this, task = std::move(task)] {
      task();
      std::lock_guard done(m_mutex);
      --m_active;
      m_done.notify_all();
    }).detach();
  }

  void shutdown() override {
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, [this] { return m_active == 0; });
  }

 private:
  std::size_t m_limit;
  std::size_t m_active = 0;
  std::mutex m_mutex;
  std::condition_variable m_done;
};

/// Read-only store connections, one per request in flight; opened when first needed.
class StorePool {
 public:
  StorePool(StoreOpener open, std::size_t size) : m_open(std::move(open)), m_size(size) {}

  class Lease {
   public:
    Lease(StorePool& pool, std::unique_ptr<store::Store> store) : m_pool(pool), m_store(std::move(store)) {}
    ~Lease() { m_pool.give_back(std::move(m_store)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    const store::Store& operator*() const { return *m_store; }

   private:
    StorePool& m_pool;
    std::unique_ptr<store::Store> m_store;
  };

  Lease take() {
    std::unique_lock lock(m_mutex);
    m_ready.wait(lock, [this] { return !m_idle.empty() || m_opened < m_size; });
    if (!m_idle.empty()) {
      auto store = std::move(m_idle.back());
      m_idle.pop_back();
      return Lease(*this, std::move(store));
    }
    ++m_opened;
    lock.unlock();
    try {
      return Lease(*this, std::make_unique<store::Store>(m_open()));
    } catch (...) {
      std::lock_guard again(m_mutex);
      --m_opened;
      m_ready.notify_one();
      throw;
    }
  }

 private:
  void give_back(std::unique_ptr<store::Store> store) {
    std::lock_guard lock(m_mutex);
    if (store) {
      m_idle.push_back(std::move(store));
    } else {
      --m_opened;
    }
    m_ready.notify_one();
  }

  StoreOpener m_open;
  std::size_t m_size;
  std::size_t m_opened = 0;
  std::vector<std::unique_ptr<store::Store>> m_idle;
  std::mutex m_mutex;
  std::condition_variable m_ready;
};

using Clock = std::chrono::steady_clock;

/// Writes all of `data` to `fd` by `deadline`; false when the client does not take it in time.
bool send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      data.remove_prefix(static_cast<std::size_t>(sent));
      continue;
    }
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd poller{fd, POLLOUT, 0};
    if (left <= 0 || ::poll(&poller, 1, static_cast<int>(left)) < 0 || (poller.revents & (POLLERR | POLLHUP)) != 0) {
      return false;
    }
  }
  return true;
}

/// A whole answer to a request the library never saw (its head too long, or too slow), with the
/// headers every answer carries.
std::string refusal(int status, const std::string& reason) {
  const char* phrase = status == 408   ? "Request Timeout"
                       : status == 414 ? "URI Too Long"
                       : status == 431 ? "Request Header Fields Too Large"
                                       : "Bad Request";
  const std::string body = safe_json_text(nlohmann::json{{"error", reason}, {"status", status}}.dump());
  std::string text = fmt::format("HTTP/1.1 {} {}\r\n", status, phrase);
  for (const auto& [key, value] : security_headers()) {
    text += key + ": " + value + "\r\n";
  }
  return text + fmt::format(
                    "Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n"
                    "Connection: close\r\n\r\n{}",
                    body.size(), body);
}

/// cpp-httplib, with a bounded reader in front of its request parsing and a listen backlog fit
/// for many clients.
///
/// The library (0.11.4) reads a request's head line by line into growing strings, keeps any
/// number of header lines and times out per read only, all before expctl's guard runs: a 128 MiB
/// request line, 25 000 header lines or a client trickling a byte every 3 s each cost memory or a
/// thread for as long as the client liked. Here each connection's head is read first, by
/// scan_request_head's limits, within k_head_deadline_s in all and k_idle_timeout_s of silence;
/// only a complete head within the limits reaches the library, as bytes in memory (`respond`, the
/// same path Server::answer takes). The answer is then written within k_write_deadline_s, and
/// stop() shuts every open connection down so the server ends within a second.
///
/// Debian's build listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG), so a burst of
/// connections beyond that waited in SYN retries (seconds); Linux lets listen() be called again
/// on the bound socket to change it.
class HttpServer : public httplib::Server {
 public:
  /// The bytes to send back for the bytes of a request received so far, or nothing while the head
  /// is incomplete.
  std::function<std::optional<std::string>(std::string_view)> respond;

  void widen_backlog() {
    if (svr_sock_ != INVALID_SOCKET) {
      ::listen(svr_sock_, SOMAXCONN);
    }
  }
  /// One request read from `input` and its answer written to `output`, through the library's
  /// own request path (parsing, limits, pre-routing guard, routes), as one connection from
  /// 127.0.0.1 that closes after it: what a socket would carry, without one.
  void answer(httplib::Stream& stream) {
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed, [](Request& request) {
      request.remote_addr = "127.0.0.1";
      request.remote_port = 40000;
    });
  }
  /// Every open connection shut down (their threads see the end at once), and those accepted
  /// from now on closed unread.
  void close_connections() {
    std::lock_guard lock(m_open_mutex);
    m_closing = true;
    for (const int fd : m_open) {
      ::shutdown(fd, SHUT_RDWR);
    }
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    {
      std::lock_guard lock(m_open_mutex);
      if (!m_closing) {
        m_open.insert(sock);
      } else {
        ::close(sock);
        return false;
      }
    }
    serve_connection(sock);
    {
      std::lock_guard lock(m_open_mutex);  // never shut down by close_connections() once closed
      m_open.erase(sock);
      ::close(sock);
    }
    return true;
  }

  void serve_connection(int fd) {
    const auto started = Clock::now();
    const auto head_deadline = started + std::chrono::seconds(k_head_deadline_s);
    auto last_byte = started;
    std::string received;
    char buffer[4096];
    for (;;) {
      const auto now = Clock::now();
      const auto until = std::min(head_deadline, last_byte + std::chrono::seconds(k_idle_timeout_s));
      if (now >= until) {
        if (!received.empty()) {  // a silent new connection (a browser's preconnect) gets no answer
          send_all(fd, refusal(408, "the request's head did not arrive in time"), now + std::chrono::seconds(1));
        }
        return;
      }
      pollfd poller{fd, POLLIN, 0};
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
      if (::poll(&poller, 1, static_cast<int>(wait)) <= 0) {
        continue;
      }
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        return;  // the client went away (or stop() shut the connection down)
      }
      if (n < 0) {
        continue;
      }
      received.append(buffer, static_cast<std::size_t>(n));
      last_byte = Clock::now();
      if (const auto answer = respond(received)) {
        if (send_all(fd, *answer, Clock::now() + std::chrono::seconds(k_write_deadline_s))) {
          linger(fd);
        }
        return;
      }
    }
  }

  /// After the answer: the client's end of the stream, for a moment, so a close with its unread
  /// bytes (a refused body) does not reset the connection before it has read the answer.
  static void linger(int fd) {
    ::shutdown(fd, SHUT_WR);
    const auto until = Clock::now() + std::chrono::milliseconds(500);
    char buffer[4096];
    std::size_t drained = 0;
    while (drained < 256 * 1024) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      pollfd poller{fd, POLLIN, 0};
      if (left <= 0 || ::poll(&poller, 1, static_cast<int>(left)) <= 0) {
        return;
      }
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n <= 0) {
        return;
      }
      drained += static_cast<std::size_t>(n);
    }
  }

  std::mutex m_open_mutex;
  std::set<int> m_open;
  bool m_closing = false;
};

/// A connection's bytes in memory: reads take from the request, writes go to the answer.
class MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string_view input) : m_input(input) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min(size, m_input.size() - m_read);
    std::copy_n(m_input.data() + m_read, n, ptr);
    m_read += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    m_output.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string take_output() { return std::move(m_output); }

 private:
  std::string_view m_input;
  std::size_t m_read = 0;
  std::string m_output;
};

/// A request's problem with its status (400 bad parameter, 404 no such run).
struct HttpError {
  int status;
  std::string message;
};

std::string param(const Request& request, const char* name) {
  if (request.get_param_value_count(name) > 1) {
    throw HttpError{400, fmt::format("parameter {} given more than once", name)};
  }
  return request.get_param_value(name);
}

template <typename T>
T number_param(const Request& request, const char* name, T fallback, T low, T high) {
  const std::string text = param(request, name);
  if (text.empty()) {
    return fallback;
  }
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < low || value > high) {
    throw HttpError{400, fmt::format("parameter {} must be a whole number from {} to {}", name, low, high)};
  }
  return value;
}

/// A path as cpp-httplib's patterns (regular expressions) match it exactly: "/api/series.csv"
/// must not also match "/api/seriesXcsv".
std::string regex_escaped(std::string_view path) {
  std::string pattern;
  for (const char c : path) {
    if (std::string_view(R"(\^$.|?*+()[]{})").find(c) != std::string_view::npos) {
      pattern += '\\';
    }
    pattern += c;
  }
  return pattern;
}

void send_json(Response& response, const nlohmann::json& document) {
  response.set_content(safe_json_text(document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)),
                       "application/json; charset=utf-8");
}

void send_error(Response& response, int status, const std::string& message) {
  response.status = status;
  send_json(response, nlohmann::json{{"error", message}, {"status", status}});
}

/// The run with exactly this id (no prefixes, no spec files: a request never names a file).
store::RunRecord exact_run(const store::Store& store, const std::string& id) {
  if (id.empty()) {
    throw HttpError{400, "parameter id (a run id) is missing"};
  }
  auto run = store.run(id);
  if (!run) {
    throw HttpError{404, "no run with this id in the store"};
  }
  return *run;
}

/// A compare side: any selector of the grammar except a spec file (a path on the server's disk).
std::string group_param(const Request& request, const char* name) {
  const std::string text = param(request, name);
  if (text.empty()) {
    throw HttpError{400, fmt::format("parameter {} (runs to compare) is missing", name)};
  }
  for (const auto& selector : compare::parse_group(text)) {
    if (selector.kind == store::SelectorKind::spec_file) {
      throw HttpError{400, "the server reads no spec files: name runs by id, tag:NAME or spec:HASHPREFIX"};
    }
  }
  return text;
}

api::RunsQuery runs_query(const Request& request) {
  api::RunsQuery query;
  if (const std::string status = param(request, "status"); !status.empty()) {
    query.status = store::parse_run_status(status);
    if (!query.status) {
      throw HttpError{400, "parameter status is not a run status"};
    }
  }
  query.tag = param(request, "tag");
  query.name = param(request, "name");
  query.spec_prefix = param(request, "spec");
  for (const char c : query.spec_prefix) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      throw HttpError{400, "parameter spec must be lowercase hex"};
    }
  }
  const std::string sort = param(request, "sort");
  if (sort == "name") {
    query.sort = api::RunsSort::name;
  } else if (sort == "status") {
    query.sort = api::RunsSort::status;
  } else if (sort == "duration") {
    query.sort = api::RunsSort::duration;
  } else if (!sort.empty() && sort != "started") {
    throw HttpError{400, "parameter sort must be started, name, status or duration"};
  }
  const std::string order = param(request, "order");
  if (!order.empty() && order != "asc" && order != "desc") {
    throw HttpError{400, "parameter order must be asc or desc"};
  }
  query.descending = order != "asc";
  query.offset = number_param<std::size_t>(request, "offset", 0, 0, 100'000'000);
  query.limit = number_param<std::size_t>(request, "limit", 50, 1, api::k_max_page_rows);
  // Metric columns: col=AGG:METRIC, once per column (the metric may hold any character, ':' too);
  // metric=NAME&agg=AGG is one column too (links made before there were several).
  const auto aggregate_of = [](const std::string& text) {
    const auto aggregate = api::parse_aggregate(text.empty() ? "last" : text);
    if (!aggregate) {
      throw HttpError{400, "a metric column's aggregate must be last, min or max"};
    }
    return *aggregate;
  };
  if (const std::string metric = param(request, "metric"); !metric.empty()) {
    query.columns.push_back({metric, aggregate_of(param(request, "agg"))});
  }
  const std::size_t count = request.get_param_value_count("col");
  if (count + query.columns.size() > api::k_max_metric_columns) {
    throw HttpError{400, fmt::format("at most {} metric columns (col=AGG:METRIC)", api::k_max_metric_columns)};
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::string column = request.get_param_value("col", i);
    const std::size_t colon = column.find(':');
    if (colon == std::string::npos || colon + 1 == column.size()) {
      throw HttpError{400, "parameter col must be AGG:METRIC, e.g. min:loss"};
    }
    query.columns.push_back({column.substr(colon + 1), aggregate_of(column.substr(0, colon))});
  }
  return query;
}

api::XAxis x_axis(const Request& request) {
  const std::string x = param(request, "x");
  if (!x.empty() && x != "step" && x != "wall") {
    throw HttpError{400, "parameter x must be step or wall"};
  }
  return x == "wall" ? api::XAxis::wall : api::XAxis::step;
}

/// from=STEP&to=STEP: the steps a zoomed chart shows (either may be left out).
void step_range(const Request& request, std::optional<std::int64_t>& from, std::optional<std::int64_t>& to) {
  constexpr auto low = std::numeric_limits<std::int64_t>::min() + 1;
  constexpr auto high = std::numeric_limits<std::int64_t>::max();
  if (!param(request, "from").empty()) {
    from = number_param<std::int64_t>(request, "from", 0, low, high);
  }
  if (!param(request, "to").empty()) {
    to = number_param<std::int64_t>(request, "to", 0, low, high);
  }
  if (from && to && *from > *to) {
    throw HttpError{400, "parameter from is after to: give the first step, then the last"};
  }
}

api::SeriesQuery series_query(const Request& request, const store::Store& store) {
  api::SeriesQuery query;
  query.run_id = exact_run(store, param(request, "id")).id;
  query.metric = param(request, "metric");
  if (query.metric.empty()) {
    query.metric = util::metric::loss;
  }
  query.x = x_axis(request);
  query.points = number_param<std::size_t>(request, "points", 1000, 3, api::k_max_series_points);
  if (!param(request, "after").empty()) {
    query.after_step = number_param<std::int64_t>(request, "after", 0, -1, std::numeric_limits<std::int64_t>::max());
  }
  step_range(request, query.from_step, query.to_step);
  return query;
}

/// The runs of a group parameter (compare's grammar, no spec files), at most k_max_group_runs.
std::vector<store::RunRecord> group_runs(const store::Store& store, const Request& request, const char* name) {
  auto runs = compare::resolve_group(store, group_param(request, name));
  if (runs.size() > api::k_max_group_runs) {
    throw HttpError{400, fmt::format("parameter {} names {} runs; at most {} are drawn together (narrow the tag)", name,
                                     runs.size(), api::k_max_group_runs)};
  }
  return runs;
}

}  // namespace

struct Server::Impl {
  Impl(StoreOpener open, ServeOptions given) : options(std::move(given)), stores(std::move(open), options.store_connections) {}

  ServeOptions options;
  StorePool stores;
  HttpServer http;
  std::vector<std::string> allowed;
  std::string cookie_name;
  std::atomic<std::size_t> answered{0};
  int port = 0;

  void listening_on(int bound) {
    port = bound;
    allowed = allowed_hosts(options.host, bound, options.allow_hosts);
    cookie_name = fmt::format("expctl_token_{}", bound);
  }

  // A request's bytes so far: nothing while its head is incomplete; a refusal when it passes a
  // limit; else the library's answer to the head alone (no body is ever read).
  std::optional<std::string> respond(std::string_view received) {
    const HeadScan scan = scan_request_head(received);
    if (scan.state == HeadScan::State::need_more) {
      return std::nullopt;
    }
    if (scan.state == HeadScan::State::refused) {
      return refusal(scan.status, scan.reason);
    }
    MemoryStream stream(received.substr(0, scan.head_bytes));
    http.answer(stream);
    return stream.take_output();
  }

  // Every request: the checks of security.hpp, then the token (Bearer, cookie, or once ?token=).
  httplib::Server::HandlerResponse guard(const Request& request, Response& response) {
    RequestFacts facts;
    facts.method = request.method;
    facts.target = request.target;
    for (const auto& [key, value] : request.headers) {
      // The client's headers, not the four the library adds (REMOTE_ADDR, LOCAL_PORT, ...).
      if (key != "REMOTE_ADDR" && key != "REMOTE_PORT" && key != "LOCAL_ADDR" && key != "LOCAL_PORT") {
        ++facts.header_count;
        facts.header_bytes += key.size() + value.size() + 4;
      }
    }
    if (request.has_header("Content-Length")) {
      facts.content_length = request.get_header_value("Content-Length");
    }
    facts.has_transfer_encoding = request.has_header("Transfer-Encoding");
    facts.has_expect = request.has_header("Expect");
    facts.host = request.get_header_value("Host");
    if (request.has_header("Origin")) {
      facts.origin = request.get_header_value("Origin");
    }
    if (request.has_header("Sec-Fetch-Site")) {
      facts.sec_fetch_site = request.get_header_value("Sec-Fetch-Site");
    }
    // No compression: Debian's cpp-httplib brotli-compresses every text/* answer at quality 11
    // when the browser accepts it, 1.4 s of CPU for Chart.js alone. Loopback needs none, and a
    // team's reverse proxy compresses (and caches) better. The request is the library's own
    // non-const object, handed to this handler as const.
    const_cast<Request&>(request).headers.erase("Accept-Encoding");
    // One range at most: the library answers many with a multipart body that repeats its part
    // headers per range (a 7.9 KB Range header drew 708 KB), so many get the whole body instead.
    if (request.ranges.size() > 1) {
      const_cast<Request&>(request).ranges.clear();
    }
    const Verdict verdict = check_request(facts, allowed);
    if (verdict.status == 0 && request.params.size() > k_max_params) {
      return refuse(response, 414, fmt::format("more than {} query parameters", k_max_params));
    }
    if (verdict.status != 0) {
      if (verdict.status == 405) {
        response.set_header("Allow", "GET, HEAD");
      }
      return refuse(response, verdict.status, verdict.reason);
    }
    const std::string authorization = request.get_header_value("Authorization");
    if (authorization.starts_with("Bearer ") && same_secret(authorization.substr(7), options.token)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (const auto cookie = cookie_value(request.get_header_value("Cookie"), cookie_name);
        cookie && same_secret(*cookie, options.token)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (request.get_param_value_count("token") == 1 && same_secret(request.get_param_value("token"), options.token)) {
      // Once: the token becomes a cookie this browser sends back, and the URL loses it (history,
      // screenshots and proxies' logs never hold it again).
      // --login-days: a cookie that outlives the browser session (Max-Age), else a session cookie.
      const std::string lifetime = options.login_lifetime.count() > 0
                                       ? fmt::format("; Max-Age={}", options.login_lifetime.count())
                                       : std::string();
      response.set_header("Set-Cookie", fmt::format("{}={}; Path=/; HttpOnly; SameSite=Strict{}", cookie_name,
                                                    options.token, lifetime));
      std::string query;
      for (const auto& [key, value] : request.params) {
        if (key != "token") {
          query += (query.empty() ? "?" : "&") + httplib::detail::encode_query_param(key) + "=" +
                   httplib::detail::encode_query_param(value);
        }
      }
      response.status = 303;
      // A path of this server only: "//host/..." or "/\\host" (decoded from %2f, %5c) would send the
      // browser to another site.
      const bool own_path =
          request.path.starts_with("/") && !request.path.starts_with("//") && !request.path.starts_with("/\\");
      response.set_header("Location", (own_path ? request.path : "/") + query);
      return httplib::Server::HandlerResponse::Handled;
    }
    return refuse(response, 401,
                  "a token is required: open the URL expctl serve printed (it holds ?token=...), or send "
                  "'Authorization: Bearer TOKEN'");
  }

  httplib::Server::HandlerResponse refuse(Response& response, int status, const std::string& reason) {
    send_error(response, status, reason);
    // Whatever the client sent after the headers is never read: close, so it is not taken for a
    // next request either.
    response.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  }

  template <typename Handler>
  httplib::Server::Handler route(Handler handler) {
    return [handler](const Request& request, Response& response) {
      try {
        handler(request, response);
      } catch (const HttpError& error) {
        send_error(response, error.status, error.message);
      } catch (const util::Failure& error) {
        // A selector that names no run, a store that cannot be read: the message names it.
        send_error(response, error.exit_code() == util::ExitCode::run_failed ? 500 : 404, error.what());
      } catch (const std::exception& error) {
        send_error(response, 500, error.what());
      }
    };
  }

  // Every row of routes.cpp gets its handler here, and nothing else is registered: a row without
  // a handler, or a handler without a row, stops the server from being made at all.
  void add_routes() {
    std::map<std::string_view, httplib::Server::Handler> handlers;
    const auto get = [&handlers](std::string_view path, httplib::Server::Handler handler) {
      handlers.emplace(path, std::move(handler));
    };
    get("/assets/", [](const Request& request, Response& response) {
      const auto asset = find_asset(request.path);
      if (!asset) {
        send_error(response, 404, "no such asset");
        return;
      }
      response.set_content(std::string(asset->bytes), std::string(asset->content_type));
      // In place of the default no-store (set_header adds a second header; with both, no-store wins).
      response.headers.erase("Cache-Control");
      response.set_header("Cache-Control", "private, max-age=3600");
    });
    get("/api/runs", route([this](const Request& request, Response& response) {
          const auto query = runs_query(request);
          const auto store = stores.take();
          send_json(response, api::runs_page(*store, query));
        }));
    get("/api/run", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          const auto run = exact_run(*store, param(request, "id"));
          nlohmann::json document = api::details_json(api::read_details(*store, run.id, "serve", options.folder));
          document["run"].erase("run_dir");
          send_json(response, document);
        }));
    get("/api/watch", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          const auto run = exact_run(*store, param(request, "id"));
          nlohmann::json document = api::view_json(api::watch_view(*store, run.id, options.folder));
          document["run"].erase("run_dir");
          send_json(response, document);
        }));
    get("/api/series", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          send_json(response, api::series_document(*store, series_query(request, *store)));
        }));
    get("/api/sweeps",
        route([this](const Request&, Response& response) { send_json(response, api::sweeps_list(options.sweeps)); }));
    get("/api/sweep", route([this](const Request& request, Response& response) {
          const std::string name = param(request, "name");
          const auto found = std::find_if(options.sweeps.begin(), options.sweeps.end(),
                                          [&](const auto& sweep) { return sweep->name == name; });
          if (found == options.sweeps.end()) {
            throw HttpError{404, options.sweeps.empty() ? "this server shows no sweeps: start it with --sweep FILE"
                                                        : "no sweep of this name is served (/api/sweeps lists them)"};
          }
          std::vector<std::string> metrics;
          const std::size_t count = request.get_param_value_count("metric");
          if (count > api::k_max_metric_columns) {
            throw HttpError{400, fmt::format("at most {} metrics", api::k_max_metric_columns)};
          }
          for (std::size_t i = 0; i < count; ++i) {
            metrics.push_back(request.get_param_value("metric", i));
          }
          const auto store = stores.take();
          const auto dir = options.array_dirs.find((*found)->name);
          send_json(response,
                    api::sweep_document(*store, **found, metrics,
                                        dir == options.array_dirs.end() ? std::vector<sweep::ArrayPoint>{}
                                                                        : sweep::array_points(**found, dir->second)));
        }));
    get("/api/phases", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          api::PhaseSharesQuery query;
          query.run_id = exact_run(*store, param(request, "id")).id;
          query.rank = number_param<int>(request, "rank", 0, 0, 1'000'000);
          query.x = x_axis(request);
          query.buckets = number_param<std::size_t>(request, "buckets", 300, 1, api::k_max_series_points / 3);
          send_json(response, api::phase_shares_document(*store, query));
        }));
    get("/api/series.csv", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          auto query = series_query(request, *store);
          query.points = api::k_max_series_points;
          response.set_content(api::series_csv(api::series_document(*store, query)), "text/csv; charset=utf-8");
          response.set_header("Content-Disposition", "attachment; filename=\"series.csv\"");
        }));
    get("/api/log", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          const auto run = exact_run(*store, param(request, "id"));
          const int rank = number_param<int>(request, "rank", 0, 0, 1'000'000);
          const auto text = api::log_tail(*store, run, rank, 64 * 1024, options.folder);
          if (!text) {
            throw HttpError{404, "no log of this rank in the run's folder on this host"};
          }
          response.set_content(*text, "text/plain; charset=utf-8");
        }));
    get("/api/metrics", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          send_json(response, api::metric_names_document(*store, exact_run(*store, param(request, "id")).id));
        }));
    get("/api/group", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          api::BandQuery query;
          const bool by_selector = !param(request, "runs").empty();
          if (by_selector == !param(request, "like").empty()) {
            throw HttpError{400,
                            "give runs=SELECTOR (e.g. all:tag:ab:NAME:a) or like=RUN (its runs but the seed), "
                            "one of them"};
          }
          query.runs = by_selector ? group_runs(*store, request, "runs")
                                   : api::seed_group(*store, exact_run(*store, param(request, "like")));
          query.metric = param(request, "metric");
          if (query.metric.empty()) {
            query.metric = util::metric::loss;
          }
          query.points = number_param<std::size_t>(request, "points", 1000, 1, api::k_max_series_points);
          step_range(request, query.from_step, query.to_step);
          send_json(response, api::band_document(*store, query));
        }));
    get("/api/spec-diff", route([this](const Request& request, Response& response) {
          const auto store = stores.take();
          send_json(response, api::spec_diff_document(*store, group_runs(*store, request, "runs")));
        }));
    get("/api/compare", route([this](const Request& request, Response& response) {
          const std::string a = group_param(request, "a");
          const std::string b = group_param(request, "b");
          const auto store = stores.take();
          send_json(response, api::compare_document(api::compare_groups(*store, a, b, {})));
        }));
    const auto page = [](const Request&, Response& response) {
      response.set_content(std::string(index_page()), "text/html; charset=utf-8");
    };
    for (const Route& row : routes()) {
      if (row.kind == RouteKind::page) {
        http.Get(regex_escaped(row.path), page);
        continue;
      }
      const auto handler = handlers.find(row.path);
      EXPCTL_ASSERT(handler != handlers.end(), "serve: route {} (routes.cpp) has no handler", row.path);
      http.Get(regex_escaped(row.path) + (row.kind == RouteKind::asset ? R"([a-z]+\.(js|css))" : ""), handler->second);
      handlers.erase(handler);
    }
    EXPCTL_ASSERT(handlers.empty(), "serve: the handler of {} has no row in routes.cpp", handlers.begin()->first);
  }
};

Server::Server(StoreOpener open, ServeOptions options) : m_impl(std::make_unique<Impl>(std::move(open), std::move(options))) {
  Impl& impl = *m_impl;
  const std::size_t limit = impl.options.max_connections;
  impl.http.new_task_queue = [limit] { return new ConnectionThreads(limit); };
  httplib::Headers headers;
  for (const auto& [key, value] : security_headers()) {
    headers.emplace(key, value);
  }
  impl.http.set_default_headers(headers);
  // One request per connection (HttpServer's reader hands the library one head and closes after
  // its answer). cpp-httplib 0.11.4 would keep a connection open after a refused request whatever
  // the response says, and then skip the body it did not read: a chunked one until its last
  // chunk, however long that takes (the unbounded read of CVE-2025-53629). Closing after every
  // answer ends that at once, and costs a loopback connect per request; the live pages poll once
  // a second, so nothing is lost. The timeouts of a connection are HttpServer's (k_head_deadline_s,
  // k_idle_timeout_s, k_write_deadline_s); the library's apply to no read or write of a socket.
  impl.http.set_keep_alive_max_count(1);
  impl.http.set_payload_max_length(0);
  // "Expect: 100-continue" would invite the body we never read. Answered whole here (any status
  // but 100 and 417 makes the library send `response` and stop; 417 itself it would send as a
  // bare status line and then route the request anyway). The guard refuses any other Expect.
  impl.http.set_expect_100_continue_handler([](const Request&, Response& response) {
    send_error(response, 417, "requests carry no body here, so nothing is expected");
    response.set_header("Connection", "close");
    return 0;
  });
  impl.http.set_pre_routing_handler([&impl](const Request& request, Response& response) {
    return impl.guard(request, response);
  });
  impl.http.set_post_routing_handler([&impl](const Request&, Response&) { ++impl.answered; });
  impl.http.set_error_handler([](const Request& request, Response& response) {
    // An error is answered whole, never a range of it (the library applies a request's ranges to
    // error bodies too).
    const_cast<Request&>(request).ranges.clear();
    if (response.body.empty()) {
      send_error(response, response.status, response.status == 404 ? "no such page" : "bad request");
    }
  });
  impl.http.respond = [&impl](std::string_view received) { return impl.respond(received); };
  impl.add_routes();
  impl.listening_on(impl.options.port);  // until bind() knows the port
}

Server::~Server() {
  stop();
}

int Server::bind() {
  Impl& impl = *m_impl;
  const int port = impl.options.port == 0 ? impl.http.bind_to_any_port(impl.options.host)
                                           : (impl.http.bind_to_port(impl.options.host, impl.options.port)
                                                  ? impl.options.port
                                                  : -1);
  if (port <= 0) {
    throw util::Failure(fmt::format("cannot listen on {}:{}: the port is taken or the address is not this "
                                    "host's (pick another with --port or --host)",
                                    impl.options.host, impl.options.port),
                        util::ExitCode::run_failed);
  }
  impl.http.widen_backlog();
  impl.listening_on(port);
  return port;
}

std::string Server::answer(std::string_view raw_request) {
  return m_impl->respond(raw_request).value_or(std::string());
}

void Server::run() {
  m_impl->http.listen_after_bind();
}

void Server::stop() {
  m_impl->http.stop();
  m_impl->http.close_connections();
}

std::size_t Server::requests() const {
  return m_impl->answered.load();
}

}  // namespace expctl::serve
