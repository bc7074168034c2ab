#pragma once
/// Internal to the store module: the SQLite backend (the zero-setup default), one file opened
/// through detail::Connection, and helpers shared by its .cpp files.

#include <filesystem>
#include <memory>
#include <string>

#include "expctl/store/backend.hpp"
#include "expctl/store/connection.hpp"
#include "expctl/store/run_query.hpp"

namespace expctl::store {

class SqliteBackend final : public Backend, public RunQueries {
 public:
  SqliteBackend(detail::Connection connection, int version)
      : m_connection(std::move(connection)), m_version(version) {}

  detail::Connection& connection() { return m_connection; }
  /// Absolute path of the database file.
  const std::filesystem::path& path() const { return m_connection.path(); }

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
  void record_folder_bytes(const std::string& run_id, std::optional<std::int64_t> bytes) override;
  std::map<std::string, std::int64_t> recorded_folder_bytes() override;

 private:
  detail::Connection m_connection;
  int m_version = 0;
};

namespace detail {

/// Opens the SQLite database at `path` and prepares it at `target_version` (Store::open uses the latest).
std::unique_ptr<SqliteBackend> open_sqlite(const std::filesystem::path& path, OpenMode mode, int target_version,
                                           bool upgrade = true);

/// The SQLite backend of `store`; throws StoreError naming `what` when the store is not SQLite.
SqliteBackend& sqlite_backend(Store& store, const char* what);

/// Throws StoreError "no run ..." unless `run_id` is a run of the database.
void require_run(Connection& connection, SQLite::Database& db, const std::string& run_id);

/// Throws StoreError naming `what` when the SQL statement changed no row.
void require_changed(const Connection& connection, int changes, const std::string& run_id);

}  // namespace detail

}  // namespace expctl::store
