// SQLite backend members for what hangs off a run: ranks, metric series, artifacts and tags.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "expctl/store/sqlite_backend.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {

namespace {

/// SQLite stores a NaN as NULL; read it back as NaN.
double read_value(const SQLite::Column& column) {
  return column.isNull() ? std::numeric_limits<double>::quiet_NaN() : column.getDouble();
}

/// The metrics table holds a metric's key (metric_keys.id), not its name: the key of a name, as
/// a scalar subquery SQLite evaluates once per statement (the primary key range scan stays).
constexpr const char* k_key_of_name = "(SELECT id FROM metric_keys WHERE name = ?2)";

/// The key of each name in `points`, made where missing, inside the caller's transaction (a key
/// made by a transaction that rolls back goes with it, so none is cached across calls).
std::map<std::string, std::int64_t> metric_keys(SQLite::Database& db, std::span<const MetricPoint> points) {
  std::map<std::string, std::int64_t> keys;
  SQLite::Statement make(db, "INSERT INTO metric_keys (name) VALUES (?) ON CONFLICT (name) DO NOTHING");
  SQLite::Statement find(db, "SELECT id FROM metric_keys WHERE name = ?");
  for (const MetricPoint& point : points) {
    if (keys.contains(point.name)) {
      continue;
    }
    make.bind(1, point.name);
    make.exec();
    make.reset();
    find.bind(1, point.name);
    EXPCTL_ASSERT(find.executeStep(), "metric key {} was just made", point.name);
    keys.emplace(point.name, find.getColumn(0).getInt64());
    find.reset();
  }
  return keys;
}

/// Counts, per series, the points of `points` at or below the series' last step before this
/// batch (series_rewrites): what a shipper that sent the series up to that step must send again.
/// One index seek per series of the batch; nothing is written for a batch that only appends.
void count_rewrites(SQLite::Database& db, const std::string& run_id, const std::map<std::string, std::int64_t>& keys,
                    std::span<const MetricPoint> points) {
  std::map<std::pair<std::int64_t, int>, std::optional<std::int64_t>> last_before;  // (key, rank) -> last step
  for (const MetricPoint& point : points) {
    last_before.try_emplace({keys.at(point.name), point.rank});
  }
  SQLite::Statement last(db, "SELECT max(step) FROM metrics WHERE run_id = ? AND key_id = ? AND rank = ?");
  for (auto& [series, step] : last_before) {
    last.bind(1, run_id);
    last.bind(2, static_cast<int64_t>(series.first));
    last.bind(3, series.second);
    if (last.executeStep() && !last.getColumn(0).isNull()) {
      step = last.getColumn(0).getInt64();
    }
    last.reset();
  }
  std::map<std::pair<std::int64_t, int>, std::int64_t> rewrites;
  for (const MetricPoint& point : points) {
    const auto& before = last_before.at({keys.at(point.name), point.rank});
    if (before && point.step <= *before) {
      ++rewrites[{keys.at(point.name), point.rank}];
    }
  }
  SQLite::Statement add(db,
                        "INSERT INTO series_rewrites (run_id, key_id, rank, rewrites) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (run_id, key_id, rank) DO UPDATE SET rewrites = rewrites + excluded.rewrites");
  for (const auto& [series, count] : rewrites) {
    add.bind(1, run_id);
    add.bind(2, static_cast<int64_t>(series.first));
    add.bind(3, series.second);
    add.bind(4, static_cast<int64_t>(count));
    add.exec();
    add.reset();
  }
}

}  // namespace

void SqliteBackend::add_rank(const std::string& run_id, const RankRecord& rank) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    detail::require_run(connection, db, run_id);
    SQLite::Statement insert(db,
                             "INSERT INTO ranks (run_id, rank, host, pid, environment_hash, status, exit_code, signal) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, run_id);
    insert.bind(2, rank.rank);
    insert.bind(3, rank.host);
    detail::bind_optional(insert, 4, rank.pid);
    detail::bind_optional(insert, 5, rank.environment_hash);
    insert.bind(6, std::string(to_string(rank.status)));
    detail::bind_optional(insert, 7, rank.exit_code);
    detail::bind_optional(insert, 8, rank.signal);
    insert.exec();
  });
}

void SqliteBackend::update_rank(const std::string& run_id, int rank, RunStatus status, std::optional<int> exit_code,
                        std::optional<int> signal) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    SQLite::Statement update(db,
                             "UPDATE ranks SET status = ?, exit_code = ?, signal = ? WHERE run_id = ? AND rank = ?");
    update.bind(1, std::string(to_string(status)));
    detail::bind_optional(update, 2, exit_code);
    detail::bind_optional(update, 3, signal);
    update.bind(4, run_id);
    update.bind(5, rank);
    EXPCTL_CHECK(update.exec() > 0, util::StoreError, "run {} has no rank {} in {}", util::quoted(run_id), rank,
                 connection.display());
  });
}

void SqliteBackend::append_metrics(const std::string& run_id, std::span<const MetricPoint> points) {
  if (points.empty()) {
    return;
  }
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    detail::require_run(connection, db, run_id);
    const auto keys = metric_keys(db, points);
    count_rewrites(db, run_id, keys, points);
    // One prepared statement for the whole batch inside one transaction: one fsync per batch.
    SQLite::Statement insert(db,
                             "INSERT INTO metrics (run_id, key_id, rank, step, value) VALUES (?, ?, ?, ?, ?) "
                             "ON CONFLICT (run_id, key_id, rank, step) DO UPDATE SET value = excluded.value");
    insert.bind(1, run_id);
    for (const MetricPoint& point : points) {
      insert.bind(2, static_cast<int64_t>(keys.at(point.name)));
      insert.bind(3, point.rank);
      insert.bind(4, static_cast<int64_t>(point.step));
      insert.bind(5, point.value);  // NaN binds as NULL
      insert.exec();
      insert.reset();
    }
  });
}

void SqliteBackend::add_artifact(const std::string& run_id, const ArtifactRecord& artifact) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    detail::require_run(connection, db, run_id);
    SQLite::Statement insert(db,
                             "INSERT INTO artifacts (run_id, path, sha256, size_bytes) VALUES (?, ?, ?, ?) "
                             "ON CONFLICT (run_id, path) DO UPDATE SET sha256 = excluded.sha256, "
                             "size_bytes = excluded.size_bytes");
    insert.bind(1, run_id);
    insert.bind(2, artifact.path);
    insert.bind(3, artifact.sha256);
    insert.bind(4, static_cast<int64_t>(artifact.size_bytes));
    insert.exec();
  });
}

bool SqliteBackend::remove_artifact(const std::string& run_id, const std::string& path) {
  auto& connection = m_connection;
  return connection.write([&](SQLite::Database& db) {
    SQLite::Statement remove(db, "DELETE FROM artifacts WHERE run_id = ? AND path = ?");
    remove.bind(1, run_id);
    remove.bind(2, path);
    return remove.exec() > 0;
  });
}

void SqliteBackend::add_tag(const std::string& run_id, const std::string& tag) {
  auto& connection = m_connection;
  connection.write([&](SQLite::Database& db) {
    detail::require_run(connection, db, run_id);
    SQLite::Statement insert(db, "INSERT INTO tags (run_id, tag) VALUES (?, ?) ON CONFLICT (run_id, tag) DO NOTHING");
    insert.bind(1, run_id);
    insert.bind(2, tag);
    insert.exec();
  });
}

bool SqliteBackend::remove_tag(const std::string& run_id, const std::string& tag) {
  auto& connection = m_connection;
  return connection.write([&](SQLite::Database& db) {
    detail::require_run(connection, db, run_id);
    SQLite::Statement remove(db, "DELETE FROM tags WHERE run_id = ? AND tag = ?");
    remove.bind(1, run_id);
    remove.bind(2, tag);
    return remove.exec() > 0;
  });
}

std::vector<MetricPoint> SqliteBackend::metrics(const std::string& run_id, const MetricFilter& filter) {
  auto& connection = m_connection;
  return connection.retry([&] {
    // NULL filters match everything, so one statement serves every combination. CROSS JOIN keeps
    // metric_keys the outer loop, read in name order from its UNIQUE index, and each key's points
    // a primary key range: rows come in the order wanted with no sort.
    SQLite::Statement query(connection.db(),
                            "SELECT k.name, m.rank, m.step, m.value FROM metric_keys k CROSS JOIN metrics m "
                            "ON m.run_id = ?1 AND m.key_id = k.id WHERE (?2 IS NULL OR k.name = ?2) "
                            "AND (?3 IS NULL OR m.rank = ?3) ORDER BY k.name, m.rank, m.step");
    query.bind(1, run_id);
    detail::bind_optional(query, 2, filter.name);
    detail::bind_optional(query, 3, filter.rank);
    std::vector<MetricPoint> points;
    while (query.executeStep()) {
      points.push_back(MetricPoint{query.getColumn(1).getInt(), query.getColumn(2).getInt64(),
                                   query.getColumn(0).getString(), read_value(query.getColumn(3))});
    }
    return points;
  });
}

std::vector<MetricPoint> SqliteBackend::recent_metrics(const std::string& run_id, const std::string& name, int rank,
                                              int count) {
  auto& connection = m_connection;
  return connection.retry([&] {
    SQLite::Statement query(connection.db(),
                            fmt::format("SELECT step, value FROM metrics WHERE run_id = ?1 AND key_id = {} AND "
                                        "rank = ?3 ORDER BY step DESC LIMIT ?4",
                                        k_key_of_name));
    query.bind(1, run_id);
    query.bind(2, name);
    query.bind(3, rank);
    query.bind(4, count);
    std::vector<MetricPoint> points;
    while (query.executeStep()) {
      points.push_back(MetricPoint{rank, query.getColumn(0).getInt64(), name, read_value(query.getColumn(1))});
    }
    std::reverse(points.begin(), points.end());
    return points;
  });
}

namespace {

void bind_series(SQLite::Statement& query, const std::string& run_id, const std::string& name,
                 std::int64_t after_step) {
  query.bind(1, run_id);
  query.bind(2, name);
  query.bind(3, static_cast<int64_t>(after_step));
}

}  // namespace

std::vector<SeriesColumns> SqliteBackend::series_columns(const std::string& run_id, const std::string& name,
                                                 std::int64_t after_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    // A range scan of the primary key (run_id, key_id, rank, step): already in the order wanted.
    SQLite::Statement query(connection.db(),
                            fmt::format("SELECT rank, step, value FROM metrics WHERE run_id = ?1 AND key_id = {} "
                                        "AND step > ?3 ORDER BY rank, step",
                                        k_key_of_name));
    bind_series(query, run_id, name, after_step);
    std::vector<SeriesColumns> ranks;
    while (query.executeStep()) {
      const int rank = query.getColumn(0).getInt();
      if (ranks.empty() || ranks.back().rank != rank) {
        ranks.push_back(SeriesColumns{rank, {}, {}});
      }
      ranks.back().steps.push_back(query.getColumn(1).getInt64());
      ranks.back().values.push_back(read_value(query.getColumn(2)));
    }
    return ranks;
  });
}

std::vector<SeriesAggregate> SqliteBackend::series_aggregates(const std::string& run_id, const std::string& name,
                                                      std::int64_t after_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    SQLite::Statement query(connection.db(),
                            fmt::format("SELECT rank, count(value), count(*) - count(value), total(value), "
                                        "min(value), max(value), min(step), max(step) FROM metrics "
                                        "WHERE run_id = ?1 AND key_id = {} AND step > ?3 GROUP BY rank ORDER BY rank",
                                        k_key_of_name));
    bind_series(query, run_id, name, after_step);
    std::vector<SeriesAggregate> ranks;
    while (query.executeStep()) {
      const auto number = [&](int column) {
        return query.getColumn(column).isNull() ? 0.0 : query.getColumn(column).getDouble();
      };
      ranks.push_back(SeriesAggregate{query.getColumn(0).getInt(), query.getColumn(1).getInt64(),
                                      query.getColumn(2).getInt64(), number(3), number(4), number(5),
                                      query.getColumn(6).getInt64(), query.getColumn(7).getInt64()});
    }
    return ranks;
  });
}

std::vector<MetricSeriesInfo> SqliteBackend::metric_series(const std::string& run_id) {
  auto& connection = m_connection;
  return connection.retry([&] {
    // One row per (name, rank); the primary key index makes the first/last look-ups cheap.
    SQLite::Statement query(connection.db(), R"sql(
SELECT k.name, m.rank, count(*), min(m.step), max(m.step),
  (SELECT value FROM metrics f WHERE f.run_id = m.run_id AND f.key_id = m.key_id AND f.rank = m.rank
   ORDER BY step LIMIT 1),
  (SELECT value FROM metrics l WHERE l.run_id = m.run_id AND l.key_id = m.key_id AND l.rank = m.rank
   ORDER BY step DESC LIMIT 1)
FROM metric_keys k CROSS JOIN metrics m ON m.run_id = ? AND m.key_id = k.id
GROUP BY k.name, m.rank ORDER BY k.name, m.rank)sql");
    query.bind(1, run_id);
    std::vector<MetricSeriesInfo> series;
    while (query.executeStep()) {
      const std::string name = query.getColumn(0).getString();
      if (series.empty() || series.back().name != name) {
        // Rows come ordered by rank, so the first row of a name is its lowest rank.
        series.push_back(MetricSeriesInfo{name, 0, 0, query.getColumn(1).getInt(), query.getColumn(3).getInt64(),
                                          read_value(query.getColumn(5)), query.getColumn(4).getInt64(),
                                          read_value(query.getColumn(6))});
      }
      series.back().points += query.getColumn(2).getInt64();
      series.back().ranks += 1;
    }
    return series;
  });
}

std::vector<ArtifactRecord> SqliteBackend::artifacts(const std::string& run_id) {
  auto& connection = m_connection;
  return connection.retry([&] {
    SQLite::Statement query(connection.db(),
                            "SELECT path, sha256, size_bytes FROM artifacts WHERE run_id = ? ORDER BY path");
    query.bind(1, run_id);
    std::vector<ArtifactRecord> artifacts;
    while (query.executeStep()) {
      artifacts.push_back(ArtifactRecord{query.getColumn(0).getString(), query.getColumn(1).getString(),
                                         query.getColumn(2).getInt64()});
    }
    return artifacts;
  });
}

std::vector<RankRecord> SqliteBackend::ranks(const std::string& run_id) {
  auto& connection = m_connection;
  return connection.retry([&] {
    SQLite::Statement query(connection.db(),
                            "SELECT rank, host, pid, environment_hash, status, exit_code, signal FROM ranks "
                            "WHERE run_id = ? ORDER BY rank");
    query.bind(1, run_id);
    std::vector<RankRecord> ranks;
    while (query.executeStep()) {
      RankRecord rank;
      rank.rank = query.getColumn(0).getInt();
      rank.host = query.getColumn(1).getString();
      if (!query.getColumn(2).isNull()) {
        rank.pid = query.getColumn(2).getInt64();
      }
      rank.environment_hash = detail::optional_text(query.getColumn(3));
      rank.status = parse_run_status(query.getColumn(4).getString()).value_or(RunStatus::failed);
      rank.exit_code = detail::optional_int(query.getColumn(5));
      rank.signal = detail::optional_int(query.getColumn(6));
      ranks.push_back(std::move(rank));
    }
    return ranks;
  });
}

std::vector<std::string> SqliteBackend::metric_names(const std::string& run_id) {
  auto& connection = m_connection;
  return connection.retry([&] {
    // One probe of the primary key (run_id, key_id, ...) per name the store knows.
    SQLite::Statement query(connection.db(), R"sql(
SELECT k.name FROM metric_keys k
WHERE EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = ? AND m.key_id = k.id) ORDER BY k.name)sql");
    query.bind(1, run_id);
    std::vector<std::string> names;
    while (query.executeStep()) {
      names.push_back(query.getColumn(0).getString());
    }
    return names;
  });
}

}  // namespace expctl::store
