#include "expctl/serve/routes.hpp"

#include <nlohmann/json.hpp>

#include "expctl/serve/security.hpp"

namespace expctl::serve {

namespace {

// One row per path, laid out by hand: clang-format would put each field on a line of its own.
// clang-format off
constexpr Route k_routes[] = {
    {RouteKind::page, "/", "runs", "runs", "",
     "the runs page (Pages, above): filters, sort, metric columns, pages of 50"},
    {RouteKind::page, "/run", "run", "", "?id=RUN",
     "a run's page: its curves, ranks, phases, spec, environment, summary and log tail"},
    {RouteKind::page, "/compare", "compare", "compare", "?a=A&b=B|runs=R1,R2,…",
     "two runs (or groups) compared: the verdict and the overlaid loss curves (a group's as its mean and 95 % "
     "band); or N runs: the spec fields that differ, their summaries and loss curves"},
    {RouteKind::page, "/group", "group", "", "?like=RUN|runs=SELECTOR&metric=M",
     "a group of runs over seeds: each metric's mean with its 95 % band, the members on demand"},
    {RouteKind::page, "/sweep", "sweep", "sweeps", "?name=NAME",
     "the sweeps served, or one sweep's report with its plots"},
    {RouteKind::asset, "/assets/", "", "", "NAME",
     "the pages' script, style and Chart.js (`app.js`, `app.css`, `chart.js`), compiled into the binary; no other "
     "name"},
    {RouteKind::api, "/api/runs", "", "", "?status&tag&name&spec&sort&order&offset&limit&col…",
     "a page of runs: `total`, `offset`, `limit`, `columns: [{metric, agg}]`, `runs` (the shape of `expctl list "
     "--format json`'s runs, without `run_dir`, with `metrics`: one value or null per column)"},
    {RouteKind::api, "/api/run", "", "", "?id=RUN",
     "`expctl show RUN --format json` (without `shipped` and `run_dir`)"},
    {RouteKind::api, "/api/watch", "", "", "?id=RUN",
     "one line of `expctl watch RUN --format json`"},
    {RouteKind::api, "/api/series", "", "", "?id=RUN&metric=loss&x=step|wall&points=N&after=SEQ&from=STEP&to=STEP",
     "`ranks: [{rank, points, downsampled, x, y}]`, `seq`; each rank's min, max and last point per bucket when "
     "more than `points` fall in the steps asked for"},
    {RouteKind::api, "/api/metrics", "", "", "?id=RUN",
     "the run's series: `names` (no point read: what the run page lays its charts out by)"},
    {RouteKind::api, "/api/series.csv", "", "", "?...",
     "the same as CSV (`rank,step,VALUE`)"},
    {RouteKind::api, "/api/phases", "", "", "?id=RUN&rank=N&x=step|wall&buckets=300",
     "one rank's phase shares over the run: `at` (each bucket's last step or second), `phases: {data, forward, "
     "backward, comm, optimizer, other}` (null when not timed), `measured` (false when no phase was timed), `ranks`"},
    {RouteKind::api, "/api/sweeps", "", "", "",
     "the sweeps served: `[{name, hash, points, runs_expected}]`"},
    {RouteKind::api, "/api/sweep", "", "", "?name=NAME&metric=M…",
     "`expctl sweep FILE --report --format json` (without the file's path), plus `title`, `table: {header, rows}`, "
     "`notes` and `numeric_axes`"},
    {RouteKind::api, "/api/log", "", "", "?id=RUN&rank=N",
     "the tail of `logs/rank-N.log`, when the run folder is on this host"},
    {RouteKind::api, "/api/compare", "", "", "?a=A&b=B",
     "`expctl compare A B --format json`"},
    {RouteKind::api, "/api/group", "", "", "?like=RUN|runs=SELECTOR&metric=loss&points=N&from=STEP&to=STEP",
     "a group's band: `members: [{id, name, status, seed, rank, points}]`, `x`, `mean`, `low`, `high`, `n` (compare's "
     "t interval of the members' mean per bucket of steps); `like=RUN`: the runs of RUN's spec but the seed"},
    {RouteKind::api, "/api/spec-diff", "", "", "?runs=R1,R2,…",
     "N runs side by side: `runs`, `fields: [{path, values}]` (only the spec fields that differ), `same`, "
     "`metrics: [{name, values}]` (their numeric summaries)"},
};
// clang-format on

std::string escape_pipes(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::string escape_html(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::span<const Route> routes() {
  return k_routes;
}

const Route* find_route(std::string_view path) {
  for (const Route& route : k_routes) {
    if (route.kind == RouteKind::asset ? path.starts_with(route.path) : path == route.path) {
      return &route;
    }
  }
  return nullptr;
}

std::string example_target(const Route& route) {
  return route.kind == RouteKind::asset ? std::string(route.path) + "app.js" : std::string(route.path);
}

std::string page_list_json() {
  nlohmann::json pages = nlohmann::json::array();
  for (const Route& route : k_routes) {
    if (route.kind == RouteKind::page) {
      pages.push_back({{"path", route.path}, {"view", route.view}});
    }
  }
  return safe_json_text(pages.dump());
}

std::string page_nav_html() {
  std::string html;
  for (const Route& route : k_routes) {
    if (route.kind == RouteKind::page && !route.nav.empty()) {
      html += (html.empty() ? "" : " ") + std::string("<a href=\"") + escape_html(route.path) + "\">" +
              escape_html(route.nav) + "</a>";
    }
  }
  return html;
}

std::string render_route_table_markdown() {
  std::string table = std::string(k_route_table_begin) + "\n\n| path | answers |\n|---|---|\n";
  for (const Route& route : k_routes) {
    table += "| `" + escape_pipes(std::string(route.path) + std::string(route.params)) + "` | " +
             escape_pipes(route.answers) + " |\n";
  }
  return table + "\n" + std::string(k_route_table_end) + "\n";
}

}  // namespace expctl::serve
