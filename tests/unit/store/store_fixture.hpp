#pragma once
// Shared helpers for the store tests: a database in a fresh temporary folder with one spec.

#include <string>

#include "support/test_support.hpp"

#include "expctl/store/store.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::test {

/// A 64-hex spec hash derived from `seed` (distinct seeds, distinct hashes).
inline std::string fake_spec_hash(const std::string& seed) {
  return util::sha256_hex(seed);
}

inline const std::string k_canonical_spec = R"({"format":"expctl-spec-v1","name":"quickstart","seed":1})";

/// A store in a TempDir with the quickstart-like spec recorded.
struct StoreFixture {
  TempDir dir;
  std::filesystem::path db_path = dir / "results" / "expctl.db";
  store::Store db = store::Store::open(db_path);
  std::string spec_hash = fake_spec_hash("quickstart");

  StoreFixture() { db.put_spec(spec_hash, k_canonical_spec, "quickstart"); }

  store::RunRecord new_run(const std::string& name = "quickstart") {
    return db.create_run(store::NewRun{spec_hash, std::nullopt, name, std::nullopt});
  }
};

}  // namespace expctl::test
