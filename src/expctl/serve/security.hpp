#pragma once
/// The server's security decisions as pure functions of a request's parts, so each rule is
/// tested without a socket (docs/serve.md, "Security model"): the token, the Host allow-list
/// (DNS rebinding), the Origin check, methods and bodies, and the limits on a request's size.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::serve {

/// Limits a request must keep (the library's own are 8 KiB per line and no header count).
inline constexpr std::size_t k_max_target_bytes = 2048;
inline constexpr std::size_t k_max_header_count = 64;
inline constexpr std::size_t k_max_header_bytes = 16 * 1024;
inline constexpr std::size_t k_max_params = 32;

/// A random token: 24 bytes from the kernel (getrandom) as 48 lowercase hex digits.
std::string make_token();

/// A token file's content, trimmed; throws util::UsageError (exit 2) naming the file when it
/// cannot be read or holds fewer than 16 characters or characters outside [A-Za-z0-9._~-].
std::string read_token_file(const std::string& path);

/// Equal in time independent of where they differ (a token is a secret).
bool same_secret(std::string_view a, std::string_view b);

/// True for a host that only this machine reaches: 127.0.0.0/8, ::1, localhost.
bool is_loopback_host(std::string_view host);

/// The Host header values a request may carry: localhost, 127.0.0.1 and [::1] with the port, the
/// bound address with the port (unless it is a wildcard), and each `--allow-host` name with and
/// without the port (a reverse proxy on 443 sends the bare name). Lowercase.
std::vector<std::string> allowed_hosts(const std::string& bind_host, int port, const std::vector<std::string>& extra);

/// `host` (as sent, any case) is one of `allowed`.
bool host_allowed(std::string_view host, const std::vector<std::string>& allowed);

/// No Origin, or "http(s)://" + an allowed host. "null" and every other origin are refused.
bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed);

/// The value of cookie `name` in a Cookie header, or nullopt.
std::optional<std::string> cookie_value(std::string_view header, std::string_view name);

/// What a request's first checks decide, before any route runs.
struct Verdict {
  int status = 0;       ///< 0: go on; otherwise the status to answer with
  std::string reason;   ///< one line for the body
};

/// The parts of a request the checks read.
struct RequestFacts {
  std::string method;
  std::string target;  ///< path and query as sent
  std::size_t header_count = 0;
  std::size_t header_bytes = 0;
  std::optional<std::string> content_length;
  bool has_transfer_encoding = false;
  std::string host;
  std::optional<std::string> origin;
  std::optional<std::string> sec_fetch_site;
};

/// Methods (405), bodies (413: no request has one; chunked bodies are refused unread), sizes
/// (414, 431), Host (403) and Origin (403), in that order. Authentication is apart (it may
/// answer with a cookie and a redirect).
Verdict check_request(const RequestFacts& request, const std::vector<std::string>& allowed);

/// The headers every response carries.
std::vector<std::pair<std::string, std::string>> security_headers();

/// A JSON text safe inside HTML and for any sniffing: '<', '>' and '&' written as \u escapes
/// (they only occur inside strings), invalid UTF-8 replaced.
std::string safe_json_text(std::string text);

}  // namespace expctl::serve
