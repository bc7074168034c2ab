#include "expctl/store/testing.hpp"

#include "expctl/store/pg_connection.hpp"
#include "expctl/store/schema.hpp"
#include "expctl/store/sqlite_backend.hpp"

namespace expctl::store::testing {

Store open_at_schema_version(const std::filesystem::path& path, int version) {
  return Store::from_backend(detail::open_sqlite(path, OpenMode::read_write, version), runs_root(path));
}

void limit_database_pages(Store& store, int max_pages) {
  auto& connection = detail::sqlite_backend(store, "limit_database_pages").connection();
  // PRAGMA takes no bound parameters; max_pages is an int from the test itself.
  connection.retry([&] { connection.db().exec(fmt::format("PRAGMA max_page_count = {}", max_pages)); });
}

void execute_sql(const std::filesystem::path& path, const std::string& sql) {
  detail::Connection connection(path, path.string(), detail::Access::read_write);
  connection.retry([&] {
    connection.db().exec("PRAGMA foreign_keys = ON");
    connection.db().exec(sql);
  });
}

void execute_postgres_sql(const std::string& conninfo, const std::string& sql) {
  detail::PgConnection connection(conninfo, detail::masked_conninfo(conninfo));
  connection.run_script(sql);
}

std::string query_postgres(const std::string& conninfo, const std::string& sql) {
  detail::PgConnection connection(conninfo, detail::masked_conninfo(conninfo));
  return connection.exec(sql).text(0, 0);
}

}  // namespace expctl::store::testing
