// `expctl merge`: runs of other expctl databases brought into this one. The source is read
// through a snapshot taken with SQLite's backup API (never through a connection that could write
// it), migrated in a temporary copy when its schema is older, attached to the destination's
// connection and copied with INSERT ... SELECT in one IMMEDIATE transaction per source.

#include <algorithm>
#include <random>
#include <string_view>
#include <thread>

#include <unistd.h>

#include <SQLiteCpp/Backup.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include "expctl/store/connection.hpp"
#include "expctl/store/pg_backend.hpp"
#include "expctl/store/run_folder.hpp"
#include "expctl/store/schema.hpp"
#include "expctl/store/ship.hpp"
#include "expctl/store/sqlite_backend.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {

namespace fs = std::filesystem;

namespace {

using detail::Access;
using detail::Connection;

/// Columns of a run that make its content; owner and heartbeat are liveness bookkeeping and
/// run_dir is where the folder is (always runs/<id> beside the database), so neither is compared.
constexpr const char* k_content_columns[] = {"spec_hash", "environment_hash", "name",      "status", "started_at",
                                             "ended_at",  "exit_code",        "root_cause", "summary"};

/// The child tables of a run, with the columns compared and copied (run_id first in each table).
/// `rows` reads them from schema {0} (src or main): the metrics table holds a key per point, so
/// its rows are compared by the metric's name (each store numbers its keys on its own).
/// `what` names the rows in a conflict's message. A series' chunks and open points are compared
/// as stored: a run copied from one store to another keeps its chunks whole.
struct ChildTable {
  const char* name;
  const char* columns;
  const char* rows;
  const char* what;
};
constexpr ChildTable k_child_tables[] = {
    {"ranks", "rank, host, pid, environment_hash, status, exit_code, signal", "{0}.ranks", "ranks"},
    {"metric_chunks", "name, rank, first_step, last_step, points, data",
     "(SELECT c.run_id, k.name, c.rank, c.first_step, c.last_step, c.points, c.data FROM {0}.metric_chunks c "
     "JOIN {0}.metric_keys k ON k.id = c.key_id)",
     "metrics"},
    {"metric_points", "name, rank, step, bits",
     "(SELECT p.run_id, k.name, p.rank, p.step, p.bits FROM {0}.metric_points p JOIN {0}.metric_keys k ON "
     "k.id = p.key_id)",
     "metrics"},
    {"artifacts", "path, sha256, size_bytes", "{0}.artifacts", "artifacts"},
};

/// A series table's columns, and what each row of the new runs is copied as: every column as it
/// is but key_id, which goes through the metric's name to the destination's key.
constexpr const char* k_copy_series[][3] = {
    {"metric_chunks",
     "run_id, key_id, rank, first_step, last_step, points, nan_points, min_value, max_value, sum_value, first_bits, "
     "last_bits, data",
     "m.run_id, d.id, m.rank, m.first_step, m.last_step, m.points, m.nan_points, m.min_value, m.max_value, "
     "m.sum_value, m.first_bits, m.last_bits, m.data"},
    {"metric_points", "run_id, key_id, rank, step, bits", "m.run_id, d.id, m.rank, m.step, m.bits"},
};
constexpr const char* k_run_columns =
    "id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code, root_cause, run_dir, summary, "
    "owner_host, owner_pid, owner_boot_id, owner_start_ticks, heartbeat_at";
/// The same, read from the source: the folder is runs/<id> beside the destination, wherever it was.
constexpr const char* k_source_run_columns =
    "id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code, root_cause, 'runs/' || id, "
    "summary, owner_host, owner_pid, owner_boot_id, owner_start_ticks, heartbeat_at";

/// Shown for a run that conflicts: enough of each value to see the difference.
constexpr size_t k_value_excerpt = 60;
constexpr int k_max_conflicts_named = 5;

// A temporary file (and its -wal/-shm) removed when this object dies.
class TempDatabase {
 public:
  explicit TempDatabase(const fs::path& directory) {
    std::random_device random;
    m_path = directory / fmt::format(".merge-{}-{:08x}.db", ::getpid(), random());
  }
  ~TempDatabase() {
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      fs::remove(m_path.string() + suffix, ignored);
    }
  }
  TempDatabase(const TempDatabase&) = delete;
  TempDatabase& operator=(const TempDatabase&) = delete;
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

// With no -wal file no connection has the source open, and immutable reading creates no -wal or
// -shm beside it; otherwise it is read like any WAL reader (mode=ro).
Access source_access(const fs::path& source) {
  std::error_code error;
  return fs::exists(source.string() + "-wal", error) ? Access::read_only : Access::immutable;
}

/// How long a snapshot waits for a source that another process is writing (as Connection's
/// retry budget: two minutes).
constexpr auto k_backup_pause = std::chrono::milliseconds(100);
constexpr int k_backup_attempts = 1200;

void copy_pages(Connection& source, const fs::path& copy) {
  SQLite::Database target(copy.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  SQLite::Backup backup(target, source.db());
  for (int attempt = 0; backup.executeStep() != SQLITE_DONE; ++attempt) {  // BUSY/LOCKED: a writer holds it
    EXPCTL_CHECK(attempt < k_backup_attempts, util::StoreError,
                 "{}: still being written by another process after 2 minutes: merge it when that has finished",
                 source.display());
    std::this_thread::sleep_for(k_backup_pause);
  }
}

/// A consistent copy of `source` at `copy`, read without writing anything beside the source.
void snapshot(const fs::path& source, const std::string& display, const fs::path& copy) {
  Connection connection(source, display, source_access(source));
  try {
    copy_pages(connection, copy);
  } catch (const SQLite::Exception& error) {
    const int code = connection.code_of(error);
    if (!Connection::is_side_file_refusal(code) || connection.access() == Access::immutable) {
      connection.fail(error);
    }
    connection.reopen(Access::immutable);  // the -shm could not be made: read the file as it is
    util::log::warn(fmt::format("{}: read without its -wal file (read-only storage): the latest changes may be missing",
                                display));
    try {
      copy_pages(connection, copy);
    } catch (const SQLite::Exception& again) {
      connection.fail(again);
    }
  }
}

/// Refuses a copy that is not an expctl database (naming the source) and migrates an older one.
void prepare_copy(const fs::path& copy, const std::string& display) {
  Connection connection(copy, display, Access::read_write);
  detail::prepare(connection, detail::schema_latest());
}

std::vector<std::string> column_strings(SQLite::Statement& query) {
  std::vector<std::string> out;
  while (query.executeStep()) {
    out.push_back(query.getColumn(0).getString());
  }
  return out;
}

std::string excerpt(const SQLite::Column& column) {
  if (column.isNull()) {
    return "null";
  }
  std::string text = column.getString();
  return text.size() > k_value_excerpt ? text.substr(0, k_value_excerpt) + "..." : text;
}

struct Conflict {
  std::string run_id;
  std::string reason;
};

void run_column_conflicts(SQLite::Database& db, const std::string& source, std::vector<Conflict>& out) {
  for (const char* column : k_content_columns) {
    SQLite::Statement query(db, fmt::format("SELECT s.id, m.{0}, s.{0} FROM src.runs s JOIN main.runs m ON m.id = s.id "
                                            "WHERE s.{0} IS NOT m.{0} ORDER BY s.id",
                                            column));
    while (query.executeStep()) {
      out.push_back({query.getColumn(0).getString(),
                     fmt::format("{}: {} here, {} in {}", column, util::quoted(excerpt(query.getColumn(1))),
                                 util::quoted(excerpt(query.getColumn(2))), source)});
    }
  }
}

// Rows of a shared run that one side has and the other has not, in either direction.
void child_conflicts(SQLite::Database& db, const ChildTable& table, std::vector<Conflict>& out) {
  constexpr const char* k_shared = "run_id IN (SELECT id FROM src.runs INTERSECT SELECT id FROM main.runs)";
  for (const auto& [from, to] : {std::pair("src", "main"), std::pair("main", "src")}) {
    SQLite::Statement query(db, fmt::format("SELECT DISTINCT run_id FROM (SELECT run_id, {0} FROM {1} WHERE {3} "
                                            "EXCEPT SELECT run_id, {0} FROM {2} WHERE {3}) ORDER BY run_id",
                                            table.columns, fmt::format(fmt::runtime(table.rows), from),
                                            fmt::format(fmt::runtime(table.rows), to), k_shared));
    for (const std::string& id : column_strings(query)) {
      out.push_back({id, fmt::format("its {} differ", table.what)});
    }
  }
}

std::vector<Conflict> spec_conflicts(SQLite::Database& db) {
  SQLite::Statement query(db, "SELECT s.hash FROM src.specs s JOIN main.specs m ON m.hash = s.hash "
                              "WHERE s.canonical IS NOT m.canonical");
  std::vector<Conflict> out;
  for (const std::string& hash : column_strings(query)) {
    out.push_back({"", fmt::format("spec {} has a different canonical form in each store (one of them is corrupt)", hash)});
  }
  return out;
}

// " (and 2 more: id, id)" for the other conflicting runs.
std::string other_runs(const std::vector<Conflict>& conflicts) {
  std::vector<std::string> others;
  for (const Conflict& conflict : conflicts) {
    if (conflict.run_id != conflicts.front().run_id && !conflict.run_id.empty() &&
        std::find(others.begin(), others.end(), conflict.run_id) == others.end()) {
      others.push_back(conflict.run_id);
    }
  }
  if (others.empty()) {
    return "";
  }
  const size_t named = std::min<size_t>(others.size(), k_max_conflicts_named);
  const std::vector<std::string> shown(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(named));
  return fmt::format(" (and {} more: {}{})", others.size(), util::join(shown, ", "), named < others.size() ? ", ..." : "");
}

[[noreturn]] void refuse(const std::vector<Conflict>& conflicts, const std::string& source,
                         const std::string& destination) {
  const Conflict& first = conflicts.front();
  const std::string what = first.run_id.empty() ? first.reason
                                                : fmt::format("run {} is in both with different content ({})",
                                                              first.run_id, first.reason);
  throw util::StoreError(fmt::format("{}: {}{}; nothing of {} was merged into {}: merge it into another store, or "
                                     "keep only one of the runs",
                                     source, what, other_runs(conflicts), source, destination));
}

void check_conflicts(SQLite::Database& db, const std::string& source, const std::string& destination) {
  std::vector<Conflict> conflicts = spec_conflicts(db);
  run_column_conflicts(db, source, conflicts);
  for (const ChildTable& table : k_child_tables) {
    child_conflicts(db, table, conflicts);
  }
  if (!conflicts.empty()) {
    refuse(conflicts, source, destination);
  }
}

int exec(SQLite::Database& db, const std::string& sql) {
  return db.exec(sql);
}

void copy_rows(SQLite::Database& db, MergeResult& result) {
  exec(db, "CREATE TEMP TABLE IF NOT EXISTS merge_new (id TEXT PRIMARY KEY)");
  exec(db, "DELETE FROM temp.merge_new");
  exec(db, "INSERT INTO temp.merge_new SELECT id FROM src.runs WHERE id NOT IN (SELECT id FROM main.runs)");
  SQLite::Statement present(db, "SELECT id FROM src.runs WHERE id IN (SELECT id FROM main.runs) ORDER BY id");
  result.present = column_strings(present);
  result.specs_added = exec(db, "INSERT INTO main.specs (hash, name, canonical, created_at) SELECT hash, name, "
                                "canonical, created_at FROM src.specs WHERE hash NOT IN (SELECT hash FROM main.specs)");
  result.environments_added = exec(db, "INSERT INTO main.environments (hash, fingerprint, created_at) SELECT hash, "
                                       "fingerprint, created_at FROM src.environments WHERE hash NOT IN (SELECT hash "
                                       "FROM main.environments)");
  exec(db, fmt::format("INSERT INTO main.runs ({}) SELECT {} FROM src.runs WHERE id IN (SELECT id FROM "
                       "temp.merge_new) ORDER BY rowid",
                       k_run_columns, k_source_run_columns));
  exec(db, "INSERT OR IGNORE INTO main.metric_keys (name) SELECT name FROM src.metric_keys ORDER BY id");
  for (const auto& [table, columns, selected] : k_copy_series) {
    exec(db, fmt::format("INSERT INTO main.{0} ({1}) SELECT {2} FROM src.{0} m JOIN src.metric_keys k ON k.id = "
                         "m.key_id JOIN main.metric_keys d ON d.name = k.name WHERE m.run_id IN (SELECT id FROM "
                         "temp.merge_new)",
                         table, columns, selected));
  }
  result.points_added = static_cast<std::int64_t>(
      db.execAndGet("SELECT (SELECT total(points) FROM main.metric_chunks WHERE run_id IN (SELECT id FROM "
                    "temp.merge_new)) + (SELECT count(*) FROM main.metric_points WHERE run_id IN (SELECT id FROM "
                    "temp.merge_new))")
          .getDouble());
  for (const ChildTable& table : k_child_tables) {
    if (std::string_view(table.name).starts_with("metric_")) {
      continue;
    }
    exec(db, fmt::format("INSERT INTO main.{0} (run_id, {1}) SELECT run_id, {1} FROM src.{0} WHERE run_id IN "
                         "(SELECT id FROM temp.merge_new)",
                         table.name, table.columns));
  }
  result.tags_added = exec(db, "INSERT OR IGNORE INTO main.tags (run_id, tag) SELECT run_id, tag FROM src.tags");
  SQLite::Statement added(db, "SELECT id FROM temp.merge_new ORDER BY id");
  result.added = column_strings(added);
  exec(db, "DROP TABLE temp.merge_new");
}

/// Refuses a source holding a row whose id is not a run id: such an id would name a folder
/// outside the runs folder when the folders are copied. Nothing of the source is merged then.
void check_ids(SQLite::Database& db, const std::string& display) {
  SQLite::Statement ids(db, "SELECT id FROM src.runs ORDER BY id");
  while (ids.executeStep()) {
    const std::string id = ids.getColumn(0).getString();
    EXPCTL_CHECK(is_run_id(id), util::StoreError, "{}; nothing of {} is merged (delete that row there first)",
                 invalid_run_id_text(id, display), display);
  }
}

class Attached {
 public:
  Attached(Connection& connection, const fs::path& copy) : m_connection(connection) {
    m_connection.retry([&] {
      SQLite::Statement attach(m_connection.db(), "ATTACH DATABASE ? AS src");
      attach.bind(1, copy.string());
      attach.exec();
    });
  }
  ~Attached() {
    try {
      m_connection.db().exec("DETACH DATABASE src");
    } catch (const SQLite::Exception& error) {
      util::log::warn(fmt::format("{}: cannot detach a merged source: {}", m_connection.display(), error.what()));
    }
  }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

 private:
  Connection& m_connection;
};

/// A copy of the folder `from` published as `to`, its store marker naming `owner` (the
/// destination, which knows the run now), so that the destination's gc treats it as its own.
void copy_folder(const fs::path& from, const fs::path& to, const std::string& owner) {
  std::random_device random;
  const fs::path staging = to.parent_path() / fmt::format(".merge-{}-{:08x}", to.filename().string(), random());
  std::error_code error;
  fs::create_directories(to.parent_path(), error);
  fs::copy(from, staging, fs::copy_options::recursive | fs::copy_options::copy_symlinks, error);
  if (!error) {
    try {
      detail::write_folder_owner(staging, owner);
    } catch (const util::StoreError&) {
      fs::remove_all(staging, error);
      throw;
    }
    if (auto published = util::publish_directory(staging, to); !published) {
      fs::remove_all(staging, error);
      throw util::StoreError(published.error().message, util::ExitCode::run_failed);
    }
    return;
  }
  std::error_code ignored;
  fs::remove_all(staging, ignored);
  throw util::StoreError(fmt::format("cannot copy run folder {} to {}: {}", from.string(), to.string(), error.message()),
                         util::ExitCode::run_failed);
}

void copy_folders(const fs::path& source, const Store& destination, MergeResult& result) {
  std::vector<std::string> ids = result.added;
  ids.insert(ids.end(), result.present.begin(), result.present.end());
  std::error_code error;
  for (const std::string& id : ids) {
    const fs::path from = runs_root(source) / id;  // check_ids held every id to the grammar
    const fs::path to = destination.run_folder(id);
    if (!fs::is_directory(from, error)) {
      result.folders_missing.push_back(id);
    } else if (!fs::exists(to, error)) {
      copy_folder(from, to, destination.folder_owner());
      result.folders_copied.push_back(id);
    }
  }
}

void check_source(const fs::path& source, const Store& destination) {
  std::error_code error;
  EXPCTL_CHECK(fs::exists(source, error), util::StoreError, "{}: no such database: check the path", source.string());
  EXPCTL_CHECK(!fs::is_directory(source, error), util::StoreError, "{}: is a directory, not a database file",
               source.string());
  EXPCTL_CHECK(!fs::equivalent(source, destination.path(), error), util::StoreError,
               "{}: is the destination itself: name another store with --into", source.string());
}

}  // namespace

MergeResult merge_store(Store& destination, const fs::path& source, const MergeOptions& options) {
  if (dynamic_cast<PgBackend*>(&destination.backend()) != nullptr) {
    return merge_by_shipping(destination, source);
  }
  check_source(source, destination);
  const std::string display = source.string();
  MergeResult result;
  result.source = source;
  Connection& connection = detail::sqlite_backend(destination, "merging").connection();
  {
    const TempDatabase copy(destination.path().parent_path());
    snapshot(fs::absolute(source), display, copy.path());
    prepare_copy(copy.path(), display);
    const Attached attached(connection, copy.path());
    connection.write([&](SQLite::Database& db) {
      check_ids(db, display);
      check_conflicts(db, display, connection.display());
      copy_rows(db, result);
    });
  }
  if (options.copy_run_folders) {
    copy_folders(fs::absolute(source), destination, result);
  }
  return result;
}

std::string check_integrity(Store& store) {
  Connection& connection = detail::sqlite_backend(store, "the integrity check").connection();
  return connection.retry([&] {
    SQLite::Statement integrity(connection.db(), "PRAGMA integrity_check");
    std::vector<std::string> problems = column_strings(integrity);
    if (problems == std::vector<std::string>{"ok"}) {
      problems.clear();
    }
    SQLite::Statement keys(connection.db(), "PRAGMA foreign_key_check");
    while (keys.executeStep()) {
      problems.push_back(fmt::format("table {} has a row that references a missing row of {}",
                                     keys.getColumn(0).getString(), keys.getColumn(2).getString()));
    }
    return problems.empty() ? std::string("ok") : util::join(problems, "\n");
  });
}

}  // namespace expctl::store
