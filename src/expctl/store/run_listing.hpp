#pragma once
/// Internal to the store module: the one run listing both backends run (Backend::list_runs,
/// RunQueries::query_runs, a run by id or prefix). What differs between SQLite and PostgreSQL is
/// a ListingDialect (parameter syntax, a few functions, byte-order collation, "no limit"); the
/// filters, the orders, the paging and the reading of a run row are written once here, so a
/// filter or a column added to one backend's listing cannot be missed in the other's.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "expctl/store/run_query.hpp"
#include "expctl/store/types.hpp"

namespace expctl::store::detail {

/// A bound value of a listing statement, in placeholder order (1, 2, ...): text, or an integer
/// (LIMIT, OFFSET) as its decimal text.
struct ListingParam {
  std::string text{};
  bool integer = false;
  bool operator==(const ListingParam&) const = default;
};

/// How one SQL dialect spells what the listing needs.
struct ListingDialect {
  /// The select list, in k_listing_columns' order (each backend aggregates the tags its way).
  std::string columns;
  /// What the columns are selected from (PostgreSQL joins the tags and the ship state).
  std::string from;
  /// Placeholder number `n` (1-based): "?n" or "$n".
  std::string (*placeholder)(std::size_t n) = nullptr;
  /// fmt patterns over a placeholder {0}: the name contains it, the spec hash starts with it.
  const char* name_contains = "";
  const char* spec_hash_starts_with = "";
  /// The column that breaks ties of started_at in creation order ("rowid": merge keeps it).
  const char* creation_order = "id";
  /// Appended to a text column so that it sorts by bytes, as std::string does.
  const char* byte_order = "";
  /// fmt pattern of a run's duration over {0} (the time now, a placeholder), NULL for a time that
  /// cannot be read.
  const char* duration = "";
  /// How NULLs sort in `descending` order so that they come as SQLite puts them (smallest).
  bool nulls_clause = false;
  /// The LIMIT of "no limit": "-1" (SQLite), or "" (leave LIMIT out).
  const char* no_limit = "";
};

/// Columns a listing row holds, in this order: id, spec_hash, environment_hash, name, status,
/// started_at, ended_at, exit_code, root_cause, summary, owner_host, owner_pid, owner_boot_id,
/// owner_start_ticks, heartbeat_at, tags (comma-separated, sorted), and on a server two more:
/// whether a shipper brought the run, and whether its node said it was lost.
inline constexpr const char* k_listing_columns =
    "id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code, root_cause, summary, "
    "owner_host, owner_pid, owner_boot_id, owner_start_ticks, heartbeat_at";

/// The statements of one listing: the page, and (for query_runs) the count of all that match.
struct ListingSql {
  std::string count;
  std::vector<ListingParam> count_params;
  std::string page;
  std::vector<ListingParam> page_params;
};

/// The SQL of `query` in `dialect`. Only fixed fragments are concatenated; every value is bound.
ListingSql listing_sql(const RunQuery& query, const ListingDialect& dialect);

/// One row of a listing as the backend's result reads it.
class ListingRow {
 public:
  virtual ~ListingRow() = default;
  virtual bool is_null(int column) const = 0;
  virtual std::string text(int column) const = 0;
  virtual std::int64_t int64(int column) const = 0;
};

/// The run of a listing row (k_listing_columns, then tags; `shipped_columns`: the server's two
/// more), with its status derived: from its owner and heartbeat, or, for a run a shipper brought
/// to a server, only as the node shipped it (`lost` when the node said so).
RunRecord decode_run_row(const ListingRow& row, bool shipped_columns);

}  // namespace expctl::store::detail
