// The SQLite backend: specs, environments and runs (sqlite_series.cpp has what hangs off a run).
#include "expctl/store/sqlite_backend.hpp"

#include <algorithm>

#include "expctl/store/run_folder.hpp"
#include "expctl/store/run_listing.hpp"
#include "expctl/store/schema.hpp"
#include "expctl/store/sqlite_chunks.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {

namespace fs = std::filesystem;

namespace detail {

namespace {

/// Columns of a run row (run_listing.hpp's k_listing_columns); tags come aggregated in the row
/// (they never hold a comma: Store::add_tag checks), as the PostgreSQL backend reads them: a query
/// per run made `list` of 10 000 runs prepare 10 000 statements.
const std::string k_run_columns = std::string(k_listing_columns) +
                                  ", (SELECT group_concat(tag, ',') FROM (SELECT tag FROM tags t WHERE t.run_id = "
                                  "runs.id ORDER BY tag))";

/// A SQLite statement's current row, for the shared row decoder.
class StatementRow final : public ListingRow {
 public:
  explicit StatementRow(SQLite::Statement& query) : m_query(query) {}
  bool is_null(int column) const override { return m_query.getColumn(column).isNull(); }
  std::string text(int column) const override { return m_query.getColumn(column).getString(); }
  std::int64_t int64(int column) const override { return m_query.getColumn(column).getInt64(); }

 private:
  SQLite::Statement& m_query;
};

/// Binds the four owner columns, from `index` on.
void bind_owner(SQLite::Statement& statement, int index, const util::ProcessIdentity& owner) {
  statement.bind(index, owner.host);
  statement.bind(index + 1, owner.pid);
  statement.bind(index + 2, owner.boot_id);
  statement.bind(index + 3, owner.start_ticks);
}

RunRecord read_run(SQLite::Statement& query) {
  return decode_run_row(StatementRow(query), false);
}

/// Reads every row of `query` as a run, tags included.
std::vector<RunRecord> read_runs(SQLite::Statement& query) {
  std::vector<RunRecord> runs;
  while (query.executeStep()) {
    runs.push_back(read_run(query));
  }
  return runs;
}

}  // namespace

std::unique_ptr<SqliteBackend> open_sqlite(const fs::path& path, OpenMode mode, int target_version, bool upgrade) {
  const std::string display = path.string();
  EXPCTL_CHECK(!path.empty(), util::StoreError, "the database path is empty: pass --db PATH or set EXPCTL_DB");
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  EXPCTL_CHECK(!ec, util::StoreError, "{}: {}", display, ec.message());
  EXPCTL_CHECK(!fs::is_directory(absolute, ec), util::StoreError, "{}: is a directory, not a database file", display);
  if (mode == OpenMode::read_only) {
    EXPCTL_CHECK(fs::exists(absolute, ec), util::StoreError,
                 "{}: no such database (runs are recorded by 'expctl run'; pick another with --db PATH or EXPCTL_DB)",
                 display);
  } else {
    fs::create_directories(absolute.parent_path(), ec);
    EXPCTL_CHECK(!ec, util::StoreError, "{}: cannot create its folder: {}", display, ec.message());
  }
  const bool writing = mode == OpenMode::read_write;
  Connection connection(absolute, display, writing ? Access::read_write : Access::read_only, writing);
  connection.set_read_only(mode == OpenMode::read_only);
  const int version = prepare(connection, target_version, upgrade);
  return std::make_unique<SqliteBackend>(std::move(connection), version);
}

void require_run(Connection& connection, SQLite::Database& db, const std::string& run_id) {
  SQLite::Statement query(db, "SELECT 1 FROM runs WHERE id = ?");
  query.bind(1, run_id);
  require_changed(connection, query.executeStep() ? 1 : 0, run_id);
}

void require_changed(const Connection& connection, int changes, const std::string& run_id) {
  EXPCTL_CHECK(changes > 0, util::StoreError, "no run {} in {} (see 'expctl list')", util::quoted(run_id),
               connection.display());
}

}  // namespace detail

void SqliteBackend::put_spec(const std::string& hash, const std::string& canonical, const std::string& name) {
  m_connection.write([&](SQLite::Database& db) {
    SQLite::Statement insert(db,
                             "INSERT INTO specs (hash, name, canonical, created_at) VALUES (?, ?, ?, ?) "
                             "ON CONFLICT (hash) DO NOTHING");
    insert.bind(1, hash);
    insert.bind(2, name);
    insert.bind(3, canonical);
    insert.bind(4, format_utc(Clock::now()));
    insert.exec();
  });
}

void SqliteBackend::put_environment(const std::string& hash, const std::string& json_text) {
  m_connection.write([&](SQLite::Database& db) {
    SQLite::Statement insert(db,
                             "INSERT INTO environments (hash, fingerprint, created_at) VALUES (?, ?, ?) "
                             "ON CONFLICT (hash) DO NOTHING");
    insert.bind(1, hash);
    insert.bind(2, json_text);
    insert.bind(3, format_utc(Clock::now()));
    insert.exec();
  });
}

std::optional<SpecRecord> SqliteBackend::spec(const std::string& hash) {
  return m_connection.retry([&]() -> std::optional<SpecRecord> {
    SQLite::Statement query(m_connection.db(), "SELECT name, canonical FROM specs WHERE hash = ?");
    query.bind(1, hash);
    if (!query.executeStep()) {
      return std::nullopt;
    }
    return SpecRecord{hash, query.getColumn(0).getString(), query.getColumn(1).getString()};
  });
}

std::optional<std::string> SqliteBackend::environment(const std::string& hash) {
  return m_connection.retry([&]() -> std::optional<std::string> {
    SQLite::Statement query(m_connection.db(), "SELECT fingerprint FROM environments WHERE hash = ?");
    query.bind(1, hash);
    if (!query.executeStep()) {
      return std::nullopt;
    }
    return query.getColumn(0).getString();
  });
}

RunRecord SqliteBackend::create_run(const NewRun& run, const PublishRun& publish) {
  const Clock::time_point started = run.started_at.value_or(Clock::now());
  auto& connection = m_connection;
  return connection.write([&](SQLite::Database& db) {
    SQLite::Statement spec_query(db, "SELECT name, canonical FROM specs WHERE hash = ?");
    spec_query.bind(1, run.spec_hash);
    EXPCTL_CHECK(spec_query.executeStep(), util::StoreError, "spec {} is not in {}: record it (put_spec) first",
                 run.spec_hash, connection.display());
    if (run.environment_hash) {
      SQLite::Statement env_query(db, "SELECT 1 FROM environments WHERE hash = ?");
      env_query.bind(1, *run.environment_hash);
      EXPCTL_CHECK(env_query.executeStep(), util::StoreError,
                   "environment {} is not in {}: record it (put_environment) first", *run.environment_hash,
                   connection.display());
    }
    // Ids of one second sort by creation because each is made greater than the greatest so far;
    // "-" < "." makes [second-, second.) the range of ids of that second.
    const std::string second = detail::run_id_second(started);
    SQLite::Statement greatest(db, "SELECT max(id) FROM runs WHERE id > ? AND id < ?");
    greatest.bind(1, second + "-");
    greatest.bind(2, second + ".");
    greatest.executeStep();

    RunRecord record;
    record.id = detail::make_run_id(started, detail::optional_text(greatest.getColumn(0)));
    record.spec_hash = run.spec_hash;
    record.environment_hash = run.environment_hash;
    record.name = run.name.empty() ? spec_query.getColumn(0).getString() : run.name;
    record.started_at = format_utc(started);

    record.status = run.queued ? RunStatus::queued : RunStatus::running;
    SQLite::Statement insert(db,
                             "INSERT INTO runs (id, spec_hash, environment_hash, name, status, started_at, run_dir, "
                             "heartbeat_at, owner_host, owner_pid, owner_boot_id, owner_start_ticks) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, record.id);
    insert.bind(2, record.spec_hash);
    detail::bind_optional(insert, 3, record.environment_hash);
    insert.bind(4, record.name);
    insert.bind(5, std::string(to_string(record.status)));
    insert.bind(6, record.started_at);
    insert.bind(7, "runs/" + record.id);  // kept for older expctl: run folders are <runs root>/<id>
    if (!run.queued) {                    // a queued run is owned by no process until its job starts it
      const util::ProcessIdentity owner = util::ProcessIdentity::current();
      record.owner = owner.display();
      record.heartbeat_at = format_utc(Clock::now());
      insert.bind(8, *record.heartbeat_at);
      detail::bind_owner(insert, 9, owner);
    }
    insert.exec();
    // Published last, under the write lock: if it fails the row is rolled back; COMMIT of a WAL
    // transaction that already holds the write lock does not meet SQLITE_BUSY, so the folder is
    // never left without its row by a retry.
    publish(record.id, spec_query.getColumn(1).getString());
    return record;
  });
}

void SqliteBackend::finish_run(const std::string& run_id, RunStatus status, int exit_code, const std::string& root_cause) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    SQLite::Statement update(db,
                             "UPDATE runs SET status = ?, exit_code = ?, root_cause = ?, ended_at = ? WHERE id = ?");
    update.bind(1, std::string(to_string(status)));
    update.bind(2, exit_code);
    update.bind(3, root_cause);
    update.bind(4, format_utc(Clock::now()));
    update.bind(5, run_id);
    detail::require_changed(connection, update.exec(), run_id);
  });
  if (m_version < 8) {
    return;  // a store opened at an older schema (tests) has no chunks
  }
  // Then its open chunks are sealed, in a transaction of their own: the run's end is recorded
  // even where sealing cannot be (a full disk), and its points are read as well unsealed.
  try {
    connection.write([&](SQLite::Database& db) { detail::seal_run(db, run_id); });
  } catch (const Error& error) {
    util::log::debug(
        fmt::format("{}: run {}'s open chunks stay unsealed: {}", connection.display(), run_id, error.what()));
  }
}

void SqliteBackend::resume_run(const std::string& run_id, const ResumeHow& how) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    SQLite::Statement query(db, fmt::format("SELECT {} FROM runs WHERE id = ?", detail::k_run_columns));
    query.bind(1, run_id);
    detail::require_changed(connection, query.executeStep() ? 1 : 0, run_id);
    detail::check_resumable(run_id, detail::read_run(query).status, how);
    SQLite::Statement update(
        db,
        "UPDATE runs SET status = 'running', ended_at = NULL, exit_code = NULL, root_cause = '', folder_bytes = NULL, "
        "heartbeat_at = ?, owner_host = ?, owner_pid = ?, owner_boot_id = ?, "
        "owner_start_ticks = ?, environment_hash = coalesce(?, environment_hash) WHERE id = ?");
    update.bind(1, format_utc(Clock::now()));
    detail::bind_owner(update, 2, util::ProcessIdentity::current());
    detail::bind_optional(update, 6, how.environment_hash);
    update.bind(7, run_id);
    update.exec();
  });
}

void SqliteBackend::queue_run(const std::string& run_id, const std::string& root_cause) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    SQLite::Statement query(db, "SELECT status FROM runs WHERE id = ?");
    query.bind(1, run_id);
    detail::require_changed(connection, query.executeStep() ? 1 : 0, run_id);
    detail::check_queueable(run_id, query.getColumn(0).getString());
    SQLite::Statement update(db,
                             "UPDATE runs SET status = 'queued', ended_at = NULL, exit_code = NULL, root_cause = ?, "
                             "folder_bytes = NULL, heartbeat_at = NULL, owner_host = NULL, owner_pid = NULL, "
                             "owner_boot_id = NULL, owner_start_ticks = NULL WHERE id = ?");
    update.bind(1, root_cause);
    update.bind(2, run_id);
    update.exec();
  });
}

void SqliteBackend::heartbeat(const std::string& run_id) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    SQLite::Statement update(db, "UPDATE runs SET heartbeat_at = ? WHERE id = ?");
    update.bind(1, format_utc(Clock::now()));
    update.bind(2, run_id);
    detail::require_changed(connection, update.exec(), run_id);
  });
}

void SqliteBackend::set_summary(const std::string& run_id, const std::string& json_text) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    SQLite::Statement update(db, "UPDATE runs SET summary = ? WHERE id = ?");
    update.bind(1, json_text);
    update.bind(2, run_id);
    detail::require_changed(connection, update.exec(), run_id);
  });
}

namespace {

/// SQLite's spelling of the run listing (run_listing.hpp).
const detail::ListingDialect& sqlite_dialect() {
  static const detail::ListingDialect dialect{
      .columns = detail::k_run_columns,
      .from = "runs",
      .placeholder = [](std::size_t n) { return "?" + std::to_string(n); },
      .name_contains = "instr(name, {0}) > 0",
      .spec_hash_starts_with = "substr(spec_hash, 1, length({0})) = {0}",
      .creation_order = "rowid",  // merge copies it
      .byte_order = "",           // SQLite's BINARY collation
      .duration = "julianday(coalesce(ended_at, {0})) - julianday(started_at)",
      .nulls_clause = false,  // NULL is the smallest already
      .no_limit = "-1",
  };
  return dialect;
}

void bind_all(SQLite::Statement& statement, const std::vector<detail::ListingParam>& params) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const int index = static_cast<int>(i + 1);
    if (params[i].integer) {
      statement.bind(index, static_cast<std::int64_t>(std::stoll(params[i].text)));
    } else {
      statement.bind(index, params[i].text);
    }
  }
}

/// The runs `query` selects, one page of them, and (with_total) how many match in all.
RunPage select_runs(detail::Connection& connection, const RunQuery& query, bool with_total) {
  const detail::ListingSql sql = detail::listing_sql(query, sqlite_dialect());
  return connection.retry([&] {
    // One read transaction, so the total and the page see the same runs.
    std::optional<SQLite::Transaction> snapshot;
    if (with_total) {
      snapshot.emplace(connection.db(), SQLite::TransactionBehavior::DEFERRED);
    }
    RunPage page;
    if (with_total) {
      SQLite::Statement counter(connection.db(), sql.count);
      bind_all(counter, sql.count_params);
      counter.executeStep();
      page.total = counter.getColumn(0).getInt64();
    }
    SQLite::Statement rows(connection.db(), sql.page);
    bind_all(rows, sql.page_params);
    page.runs = detail::read_runs(rows);
    return page;
  });
}

}  // namespace

std::vector<RunRecord> SqliteBackend::list_runs(const RunFilter& filter) {
  return select_runs(m_connection,
                     {.status = filter.status,
                      .tag = filter.tag,
                      .spec_hash_prefix = filter.spec_hash_prefix,
                      .limit = filter.limit},
                     false)
      .runs;
}

RunPage SqliteBackend::query_runs(const RunQuery& query) {
  return select_runs(m_connection, query, true);
}

std::optional<RunRecord> SqliteBackend::run(const std::string& run_id) {
  auto& connection = m_connection;
  return connection.retry([&]() -> std::optional<RunRecord> {
    SQLite::Statement query(connection.db(), fmt::format("SELECT {} FROM runs WHERE id = ?", detail::k_run_columns));
    query.bind(1, run_id);
    auto runs = detail::read_runs(query);
    if (runs.empty()) {
      return std::nullopt;
    }
    return std::move(runs.front());
  });
}

std::pair<std::int64_t, std::vector<RunRecord>> SqliteBackend::runs_with_prefix(const std::string& prefix, int limit) {
  auto& connection = m_connection;
  return connection.retry([&] {
    SQLite::Statement counter(connection.db(), "SELECT count(*) FROM runs WHERE substr(id, 1, length(:p)) = :p");
    counter.bind(":p", prefix);
    counter.executeStep();
    SQLite::Statement query(connection.db(),
                            fmt::format("SELECT {} FROM runs WHERE substr(id, 1, length(:p)) = :p ORDER BY id LIMIT :n",
                                        detail::k_run_columns));
    query.bind(":p", prefix);
    query.bind(":n", limit);
    return std::pair(counter.getColumn(0).getInt64(), detail::read_runs(query));
  });
}

std::unique_ptr<Backend> SqliteBackend::open_reader() {
  return detail::open_sqlite(path(), OpenMode::read_only, m_version);
}

}  // namespace expctl::store
