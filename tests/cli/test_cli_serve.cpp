// `expctl serve`'s command line: the sweeps it shows are read at start, and a bad one stops it
// there with one line (exit 2) before it listens. The server itself: tests/unit/serve.
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/store/store.hpp"

using namespace expctl;

TEST_CASE("cli serve: --sweep with a bad file or two sweeps of one name exits 2 in one line, before listening") {
  test::TempDir dir;
  const auto base = (test::source_dir() / "tests/data/sweep/base.yaml").string();
  const auto db = (dir / "expctl.db").string();
  (void)store::Store::open(db);  // an empty store

  const auto missing = test::run_expctl({"--db", db, "serve", "--port", "0", "--sweep", (dir / "nope.yaml").string()});
  CHECK(missing.exit_code == 2);
  CHECK((missing.out + missing.err).find("nope.yaml") != std::string::npos);
  CHECK(missing.out.find("open  http") == std::string::npos);  // never listened

  const auto one = dir.write("one.yaml", "base: " + base + "\nname: lr\ngrid:\n  optim.lr: [0.01, 0.1]\n");
  const auto two = dir.write("two.yaml", "base: " + base + "\nname: lr\ngrid:\n  optim.lr: [0.5]\n");
  const auto same =
      test::run_expctl({"--db", db, "serve", "--port", "0", "--sweep", one.string(), "--sweep", two.string()});
  CHECK(same.exit_code == 2);
  CHECK(same.err.find("another sweep file is named \"lr\" too") != std::string::npos);
}
