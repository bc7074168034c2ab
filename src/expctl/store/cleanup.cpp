// Store members for cleaning the store (expctl rm, expctl gc): rows through the backend, then
// the run folders, which live beside the database and not in it.
#include <algorithm>
#include <map>
#include <set>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include "expctl/store/run_folder.hpp"
#include "expctl/store/schema.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {

std::int64_t Store::bytes_under(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) {
    const auto size = std::filesystem::file_size(path, error);
    return error ? 0 : static_cast<std::int64_t>(size);
  }
  std::int64_t bytes = 0;
  for (std::filesystem::recursive_directory_iterator it(path, std::filesystem::directory_options::skip_permission_denied,
                                                        error),
       end;
       !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (it->is_regular_file(ignored) && !it->is_symlink(ignored)) {
      const auto size = it->file_size(ignored);
      bytes += ignored ? 0 : static_cast<std::int64_t>(size);
    }
  }
  return bytes;
}

std::int64_t Store::remove_run(const std::string& run_id) {
  // The row first: a folder without its row is an orphan that gc finds; a row without its folder
  // would be a run whose logs and checkpoints are gone.
  const std::filesystem::path folder = run_folder(run_id);  // an id outside the grammar is refused here, row kept
  EXPCTL_CHECK(m_backend->delete_run(run_id), util::StoreError, "no run {} in {} (see 'expctl list')",
               util::quoted(run_id), location());
  const std::int64_t bytes = bytes_under(folder);
  std::error_code error;
  std::filesystem::remove_all(folder, error);
  EXPCTL_CHECK(!error, util::StoreError,
               "run {} is removed from {}, but its folder {} could not be deleted ({}): delete it by hand or run "
               "`expctl gc` later",
               run_id, location(), folder.string(), error.message());
  return bytes;
}

namespace {

/// The run ids of every expctl SQLite database in `folder` (the stores that may share a runs/
/// folder there), read-only; nullopt when one of them cannot be read, so that nothing is called
/// an orphan on a guess. Files that are not expctl databases are passed over.
std::optional<std::set<std::string>> ids_of_stores_in(const std::filesystem::path& folder) {
  std::set<std::string> ids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    std::error_code ignored;
    if (!entry.is_regular_file(ignored)) {
      continue;
    }
    try {
      SQLite::Database db(entry.path().string(), SQLite::OPEN_READONLY);
      const int application = db.execAndGet("PRAGMA application_id").getInt();
      if ((application != 0 && application != detail::k_sqlite_application_id) || !db.tableExists("runs")) {
        continue;  // another program's database
      }
      SQLite::Statement query(db, "SELECT id FROM runs");
      while (query.executeStep()) {
        ids.insert(query.getColumn(0).getString());
      }
    } catch (const SQLite::Exception& failure) {
      if (failure.getErrorCode() == SQLITE_NOTADB) {
        continue;  // not a database at all
      }
      util::log::debug(fmt::format("gc: cannot read {} ({}): no folder without a store marker is an orphan",
                                   entry.path().string(), failure.what()));
      return std::nullopt;
    }
  }
  return ids;
}

}  // namespace

std::vector<std::filesystem::path> Store::orphaned_folders(std::chrono::seconds min_age) const {
  std::set<std::string> known;
  for (const RunRecord& run : m_backend->list_runs({})) {
    known.insert(run.id);
  }
  const std::string owner = folder_owner();
  std::optional<std::optional<std::set<std::string>>> neighbours;  // read once, for the first unmarked folder
  std::vector<std::filesystem::path> orphans;
  std::error_code error;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const auto& entry : std::filesystem::directory_iterator(m_runs_root, error)) {
    const std::string name = entry.path().filename().string();
    std::error_code ignored;
    if (!is_run_id(name) || !entry.is_directory(ignored) || entry.is_symlink(ignored) || known.contains(name)) {
      continue;
    }
    const auto modified = entry.last_write_time(ignored);
    if (ignored || now - modified < min_age) {
      continue;
    }
    if (const auto marked = detail::folder_owner(entry.path())) {
      if (*marked != owner) {
        continue;  // another store's run
      }
    } else {
      if (!neighbours) {
        neighbours = ids_of_stores_in(m_runs_root.parent_path());
      }
      if (!*neighbours || (*neighbours)->contains(name)) {
        continue;  // a store beside runs/ knows it, or one could not be read
      }
    }
    orphans.push_back(entry.path());
  }
  std::sort(orphans.begin(), orphans.end());
  return orphans;
}

std::int64_t Store::database_bytes() const {
  return m_backend->database_bytes();
}

std::int64_t Store::folders_bytes() const {
  // A finished run's folder keeps its size (finish_run measured it; resume forgets it, gc measures
  // again): walking 10 000 run folders took most of a second of `list`. The others are walked.
  const std::map<std::string, std::int64_t> recorded = m_backend->recorded_folder_bytes();
  std::int64_t bytes = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(m_runs_root, error)) {
    const auto known = recorded.find(entry.path().filename().string());
    std::error_code ignored;
    bytes += known != recorded.end() && entry.is_directory(ignored) ? known->second : bytes_under(entry.path());
  }
  return bytes;
}

int Store::remember_folder_sizes() {
  const std::map<std::string, std::int64_t> recorded = m_backend->recorded_folder_bytes();
  int measured = 0;
  for (const RunRecord& run : m_backend->list_runs({})) {
    if (run.status != RunStatus::running && !recorded.contains(run.id)) {
      remeasure_folder(run.id);
      ++measured;
    }
  }
  return measured;
}

void Store::remeasure_folder(const std::string& run_id) {
  // Only a cache for folders_bytes: a size not written (a full disk) means a walk later, no error.
  try {
    m_backend->record_folder_bytes(run_id, bytes_under(run_folder(run_id)));
  } catch (const util::StoreError& error) {
    util::log::debug(fmt::format("store: the size of run {}'s folder is not remembered: {}", run_id, error.what()));
  }
}

std::int64_t Store::reclaimable_bytes() const {
  return m_backend->reclaimable_bytes();
}

void Store::compact() {
  m_backend->compact();
}

}  // namespace expctl::store
