#pragma once
/// The store's backend seam: what a database must do for expctl, whatever it is. Store (store.hpp)
/// owns one Backend and adds what does not depend on the database: the run folders (under a root
/// of their own, not beside a database file) and the statuses derived on read. SQLite
/// (sqlite_backend.*) is the zero-setup default; other databases implement the same members.
///
/// Contract for every implementation: failures are store::Error with a FailureKind (busy, full,
/// read-only, unreachable, corrupt, io, input) and a one-line message naming the store (with any
/// password masked) and the fix; a write is one transaction, whole or not at all; NaN and ±Inf
/// metric values and 64-bit steps read back as they were written; RunRecord::run_dir is left
/// empty (Store fills it in); statuses are returned as stored (Store derives `lost`).

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "expctl/store/types.hpp"

namespace expctl::store {

struct SeriesColumns;
struct SeriesAggregate;
struct SeriesEnvelope;

/// Called by Backend::create_run inside its transaction, after the row is written and before it
/// commits, with the new run's id and canonical spec: publishes the run's folder, so a row never
/// points at a missing folder. When it throws, the transaction is rolled back.
using PublishRun = std::function<void(const std::string& id, const std::string& canonical_spec)>;

/// What resume_run takes and records.
struct ResumeHow {
  bool queued = false;  ///< a queued run's job started: only a `queued` run is taken
  /// Recorded as the run's fingerprint when given (a queued run's first start on its node).
  std::optional<std::string> environment_hash{};
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// The store as the user named it, safe to print (passwords masked).
  virtual const std::string& display() const = 0;
  /// Schema version of the open store.
  virtual int schema_version() const = 0;

  virtual void put_spec(const std::string& hash, const std::string& canonical, const std::string& name) = 0;
  virtual void put_environment(const std::string& hash, const std::string& json_text) = 0;
  virtual std::optional<SpecRecord> spec(const std::string& hash) = 0;
  virtual std::optional<std::string> environment(const std::string& hash) = 0;

  virtual RunRecord create_run(const NewRun& run, const PublishRun& publish) = 0;
  virtual void finish_run(const std::string& run_id, RunStatus status, int exit_code,
                          const std::string& root_cause) = 0;
  /// Marks the run `running` again, owned by the calling process; throws StoreError for a run that
  /// is running (its owner alive, as derive_run_status says) or completed. `how.queued`: only a
  /// `queued` run is taken (its job started); otherwise a queued run is refused.
  virtual void resume_run(const std::string& run_id, const ResumeHow& how) = 0;
  /// Marks the run `queued`, owned by no process, with `root_cause` saying what it waits for;
  /// throws StoreError for a completed run.
  virtual void queue_run(const std::string& run_id, const std::string& root_cause) = 0;
  virtual void heartbeat(const std::string& run_id) = 0;
  virtual void set_summary(const std::string& run_id, const std::string& json_text) = 0;

  virtual void add_rank(const std::string& run_id, const RankRecord& rank) = 0;
  virtual void update_rank(const std::string& run_id, int rank, RunStatus status, std::optional<int> exit_code,
                           std::optional<int> signal) = 0;
  virtual void append_metrics(const std::string& run_id, std::span<const MetricPoint> points) = 0;
  virtual void add_artifact(const std::string& run_id, const ArtifactRecord& artifact) = 0;
  virtual bool remove_artifact(const std::string& run_id, const std::string& path) = 0;
  virtual void add_tag(const std::string& run_id, const std::string& tag) = 0;
  virtual bool remove_tag(const std::string& run_id, const std::string& tag) = 0;

  /// Runs matching `filter` with statuses as stored; `running`/`lost` filters and their limit are
  /// applied by Store after deriving (the backend is asked for `running` without a limit).
  virtual std::vector<RunRecord> list_runs(const RunFilter& filter) = 0;
  virtual std::optional<RunRecord> run(const std::string& run_id) = 0;
  /// How many run ids start with `prefix`, and the first `limit` of those runs by id.
  virtual std::pair<std::int64_t, std::vector<RunRecord>> runs_with_prefix(const std::string& prefix, int limit) = 0;

  virtual std::vector<MetricPoint> metrics(const std::string& run_id, const MetricFilter& filter) = 0;
  virtual std::vector<MetricPoint> recent_metrics(const std::string& run_id, const std::string& name, int rank,
                                                  int count) = 0;
  virtual std::vector<SeriesColumns> series_columns(const std::string& run_id, const std::string& name,
                                                    std::int64_t after_step) = 0;
  virtual std::vector<SeriesAggregate> series_aggregates(const std::string& run_id, const std::string& name,
                                                         std::int64_t after_step) = 0;
  /// Store::series_columns with an upper bound: the points with after_step < step <= upto_step.
  /// By default, series_columns' points cut at upto_step; the SQLite and PostgreSQL backends read
  /// only the chunks that hold such steps (series_chunks.hpp).
  virtual std::vector<SeriesColumns> series_columns_between(const std::string& run_id, const std::string& name,
                                                            std::int64_t after_step, std::int64_t upto_step);
  /// Store::series_envelope. By default, from every point (series_columns_between); a backend
  /// that keeps chunk headers reads coarse buckets from them.
  virtual std::vector<SeriesEnvelope> series_envelope(const std::string& run_id, const std::string& name,
                                                      std::size_t buckets, std::int64_t after_step,
                                                      std::int64_t upto_step);
  virtual std::vector<MetricSeriesInfo> metric_series(const std::string& run_id) = 0;
  /// The names of the run's series, ordered by name, without reading their points.
  virtual std::vector<std::string> metric_names(const std::string& run_id) = 0;
  virtual std::vector<ArtifactRecord> artifacts(const std::string& run_id) = 0;
  /// Ordered by rank, statuses as stored.
  virtual std::vector<RankRecord> ranks(const std::string& run_id) = 0;

  // Cleaning the store (expctl rm, expctl gc).
  /// Deletes the run's row and every row that hangs off it (ranks, metrics, artifacts, tags) in
  /// one transaction; false when there is no such run. Specs and environments stay.
  virtual bool delete_run(const std::string& run_id) = 0;
  /// Bytes the database occupies: SQLite, the file with its -wal; PostgreSQL, expctl's tables.
  virtual std::int64_t database_bytes() = 0;
  /// Bytes compact() would give back to the file system (SQLite: its free pages; PostgreSQL: 0,
  /// the server's autovacuum makes deleted rows' space reusable and VACUUM gives none back).
  virtual std::int64_t reclaimable_bytes() = 0;
  /// Remembers the bytes of a finished run's folder (nullopt: forget them, the folder changes).
  /// A cache for Store::folders_bytes, so that `list` need not walk every run folder; backends
  /// without one (PostgreSQL, whose runs arrive by shipping) keep nothing.
  virtual void record_folder_bytes(const std::string& /*run_id*/, std::optional<std::int64_t> /*bytes*/) {}
  /// The folder bytes remembered, by run id.
  virtual std::map<std::string, std::int64_t> recorded_folder_bytes() { return {}; }
  /// Gives free space back: SQLite VACUUM and a WAL truncation; PostgreSQL VACUUM ANALYZE of
  /// expctl's tables.
  virtual void compact() = 0;
  /// Another connection to the same database, read-only, for a thread of its own (a backend is
  /// one connection and is never shared between threads); nullptr where there is none to open.
  virtual std::unique_ptr<Backend> open_reader() { return nullptr; }
};

}  // namespace expctl::store
