#pragma once
/// Helpers for subcommands that read or write the results store: opening the database that
/// --db / EXPCTL_DB names, and the one JSON and text rendering of a run that every command shares.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "expctl/api/runs.hpp"
#include "expctl/cli/command.hpp"
#include "expctl/store/ship.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/display.hpp"

namespace expctl::cli {

/// Opens the database named by --db / EXPCTL_DB. read_only requires it to exist (StoreError,
/// exit 2, naming the path and how to pick another); read_write creates it.
/// `upgrade` false: an older SQLite store is refused in one line instead of migrated in place (for
/// commands that never write).
store::Store open_store(const GlobalOptions& globals, store::OpenMode mode, bool upgrade = true);

/// For reading commands where "no database yet" is a normal state: nullopt when the file does
/// not exist; otherwise the store opened read-only (errors as in open_store).
std::optional<store::Store> open_store_if_present(const GlobalOptions& globals);
/// The node-local store to ship (`sync`): `from`, or --local-db where `from` is empty; nullopt
/// where that default does not exist yet (a new node has nothing to ship). A `from` that names
/// no file is a mistake: StoreError naming it.
std::optional<store::Store> open_node_store(const GlobalOptions& globals, const std::string& from);

/// True when --db / EXPCTL_DB names a SQLite file (not a server).
bool store_is_file(const GlobalOptions& globals);

/// The hint printed when the database does not exist yet.
std::string missing_database_hint(const GlobalOptions& globals);

/// How far a server given as --db is behind this node's store (--local-db): nullopt when --db is a
/// SQLite file, when this node has no local store, or when it cannot be read (a reading command
/// never fails over it). `run_id`: that run only.
struct NodeLag {
  std::string local;  ///< the local store as given
  store::ShipLag lag;
};
std::optional<NodeLag> node_lag(const GlobalOptions& globals, store::Store& server,
                                const std::optional<std::string>& run_id = std::nullopt);

/// `list`'s line: "this node's store results/expctl.db: 2 run(s) and 1200 point(s) not on the
/// server yet (...)", or that everything is there.
std::string node_lag_text(const NodeLag& lag);

/// {"local": ..., "runs_behind": N, "points_behind": M}, or null.
nlohmann::json node_lag_json(const std::optional<NodeLag>& lag);

/// A run as a JSON object (api::run_json: the one shape the CLI and the server share).
using api::run_json;

/// A duration for people: "850ms", "42.0s", "3m05s", "2h04m"; "-" when unknown.
using util::duration_text;

/// "2026-11-29T22:31:18.042Z" -> "2026-11-29 22:31:18" (UTC, to the second; util::short_utc).
std::string short_time(const std::string& utc);

/// A size for people: "812 B", "4.0 KiB", "12.3 MiB", "1.20 GiB".
std::string bytes_text(std::int64_t bytes);

}  // namespace expctl::cli
