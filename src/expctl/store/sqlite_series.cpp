// SQLite backend members for what hangs off a run: ranks, metric series, artifacts and tags.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/store/sqlite_backend.hpp"
#include "expctl/store/sqlite_chunks.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {

namespace {

/// The key of each name in `points`, made where missing, inside the caller's transaction (a key
/// made by a transaction that rolls back goes with it, so none is cached across calls).
std::map<std::string, std::int64_t> metric_keys(SQLite::Database& db, std::span<const MetricPoint> points) {
  std::map<std::string, std::int64_t> keys;
  for (const MetricPoint& point : points) {
    if (!keys.contains(point.name)) {
      keys.emplace(point.name, detail::metric_key(db, point.name));
    }
  }
  return keys;
}

/// The key of metric `name`, or nullopt when no point was ever written under it.
std::optional<std::int64_t> key_of(SQLite::Database& db, const std::string& name) {
  SQLite::Statement find(db, "SELECT id FROM metric_keys WHERE name = ?");
  find.bind(1, name);
  if (!find.executeStep()) {
    return std::nullopt;
  }
  return find.getColumn(0).getInt64();
}

/// A chunk header from columns rank, first_step, last_step, points, nan_points, min_value,
/// max_value, sum_value[, first_bits, last_bits].
detail::ChunkHead chunk_head(SQLite::Statement& row) {
  const auto optional_real = [&](int column) {
    return row.getColumn(column).isNull() ? std::nullopt : std::optional<double>(row.getColumn(column).getDouble());
  };
  detail::ChunkHead head{row.getColumn(0).getInt(),
                         row.getColumn(1).getInt64(),
                         row.getColumn(2).getInt64(),
                         row.getColumn(3).getInt64(),
                         row.getColumn(4).getInt64(),
                         optional_real(5),
                         optional_real(6),
                         optional_real(7).value_or(std::numeric_limits<double>::quiet_NaN())};
  if (row.getColumnCount() > 9) {
    head.first_bits = static_cast<std::uint64_t>(row.getColumn(8).getInt64());
    head.last_bits = static_cast<std::uint64_t>(row.getColumn(9).getInt64());
  }
  return head;
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
    if (m_version >= 8) {
      detail::write_points(db, run_id, keys, points);
      return;
    }
    // A store opened at an older schema (tests building one as an older expctl wrote it, v4-v7):
    // a row per point, as then.
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
    const detail::ReadSnapshot snapshot(connection.db());
    // The run's metric keys in name order (from metric_keys' UNIQUE index), each series read whole.
    SQLite::Statement keys(connection.db(),
                           "SELECT id, name FROM metric_keys k WHERE (?2 IS NULL OR name = ?2) AND "
                           "(EXISTS (SELECT 1 FROM metric_chunks c WHERE c.run_id = ?1 AND c.key_id = k.id) OR "
                           "EXISTS (SELECT 1 FROM metric_points p WHERE p.run_id = ?1 AND p.key_id = k.id)) "
                           "ORDER BY name");
    keys.bind(1, run_id);
    detail::bind_optional(keys, 2, filter.name);
    std::vector<MetricPoint> points;
    while (keys.executeStep()) {
      const std::string name = keys.getColumn(1).getString();
      for (const SeriesColumns& rank :
           detail::read_series(connection.db(), run_id, keys.getColumn(0).getInt64(), filter.rank)) {
        for (std::size_t i = 0; i < rank.steps.size(); ++i) {
          points.push_back(MetricPoint{rank.rank, rank.steps[i], name, rank.values[i]});
        }
      }
    }
    return points;
  });
}

std::vector<MetricPoint> SqliteBackend::recent_metrics(const std::string& run_id, const std::string& name, int rank,
                                                       int count) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const detail::ReadSnapshot snapshot(connection.db());
    std::vector<MetricPoint> points;
    const auto key = key_of(connection.db(), name);
    if (!key || count <= 0) {
      return points;
    }
    // Newest first: the open chunk's points, then sealed chunks backwards until `count` are read.
    SQLite::Statement staged(connection.db(),
                             "SELECT step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 "
                             "ORDER BY step DESC LIMIT ?4");
    staged.bind(1, run_id);
    staged.bind(2, static_cast<int64_t>(*key));
    staged.bind(3, rank);
    staged.bind(4, count);
    while (staged.executeStep()) {
      points.push_back(MetricPoint{rank, staged.getColumn(0).getInt64(), name,
                                   chunk::value_of(static_cast<std::uint64_t>(staged.getColumn(1).getInt64()))});
    }
    SQLite::Statement sealed(connection.db(),
                             "SELECT data FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 AND "
                             "last_step < ?4 ORDER BY last_step DESC");
    sealed.bind(1, run_id);
    sealed.bind(2, static_cast<int64_t>(*key));
    sealed.bind(3, rank);
    sealed.bind(4, static_cast<int64_t>(points.empty() ? detail::k_last_step : points.back().step));
    while (std::cmp_less(points.size(), count) && sealed.executeStep()) {
      const SQLite::Column data = sealed.getColumn(0);
      detail::append_newest({static_cast<const char*>(data.getBlob()), static_cast<std::size_t>(data.getBytes())}, rank,
                            name, static_cast<std::size_t>(count), points);
    }
    std::reverse(points.begin(), points.end());
    return points;
  });
}

std::vector<SeriesColumns> SqliteBackend::series_columns(const std::string& run_id, const std::string& name,
                                                         std::int64_t after_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const auto key = key_of(connection.db(), name);
    return key ? detail::read_series(connection.db(), run_id, *key, std::nullopt, after_step)
               : std::vector<SeriesColumns>{};
  });
}

std::vector<SeriesColumns> SqliteBackend::series_columns_between(const std::string& run_id, const std::string& name,
                                                                 std::int64_t after_step, std::int64_t upto_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const auto key = key_of(connection.db(), name);
    return key ? detail::read_series(connection.db(), run_id, *key, std::nullopt, after_step, upto_step)
               : std::vector<SeriesColumns>{};
  });
}

std::vector<SeriesAggregate> SqliteBackend::series_aggregates(const std::string& run_id, const std::string& name,
                                                              std::int64_t after_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const detail::ReadSnapshot snapshot(connection.db());
    detail::AggregateCollector ranks;
    const auto key = key_of(connection.db(), name);
    if (!key) {
      return std::vector<SeriesAggregate>{};
    }
    // Whole chunks past `after_step` count from their headers; the one it falls in point by point.
    SQLite::Statement whole(connection.db(),
                            "SELECT rank, first_step, last_step, points, nan_points, min_value, max_value, sum_value "
                            "FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND first_step > ?3 "
                            "ORDER BY rank, last_step");
    whole.bind(1, run_id);
    whole.bind(2, static_cast<int64_t>(*key));
    whole.bind(3, static_cast<int64_t>(after_step));
    while (whole.executeStep()) {
      ranks.add_head(chunk_head(whole));
    }
    SQLite::Statement straddling(connection.db(),
                                 "SELECT rank, data FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND "
                                 "first_step <= ?3 AND last_step > ?3");
    straddling.bind(1, run_id);
    straddling.bind(2, static_cast<int64_t>(*key));
    straddling.bind(3, static_cast<int64_t>(after_step));
    while (straddling.executeStep()) {
      const SQLite::Column data = straddling.getColumn(1);
      ranks.add_chunk(straddling.getColumn(0).getInt(),
                      {static_cast<const char*>(data.getBlob()), static_cast<std::size_t>(data.getBytes())},
                      after_step);
    }
    SQLite::Statement staged(connection.db(),
                             "SELECT rank, step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                             "step > ?3");
    staged.bind(1, run_id);
    staged.bind(2, static_cast<int64_t>(*key));
    staged.bind(3, static_cast<int64_t>(after_step));
    while (staged.executeStep()) {
      ranks.add(staged.getColumn(0).getInt(), staged.getColumn(1).getInt64(),
                chunk::value_of(static_cast<std::uint64_t>(staged.getColumn(2).getInt64())));
    }
    return ranks.take();
  });
}

std::vector<SeriesEnvelope> SqliteBackend::series_envelope(const std::string& run_id, const std::string& name,
                                                           std::size_t buckets, std::int64_t after_step,
                                                           std::int64_t upto_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const detail::ReadSnapshot snapshot(connection.db());
    std::vector<SeriesEnvelope> out;
    const auto key = key_of(connection.db(), name);
    if (!key || upto_step <= after_step) {
      return out;
    }
    std::vector<detail::ChunkHead> heads;
    std::map<int, std::int64_t> open;
    SQLite::Statement chunks(connection.db(),
                             "SELECT rank, first_step, last_step, points, nan_points, min_value, max_value, "
                             "sum_value, first_bits, last_bits FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 "
                             "AND last_step > ?3 AND first_step <= ?4 ORDER BY rank, last_step");
    SQLite::Statement staged(connection.db(),
                             "SELECT rank, count(*) FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                             "step > ?3 AND step <= ?4 GROUP BY rank");
    for (SQLite::Statement* query : {&chunks, &staged}) {
      query->bind(1, run_id);
      query->bind(2, static_cast<int64_t>(*key));
      query->bind(3, static_cast<int64_t>(after_step));
      query->bind(4, static_cast<int64_t>(upto_step));
    }
    while (chunks.executeStep()) {
      heads.push_back(chunk_head(chunks));
    }
    while (staged.executeStep()) {
      open[staged.getColumn(0).getInt()] = staged.getColumn(1).getInt64();
    }
    return detail::envelope_from_heads(
        heads, open, buckets, after_step, upto_step, [&](int rank, std::int64_t after, std::int64_t upto) {
          const auto read = detail::read_series(connection.db(), run_id, *key, rank, after, upto);
          return read.empty() ? SeriesColumns{rank, {}, {}} : read.front();
        });
  });
}

std::vector<MetricSeriesInfo> SqliteBackend::metric_series(const std::string& run_id) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const detail::ReadSnapshot snapshot(connection.db());
    // Per (name, rank): the chunks' headers and the open chunk's points, each an index range.
    detail::SeriesInfoCollector parts;
    // {0}: the table, {1}: its points, {2} {3}: a row's first and last step, {4} {5}: their values.
    constexpr const char* k_parts = R"sql(
SELECT k.name, t.rank, {1}, min(t.{2}),
  (SELECT {4} FROM {0} f WHERE f.run_id = t.run_id AND f.key_id = t.key_id AND f.rank = t.rank
   ORDER BY {3} LIMIT 1),
  max(t.{3}),
  (SELECT {5} FROM {0} l WHERE l.run_id = t.run_id AND l.key_id = t.key_id AND l.rank = t.rank
   ORDER BY {3} DESC LIMIT 1)
FROM metric_keys k CROSS JOIN {0} t ON t.run_id = ?1 AND t.key_id = k.id
GROUP BY k.name, t.rank)sql";
    for (const auto& table :
         {std::array{"metric_chunks", "sum(t.points)", "first_step", "last_step", "first_bits", "last_bits"},
          std::array{"metric_points", "count(*)", "step", "step", "bits", "bits"}}) {
      SQLite::Statement query(connection.db(), fmt::format(fmt::runtime(k_parts), table[0], table[1], table[2],
                                                           table[3], table[4], table[5]));
      query.bind(1, run_id);
      while (query.executeStep()) {
        parts.add(query.getColumn(0).getString(), query.getColumn(1).getInt(), query.getColumn(2).getInt64(),
                  query.getColumn(3).getInt64(), static_cast<std::uint64_t>(query.getColumn(4).getInt64()),
                  query.getColumn(5).getInt64(), static_cast<std::uint64_t>(query.getColumn(6).getInt64()));
      }
    }
    return parts.take();
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
    // One probe of each table's primary key (run_id, key_id, ...) per name the store knows: the
    // sealed chunks and the open chunk's points.
    SQLite::Statement query(connection.db(), R"sql(
SELECT k.name FROM metric_keys k
WHERE EXISTS (SELECT 1 FROM metric_chunks c WHERE c.run_id = ?1 AND c.key_id = k.id)
   OR EXISTS (SELECT 1 FROM metric_points p WHERE p.run_id = ?1 AND p.key_id = k.id) ORDER BY k.name)sql");
    query.bind(1, run_id);
    std::vector<std::string> names;
    while (query.executeStep()) {
      names.push_back(query.getColumn(0).getString());
    }
    return names;
  });
}

}  // namespace expctl::store
