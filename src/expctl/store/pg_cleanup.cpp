// PostgreSQL backend members for cleaning the store: deleting runs, its size, VACUUM.
#include "expctl/store/pg_backend.hpp"

namespace expctl::store {

namespace {

// expctl's tables: their size is the store's (the server may hold other databases and schemas).
constexpr const char* k_table_list =
    "ARRAY['expctl_schema', 'specs', 'environments', 'runs', 'ranks', 'metric_keys', 'metric_chunks', "
    "'metric_points', 'artifacts', 'tags', 'ship_progress', 'ship_state']";

}  // namespace

bool PgBackend::delete_run(const std::string& run_id) {
  // ON DELETE CASCADE takes the run's ranks, artifacts, tags and shipping progress along; its
  // series (metric_chunks, metric_points) have no foreign key (schema v3, v6), so they go here,
  // after the run's row: deleting it waits for any batch that holds the row (hold_run), and these
  // statements then see that batch's chunks and points.
  return m_connection.transaction([&] {
    const bool deleted = m_connection.exec("DELETE FROM runs WHERE id = $1", {run_id}).changed() > 0;
    m_connection.exec("DELETE FROM metric_chunks WHERE run_id = $1", {run_id});
    m_connection.exec("DELETE FROM metric_points WHERE run_id = $1", {run_id});
    return deleted;
  });
}

std::int64_t PgBackend::database_bytes() {
  const auto result = m_connection.exec(
      std::string("SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0)::bigint FROM unnest(") +
      k_table_list + ") AS t");
  return result.rows() > 0 ? result.int64(0, 0) : 0;
}

std::int64_t PgBackend::reclaimable_bytes() {
  return 0;
}

void PgBackend::compact() {
  // VACUUM cannot run inside a transaction block; exec runs one statement on its own.
  m_connection.exec("VACUUM ANALYZE runs, ranks, metric_chunks, metric_points, artifacts, tags");
}

}  // namespace expctl::store
