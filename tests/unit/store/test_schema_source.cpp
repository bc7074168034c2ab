// The one schema source (store/schema_source.cpp) against the migrations: a new store is created
// from the source, an old one is carried forward step by step, and both must end with the same
// tables, columns, types, defaults, keys, references, checks and indexes, on both backends.
#include "backend_fixture.hpp"
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"

using namespace expctl;
using test::BackendStore;

namespace {

/// Opens the store at `where` created at schema v1 (the oldest) and closes it.
void create_at_v1(const BackendStore& where) {
  if (where.kind() == store::StoreKind::sqlite) {
    store::testing::open_at_schema_version(where.location, 1);
  } else {
    store::testing::open_postgres_at_schema_version(where.location, 1);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("schema source: a store migrated from v1 has exactly the schema a new store is created with",
                   "[schema]", test::OnSqlite, test::OnPostgres) {
  BackendStore migrated(TestType::kind);
  BackendStore created(TestType::kind);
  if (!migrated.available || !created.available) return;

  create_at_v1(migrated);
  const std::string at_v1 = store::testing::describe_schema(migrated.location);
  CHECK(migrated.open().schema_version() == store::latest_schema_version(TestType::kind));
  CHECK(created.open().schema_version() == store::latest_schema_version(TestType::kind));

  const std::string from_steps = store::testing::describe_schema(migrated.location);
  const std::string from_source = store::testing::describe_schema(created.location);
  CHECK(from_steps == from_source);
  // The description sees what the steps change: v1 is another schema on either backend.
  CHECK(at_v1 != from_source);
  for (const char* table : {"specs", "environments", "runs", "ranks", "metric_keys", "artifacts", "tags"}) {
    CHECK_THAT(from_source, Catch::Contains(table));
  }
  // Both keep series as chunks and their open points (SQLite v8, PostgreSQL v6): no metrics table.
  for (const char* table : {"metric_chunks", "metric_points"}) {
    CHECK_THAT(from_source, Catch::Contains(table));
  }
  CHECK_THAT(from_source, !Catch::Contains("metrics"));
  if (TestType::kind == store::StoreKind::postgresql) {
    // A chunk's bytes, compressed already, stay in their row where it fits a page.
    CHECK_THAT(from_source, Catch::Contains("storage | metric_chunks | data | m"));
  }
  if (TestType::kind == store::StoreKind::postgresql) {
    CHECK_THAT(from_source, Catch::Contains("PRIMARY KEY (run_id, key_id, rank, first_step)"));
    CHECK_THAT(from_source, Catch::Contains("COLLATE \"C\"") || Catch::Contains("| C |"));
    // No per-row foreign-key checks on the series tables (v3, v6); the small tables keep theirs.
    for (const auto* where : {&migrated, &created}) {
      const auto foreign_keys = [&](const char* table) {
        return store::testing::query_postgres(
            where->location,
            fmt::format("SELECT count(*) FROM pg_constraint WHERE conrelid = '{}'::regclass AND contype = 'f'", table));
      };
      CHECK(foreign_keys("metric_chunks") == "0");
      CHECK(foreign_keys("metric_points") == "0");
      CHECK(foreign_keys("ranks") == "2");
    }
  } else {
    CHECK_THAT(from_source, Catch::Contains("table metric_points WITHOUT ROWID"));
    CHECK_THAT(from_source, Catch::Contains("index metric_chunks_by_series unique 1"));
    CHECK_THAT(from_source, Catch::Contains("check | rank >= 0"));
  }
}
