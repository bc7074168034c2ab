#include <catch2/catch.hpp>

#include "expctl/util/diagnostic.hpp"

using expctl::util::Diagnostic;
using expctl::util::DiagnosticError;
using expctl::util::format_diagnostic;

TEST_CASE("diagnostic: message grammar with source line and caret") {
  const Diagnostic d{"exp.yaml", 12, 3, R"(unknown key "lerning_rate" in "optim" (did you mean "lr"?))", "  lerning_rate: 3e-4"};
  CHECK(format_diagnostic(d) ==
        "expctl: error: exp.yaml:12:3: unknown key \"lerning_rate\" in \"optim\" (did you mean \"lr\"?)\n"
        "   12 |   lerning_rate: 3e-4\n"
        "      |   ^");
}

TEST_CASE("diagnostic: no position gives a bare file prefix") {
  CHECK(format_diagnostic(Diagnostic{"empty.yaml", 0, 0, "the file is empty", ""}) ==
        "expctl: error: empty.yaml: the file is empty");
}

TEST_CASE("diagnostic: caret follows tab indentation") {
  const Diagnostic d{"a.yaml", 1, 3, "bad", "\t\tx"};
  CHECK(format_diagnostic(d) == "expctl: error: a.yaml:1:3: bad\n    1 | \t\tx\n      | \t\t^");
}

TEST_CASE("diagnostic: line_of picks lines and strips CR") {
  CHECK(expctl::util::line_of("a\r\nb\nc", 1) == "a");
  CHECK(expctl::util::line_of("a\r\nb\nc", 3) == "c");
  CHECK(expctl::util::line_of("a\nb", 4).empty());
}

TEST_CASE("diagnostic: an error with several problems reports all and counts them, exit 2") {
  const DiagnosticError error({{"s.yaml", 1, 1, "first", "x: 1"}, {"s.yaml", 2, 1, "second", "y: 2"}});
  CHECK(error.exit_code() == expctl::util::ExitCode::usage);
  const std::string report = error.report();
  CHECK_THAT(report, Catch::Contains("s.yaml:1:1: first"));
  CHECK_THAT(report, Catch::Contains("s.yaml:2:1: second"));
  CHECK_THAT(report, Catch::EndsWith("expctl: 2 errors in s.yaml"));
}
