// fuzz_selector: a run selector or comma-separated group, as compare/ab/export/baseline resolve
// it (compare::resolve_group) against a store holding a few runs with tags.
#include <optional>

#include "expctl/compare/selector.hpp"
#include "expctl/store/store.hpp"
#include "fuzz_support.hpp"

namespace {
expctl::store::Store& fixture_store() {
  using namespace expctl;
  static std::optional<store::Store> db;
  if (!db) {
    db.emplace(store::Store::open((fuzz::scratch() / "selector.db").string()));
    for (const char hex : {'a', 'b', 'c'}) {
      const std::string hash(64, hex);
      db->put_spec(hash, "{}", "fuzz");
      for (int i = 0; i < 2; ++i) {
        const auto run = db->create_run({hash, std::nullopt, "fuzz", std::nullopt});
        db->add_tag(run.id, std::string("tag-") + hex);
        db->finish_run(run.id, store::RunStatus::completed, 0, "");
      }
    }
  }
  return *db;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  auto& db = fixture_store();
  fuzz::expect_only_user_errors([&] { (void)compare::resolve_group(db, fuzz::as_text(data, size)); });
  return 0;
}
