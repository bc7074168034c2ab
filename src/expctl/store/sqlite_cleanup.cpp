// SQLite backend members for cleaning the store: deleting runs, its size, VACUUM.
#include <filesystem>

#include "expctl/store/sqlite_backend.hpp"

namespace expctl::store {

bool SqliteBackend::delete_run(const std::string& run_id) {
  return m_connection.write([&](SQLite::Database& db) {
    // The connection runs with foreign keys on: ranks, metrics, artifacts and tags go with the row.
    SQLite::Statement remove(db, "DELETE FROM runs WHERE id = ?");
    remove.bind(1, run_id);
    return remove.exec() > 0;
  });
}

std::int64_t SqliteBackend::database_bytes() {
  std::int64_t bytes = 0;
  for (const char* suffix : {"", "-wal"}) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path().string() + suffix, error);
    bytes += error ? 0 : static_cast<std::int64_t>(size);
  }
  return bytes;
}

std::int64_t SqliteBackend::reclaimable_bytes() {
  return m_connection.retry([&] {
    SQLite::Statement query(m_connection.db(),
                            "SELECT (SELECT freelist_count FROM pragma_freelist_count) * "
                            "(SELECT page_size FROM pragma_page_size)");
    return query.executeStep() ? query.getColumn(0).getInt64() : std::int64_t{0};
  });
}

void SqliteBackend::compact() {
  // VACUUM cannot run inside a transaction; it takes the write lock itself. In WAL mode the
  // rewritten pages pass through the -wal file, which the checkpoint then truncates.
  m_connection.retry([&] {
    m_connection.db().exec("VACUUM");
    m_connection.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  });
}

void SqliteBackend::record_folder_bytes(const std::string& run_id, std::optional<std::int64_t> bytes) {
  m_connection.write([&](SQLite::Database& db) {
    SQLite::Statement update(db, "UPDATE runs SET folder_bytes = ? WHERE id = ?");
    if (bytes) {
      update.bind(1, static_cast<int64_t>(*bytes));
    } else {
      update.bind(1);
    }
    update.bind(2, run_id);
    update.exec();
  });
}

std::map<std::string, std::int64_t> SqliteBackend::recorded_folder_bytes() {
  return m_connection.retry([&] {
    SQLite::Statement query(m_connection.db(), "SELECT id, folder_bytes FROM runs WHERE folder_bytes IS NOT NULL");
    std::map<std::string, std::int64_t> bytes;
    while (query.executeStep()) {
      bytes.emplace(query.getColumn(0).getString(), query.getColumn(1).getInt64());
    }
    return bytes;
  });
}

}  // namespace expctl::store
