#pragma once
/// Internal to the store module: Store's private state and helpers shared by its .cpp files.

#include <filesystem>
#include <string>

#include "expctl/store/connection.hpp"

namespace expctl::store {

struct Store::Impl {
  detail::Connection connection;
  int version = 0;
  std::filesystem::path runs_root;  ///< absolute <database dir>/runs
};

/// Builds Store objects from an Impl (used by Store::open and the testing hooks).
struct StoreAccess {
  static Store make(std::unique_ptr<Store::Impl> impl) { return Store(std::move(impl)); }
  static Store::Impl& impl(Store& store) { return *store.m_impl; }
};

namespace detail {

/// Opens `path` and prepares it at `target_version` (Store::open uses the latest).
Store open_store(const std::filesystem::path& path, OpenMode mode, int target_version);

/// Throws StoreError "no run ..." unless `run_id` is a run of the database.
void require_run(Connection& connection, SQLite::Database& db, const std::string& run_id);

/// Throws StoreError naming `what` when the SQL statement changed no row.
void require_changed(const Connection& connection, int changes, const std::string& run_id);

}  // namespace detail

}  // namespace expctl::store
