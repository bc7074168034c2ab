#include "expctl/serve/security.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <sys/random.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::serve {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool token_character(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '~' || c == '-';
}

}  // namespace

std::string make_token() {
  unsigned char bytes[24];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw util::Failure(fmt::format("cannot draw a random token from the kernel: {}", std::strerror(errno)),
                          util::ExitCode::run_failed);
    }
    got += static_cast<std::size_t>(n);
  }
  std::string token;
  for (const unsigned char byte : bytes) {
    token += fmt::format("{:02x}", byte);
  }
  return token;
}

std::string read_token_file(const std::string& path) {
  // Checked before reading, as ssh checks a key: a token others can read is everyone's.
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
    throw util::UsageError(
        fmt::format("--token-file {}: other users can read or change it (mode {:04o}): run "
                    "'chmod 600 {}' first",
                    path, info.st_mode & 07777, path));
  }
  const auto text = util::read_file(path);
  if (!text) {
    throw util::UsageError(fmt::format("--token-file {}: cannot read it ({}): write the token into it first",
                                       path, text.error().message));
  }
  std::string token(util::trim(*text));
  if (token.size() < 16 || !std::all_of(token.begin(), token.end(), token_character)) {
    throw util::UsageError(fmt::format(
        "--token-file {}: the token must be at least 16 characters of A-Z a-z 0-9 . _ ~ - (e.g. the output of "
        "'openssl rand -hex 24')",
        path));
  }
  return token;
}

bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

bool is_loopback_host(std::string_view host) {
  const std::string name = lower(host);
  return name == "localhost" || name == "::1" || name == "[::1]" || name.starts_with("127.");
}

std::vector<std::string> allowed_hosts(const std::string& bind_host, int port, const std::vector<std::string>& extra) {
  std::vector<std::string> hosts;
  const std::string suffix = fmt::format(":{}", port);
  for (const char* name : {"localhost", "127.0.0.1", "[::1]"}) {
    hosts.push_back(name + suffix);
  }
  const std::string bound = lower(bind_host);
  if (bound != "0.0.0.0" && bound != "::" && bound != "[::]" && !bound.empty()) {
    hosts.push_back((bound.find(':') != std::string::npos && bound.front() != '[' ? "[" + bound + "]" : bound) +
                    suffix);
  }
  for (const std::string& name : extra) {
    hosts.push_back(lower(name));
    if (name.find(':') == std::string::npos) {
      hosts.push_back(lower(name) + suffix);
    }
  }
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  return hosts;
}

bool host_allowed(std::string_view host, const std::vector<std::string>& allowed) {
  const std::string name = lower(host);
  return std::find(allowed.begin(), allowed.end(), name) != allowed.end();
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed) {
  const std::string value = lower(origin);
  for (const std::string_view scheme : {"http://", "https://"}) {
    if (value.starts_with(scheme)) {
      return host_allowed(std::string_view(value).substr(scheme.size()), allowed);
    }
  }
  return false;
}

std::optional<std::string> cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const auto end = header.find(';');
    const std::string pair(util::trim(header.substr(0, end)));
    const auto equals = pair.find('=');
    if (equals != std::string::npos && std::string_view(pair).substr(0, equals) == name) {
      return pair.substr(equals + 1);
    }
    if (end == std::string_view::npos) {
      break;
    }
    header.remove_prefix(end + 1);
  }
  return std::nullopt;
}

Verdict check_request(const RequestFacts& request, const std::vector<std::string>& allowed) {
  if (request.method != "GET" && request.method != "HEAD") {
    return {405, "this server is read-only: only GET and HEAD are answered"};
  }
  if (request.has_expect) {
    return {417, "requests carry no body here, so nothing is expected"};
  }
  if (request.has_transfer_encoding ||
      (request.content_length && util::trim(*request.content_length) != "0")) {
    return {413, "requests carry no body here"};
  }
  if (request.target.size() > k_max_target_bytes) {
    return {414, fmt::format("the request target is longer than {} bytes", k_max_target_bytes)};
  }
  if (request.header_count > k_max_header_count || request.header_bytes > k_max_header_bytes) {
    return {431, fmt::format("more than {} headers or {} bytes of them", k_max_header_count, k_max_header_bytes)};
  }
  if (!host_allowed(request.host, allowed)) {
    return {403, "this Host is not one the server answers (start it with --allow-host NAME for a proxy's name)"};
  }
  if (request.origin && !origin_allowed(*request.origin, allowed)) {
    return {403, "requests from another origin are refused"};
  }
  if (request.sec_fetch_site && *request.sec_fetch_site == "cross-site") {
    return {403, "requests from another site are refused"};
  }
  return {};
}

HeadScan scan_request_head(std::string_view received) {
  HeadScan scan;
  const auto refuse = [&scan](int status, std::string reason) {
    scan.state = HeadScan::State::refused;
    scan.status = status;
    scan.reason = std::move(reason);
    return scan;
  };
  const auto line_end = received.find('\n');
  if ((line_end == std::string_view::npos ? received.size() : line_end + 1) > k_max_request_line_bytes) {
    return refuse(414, fmt::format("the request line is longer than {} bytes", k_max_request_line_bytes));
  }
  if (line_end == std::string_view::npos) {
    return scan;
  }
  const auto too_many = [&refuse] {
    return refuse(431, fmt::format("more than {} headers or {} bytes of them", k_max_header_count, k_max_header_bytes));
  };
  std::size_t count = 0;
  std::size_t bytes = 0;
  for (std::size_t at = line_end + 1;;) {
    const auto end = received.find('\n', at);
    const std::string_view line =
        received.substr(at, end == std::string_view::npos ? std::string_view::npos : end + 1 - at);
    if (line == "\r\n" || line == "\n") {
      scan.state = HeadScan::State::complete;
      scan.head_bytes = at + line.size();
      return scan;
    }
    // A partial line may still be the blank one ("\r" so far): it counts once it is more.
    bytes += line == "\r" ? 0 : line.size();
    if (bytes > k_max_header_bytes) {
      return too_many();
    }
    if (end == std::string_view::npos) {
      return scan;
    }
    if (++count > k_max_header_count) {
      return too_many();
    }
    at = end + 1;
  }
}

std::vector<std::pair<std::string, std::string>> security_headers() {
  return {
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"X-Frame-Options", "DENY"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
      {"Cross-Origin-Resource-Policy", "same-origin"},
      {"Cache-Control", "no-store"},
  };
}

std::string safe_json_text(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace expctl::serve
