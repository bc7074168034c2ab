// The server's security rules as pure functions (serve/security.hpp).
#include <filesystem>
#include <functional>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/serve/security.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
using namespace expctl::serve;

namespace {

RequestFacts good_request() {
  RequestFacts facts;
  facts.method = "GET";
  facts.target = "/api/runs";
  facts.host = "127.0.0.1:8080";
  return facts;
}

}  // namespace

TEST_CASE("tokens are 48 random hex digits and compared whole", "[serve]") {
  const std::string a = make_token();
  const std::string b = make_token();
  CHECK(a.size() == 48);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
  CHECK(same_secret(a, a));
  CHECK_FALSE(same_secret(a, b));
  CHECK_FALSE(same_secret(a, a.substr(0, 47)));
  CHECK_FALSE(same_secret(a, a + "0"));
  CHECK_FALSE(same_secret("", a));
}

TEST_CASE("a token file is read trimmed and a weak one is refused by name", "[serve]") {
  test::TempDir dir;
  const auto private_file = [&dir](const std::string& name, const std::string& text) {
    const auto path = dir.write(name, text);
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return path.string();
  };
  CHECK(read_token_file(private_file("good", "  abcdefghijklmnop0123\n")) == "abcdefghijklmnop0123");
  CHECK_THROWS_WITH(read_token_file(private_file("short", "abc\n")), Catch::Contains("at least 16"));
  CHECK_THROWS_WITH(read_token_file(private_file("spaces", "abcdefgh ijklmnopq\n")), Catch::Contains("at least 16"));
  CHECK_THROWS_AS(read_token_file((dir / "missing").string()), util::UsageError);
}

TEST_CASE("a token file others can read or write is refused as ssh refuses a loose key", "[serve]") {
  test::TempDir dir;
  const auto path = dir.write("token", "abcdefghijklmnop0123\n");
  using std::filesystem::perms;
  for (const perms loose : {perms::group_read, perms::others_read, perms::group_write, perms::others_write}) {
    std::filesystem::permissions(path, perms::owner_read | perms::owner_write | loose);
    INFO(static_cast<int>(loose));
    CHECK_THROWS_AS(read_token_file(path.string()), util::UsageError);
    CHECK_THROWS_WITH(read_token_file(path.string()), Catch::Contains("chmod 600 " + path.string()) &&
                                                          Catch::Contains("other users can read or change it"));
  }
  std::filesystem::permissions(path, perms::owner_read);
  CHECK(read_token_file(path.string()) == "abcdefghijklmnop0123");
}

TEST_CASE("the Host allow-list holds loopback names, the bound address and proxy names", "[serve]") {
  const auto loopback = allowed_hosts("127.0.0.1", 8080, {});
  CHECK(host_allowed("127.0.0.1:8080", loopback));
  CHECK(host_allowed("LOCALHOST:8080", loopback));
  CHECK(host_allowed("[::1]:8080", loopback));
  CHECK_FALSE(host_allowed("127.0.0.1:8081", loopback));
  CHECK_FALSE(host_allowed("evil.example:8080", loopback));  // DNS rebinding: a name that resolves here
  CHECK_FALSE(host_allowed("localhost", loopback));
  CHECK_FALSE(host_allowed("", loopback));

  const auto team = allowed_hosts("10.0.0.5", 9000, {"dash.example.com"});
  CHECK(host_allowed("10.0.0.5:9000", team));
  CHECK(host_allowed("dash.example.com", team));
  CHECK(host_allowed("dash.example.com:9000", team));
  CHECK_FALSE(host_allowed("10.0.0.6:9000", team));

  const auto wildcard = allowed_hosts("0.0.0.0", 9000, {});
  CHECK_FALSE(host_allowed("0.0.0.0:9000", wildcard));
  CHECK(host_allowed("127.0.0.1:9000", wildcard));
}

TEST_CASE("origins must be an allowed host over http or https, and null is refused", "[serve]") {
  const auto allowed = allowed_hosts("127.0.0.1", 8080, {"dash.example.com"});
  CHECK(origin_allowed("http://127.0.0.1:8080", allowed));
  CHECK(origin_allowed("https://dash.example.com", allowed));
  CHECK_FALSE(origin_allowed("null", allowed));
  CHECK_FALSE(origin_allowed("http://evil.example", allowed));
  CHECK_FALSE(origin_allowed("http://127.0.0.1:8080.evil.example", allowed));
  CHECK_FALSE(origin_allowed("ftp://127.0.0.1:8080", allowed));
}

TEST_CASE("check_request refuses methods, bodies, sizes, hosts and origins in that order", "[serve]") {
  const auto allowed = allowed_hosts("127.0.0.1", 8080, {});
  CHECK(check_request(good_request(), allowed).status == 0);

  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "get"}) {
    auto facts = good_request();
    facts.method = method;
    CHECK(check_request(facts, allowed).status == 405);
  }
  auto head = good_request();
  head.method = "HEAD";
  CHECK(check_request(head, allowed).status == 0);

  auto chunked = good_request();
  chunked.has_transfer_encoding = true;
  CHECK(check_request(chunked, allowed).status == 413);
  auto sized = good_request();
  sized.content_length = "10";
  CHECK(check_request(sized, allowed).status == 413);
  sized.content_length = "0";
  CHECK(check_request(sized, allowed).status == 0);

  auto long_target = good_request();
  long_target.target = "/" + std::string(k_max_target_bytes, 'a');
  CHECK(check_request(long_target, allowed).status == 414);
  auto many_headers = good_request();
  many_headers.header_count = k_max_header_count + 1;
  CHECK(check_request(many_headers, allowed).status == 431);

  auto foreign = good_request();
  foreign.host = "evil.example";
  CHECK(check_request(foreign, allowed).status == 403);
  auto cross = good_request();
  cross.origin = "http://evil.example";
  CHECK(check_request(cross, allowed).status == 403);
  auto site = good_request();
  site.sec_fetch_site = "cross-site";
  CHECK(check_request(site, allowed).status == 403);

  // The order: a request that breaks every rule gets the first rule's answer, and mending the
  // rules one at a time walks down the list (method, Expect, body, target, headers, host, origin).
  auto all_wrong = good_request();
  all_wrong.method = "POST";
  all_wrong.has_expect = true;
  all_wrong.has_transfer_encoding = true;
  all_wrong.target = "/" + std::string(k_max_target_bytes, 'a');
  all_wrong.header_count = k_max_header_count + 1;
  all_wrong.host = "evil.example";
  all_wrong.origin = "http://evil.example";
  const std::vector<std::pair<int, std::function<void(RequestFacts&)>>> in_order = {
      {405, [](RequestFacts& r) { r.method = "GET"; }},
      {417, [](RequestFacts& r) { r.has_expect = false; }},
      {413, [](RequestFacts& r) { r.has_transfer_encoding = false; }},
      {414, [](RequestFacts& r) { r.target = "/api/runs"; }},
      {431, [](RequestFacts& r) { r.header_count = 1; }},
      {403, [](RequestFacts& r) { r.host = "127.0.0.1:8080"; }},
      {403, [](RequestFacts& r) { r.origin.reset(); }},
  };
  for (const auto& [status, mend] : in_order) {
    const auto verdict = check_request(all_wrong, allowed);
    INFO(verdict.reason);
    CHECK(verdict.status == status);
    mend(all_wrong);
  }
  CHECK(check_request(all_wrong, allowed).status == 0);
  // The two 403s differ by their reason: Host before Origin.
  auto host_and_origin = good_request();
  host_and_origin.host = "evil.example";
  host_and_origin.origin = "http://evil.example";
  CHECK_THAT(check_request(host_and_origin, allowed).reason, Catch::Contains("Host"));
}

TEST_CASE("cookies are found by exact name", "[serve]") {
  CHECK(cookie_value("a=1; expctl_token_8080=abc; b=2", "expctl_token_8080") == "abc");
  CHECK_FALSE(cookie_value("xexpctl_token_8080=abc", "expctl_token_8080"));
  CHECK_FALSE(cookie_value("", "expctl_token_8080"));
}

TEST_CASE("JSON text for the browser never holds < > or &", "[serve]") {
  const std::string text = safe_json_text(R"({"name":"</script><b>&amp;"})");
  CHECK(text.find('<') == std::string::npos);
  CHECK(text.find('>') == std::string::npos);
  CHECK(text.find('&') == std::string::npos);
  CHECK(text == R"({"name":"\u003c/script\u003e\u003cb\u003e\u0026amp;"})");
}

TEST_CASE("every response's security headers include a strict CSP", "[serve]") {
  std::string csp;
  bool nosniff = false;
  bool no_referrer = false;
  for (const auto& [key, value] : security_headers()) {
    csp = key == "Content-Security-Policy" ? value : csp;
    nosniff = nosniff || (key == "X-Content-Type-Options" && value == "nosniff");
    no_referrer = no_referrer || (key == "Referrer-Policy" && value == "no-referrer");
  }
  CHECK(csp.find("default-src 'none'") != std::string::npos);
  CHECK(csp.find("script-src 'self'") != std::string::npos);
  CHECK(csp.find("frame-ancestors 'none'") != std::string::npos);
  CHECK(csp.find("unsafe") == std::string::npos);
  CHECK(nosniff);
  CHECK(no_referrer);
}

TEST_CASE("the request head is scanned for its limits before the library reads it", "[serve]") {
  using State = HeadScan::State;
  const std::string line = "GET /api/runs HTTP/1.1\r\n";
  CHECK(scan_request_head("").state == State::need_more);
  CHECK(scan_request_head("GET /api/ru").state == State::need_more);
  CHECK(scan_request_head(line + "Host: x\r\n").state == State::need_more);
  CHECK(scan_request_head(line + "Host: x\r\n\r").state == State::need_more);
  HeadScan scan = scan_request_head(line + "Host: x\r\n\r\nBODY");
  CHECK(scan.state == State::complete);
  CHECK(scan.head_bytes == line.size() + 9 + 2);  // the body is never part of the head
  CHECK(scan_request_head(line + "\r\n").head_bytes == line.size() + 2);
  CHECK(scan_request_head("GET / HTTP/1.1\nHost: x\n\n").state == State::complete);

  // The request line: refused as soon as it is too long, whether or not it has ended.
  const std::string longest = "GET /" + std::string(k_max_request_line_bytes - 16, 'a') + " HTTP/1.1\r\n";
  REQUIRE(longest.size() == k_max_request_line_bytes);
  CHECK(scan_request_head(longest + "\r\n").state == State::complete);
  scan = scan_request_head("GET /" + std::string(k_max_request_line_bytes, 'a'));
  CHECK(scan.state == State::refused);
  CHECK(scan.status == 414);
  CHECK(scan_request_head("GET /" + std::string(k_max_request_line_bytes - 15, 'a') + " HTTP/1.1\r\n").status == 414);

  // Headers: at most k_max_header_count lines and k_max_header_bytes, counted as they arrive.
  std::string headers;
  for (std::size_t i = 0; i < k_max_header_count; ++i) {
    headers += "X: 1\r\n";
  }
  CHECK(scan_request_head(line + headers + "\r\n").state == State::complete);
  scan = scan_request_head(line + headers + "X: 1\r\n");
  CHECK(scan.state == State::refused);
  CHECK(scan.status == 431);
  const std::string filled = "X: " + std::string(k_max_header_bytes - 5, 'v') + "\r\n";  // exactly the limit
  CHECK(scan_request_head(line + filled + "\r\n").state == State::complete);
  CHECK(scan_request_head(line + filled + "Y").status == 431);  // a byte more, before its line ends
  CHECK(scan_request_head(line + "X: " + std::string(k_max_header_bytes, 'v')).status == 431);
}

TEST_CASE("an Expect header is refused 417 before a body could be invited", "[serve]") {
  RequestFacts facts = good_request();
  facts.has_expect = true;
  CHECK(check_request(facts, allowed_hosts("127.0.0.1", 8080, {})).status == 417);
}
