// expctl serve over a real socket: every request is written byte for byte by a raw client, so the
// tests see exactly what an attacker's client would (no HTTP library in between).
#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "store_fixture.hpp"
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "expctl/serve/assets.hpp"
#include "expctl/serve/routes.hpp"
#include "expctl/serve/server.hpp"
#include "expctl/sweep/array_progress.hpp"

using namespace expctl;

namespace {

const std::string k_token = "test-token-0123456789abcdef";

struct Reply {
  int status = 0;
  std::string head;
  std::string body;
  bool has_header(const std::string& line) const { return head.find(line) != std::string::npos; }
};

int connect_to(int port) {
  // No REQUIRE here: the pollers call this from their own threads, and Catch2 is not thread-safe.
  const int fd = test::connect_loopback(port);
  if (fd < 0) {
    throw std::runtime_error("cannot connect to the server under test");
  }
  return fd;
}

/// Everything the server sends until it closes (or `timeout` passes), split at the first blank line.
std::string read_all(int fd, std::chrono::milliseconds timeout) {
  std::string data;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd poller{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (::poll(&poller, 1, static_cast<int>(std::max<long>(1, left.count()))) <= 0) {
      break;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      break;
    }
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

Reply parse(const std::string& data) {
  Reply reply;
  const auto blank = data.find("\r\n\r\n");
  reply.head = data.substr(0, blank);
  reply.body = blank == std::string::npos ? "" : data.substr(blank + 4);
  if (data.starts_with("HTTP/1.1 ")) {
    reply.status = std::stoi(data.substr(9, 3));
  }
  return reply;
}

/// Sends as much of `total` bytes (`first`, then `filler` repeated) as the server takes before it
/// answers and closes; returns the bytes sent and the answer.
std::pair<std::size_t, std::string> flood(int port, const std::string& first, char filler, std::size_t total) {
  const int fd = connect_to(port);
  std::size_t sent = 0;
  const std::string block = first + std::string(65536 - first.size(), filler);
  const std::string more(65536, filler);
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sent < total && std::chrono::steady_clock::now() < deadline) {
    const std::string& chunk = sent == 0 ? block : more;
    const ssize_t n = ::send(fd, chunk.data(), std::min(chunk.size(), total - sent), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN) {
      break;  // the server closed
    }
    pollfd poller{fd, POLLOUT | POLLIN, 0};
    ::poll(&poller, 1, 100);
    if ((poller.revents & POLLIN) != 0) {
      break;  // it answered: read that
    }
  }
  answer = read_all(fd, std::chrono::seconds(3));
  ::close(fd);
  return {sent, answer};
}

/// Sends `raw` as it is and reads the answer.
Reply ask(int port, const std::string& raw, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const int fd = connect_to(port);
  ::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
  const Reply reply = parse(read_all(fd, timeout));
  ::close(fd);
  return reply;
}

std::string request(int port, const std::string& target, const std::string& extra = "",
                    const std::string& method = "GET") {
  return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" + extra +
         "Connection: close\r\n\r\n";
}

std::string bearer() {
  return "Authorization: Bearer " + k_token + "\r\n";
}

/// A store with two runs, and a server on a free loopback port in a thread.
struct Served {
  test::StoreFixture fixture;
  std::string run_id;
  std::unique_ptr<serve::Server> server;
  std::thread thread;
  int port = 0;

  explicit Served(serve::ServeOptions options = {}) {
    const auto run = fixture.new_run("served");
    run_id = run.id;
    fixture.db.append_metrics(run.id, std::vector<store::MetricPoint>{{0, 1, "loss", 2.0}, {0, 2, "loss", 1.5}});
    fixture.db.finish_run(run.id, store::RunStatus::completed, 0, "");
    options.port = 0;
    options.token = k_token;
    const auto path = fixture.db_path.string();
    server = std::make_unique<serve::Server>([path] { return store::Store::open(path, store::OpenMode::read_only); },
                                             options);
    port = server->bind();
    thread = std::thread([this] { server->run(); });
  }
  ~Served() {
    server->stop();
    if (thread.joinable()) {
      thread.join();
    }
  }
};

}  // namespace

TEST_CASE("serve: every request needs the token, and ?token= once becomes a cookie", "[serve]") {
  Served served;
  const int port = served.port;
  Reply reply = ask(port, request(port, "/api/runs"));
  CHECK(reply.status == 401);
  CHECK(reply.body.find("token") != std::string::npos);
  CHECK(ask(port, request(port, "/")).status == 401);
  CHECK(ask(port, request(port, "/assets/app.js")).status == 401);
  CHECK(ask(port, request(port, "/api/runs", "Authorization: Bearer wrong-token-0123456789\r\n")).status == 401);
  CHECK(ask(port, request(port, "/api/runs?token=wrong")).status == 401);

  reply = ask(port, request(port, "/api/runs", bearer()));
  CHECK(reply.status == 200);
  CHECK(reply.body.find(served.run_id) != std::string::npos);

  reply = ask(port, request(port, "/run?id=" + served.run_id + "&token=" + k_token));
  CHECK(reply.status == 303);
  CHECK(reply.has_header("Location: /run?id=" + served.run_id + "\r"));
  const std::string cookie = "expctl_token_" + std::to_string(port) + "=" + k_token;
  CHECK(reply.has_header("Set-Cookie: " + cookie + "; Path=/; HttpOnly; SameSite=Strict\r"));  // a session cookie
  reply = ask(port, request(port, "/api/runs", "Cookie: other=1; " + cookie + "\r\n"));
  CHECK(reply.status == 200);
  CHECK(ask(port, request(port, "/api/runs", "Cookie: expctl_token_1=" + k_token + "\r\n")).status == 401);

  // The redirect stays on this server, whatever the path decodes to.
  for (const std::string path : {"//evil.example/x", "/%2fevil.example/x", "/%5cevil.example", "/\\evil.example"}) {
    INFO(path);
    reply = ask(port, request(port, path + "?token=" + k_token));
    CHECK(reply.status == 303);
    CHECK(reply.has_header("Location: /\r"));
  }
}

TEST_CASE("serve: a foreign Host or Origin is refused even with the token", "[serve]") {
  Served served;
  const int port = served.port;
  const std::string foreign = "GET /api/runs HTTP/1.1\r\nHost: evil.example:" + std::to_string(port) + "\r\n" +
                              bearer() + "Connection: close\r\n\r\n";
  CHECK(ask(port, foreign).status == 403);
  const std::string no_host = "GET /api/runs HTTP/1.1\r\n" + bearer() + "Connection: close\r\n\r\n";
  CHECK(ask(port, no_host).status == 403);
  CHECK(ask(port, request(port, "/api/runs", bearer() + "Origin: http://evil.example\r\n")).status == 403);
  CHECK(ask(port, request(port, "/api/runs", bearer() + "Origin: null\r\n")).status == 403);
  CHECK(ask(port, request(port, "/api/runs", bearer() + "Sec-Fetch-Site: cross-site\r\n")).status == 403);
  CHECK(ask(port, request(port, "/api/runs", bearer() + "Origin: http://localhost:" + std::to_string(port) +
                                                      "\r\n"))
            .status == 200);
}

TEST_CASE("serve: only GET and HEAD are answered, and no body is ever read", "[serve]") {
  Served served;
  const int port = served.port;
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    const Reply reply = ask(port, request(port, "/api/runs", bearer() + "Content-Length: 0\r\n", method));
    CHECK(reply.status == 405);
    CHECK(reply.has_header("Allow: GET, HEAD"));
  }
  const Reply head = ask(port, request(port, "/api/runs", bearer(), "HEAD"));
  CHECK(head.status == 200);
  CHECK(head.body.empty());

  CHECK(ask(port, request(port, "/api/runs", bearer() + "Content-Length: 5\r\n") + "abcde").status == 413);
  // Expect is refused before the body size (security.cpp's order): 417, not 413.
  CHECK(ask(port, request(port, "/api/runs", bearer() + "Expect: 100-continue\r\nContent-Length: 5\r\n")).status ==
        417);

  // A chunked body that never ends (CVE-2025-53629's shape) is refused at once, unread: the answer
  // comes while the client is still sending, and the connection is closed.
  const int fd = connect_to(port);
  const std::string start = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" + bearer() +
                            "Transfer-Encoding: chunked\r\n\r\n";
  ::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
  const std::string chunk = "10000\r\n" + std::string(65536, 'x') + "\r\n";
  for (int i = 0; i < 4; ++i) {
    ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  const auto started = std::chrono::steady_clock::now();
  const Reply chunked = parse(read_all(fd, std::chrono::seconds(10) * test::timeout_scale()));
  ::close(fd);
  CHECK(chunked.status == 413);
  // The server's read timeout is 10 s: an answer within 4 s was not waiting for the body.
  // EXPCTL_TEST_TIMEOUT_SCALE stretches the limit on slow builds (test::timeout_scale()).
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(4) * test::timeout_scale());

  // A refused body is never taken for a second request (no smuggling): the body here is a whole
  // request, which a server that refuses without reading would answer next. (cpp-httplib 0.11.4
  // skips a Content-Length body it did not read, so this holds with keep-alive too; a chunked
  // body it skips until its end, which is why the connection closes after every answer: the
  // check above fails, 5 s instead of at once, without that.)
  const std::string inner = request(port, "/api/runs", bearer());
  const std::string smuggled =
      request(port, "/api/runs", bearer() + "Content-Length: " + std::to_string(inner.size()) + "\r\n");
  const std::string both = smuggled.substr(0, smuggled.find("Connection: close")) + "\r\n" + inner;
  const int fd2 = connect_to(port);
  ::send(fd2, both.data(), both.size(), MSG_NOSIGNAL);
  const std::string answer = read_all(fd2, std::chrono::seconds(3));
  ::close(fd2);
  CHECK(answer.starts_with("HTTP/1.1 413"));
  CHECK(answer.find("HTTP/1.1 200") == std::string::npos);
}

TEST_CASE("serve: limits on the target, headers and parameters", "[serve]") {
  Served served;
  const int port = served.port;
  CHECK(ask(port, request(port, "/api/runs?name=" + std::string(3000, 'a'), bearer())).status == 414);
  std::string many;
  for (int i = 0; i < 80; ++i) {
    many += "X-Filler-" + std::to_string(i) + ": 1\r\n";
  }
  CHECK(ask(port, request(port, "/api/runs", bearer() + many)).status == 431);
  std::string params = "/api/runs?";
  for (int i = 0; i < 40; ++i) {
    params += "p" + std::to_string(i) + "=1&";
  }
  CHECK(ask(port, request(port, params, bearer())).status == 414);
  CHECK(ask(port, request(port, "/api/runs?limit=5&limit=6", bearer())).status == 400);
  CHECK(ask(port, request(port, "/api/runs?limit=-1", bearer())).status == 400);
  CHECK(ask(port, request(port, "/api/runs?status=bogus", bearer())).status == 400);
}

TEST_CASE("serve: every route of the table is served, and only with the token, its Host and GET", "[serve]") {
  Served served;
  const int port = served.port;
  REQUIRE(serve::routes().size() >= 15);
  for (const serve::Route& route : serve::routes()) {
    const std::string target = serve::example_target(route);
    INFO(target);
    // The route's own handler answers (a page, an asset, a document or its 400 for a missing
    // parameter), not the library's 404 for a path nobody registered.
    const Reply open = ask(port, request(port, target, bearer()));
    CHECK(open.status != 0);
    CHECK(open.body.find("no such page") == std::string::npos);
    if (route.kind == serve::RouteKind::page) {
      CHECK(open.status == 200);
      CHECK(open.body == serve::index_page());
    }
    for (const Reply& reply : {open, ask(port, request(port, target))}) {
      CHECK(reply.has_header("Content-Security-Policy: default-src 'none'; script-src 'self'"));
      CHECK(reply.has_header("X-Content-Type-Options: nosniff"));
      CHECK(reply.has_header("X-Frame-Options: DENY"));
    }
    const Reply no_token = ask(port, request(port, target));
    CHECK(no_token.status == 401);
    CHECK(no_token.body.find("Chart") == std::string::npos);
    CHECK(ask(port, request(port, target + "?token=wrong")).status == 401);
    const std::string foreign =
        "GET " + target + " HTTP/1.1\r\nHost: evil.example:" + std::to_string(port) + "\r\n" + bearer() + "\r\n";
    CHECK(ask(port, foreign).status == 403);
    CHECK(ask(port, request(port, target, bearer() + "Origin: http://evil.example\r\n")).status == 403);
    CHECK(ask(port, request(port, target, bearer() + "Sec-Fetch-Site: cross-site\r\n")).status == 403);
    for (const std::string method : {"POST", "PUT", "DELETE"}) {
      CHECK(ask(port, request(port, target, bearer() + "Content-Length: 0\r\n", method)).status == 405);
    }
    CHECK(ask(port, request(port, target, bearer() + "Content-Length: 5\r\n") + "abcde").status == 413);
  }
  // A path of no row is the library's 404, even with the token.
  for (const std::string target :
       {"/api/nope", "/runs", "/api/series.csvx", "/api/seriesXcsv", "/assets/x.png", "/assets/app.js.map", "/run/x"}) {
    INFO(target);
    CHECK(ask(port, request(port, target, bearer())).status == 404);
  }
}

TEST_CASE("serve: security headers on every answer, JSON with < escaped", "[serve]") {
  Served served;
  const int port = served.port;
  for (const std::string& target : {std::string("/"), std::string("/api/runs"), std::string("/nope")}) {
    for (const std::string& auth : {bearer(), std::string()}) {
      const Reply reply = ask(port, request(port, target, auth));
      CHECK(reply.has_header("Content-Security-Policy: default-src 'none'; script-src 'self'"));
      CHECK(reply.has_header("X-Content-Type-Options: nosniff"));
      CHECK(reply.has_header("Referrer-Policy: no-referrer"));
      CHECK(reply.has_header("frame-ancestors 'none'"));
      CHECK(reply.has_header("X-Frame-Options: DENY"));
      CHECK(reply.has_header("Cache-Control: no-store\r"));
    }
  }
  // The embedded assets may be kept an hour, by this browser only.
  const Reply asset = ask(port, request(port, "/assets/app.js", bearer()));
  CHECK(asset.status == 200);
  CHECK(asset.has_header("Cache-Control: private, max-age=3600"));
  CHECK_FALSE(asset.has_header("no-store"));
  CHECK(asset.has_header("X-Frame-Options: DENY"));
  const auto run = served.fixture.new_run("</script><img src=x onerror=alert(1)>");
  const Reply reply = ask(port, request(port, "/api/runs", bearer()));
  CHECK(reply.status == 200);
  CHECK(reply.has_header("Content-Type: application/json"));
  CHECK(reply.body.find("\\u003c/script\\u003e\\u003cimg") != std::string::npos);
  CHECK(reply.body.find('<') == std::string::npos);
}

TEST_CASE("serve: the API answers runs, a run, its series, CSV and a compare", "[serve]") {
  Served served;
  const int port = served.port;
  const std::string id = served.run_id;
  Reply reply = ask(port, request(port, "/api/run?id=" + id, bearer()));
  CHECK(reply.status == 200);
  CHECK(reply.body.find("\"kind\":\"show\"") != std::string::npos);
  CHECK(reply.body.find("run_dir") == std::string::npos);
  CHECK(ask(port, request(port, "/api/run?id=" + id.substr(0, 8), bearer())).status == 404);  // exact ids only
  CHECK(ask(port, request(port, "/api/run?id=nope", bearer())).status == 404);
  CHECK(ask(port, request(port, "/api/run", bearer())).status == 400);
  reply = ask(port, request(port, "/api/series?id=" + id + "&metric=loss", bearer()));
  CHECK(reply.status == 200);
  CHECK(reply.body.find("\"seq\":2") != std::string::npos);
  reply = ask(port, request(port, "/api/series.csv?id=" + id + "&metric=loss", bearer()));
  CHECK(reply.status == 200);
  CHECK(reply.body == "rank,step,loss\n0,1,2.0\n0,2,1.5\n");
  CHECK(reply.has_header("Content-Disposition: attachment; filename=\"series.csv\""));
  reply = ask(port, request(port, "/api/watch?id=" + id, bearer()));
  CHECK(reply.status == 200);
  CHECK(reply.body.find("\"ended\":true") != std::string::npos);
  reply = ask(port, request(port, "/api/compare?a=" + id + "&b=" + id, bearer()));
  CHECK(reply.status >= 200);
  CHECK(reply.body.find("\"kind\"") != std::string::npos);
  test::TempDir dir;
  const auto spec = dir.write("spec.yaml", "name: x\n");
  reply = ask(port, request(port, "/api/compare?a=" + spec.string() + "&b=" + id, bearer()));
  CHECK(reply.status == 400);
  CHECK(reply.body.find("reads no spec files") != std::string::npos);
  CHECK(ask(port, request(port, "/api/log?id=" + id + "&rank=0", bearer())).status == 404);

  // Metric columns: col=AGG:METRIC once per column (the metric may hold ':'), metric=&agg= as one more.
  reply =
      ask(port, request(port, "/api/runs?col=min:loss&col=last:loss&col=max:no%3Asuch&metric=loss&agg=max", bearer()));
  REQUIRE(reply.status == 200);
  const auto page = nlohmann::json::parse(reply.body);
  CHECK(page["columns"] ==
        nlohmann::json::parse(R"([{"metric":"loss","agg":"max"},{"metric":"loss","agg":"min"},)"
                              R"({"metric":"loss","agg":"last"},{"metric":"no:such","agg":"max"}])"));
  CHECK(page["runs"][0]["metrics"] == nlohmann::json::parse("[2.0,1.5,1.5,null]"));
  CHECK(ask(port, request(port, "/api/runs?col=median:loss", bearer())).status == 400);
  CHECK(ask(port, request(port, "/api/runs?col=loss", bearer())).status == 400);
  CHECK(ask(port, request(port, "/api/runs?metric=loss&agg=mean", bearer())).status == 400);
  std::string nine = "/api/runs?col=last:a";  // distinct: cpp-httplib drops a repeated key=value pair
  for (int i = 0; i < 8; ++i) nine += "&col=last:a" + std::to_string(i);
  reply = ask(port, request(port, nine, bearer()));
  CHECK(reply.status == 400);
  CHECK(reply.body.find("at most 8 metric columns") != std::string::npos);
}

TEST_CASE("serve: a run's series names, a group's band, N runs' spec differences and a zoomed series", "[serve]") {
  Served served;
  const int port = served.port;
  const std::string id = served.run_id;
  Reply reply = ask(port, request(port, "/api/metrics?id=" + id, bearer()));
  REQUIRE(reply.status == 200);
  CHECK(nlohmann::json::parse(reply.body)["names"] == nlohmann::json::parse(R"(["loss"])"));
  reply = ask(port, request(port, "/api/group?like=" + id, bearer()));
  REQUIRE(reply.status == 200);
  const auto band = nlohmann::json::parse(reply.body);
  CHECK(band["members"][0]["id"] == id);
  CHECK(band["mean"] == nlohmann::json::parse("[2.0, 1.5]"));
  reply = ask(port, request(port, "/api/group?runs=" + id + "&metric=loss&from=2", bearer()));
  REQUIRE(reply.status == 200);
  CHECK(nlohmann::json::parse(reply.body)["x"] == nlohmann::json::parse("[2]"));
  // One of runs= and like=; no spec files; a step range in order.
  CHECK(ask(port, request(port, "/api/group", bearer())).status == 400);
  CHECK(ask(port, request(port, "/api/group?like=" + id + "&runs=" + id, bearer())).status == 400);
  CHECK(ask(port, request(port, "/api/group?like=nope", bearer())).status == 404);
  test::TempDir dir;
  const auto spec = dir.write("spec.yaml", "name: x\n");
  reply = ask(port, request(port, "/api/group?runs=" + spec.string(), bearer()));
  CHECK(reply.status == 400);
  CHECK(reply.body.find("reads no spec files") != std::string::npos);
  reply = ask(port, request(port, "/api/series?id=" + id + "&from=3&to=2", bearer()));
  CHECK(reply.status == 400);
  CHECK(reply.body.find("from is after to") != std::string::npos);
  reply = ask(port, request(port, "/api/series?id=" + id + "&from=2&to=2", bearer()));
  REQUIRE(reply.status == 200);
  CHECK(nlohmann::json::parse(reply.body)["ranks"][0]["x"] == nlohmann::json::parse("[2]"));
  reply = ask(port, request(port, "/api/spec-diff?runs=" + id, bearer()));
  REQUIRE(reply.status == 200);
  CHECK(nlohmann::json::parse(reply.body)["kind"] == "spec-diff");
  CHECK(reply.body.find("run_dir") == std::string::npos);
  CHECK(ask(port, request(port, "/api/spec-diff", bearer())).status == 400);
  CHECK(ask(port, request(port, "/api/spec-diff?runs=" + id, "")).status == 401);
}

TEST_CASE("serve: 240 path and query fuzz cases never reach a file", "[serve]") {
  Served served;
  const int port = served.port;
  // A canary file beside the store and in the run's folder: no answer may ever hold its text.
  const std::string canary = "CANARY-" + std::to_string(std::random_device{}());
  std::ofstream(served.fixture.dir / "canary.txt") << canary;
  std::ofstream(served.fixture.dir / "results" / "canary.txt") << canary;
  const std::vector<std::string> paths = {
      "/../canary.txt", "/..%2fcanary.txt", "/%2e%2e/canary.txt", "/assets/../canary.txt", "/assets/..%2f..%2fcanary.txt",
      "/assets/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/etc/passwd", "//etc/passwd", "/./canary.txt", "/assets/app.js/../../x",
      "/assets/chart.js%00.txt", "/assets/APP.JS", "/assets/app.js.map", "/assets/", "/assets", "/results/canary.txt",
      "/results/expctl.db", "/expctl.db", "/api/../canary.txt", "/api/runs/../../canary.txt", "/\\..\\canary.txt",
      "/%5c..%5ccanary.txt", "/file:///etc/passwd", "/api/log?id=../../canary.txt&rank=0", "/run/../../etc/passwd",
      "/api/run?id=../canary", "/api/run?id=%2e%2e%2fcanary.txt", "/api/log?id=x&rank=../../canary",
      "/api/series.csv?id=../../canary.txt", "/api/compare?a=/etc/passwd&b=x", "/api/compare?a=../canary.txt&b=@latest",
      "/api/compare?a=" + (served.fixture.dir / "canary.txt").string() + "&b=@latest", "/%00", "/%ff%fe", "/?%",
      "/api/runs?name=%00&tag=%0d%0aSet-Cookie:x=1", "/api/runs?sort=../../x", "/api/series?id=x&metric=../../canary.txt",
      "/api/series?id=x&x=../../etc/passwd", "/api/runs?spec=../../"};
  std::vector<std::string> cases = paths;
  // Every route of the table (a new one is fuzzed the day it is added), and a path of none.
  std::vector<std::string> roots = {"/x"};
  for (const serve::Route& route : serve::routes()) {
    roots.emplace_back(route.path);
  }
  const std::vector<std::string> pieces = {"..", "%2e%2e", "%2f", "/", "\\", "%5c", "canary.txt", "etc", "passwd",
                                           "?id=", "&rank=", "%00", "~", ".", "results", "expctl.db", "app.js", ";",
                                           "%252e", "?a=", "&b="};
  std::mt19937 random(12345);
  while (cases.size() < 240) {
    std::string target = roots[random() % roots.size()];
    const int parts = 1 + static_cast<int>(random() % 6);
    for (int i = 0; i < parts; ++i) {
      target += pieces[random() % pieces.size()];
    }
    cases.push_back(target);
  }
  const std::string index(serve::index_page());
  int answered = 0;
  for (const std::string& target : cases) {
    const Reply reply = ask(port, request(port, target, bearer()));
    INFO(target);
    CHECK(reply.body.find(canary) == std::string::npos);
    CHECK(reply.body.find("root:x:0:0") == std::string::npos);
    CHECK(reply.body.find("SQLite format") == std::string::npos);
    if (reply.status == 200 && !target.starts_with("/api/")) {
      // Not an API answer: the page or one of the embedded assets, byte for byte.
      const auto path = target.substr(0, target.find('?'));
      const auto asset = serve::find_asset(path);
      CHECK((reply.body == index || (asset && reply.body == asset->bytes)));
    }
    answered += reply.status != 0 ? 1 : 0;
  }
  CHECK(answered >= 235);  // a few may be malformed enough that the library drops the connection
  // The random part added cases of its own: at least 200 of the 240 differ (not the padding's count).
  CHECK(std::set<std::string>(cases.begin(), cases.end()).size() >= 200);
}

TEST_CASE("serve: idle connections and eight live pollers do not hold up another request", "[serve]") {
  Served served;
  const int port = served.port;
  // More idle connections than cpp-httplib's default pool has threads (max(8, cores - 1)): with
  // that pool, the next request waited for them to time out.
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(connect_to(port));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> polls{0};
  std::atomic<int> failed_polls{0};
  std::vector<std::thread> pollers;
  for (int i = 0; i < 8; ++i) {
    pollers.emplace_back([&] {
      while (!stop) {
        try {
          if (ask(port, request(port, "/api/series?id=" + served.run_id + "&after=1", bearer())).status == 200) {
            ++polls;
          }
        } catch (const std::exception&) {
          ++failed_polls;
        }
      }
    });
  }
  const auto started = std::chrono::steady_clock::now();
  const Reply reply = ask(port, request(port, "/api/runs", bearer()));
  const auto took = std::chrono::steady_clock::now() - started;
  stop = true;
  for (auto& poller : pollers) {
    poller.join();
  }
  for (const int fd : idle) {
    ::close(fd);
  }
  CHECK(reply.status == 200);
  CHECK(polls > 0);
  CHECK(failed_polls == 0);
  // Well under the 5 s keep-alive timeout the idle connections would have held the pool for
  // (scaled by EXPCTL_TEST_TIMEOUT_SCALE on slow builds).
  CHECK(took < std::chrono::seconds(3) * test::timeout_scale());
}

TEST_CASE("serve: a 128 MiB request line is refused 414 after its first 2 KiB", "[serve]") {
  Served served;
  const auto [sent, answer] = flood(served.port, "GET /", 'a', 128u << 20);
  const Reply reply = parse(answer);
  CHECK(reply.status == 414);
  CHECK(reply.body.find("request line is longer than") != std::string::npos);
  CHECK(reply.has_header("X-Frame-Options: DENY"));
  CHECK(reply.has_header("Cache-Control: no-store"));
  // The server stopped reading at once: what was sent is what the sockets' buffers held.
  CHECK(sent < (32u << 20));
}

TEST_CASE("serve: 25 000 header lines or 16 KiB of headers are refused 431", "[serve]") {
  Served served;
  const int port = served.port;
  std::string lines = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n";
  for (int i = 0; i < 25'000; ++i) {
    lines += "X-" + std::to_string(i) + ": 1\r\n";
  }
  const int fd = connect_to(port);
  ::send(fd, lines.data(), lines.size(), MSG_NOSIGNAL);  // may fail part way: the server closed
  Reply reply = parse(read_all(fd, std::chrono::seconds(5)));
  ::close(fd);
  CHECK(reply.status == 431);
  CHECK(reply.body.find("more than 64 headers or 16384 bytes of them") != std::string::npos);

  // The size limit: five headers of 4 KiB are 20 KiB; three are within it.
  const std::string big(4096, 'v');
  std::string five;
  std::string three;
  for (int i = 0; i < 5; ++i) {
    (i < 3 ? three : five) += "X-Big-" + std::to_string(i) + ": " + big + "\r\n";
  }
  five = three + five;
  CHECK(ask(port, request(port, "/api/runs", bearer() + five)).status == 431);
  CHECK(ask(port, request(port, "/api/runs", bearer() + three)).status == 200);
  // Up to 64 headers of the client's are answered.
  std::string sixty;
  for (int i = 0; i < 60; ++i) {
    sixty += "X-" + std::to_string(i) + ": 1\r\n";
  }
  CHECK(ask(port, request(port, "/api/runs", bearer() + sixty)).status == 200);
}

TEST_CASE("serve: a trickling client is cut off at the 10 s head deadline, a silent one after 5 s", "[serve]") {
  Served served;
  const int port = served.port;
  const auto started = std::chrono::steady_clock::now();
  const int silent = connect_to(port);
  const int trickler = connect_to(port);
  // One byte a second: never silent for 5 s, never a whole head.
  std::atomic<bool> stop{false};
  std::thread dripping([&] {
    const std::string slow = "GET /api/runs HTTP/1.1\r\nX-Slow: " + std::string(100, 'a');
    for (std::size_t i = 0; i < slow.size() && !stop; ++i) {
      if (::send(trickler, &slow[i], 1, MSG_NOSIGNAL) != 1) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  const std::string nothing = read_all(silent, std::chrono::seconds(15));  // until the server closes
  const auto silent_for = std::chrono::steady_clock::now() - started;
  const Reply cut = parse(read_all(trickler, std::chrono::seconds(15)));
  const auto trickled_for = std::chrono::steady_clock::now() - started;
  stop = true;
  dripping.join();
  ::close(silent);
  ::close(trickler);
  CHECK(nothing.empty());  // closed without an answer (a browser's preconnected socket)
  CHECK(silent_for >= std::chrono::milliseconds(4900));
  CHECK(silent_for < std::chrono::seconds(8) * test::timeout_scale());
  CHECK(cut.status == 408);
  CHECK(trickled_for >= std::chrono::milliseconds(9900));
  CHECK(trickled_for < std::chrono::seconds(13) * test::timeout_scale());
}

TEST_CASE("serve: stop() closes open connections and returns within a second", "[serve]") {
  Served served;
  const int port = served.port;
  const int idle = connect_to(port);
  const int partial = connect_to(port);
  const std::string half = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n";
  ::send(partial, half.data(), half.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both held by the server
  const auto started = std::chrono::steady_clock::now();
  served.server->stop();
  served.thread.join();
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(took < std::chrono::seconds(1) * test::timeout_scale());
  CHECK(read_all(idle, std::chrono::seconds(1)).empty());  // closed, no answer
  CHECK(read_all(partial, std::chrono::seconds(1)).empty());
  ::close(idle);
  ::close(partial);
}

TEST_CASE("serve: --max-connections connections are served at once and the rest wait their turn", "[serve]") {
  serve::ServeOptions options;
  options.max_connections = 2;
  Served served(options);
  const int port = served.port;
  const int first = connect_to(port);
  const int second = connect_to(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int third = connect_to(port);  // the kernel's listen queue takes it
  const std::string raw = request(port, "/api/runs", bearer());
  ::send(third, raw.data(), raw.size(), MSG_NOSIGNAL);
  CHECK(read_all(third, std::chrono::seconds(1)).empty());  // waiting its turn
  ::close(first);
  const Reply reply = parse(read_all(third, std::chrono::seconds(3)));
  CHECK(reply.status == 200);
  ::close(second);
  ::close(third);
}

TEST_CASE("serve: a Range header gets the whole body or one range, never many", "[serve]") {
  Served served;
  const int port = served.port;
  const auto chart = serve::find_asset("/assets/chart.js");
  REQUIRE(chart);
  std::string ranges = "Range: bytes=0-";
  for (int i = 1; i < 2600; ++i) {
    ranges += ",0-";
  }
  ranges += "\r\n";  // 7.8 KB: each range the whole file
  Reply reply = ask(port, request(port, "/assets/chart.js", bearer() + ranges));
  CHECK(reply.status == 200);
  CHECK(reply.body == chart->bytes);
  CHECK_FALSE(reply.has_header("multipart/byteranges"));
  reply = ask(port, request(port, "/assets/chart.js", ranges));  // no token
  CHECK(reply.status == 401);
  CHECK(reply.body.size() < 1024);
  CHECK(reply.body.starts_with("{\"error\""));

  reply = ask(port, request(port, "/assets/chart.js", bearer() + "Range: bytes=10-109\r\n"));
  CHECK(reply.status == 206);
  CHECK(reply.body == chart->bytes.substr(10, 100));
  CHECK(reply.has_header("Content-Range: bytes 10-109/" + std::to_string(chart->bytes.size())));
  reply = ask(port, request(port, "/nope", bearer() + "Range: bytes=0-3\r\n"));  // errors whole
  CHECK(reply.status == 404);
  CHECK(reply.body.starts_with("{\"error\""));
  CHECK(reply.body.ends_with("}"));
}

TEST_CASE("serve: a request with an Expect header gets one answer, 417", "[serve]") {
  Served served;
  const int port = served.port;
  for (const std::string& expect : {std::string("Expect: 100-continue\r\nContent-Length: 5\r\n"),
                                    std::string("Expect: 100-continue\r\n"), std::string("Expect: other\r\n")}) {
    INFO(expect);
    const int fd = connect_to(port);
    const std::string raw = request(port, "/api/runs", bearer() + expect);
    ::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
    const std::string answer = read_all(fd, std::chrono::seconds(3));
    ::close(fd);
    CHECK(answer.starts_with("HTTP/1.1 417"));
    CHECK(answer.find("HTTP/1.1", 1) == std::string::npos);  // nothing routed after it
    CHECK(parse(answer).body.find("nothing is expected") != std::string::npos);
  }
}

TEST_CASE("serve: two dashboards on two ports keep apart cookies", "[serve]") {
  Served one;
  serve::ServeOptions other_options;
  Served two(other_options);
  const auto cookie_of = [](const Served& served) {
    const Reply reply = ask(served.port, request(served.port, "/?token=" + k_token));
    REQUIRE(reply.status == 303);
    const auto at = reply.head.find("Set-Cookie: ");
    REQUIRE(at != std::string::npos);
    const std::string line = reply.head.substr(at + 12, reply.head.find("\r\n", at) - at - 12);
    return line.substr(0, line.find(';'));
  };
  const std::string first = cookie_of(one);
  const std::string second = cookie_of(two);
  const auto name = [](const std::string& pair) { return pair.substr(0, pair.find('=')); };
  CHECK(name(first) == "expctl_token_" + std::to_string(one.port));
  CHECK(name(second) == "expctl_token_" + std::to_string(two.port));
  CHECK(name(first) != name(second));  // a browser keeps both (cookies ignore ports)
  // The browser sends both cookies to both; each server takes its own.
  const std::string jar = "Cookie: " + first + "; " + second + "\r\n";
  CHECK(ask(one.port, request(one.port, "/api/runs", jar)).status == 200);
  CHECK(ask(two.port, request(two.port, "/api/runs", jar)).status == 200);
  CHECK(ask(one.port, request(one.port, "/api/runs", "Cookie: " + second + "\r\n")).status == 401);
}

TEST_CASE("serve: the sweep page's document names the points a submitted Slurm array holds", "[serve]") {
  test::TempDir dir;
  const auto file = dir.write(
      "sweep.yaml", std::string("base: ") + EXPCTL_SWEEP_BASE + "\nname: held\ngrid:\n  optim.lr: [0.01, 0.1]\n");
  auto loaded = std::make_shared<const sweep::Sweep>(sweep::load_sweep(file));
  const auto folder = dir / "sweep-held";
  std::filesystem::create_directories(folder);
  sweep::write_array_record(folder, {"77", loaded->hash, {0, 1}, "2026-12-06T10:00:00.000Z", false});
  serve::ServeOptions options;
  options.sweeps.push_back(loaded);
  options.array_dirs["held"] = folder;  // what `expctl serve --sweep FILE` derives from --db
  Served served(options);
  const Reply reply = ask(served.port, request(served.port, "/api/sweep?name=held", bearer()));
  REQUIRE(reply.status == 200);
  const auto doc = nlohmann::json::parse(reply.body);
  REQUIRE(doc["array"].size() == 2);
  CHECK(doc["array"][1]["state"] == "queued");
  CHECK(doc["array"][1]["job"] == "77");
  CHECK(doc["notes"].dump().find("array 77: queued points 0, 1") != std::string::npos);
}
