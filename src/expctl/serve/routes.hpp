#pragma once
/// Every path `expctl serve` answers, one row each. The server registers exactly these rows (and
/// refuses to start when a row has no handler or a handler no row); the pages' list and header
/// links reach index.html from here (app.js reads them there); docs/serve.md's route table is
/// rendered from here (test_serve holds the two equal); and the security tests iterate the rows,
/// so a new route is covered the day it is added. Plain data: no HTTP library here.

#include <span>
#include <string>
#include <string_view>

namespace expctl::serve {

enum class RouteKind {
  page,   ///< the dashboard's HTML (every page is the same document; app.js draws the view)
  asset,  ///< a file compiled into the binary (assets.hpp), under the row's path
  api,    ///< a JSON (or CSV, or text) document of the api module
};

struct Route {
  RouteKind kind = RouteKind::api;
  std::string_view path;     ///< matched exactly; an asset row's path is the prefix of its files
  std::string_view view;     ///< page: the view app.js draws for it ("runs"); else ""
  std::string_view nav;      ///< page: its link text in the header ("" for none: a run needs an id)
  std::string_view params;   ///< the parameters as the docs show them ("?id=RUN"), or ""
  std::string_view answers;  ///< what it answers, as docs/serve.md says it
};

/// The rows, pages first, then assets, then the API.
std::span<const Route> routes();

/// The row whose path is `path` (asset rows: whose prefix it starts with), or nullptr.
const Route* find_route(std::string_view path);

/// A target that reaches the row's handler (the path, or for assets one of its files): what the
/// tests request for every row.
std::string example_target(const Route& route);

/// The pages for app.js, as JSON safe inside a <script> element: [{"path", "view"}].
std::string page_list_json();

/// The header's links to the pages with a `nav` text, as HTML.
std::string page_nav_html();

/// docs/serve.md's route table (Markdown, between its marker comments, markers included).
std::string render_route_table_markdown();

inline constexpr std::string_view k_route_table_begin =
    "<!-- route table: rendered from src/expctl/serve/routes.cpp; test_serve holds the two equal -->";
inline constexpr std::string_view k_route_table_end = "<!-- end of the route table -->";

}  // namespace expctl::serve
