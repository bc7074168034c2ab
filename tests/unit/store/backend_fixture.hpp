#pragma once
// The store's contract suite runs once per backend (c10d's store tests write each check once and
// instantiate it per store): TEMPLATE_TEST_CASE(..., OnSqlite, OnPostgres) with a BackendStore.
//
// PostgreSQL comes from EXPCTL_TEST_POSTGRES (a libpq connection string; scripts/test.sh and
// .ci/run start a throwaway server, scripts/pg-throwaway.sh, and set it). Each test gets a schema
// of its own on that server, dropped at the end. Without the variable, a PostgreSQL test fails
// when EXPCTL_REQUIRE_POSTGRES=1 (CI) and is otherwise reported by ctest as skipped, never passed.

#include <atomic>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "support/test_support.hpp"

#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::test {

/// A spec the contract tests record runs of.
inline const std::string k_contract_spec = R"({"format":"expctl-spec-v1","name":"quickstart","seed":1})";
inline const std::string k_contract_hash = util::sha256_hex("quickstart");

struct OnSqlite {
  static constexpr store::StoreKind kind = store::StoreKind::sqlite;
};
struct OnPostgres {
  static constexpr store::StoreKind kind = store::StoreKind::postgresql;
};

/// The test server's connection string, or nullopt (the test then fails or is skipped, see above).
inline std::optional<std::string> test_postgres() {
  const char* conninfo = std::getenv("EXPCTL_TEST_POSTGRES");
  if (conninfo != nullptr && *conninfo != '\0') {
    return std::string(conninfo);
  }
  const char* required = std::getenv("EXPCTL_REQUIRE_POSTGRES");
  if (required != nullptr && std::string(required) == "1") {
    FAIL("EXPCTL_REQUIRE_POSTGRES=1 but EXPCTL_TEST_POSTGRES is not set: start a server with "
         "scripts/pg-throwaway.sh start DIR and export the line it prints");
  }
  skip("postgres", "no PostgreSQL test server (set EXPCTL_TEST_POSTGRES; scripts/test.sh starts one)");
  return std::nullopt;
}

/// `conninfo` with its search_path set to `schema` (libpq's "options" parameter).
inline std::string with_search_path(const std::string& conninfo, const std::string& schema) {
  if (conninfo.find("://") != std::string::npos) {
    return conninfo + (conninfo.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
  }
  return conninfo + " options='-csearch_path=" + schema + "'";
}

/// A fresh, empty store location of one kind: a SQLite file in a TempDir, or a schema of its own
/// on the test server. `available` is false when the PostgreSQL test must stop (see above).
class BackendStore {
 public:
  explicit BackendStore(store::StoreKind kind) : m_kind(kind) {
    if (kind == store::StoreKind::sqlite) {
      location = (dir / "results" / "expctl.db").string();
      return;
    }
    const auto server = test_postgres();
    if (!server) {
      available = false;
      return;
    }
    static std::atomic<int> counter{0};
    m_schema = "t" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
               std::to_string(std::random_device{}() % 100000);
    m_server = *server;
    store::testing::execute_postgres_sql(m_server, "CREATE SCHEMA " + m_schema);
    location = with_search_path(m_server, m_schema);
  }
  ~BackendStore() {
    if (!m_schema.empty()) {
      try {
        store::testing::execute_postgres_sql(m_server, "DROP SCHEMA " + m_schema + " CASCADE");
      } catch (const std::exception&) {
        // the server is gone (a fault test stopped it): the cluster is thrown away as a whole
      }
    }
  }
  BackendStore(const BackendStore&) = delete;
  BackendStore& operator=(const BackendStore&) = delete;

  store::Store open(store::OpenMode mode = store::OpenMode::read_write) const {
    return store::Store::open(location, mode, {.runs_root = dir / "runs"});
  }
  store::StoreKind kind() const { return m_kind; }
  /// Runs SQL on this store's database (PostgreSQL: in its schema).
  void execute(const std::string& sql) const {
    if (m_kind == store::StoreKind::sqlite) {
      store::testing::execute_sql(location, sql);
    } else {
      store::testing::execute_postgres_sql(location, sql);
    }
  }
  /// The first column of the first row of `sql` on this store's database, as text.
  std::string query(const std::string& sql) const {
    return m_kind == store::StoreKind::sqlite ? store::testing::query_sqlite(location, sql)
                                              : store::testing::query_postgres(location, sql);
  }

  TempDir dir;
  std::string location;
  bool available = true;

 private:
  store::StoreKind m_kind;
  std::string m_server;
  std::string m_schema;
};

}  // namespace expctl::test
