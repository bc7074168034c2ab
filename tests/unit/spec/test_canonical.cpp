#include <cmath>
#include <cstdlib>
#include <limits>

#include <catch2/catch.hpp>

#include "expctl/spec/canonical.hpp"

using expctl::spec::canonical_float;
using expctl::spec::canonical_json;

TEST_CASE("canonical: floats are shortest round-trip and always look like floats") {
  CHECK(canonical_float(0.001) == "0.001");
  CHECK(canonical_float(64.0) == "64.0");
  CHECK(canonical_float(25) == "25.0");
  CHECK(canonical_float(1e-8) == "1e-08");
  CHECK(canonical_float(1e20) == "1e+20");
  CHECK(canonical_float(0.1) == "0.1");
  CHECK(canonical_float(-0.0) == "0.0");
  CHECK(canonical_float(0.30000000000000004) == "0.30000000000000004");
  CHECK(canonical_float(std::numeric_limits<double>::infinity()) == "\"inf\"");
}

TEST_CASE("canonical: floats read back to the same double") {
  for (const double value : {0.1, 1.0 / 3.0, 2.5e-310, 1.7976931348623157e308, 123456789.125, 3e-4}) {
    CHECK(std::strtod(canonical_float(value).c_str(), nullptr) == value);
  }
}

TEST_CASE("canonical: integers and floats never share bytes") {
  CHECK(canonical_json(nlohmann::json(64)) == "64");
  CHECK(canonical_json(nlohmann::json(64.0)) == "64.0");
}

TEST_CASE("canonical: compact - keys sorted by bytes - minimal escapes") {
  const nlohmann::json value = {{"b", {1, 2}}, {"a", {{"z", true}, {"Z", nullptr}}}, {"s", "q\"\\\n\x01é"}};
  CHECK(canonical_json(value) == "{\"a\":{\"Z\":null,\"z\":true},\"b\":[1,2],\"s\":\"q\\\"\\\\\\n\\u0001é\"}");
}
