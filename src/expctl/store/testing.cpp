#include "expctl/store/testing.hpp"

#include <regex>

#include "expctl/store/pg_backend.hpp"
#include "expctl/store/pg_connection.hpp"
#include "expctl/store/schema.hpp"
#include "expctl/store/sqlite_backend.hpp"
#include "expctl/store/sqlite_chunks.hpp"

namespace expctl::store::testing {

Store open_at_schema_version(const std::filesystem::path& path, int version) {
  return Store::from_backend(detail::open_sqlite(path, OpenMode::read_write, version), runs_root(path));
}

Store open_postgres_at_schema_version(const std::string& conninfo, int version) {
  return Store::from_backend(detail::open_postgres(conninfo, OpenMode::read_write, version), "runs");
}

namespace {

/// The CHECK expressions of a CREATE TABLE text, whitespace collapsed, sorted: SQLite keeps each
/// table's text as written (by a migration or the schema source), and no PRAGMA lists checks.
std::vector<std::string> sqlite_checks(const std::string& create_sql) {
  std::vector<std::string> checks;
  static const std::regex k_check("CHECK\\s*\\(", std::regex::icase);
  for (auto it = std::sregex_iterator(create_sql.begin(), create_sql.end(), k_check); it != std::sregex_iterator();
       ++it) {
    size_t at = static_cast<size_t>(it->position() + it->length());
    int depth = 1;
    std::string expression;
    for (; at < create_sql.size() && depth > 0; ++at) {
      const char c = create_sql[at];
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
      if (depth > 0) {
        const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
        if (!space || (!expression.empty() && expression.back() != ' ')) {
          expression += space ? ' ' : c;
        }
      }
    }
    checks.push_back(expression);
  }
  std::sort(checks.begin(), checks.end());
  return checks;
}

std::string describe_sqlite(const std::filesystem::path& path) {
  detail::Connection connection(path, path.string(), detail::Access::read_only);
  SQLite::Database& db = connection.db();
  std::string text;
  const auto rows = [&](const std::string& sql, const std::string& prefix) {
    SQLite::Statement query(db, sql);
    while (query.executeStep()) {
      std::string line = prefix;
      for (int column = 0; column < query.getColumnCount(); ++column) {
        line += " | " + (query.getColumn(column).isNull() ? std::string("NULL") : query.getColumn(column).getString());
      }
      text += line + "\n";
    }
  };
  SQLite::Statement tables(db, "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name");
  while (tables.executeStep()) {
    const std::string table = tables.getColumn(0).getString();
    const std::string sql = tables.getColumn(1).getString();
    text += fmt::format("table {}{}\n", table, sql.find("WITHOUT ROWID") != std::string::npos ? " WITHOUT ROWID" : "");
    rows(fmt::format("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_xinfo('{}') ORDER BY cid", table),
         "  column");
    rows(fmt::format("SELECT \"table\", \"from\", \"to\", on_update, on_delete FROM pragma_foreign_key_list('{}') "
                     "ORDER BY \"from\"",
                     table),
         "  reference");
    for (const std::string& check : sqlite_checks(sql)) {
      text += "  check | " + check + "\n";
    }
    SQLite::Statement indexes(
        db, fmt::format("SELECT name, \"unique\", origin, partial FROM pragma_index_list('{}') ORDER BY name", table));
    while (indexes.executeStep()) {
      const std::string index = indexes.getColumn(0).getString();
      text += fmt::format("  index {} unique {} origin {} partial {}\n", index, indexes.getColumn(1).getString(),
                          indexes.getColumn(2).getString(), indexes.getColumn(3).getString());
      rows(fmt::format("SELECT name, \"desc\", coll, key FROM pragma_index_xinfo('{}') ORDER BY seqno", index), "    on");
    }
  }
  return text;
}

std::string describe_postgres(const std::string& conninfo) {
  detail::PgConnection connection(conninfo, detail::masked_conninfo(conninfo));
  const std::string schema = connection.exec("SELECT current_schema()").text(0, 0);
  std::string text;
  const auto rows = [&](const std::string& sql, const std::string& prefix) {
    const detail::PgResult result = connection.exec(sql);
    for (int row = 0; row < result.rows(); ++row) {
      std::string line = prefix;
      for (int column = 0; column < result.columns(); ++column) {
        line += " | " + (result.is_null(row, column) ? std::string("NULL") : result.text(row, column));
      }
      // Index definitions name the schema ("ON t123.runs"): each test store has its own.
      text += std::regex_replace(line, std::regex("\\b" + schema + "\\."), "") + "\n";
    }
  };
  rows("SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default, collation_name, "
       "is_identity FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY 1, 2",
       "column");
  rows("SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
       "WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2",
       "constraint");
  rows("SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2",
       "index");
  // A column's storage where it is not its type's (metric_chunks.data: MAIN).
  rows(
      "SELECT c.relname, a.attname, a.attstorage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
      "JOIN pg_type t ON t.oid = a.atttypid WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
      "AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage <> t.typstorage ORDER BY 1, 2",
      "storage");
  return text;
}

}  // namespace

std::string describe_schema(const std::string& location) {
  if (location.starts_with("postgres") || location.find('=') != std::string::npos) {
    return describe_postgres(location);
  }
  return describe_sqlite(location);
}

void limit_database_pages(Store& store, int max_pages) {
  auto& connection = detail::sqlite_backend(store, "limit_database_pages").connection();
  // PRAGMA takes no bound parameters; max_pages is an int from the test itself.
  connection.retry([&] { connection.db().exec(fmt::format("PRAGMA max_page_count = {}", max_pages)); });
}

void append_sealed_chunks(Store& store, const std::string& run_id, std::span<const SealedSeries> series) {
  auto& connection = detail::sqlite_backend(store, "append_sealed_chunks").connection();
  connection.write([&](SQLite::Database& db) {
    for (const SealedSeries& one : series) {
      detail::insert_sealed_chunks(db, run_id, {detail::metric_key(db, one.name), one.rank}, one.chunks);
    }
  });
}

void execute_sql(const std::filesystem::path& path, const std::string& sql) {
  detail::Connection connection(path, path.string(), detail::Access::read_write);
  connection.retry([&] {
    connection.db().exec("PRAGMA foreign_keys = ON");
    connection.db().exec(sql);
  });
}

std::string query_sqlite(const std::filesystem::path& path, const std::string& sql) {
  detail::Connection connection(path, path.string(), detail::Access::read_write);
  return connection.retry([&] { return connection.db().execAndGet(sql).getString(); });
}

void execute_postgres_sql(const std::string& conninfo, const std::string& sql) {
  detail::PgConnection connection(conninfo, detail::masked_conninfo(conninfo));
  connection.run_script(sql);
}

std::string query_postgres(const std::string& conninfo, const std::string& sql) {
  detail::PgConnection connection(conninfo, detail::masked_conninfo(conninfo));
  return connection.exec(sql).text(0, 0);
}

std::string postgres_points_sql(const std::string& run_filter) {
  return "SELECT (SELECT coalesce(sum(points), 0) FROM metric_chunks WHERE " + run_filter +
         ") + (SELECT count(*) FROM metric_points WHERE " + run_filter + ")";
}

}  // namespace expctl::store::testing
