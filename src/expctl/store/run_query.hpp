#pragma once
/// The runs table's query (`expctl serve`): runs filtered, counted, sorted and paged by the
/// database, never by reading every run. Every backend implements RunQueries beside Backend,
/// each through the one listing of run_listing.hpp in its SQL dialect; query_runs adds what Store
/// adds to a backend's answer (derived statuses, run folders).
///
/// Kept out of backend.hpp and store.hpp for now only so that adding it does not rebuild every
/// file that includes the store: RunQueries::query_runs belongs in Backend, and query_runs in
/// Store, when the store's headers next change anyway.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "expctl/store/store.hpp"
#include "expctl/store/types.hpp"

namespace expctl::store {

/// How query_runs orders runs. Every order ends with the run id, so pages never overlap.
/// `status` sorts by the stored spelling (a lost run sorts among running ones); `duration` by the
/// seconds from start to end, or to now for a run without an end.
enum class RunSort { started, name, status, duration };

/// One page of runs, filtered, sorted and paged by the database (the dashboard's runs table).
struct RunQuery {
  std::optional<RunStatus> status{};
  std::optional<std::string> tag{};  ///< exact tag
  std::string name_contains{};       ///< substring of the name (case-sensitive); empty: any
  std::string spec_hash_prefix{};    ///< lowercase hex, empty: any
  RunSort sort = RunSort::started;
  bool descending = true;
  std::size_t offset = 0;
  std::size_t limit = 50;  ///< 0: no limit
};

/// What query_runs answers: how many runs match in all, and the page asked for.
struct RunPage {
  std::int64_t total = 0;
  std::vector<RunRecord> runs{};
};

/// What a backend answers a RunQuery with. Statuses as stored, like Backend::list_runs: query_runs
/// answers the `running`/`lost` filters itself.
class RunQueries {
 public:
  virtual ~RunQueries() = default;
  /// One page of the runs `query` selects and their total, filtered, counted, sorted and paged in
  /// SQL, the count and the page from one snapshot.
  virtual RunPage query_runs(const RunQuery& query) = 0;
};

/// One page of the runs `query` selects, with their total: the database filters, counts, sorts
/// and pages (a page of a 10 000-run store reads its rows only). Statuses as derive_run_status
/// says; a `running` or `lost` filter reads the runs stored as running (few) and pages those.
/// Throws StoreError for a spec-hash prefix that is not lowercase hex.
RunPage query_runs(const Store& store, const RunQuery& query);

}  // namespace expctl::store
