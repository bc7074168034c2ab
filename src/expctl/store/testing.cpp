#include "expctl/store/testing.hpp"

#include "expctl/store/store_impl.hpp"

namespace expctl::store::testing {

Store open_at_schema_version(const std::filesystem::path& path, int version) {
  return detail::open_store(path, OpenMode::read_write, version);
}

void limit_database_pages(Store& store, int max_pages) {
  auto& connection = StoreAccess::impl(store).connection;
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

}  // namespace expctl::store::testing
