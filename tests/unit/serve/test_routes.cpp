// serve's route table (serve/routes.hpp): the one list of paths from which the server's routes,
// the pages' list in index.html and docs/serve.md's route table come. The server-side checks that
// iterate it are in test_server.cpp ("every route of the table ...").
#include <fstream>
#include <set>
#include <sstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "expctl/serve/assets.hpp"
#include "expctl/serve/routes.hpp"

using namespace expctl;

TEST_CASE("docs: docs/serve.md carries exactly serve's route table", "[serve]") {
  std::ifstream in(test::source_dir() / "docs" / "serve.md");
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string docs = buffer.str();
  INFO("docs/serve.md is out of date: replace its route table with\n" << serve::render_route_table_markdown());
  const std::size_t begin = docs.find(serve::k_route_table_begin);
  const std::size_t end = docs.find(serve::k_route_table_end);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const std::string in_docs = docs.substr(begin, end + serve::k_route_table_end.size() + 1 - begin);
  CHECK(in_docs == serve::render_route_table_markdown());
}

TEST_CASE("serve routes: one row per path, pages with a view, found by path", "[serve]") {
  std::set<std::string> paths;
  std::set<std::string> views;
  for (const serve::Route& route : serve::routes()) {
    CAPTURE(route.path);
    CHECK(paths.insert(std::string(route.path)).second);
    CHECK(route.path.starts_with("/"));
    CHECK_FALSE(route.answers.empty());
    CHECK(serve::find_route(serve::example_target(route)) == &route);
    if (route.kind == serve::RouteKind::page) {
      CHECK_FALSE(route.view.empty());
      CHECK(views.insert(std::string(route.view)).second);
    } else {
      CHECK(route.view.empty());
      CHECK(route.nav.empty());
    }
    if (route.kind == serve::RouteKind::asset) {
      CHECK(serve::find_asset(serve::example_target(route)));
    }
  }
  CHECK(paths.contains("/"));
  CHECK(paths.contains("/api/runs"));
  CHECK(serve::find_route("/api/runs/x") == nullptr);
  CHECK(serve::find_route("/nope") == nullptr);
  CHECK(serve::find_route("/assets/app.css")->kind == serve::RouteKind::asset);
}

TEST_CASE("serve routes: index.html carries the table's pages and header links", "[serve]") {
  const std::string page(serve::index_page());
  CHECK(page.find('@') == std::string::npos);  // every marker filled in
  CHECK(page.find(serve::page_list_json()) != std::string::npos);
  CHECK(page.find("<nav>" + serve::page_nav_html() + "</nav>") != std::string::npos);
  const auto list = nlohmann::json::parse(serve::page_list_json());
  std::size_t pages = 0;
  for (const serve::Route& route : serve::routes()) {
    if (route.kind == serve::RouteKind::page) {
      CAPTURE(route.path);
      REQUIRE(pages < list.size());
      CHECK(list[pages]["path"] == route.path);
      CHECK(list[pages]["view"] == route.view);
      ++pages;
      CHECK((serve::page_nav_html().find("href=\"" + std::string(route.path) + "\"") != std::string::npos) ==
            !route.nav.empty());
    }
  }
  CHECK(pages == list.size());
  CHECK(pages >= 4);
  CHECK(serve::page_nav_html().starts_with("<a href=\"/\">runs</a> "));
}

TEST_CASE("serve routes: the rendered table has one row per route and escapes pipes", "[serve]") {
  const std::string table = serve::render_route_table_markdown();
  std::size_t rows = 0;
  for (std::size_t at = table.find("\n| `"); at != std::string::npos; at = table.find("\n| `", at + 1)) {
    ++rows;
  }
  CHECK(rows == serve::routes().size());
  CHECK_THAT(table, Catch::Contains(
                        "| `/api/series?id=RUN&metric=loss&x=step\\|wall&points=N&after=SEQ&from=STEP&to=STEP` |"));
  CHECK_THAT(table, Catch::Contains("| `/run?id=RUN` |"));
}
