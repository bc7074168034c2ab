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
/// The request line ("GET TARGET HTTP/1.1"): the target's limit and room for a method and version.
inline constexpr std::size_t k_max_request_line_bytes = k_max_target_bytes + 64;
/// A request's head (request line and headers) must arrive whole within this, however it trickles.
inline constexpr int k_head_deadline_s = 10;
/// A connection that sends nothing for this long is closed.
inline constexpr int k_idle_timeout_s = 5;
/// An answer must be taken by the client within this (a reader that never reads holds no thread).
inline constexpr int k_write_deadline_s = 10;

/// A random token: 24 bytes from the kernel (getrandom) as 48 lowercase hex digits.
std::string make_token();

/// A token file's content, trimmed; throws util::UsageError (exit 2) naming the file when it
/// cannot be read, is readable or writable by its group or others (as ssh refuses a loose key:
/// the line says `chmod 600 FILE`), or holds fewer than 16 characters or characters outside
/// [A-Za-z0-9._~-].
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
  bool has_expect = false;  ///< an `Expect:` header (it would invite a body)
  std::string host;
  std::optional<std::string> origin;
  std::optional<std::string> sec_fetch_site;
};

/// Methods (405), `Expect:` (417), bodies (413: no request has one; chunked bodies are refused unread), sizes
/// (414, 431), Host (403) and Origin (403), in that order. Authentication is apart (it may
/// answer with a cookie and a redirect).
Verdict check_request(const RequestFacts& request, const std::vector<std::string>& allowed);

/// What the bounded reader in front of cpp-httplib makes of the bytes of a request received so
/// far. The library reads a head line by line into a growing string with no count limit and checks
/// sizes only afterwards, so nothing reaches it before this says `complete`.
struct HeadScan {
  enum class State { need_more, complete, refused };
  State state = State::need_more;
  std::size_t head_bytes = 0;  ///< complete: the request line and headers with the blank line
  int status = 0;              ///< refused: 414 (request line) or 431 (headers)
  std::string reason;          ///< refused: one line for the body
};

/// Scans `received` (a request's first bytes): a request line of at most
/// k_max_request_line_bytes, then at most k_max_header_count header lines of at most
/// k_max_header_bytes together, then a blank line. Refuses as soon as a limit is passed, before
/// the rest arrives.
HeadScan scan_request_head(std::string_view received);

/// The headers every response carries.
std::vector<std::pair<std::string, std::string>> security_headers();

/// A JSON text safe inside HTML and for any sniffing: '<', '>' and '&' written as \u escapes
/// (they only occur inside strings), invalid UTF-8 replaced.
std::string safe_json_text(std::string text);

}  // namespace expctl::serve
