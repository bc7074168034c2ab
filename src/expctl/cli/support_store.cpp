#include "expctl/cli/support_store.hpp"

#include <filesystem>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/launch/environment.hpp"
#include "expctl/store/failure.hpp"
#include "expctl/store/ship_pending.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/spawn.hpp"

namespace expctl::cli {

namespace {

/// Starts `expctl ship_pending` in the background, detached (it ends by itself after one pass),
/// its output to /dev/null; the server and the node's store reach it through the environment.
void start_background_ship(const GlobalOptions& globals) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (error || null < 0) {
    return;
  }
  const launch::EnvOverrides where = {
      {"EXPCTL_DB", globals.db_path},
      {"EXPCTL_LOCAL_DB", globals.local_db},
      {"EXPCTL_RUNS_DIR", globals.runs_dir.empty() ? std::nullopt : std::optional(globals.runs_dir)}};
  auto child =
      util::ChildProcess::spawn({.argv = {self.string(), "-q", "ship_pending"},
                                 .environment = launch::merged_environment(launch::current_environment(), where),
                                 .fds = {null, null, null}});
  ::close(null);
  if (child) {
    util::log::info(fmt::format("shipping what earlier runs left in {} in the background (pid {})", globals.local_db,
                                child->pid()));
    child->release();
  }
}

}  // namespace

store::Store open_store(const GlobalOptions& globals, store::OpenMode mode, bool upgrade) {
  store::StoreOptions options;
  options.upgrade = upgrade;
  if (!globals.runs_dir.empty()) {
    options.runs_root = globals.runs_dir;
  }
  store::Store store = store::Store::open(globals.db_path, mode, options);
  // A reading command on the team store: what a run's exit could not ship goes now, beside it.
  if (mode == store::OpenMode::read_only && !store_is_file(globals) && store::has_pending(globals.local_db)) {
    start_background_ship(globals);
  }
  return store;
}

bool store_is_file(const GlobalOptions& globals) {
  return store::parse_store_location(globals.db_path).kind == store::StoreKind::sqlite;
}

std::optional<store::Store> open_store_if_present(const GlobalOptions& globals) {
  std::error_code ec;
  const auto where = store::parse_store_location(globals.db_path);
  if (where.kind == store::StoreKind::sqlite && !std::filesystem::exists(where.target, ec)) {
    return std::nullopt;
  }
  try {
    return open_store(globals, store::OpenMode::read_only);
  } catch (const store::NoStoreYet& error) {
    // A team server no run has reached yet: as a SQLite file not made yet, it holds no runs.
    util::log::debug(error.what());
    return std::nullopt;
  }
}

std::optional<store::Store> open_node_store(const GlobalOptions& globals, const std::string& from) {
  GlobalOptions local = globals;
  local.db_path = from.empty() ? globals.local_db : from;
  auto found = open_store_if_present(local);
  EXPCTL_CHECK(found || from.empty(), util::StoreError,
               "--from {}: no such database: check the path (a node's runs are recorded in --local-db, default "
               "results/expctl.db)",
               from);
  return found;
}

std::string missing_database_hint(const GlobalOptions& globals) {
  if (!store_is_file(globals)) {
    return "the team server (--db, EXPCTL_DB) holds no expctl store yet: 'expctl run' records the first run there "
           "(or 'expctl sync' ships this node's runs)";
  }
  return fmt::format(
      "no database at {} yet: runs are recorded there by 'expctl run' (pick another with --db PATH or EXPCTL_DB)",
      globals.db_path);
}

std::optional<NodeLag> node_lag(const GlobalOptions& globals, store::Store& server,
                                const std::optional<std::string>& run_id) {
  std::error_code ec;
  if (store_is_file(globals) || !std::filesystem::exists(globals.local_db, ec)) {
    return std::nullopt;
  }
  try {
    GlobalOptions local_globals = globals;
    local_globals.db_path = globals.local_db;
    store::Store local = open_store(local_globals, store::OpenMode::read_only);
    return NodeLag{globals.local_db, store::ship_lag(local, server, run_id)};
  } catch (const std::exception& error) {
    util::log::debug(fmt::format("cannot tell how far {} is behind {}: {}", server.location(), globals.local_db,
                                 error.what()));
    return std::nullopt;
  }
}

std::string node_lag_text(const NodeLag& lag) {
  if (lag.lag.runs_behind == 0) {
    return fmt::format("this node's store {}: every run of it is on the server", lag.local);
  }
  return fmt::format("this node's store {}: {} run(s) and {} point(s) not on the server yet ('expctl run' ships "
                     "them while it trains, 'expctl sync' ships the rest)",
                     lag.local, lag.lag.runs_behind, lag.lag.points_behind);
}

nlohmann::json node_lag_json(const std::optional<NodeLag>& lag) {
  if (!lag) {
    return nullptr;
  }
  return {{"local", lag->local}, {"runs_behind", lag->lag.runs_behind}, {"points_behind", lag->lag.points_behind}};
}

std::string short_time(const std::string& utc) {
  return util::short_utc(utc);
}

std::string bytes_text(std::int64_t bytes) {
  constexpr const char* k_units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    return fmt::format("{} B", bytes);
  }
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  return value < 100.0 ? fmt::format("{:.1f} {}", value, k_units[unit]) : fmt::format("{:.0f} {}", value, k_units[unit]);
}

}  // namespace expctl::cli
