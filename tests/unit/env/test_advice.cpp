#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/env/advice.hpp"

using namespace expctl::env;

namespace {

Fingerprint with_blas(const std::string& described) {
  Fingerprint fingerprint;
  fingerprint.set("software.libtorch_math_libraries",
                  nlohmann::json{{"libblas.so.3", described},
                                 {"libdnnl.so.2", "/usr/lib/x86_64-linux-gnu/libdnnl.so.2.6 (libdnnl2 2.6.3)"}});
  return fingerprint;
}

}  // namespace

TEST_CASE("env advice: netlib's reference BLAS under LibTorch is named, with the package that replaces it") {
  const auto notes = advice(with_blas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0 (libblas3 3.11.0)"));
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("netlib's reference BLAS (/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"));
  CHECK_THAT(notes[0], Catch::Contains("apt-get install libopenblas0-pthread"));
  CHECK_THAT(notes[0], Catch::Contains("their numbers change"));
}

TEST_CASE("env advice: OpenBLAS, an unpackaged BLAS or no LibTorch at all give no note") {
  CHECK(advice(with_blas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 (libopenblas0-pthread 0.3.21+ds-4)"))
            .empty());
  // A libblas.so.3 no package owns (LD_LIBRARY_PATH, a build of one's own): not known to be slow.
  CHECK(advice(with_blas("/opt/blas/libblas.so.3")).empty());
  CHECK(advice(Fingerprint{}).empty());
}
