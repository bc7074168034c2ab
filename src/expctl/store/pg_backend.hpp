#pragma once
/// Internal to the store module: the PostgreSQL backend (a team's shared store), over libpq.

#include <limits>
#include <map>
#include <memory>
#include <string>

#include "expctl/store/backend.hpp"
#include "expctl/store/chunk_codec.hpp"
#include "expctl/store/pg_connection.hpp"
#include "expctl/store/run_query.hpp"
#include "expctl/store/store.hpp"

namespace expctl::store {

class PgBackend final : public Backend, public RunQueries {
 public:
  /// `conninfo` as the user gave it (a password included): kept only to open readers, never shown.
  PgBackend(detail::PgConnection connection, int version, std::string conninfo)
      : m_connection(std::move(connection)), m_version(version), m_conninfo(std::move(conninfo)) {}

  detail::PgConnection& connection() { return m_connection; }
  /// Inside a transaction that writes a run's metrics: fails unless the run is on the server, and
  /// holds its row (FOR KEY SHARE) until the transaction ends, so a concurrent delete_run waits and
  /// then deletes these points too. What a foreign key's trigger did per point (schema v3).
  void hold_run(const std::string& run_id);
  /// hold_run, and the run's series to this transaction alone (an advisory lock): a writer reads
  /// a series' tail before it writes it (series_chunks.hpp), and the shipper replaces the steps a
  /// batch covers; two sessions must not interleave either.
  void hold_series(const std::string& run_id);

  const std::string& display() const override { return m_connection.display(); }
  int schema_version() const override { return m_version; }

  void put_spec(const std::string& hash, const std::string& canonical, const std::string& name) override;
  void put_environment(const std::string& hash, const std::string& json_text) override;
  std::optional<SpecRecord> spec(const std::string& hash) override;
  std::optional<std::string> environment(const std::string& hash) override;
  RunRecord create_run(const NewRun& run, const PublishRun& publish) override;
  void finish_run(const std::string& run_id, RunStatus status, int exit_code, const std::string& root_cause) override;
  void resume_run(const std::string& run_id, const ResumeHow& how) override;
  void queue_run(const std::string& run_id, const std::string& root_cause) override;
  void heartbeat(const std::string& run_id) override;
  void set_summary(const std::string& run_id, const std::string& json_text) override;
  void add_rank(const std::string& run_id, const RankRecord& rank) override;
  void update_rank(const std::string& run_id, int rank, RunStatus status, std::optional<int> exit_code,
                   std::optional<int> signal) override;
  void append_metrics(const std::string& run_id, std::span<const MetricPoint> points) override;
  void add_artifact(const std::string& run_id, const ArtifactRecord& artifact) override;
  bool remove_artifact(const std::string& run_id, const std::string& path) override;
  void add_tag(const std::string& run_id, const std::string& tag) override;
  bool remove_tag(const std::string& run_id, const std::string& tag) override;
  std::vector<RunRecord> list_runs(const RunFilter& filter) override;
  RunPage query_runs(const RunQuery& query) override;
  std::optional<RunRecord> run(const std::string& run_id) override;
  std::pair<std::int64_t, std::vector<RunRecord>> runs_with_prefix(const std::string& prefix, int limit) override;
  std::vector<MetricPoint> metrics(const std::string& run_id, const MetricFilter& filter) override;
  std::vector<MetricPoint> recent_metrics(const std::string& run_id, const std::string& name, int rank,
                                          int count) override;
  std::vector<SeriesColumns> series_columns(const std::string& run_id, const std::string& name,
                                            std::int64_t after_step) override;
  std::vector<SeriesAggregate> series_aggregates(const std::string& run_id, const std::string& name,
                                                 std::int64_t after_step) override;
  std::vector<SeriesColumns> series_columns_between(const std::string& run_id, const std::string& name,
                                                    std::int64_t after_step, std::int64_t upto_step) override;
  std::vector<SeriesEnvelope> series_envelope(const std::string& run_id, const std::string& name, std::size_t buckets,
                                              std::int64_t after_step, std::int64_t upto_step) override;
  std::vector<MetricSeriesInfo> metric_series(const std::string& run_id) override;
  std::vector<std::string> metric_names(const std::string& run_id) override;
  std::vector<ArtifactRecord> artifacts(const std::string& run_id) override;
  std::vector<RankRecord> ranks(const std::string& run_id) override;
  bool delete_run(const std::string& run_id) override;
  std::int64_t database_bytes() override;
  std::int64_t reclaimable_bytes() override;
  void compact() override;
  std::unique_ptr<Backend> open_reader() override;

  /// The integer key of each metric name, created where missing (each in its own committed
  /// statement, so a key id is never cached from a transaction that was rolled back).
  std::vector<int> key_ids(std::span<const MetricPoint> points);
  /// The integer key of one metric name (as key_ids).
  int key_id(const std::string& name);

 private:
  /// The key of metric `name`, or nullopt when no point was ever written under it.
  std::optional<std::int64_t> metric_key(const std::string& name);
  /// Seals every open chunk of the run (pg_series.cpp), in a transaction of its own.
  void seal_run(const std::string& run_id);
  /// The points of series `key` (every rank, or `rank`) with after < step <= upto, per rank in
  /// rank order, at most `limit` a rank; inside the caller's snapshot (read_snapshot).
  std::vector<SeriesColumns> read_series(std::int64_t key, const std::string& run_id, std::optional<int> rank,
                                         std::int64_t after, std::int64_t upto,
                                         std::size_t limit = std::numeric_limits<std::size_t>::max());
  /// `fn()` in one read-only snapshot: a series is read from two tables, and a writer sealing
  /// its open points between two statements would otherwise hide them from both.
  template <typename Fn>
  auto read_snapshot(Fn&& fn) -> decltype(fn()) {
    return m_connection.transaction([&] {
      m_connection.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      return fn();
    });
  }
  void require_run(const std::string& run_id);
  void require_changed(std::int64_t changes, const std::string& run_id) const;

  detail::PgConnection m_connection;
  int m_version = 0;
  std::string m_conninfo;
  std::map<std::string, int, std::less<>> m_key_ids;
};

namespace detail {

/// Connects to the server of `conninfo` and prepares its schema (may_write: creating and
/// upgrading it; otherwise an older or missing schema is refused).
std::unique_ptr<PgBackend> open_postgres(const std::string& conninfo, OpenMode mode, int target_version);

/// The PostgreSQL backend of `store`; throws StoreError naming `what` when the store is not one.
PgBackend& pg_backend(Store& store, const char* what);

/// COPY of chunk rows (chunk_copy_row) into metric_chunks.
inline constexpr const char* k_chunk_copy =
    "COPY metric_chunks (run_id, key_id, rank, first_step, last_step, points, nan_points, min_value, max_value, "
    "sum_value, first_bits, last_bits, data) FROM STDIN";
/// One metric_chunks row in COPY's text format, a line: the header's min and max NULL when every
/// value is NaN and the sum NULL when it is NaN, as the SQLite store holds them.
std::string chunk_copy_row(const std::string& run_id, std::int64_t key, int rank, const chunk::Header& header,
                           std::string_view data);
/// The migration to v6: every row of the row-per-point `metrics` table of v1-v5 into sealed
/// chunks, then the table is dropped, in the migration's transaction.
void chunk_metrics_rows(PgConnection& connection);

}  // namespace detail

}  // namespace expctl::store
