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

/// The key of metric `name`, or nullopt when no point was ever written under it.
std::optional<std::int64_t> key_of(SQLite::Database& db, const std::string& name) {
  SQLite::Statement find(db, "SELECT id FROM metric_keys WHERE name = ?");
  find.bind(1, name);
  if (!find.executeStep()) {
    return std::nullopt;
  }
  return find.getColumn(0).getInt64();
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
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
    while (std::cmp_less(points.size(), count) && sealed.executeStep()) {
      steps.clear();
      bits.clear();
      const SQLite::Column data = sealed.getColumn(0);
      chunk::decode({static_cast<const char*>(data.getBlob()), static_cast<std::size_t>(data.getBytes())}, steps, bits);
      for (std::size_t i = steps.size(); i-- > 0 && std::cmp_less(points.size(), count);) {
        points.push_back(MetricPoint{rank, steps[i], name, chunk::value_of(bits[i])});
      }
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

namespace {

/// Widens a rank's aggregate's step range to [first, last].
void extend_steps(SeriesAggregate& into, std::int64_t first, std::int64_t last) {
  const bool empty = into.count + into.nan_count == 0;
  into.first_step = empty ? first : std::min(into.first_step, first);
  into.last_step = empty ? last : std::max(into.last_step, last);
}

/// Adds one value to a rank's aggregate (NaN counted apart, out of sum, min and max).
void aggregate(SeriesAggregate& into, bool& any, std::int64_t step, double value) {
  extend_steps(into, step, step);
  if (std::isnan(value)) {
    ++into.nan_count;
    return;
  }
  into.min = any ? std::min(into.min, value) : value;
  into.max = any ? std::max(into.max, value) : value;
  into.sum += value;
  ++into.count;
  any = true;
}

}  // namespace

std::vector<SeriesAggregate> SqliteBackend::series_aggregates(const std::string& run_id, const std::string& name,
                                                              std::int64_t after_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const detail::ReadSnapshot snapshot(connection.db());
    std::map<int, std::pair<SeriesAggregate, bool>> ranks;  // rank -> (aggregate, has a value)
    const auto key = key_of(connection.db(), name);
    if (!key) {
      return std::vector<SeriesAggregate>{};
    }
    const auto of = [&](int rank) -> std::pair<SeriesAggregate, bool>& {
      return ranks.try_emplace(rank, SeriesAggregate{rank, 0, 0, 0.0, 0.0, 0.0, 0, 0}, false).first->second;
    };
    // Whole chunks past `after_step` count from their headers; the one it falls in point by point.
    SQLite::Statement whole(connection.db(),
                            "SELECT rank, first_step, last_step, points, nan_points, min_value, max_value, sum_value "
                            "FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND first_step > ?3 "
                            "ORDER BY rank, last_step");
    whole.bind(1, run_id);
    whole.bind(2, static_cast<int64_t>(*key));
    whole.bind(3, static_cast<int64_t>(after_step));
    while (whole.executeStep()) {
      auto& [into, any] = of(whole.getColumn(0).getInt());
      extend_steps(into, whole.getColumn(1).getInt64(), whole.getColumn(2).getInt64());
      const std::int64_t nan_points = whole.getColumn(4).getInt64();
      into.nan_count += nan_points;
      into.count += whole.getColumn(3).getInt64() - nan_points;
      into.sum +=
          whole.getColumn(7).isNull() ? std::numeric_limits<double>::quiet_NaN() : whole.getColumn(7).getDouble();
      if (!whole.getColumn(5).isNull()) {
        const double low = whole.getColumn(5).getDouble();
        const double high = whole.getColumn(6).getDouble();
        into.min = any ? std::min(into.min, low) : low;
        into.max = any ? std::max(into.max, high) : high;
        any = true;
      }
    }
    SQLite::Statement straddling(connection.db(),
                                 "SELECT rank, data FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND "
                                 "first_step <= ?3 AND last_step > ?3");
    straddling.bind(1, run_id);
    straddling.bind(2, static_cast<int64_t>(*key));
    straddling.bind(3, static_cast<int64_t>(after_step));
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
    while (straddling.executeStep()) {
      auto& [into, any] = of(straddling.getColumn(0).getInt());
      steps.clear();
      bits.clear();
      const SQLite::Column data = straddling.getColumn(1);
      chunk::decode({static_cast<const char*>(data.getBlob()), static_cast<std::size_t>(data.getBytes())}, steps, bits);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        if (steps[i] > after_step) {
          aggregate(into, any, steps[i], chunk::value_of(bits[i]));
        }
      }
    }
    SQLite::Statement staged(connection.db(),
                             "SELECT rank, step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                             "step > ?3");
    staged.bind(1, run_id);
    staged.bind(2, static_cast<int64_t>(*key));
    staged.bind(3, static_cast<int64_t>(after_step));
    while (staged.executeStep()) {
      auto& [into, any] = of(staged.getColumn(0).getInt());
      aggregate(into, any, staged.getColumn(1).getInt64(),
                chunk::value_of(static_cast<std::uint64_t>(staged.getColumn(2).getInt64())));
    }
    std::vector<SeriesAggregate> out;
    for (auto& [rank, entry] : ranks) {
      out.push_back(entry.first);
    }
    return out;
  });
}

namespace {

/// A sealed chunk's header, as series_envelope reads it.
struct ChunkHead {
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  std::int64_t points = 0;
  std::optional<double> min{};
  std::optional<double> max{};
  std::uint64_t last_bits = 0;
};

/// One bucket of whole chunks, from their headers alone.
SeriesBucket bucket_of(std::span<const ChunkHead> heads) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  SeriesBucket bucket{
      heads.front().first_step, heads.back().last_step, 0, nan, nan, chunk::value_of(heads.back().last_bits)};
  for (const ChunkHead& head : heads) {
    bucket.points += head.points;
    if (head.min) {
      bucket.min = std::isnan(bucket.min) ? *head.min : std::min(bucket.min, *head.min);
      bucket.max = std::isnan(bucket.max) ? *head.max : std::max(bucket.max, *head.max);
    }
  }
  return bucket;
}

}  // namespace

std::vector<SeriesEnvelope> SqliteBackend::series_envelope(const std::string& run_id, const std::string& name,
                                                           std::size_t buckets, std::int64_t after_step) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const detail::ReadSnapshot snapshot(connection.db());
    std::vector<SeriesEnvelope> out;
    const auto key = key_of(connection.db(), name);
    if (!key) {
      return out;
    }
    buckets = std::max<std::size_t>(buckets, 1);
    std::map<int, std::vector<ChunkHead>> heads;
    std::map<int, std::int64_t> open;
    SQLite::Statement chunks(connection.db(),
                             "SELECT rank, first_step, last_step, points, min_value, max_value, last_bits FROM "
                             "metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND last_step > ?3 ORDER BY rank, "
                             "last_step");
    SQLite::Statement staged(connection.db(),
                             "SELECT rank, count(*) FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                             "step > ?3 GROUP BY rank");
    for (SQLite::Statement* query : {&chunks, &staged}) {
      query->bind(1, run_id);
      query->bind(2, static_cast<int64_t>(*key));
      query->bind(3, static_cast<int64_t>(after_step));
    }
    while (chunks.executeStep()) {
      const auto optional_real = [&](int column) {
        return chunks.getColumn(column).isNull() ? std::nullopt
                                                 : std::optional<double>(chunks.getColumn(column).getDouble());
      };
      heads[chunks.getColumn(0).getInt()].push_back(
          ChunkHead{chunks.getColumn(1).getInt64(), chunks.getColumn(2).getInt64(), chunks.getColumn(3).getInt64(),
                    optional_real(4), optional_real(5), static_cast<std::uint64_t>(chunks.getColumn(6).getInt64())});
    }
    while (staged.executeStep()) {
      open[staged.getColumn(0).getInt()] = staged.getColumn(1).getInt64();
      heads.try_emplace(staged.getColumn(0).getInt());
    }
    for (const auto& [rank_key, rank_heads] : heads) {
      const int rank = rank_key;  // a copy: clang 14 cannot capture a structured binding
      std::int64_t total = open[rank];
      for (const ChunkHead& head : rank_heads) {
        total += head.points;
      }
      const auto size = static_cast<std::size_t>((total + static_cast<std::int64_t>(buckets) - 1) /
                                                 static_cast<std::int64_t>(buckets));
      const auto points_between = [&](std::int64_t after, std::int64_t upto) {
        const auto read = detail::read_series(connection.db(), run_id, *key, rank, after, upto);
        return read.empty() ? SeriesColumns{rank, {}, {}} : read.front();
      };
      if (std::cmp_less(size, chunk::k_chunk_points)) {
        out.push_back(envelope_of(points_between(after_step, detail::k_last_step), size));
        continue;
      }
      // Buckets of whole chunks, from their headers; the chunk `after_step` falls in and the open
      // points are read point by point.
      const std::size_t group = size / static_cast<std::size_t>(chunk::k_chunk_points);
      SeriesEnvelope envelope{rank, {}};
      const auto add_points = [&](const SeriesColumns& columns) {
        for (const SeriesBucket& bucket : envelope_of(columns, size).buckets) {
          envelope.buckets.push_back(bucket);
        }
      };
      std::size_t from = 0;
      if (!rank_heads.empty() && rank_heads.front().first_step <= after_step) {
        add_points(points_between(after_step, rank_heads.front().last_step));
        from = 1;
      }
      for (; from < rank_heads.size(); from += group) {
        envelope.buckets.push_back(
            bucket_of(std::span(rank_heads).subspan(from, std::min(group, rank_heads.size() - from))));
      }
      if (open[rank] > 0) {
        add_points(points_between(rank_heads.empty() ? after_step : rank_heads.back().last_step, detail::k_last_step));
      }
      out.push_back(std::move(envelope));
    }
    return out;
  });
}

std::vector<MetricSeriesInfo> SqliteBackend::metric_series(const std::string& run_id) {
  auto& connection = m_connection;
  return connection.retry([&] {
    const detail::ReadSnapshot snapshot(connection.db());
    // Per (name, rank): the chunks' headers and the open chunk's points, each an index range.
    struct Part {
      std::int64_t points = 0;
      std::int64_t first_step = 0;
      std::uint64_t first_bits = 0;
      std::int64_t last_step = 0;
      std::uint64_t last_bits = 0;
    };
    std::map<std::pair<std::string, int>, Part> parts;
    const auto merge = [&](SQLite::Statement& query) {
      while (query.executeStep()) {
        const Part part{query.getColumn(2).getInt64(), query.getColumn(3).getInt64(),
                        static_cast<std::uint64_t>(query.getColumn(4).getInt64()), query.getColumn(5).getInt64(),
                        static_cast<std::uint64_t>(query.getColumn(6).getInt64())};
        const auto [it, added] = parts.try_emplace({query.getColumn(0).getString(), query.getColumn(1).getInt()}, part);
        if (!added) {
          Part& into = it->second;
          into.points += part.points;
          if (part.first_step < into.first_step) {
            into.first_step = part.first_step;
            into.first_bits = part.first_bits;
          }
          if (part.last_step > into.last_step) {
            into.last_step = part.last_step;
            into.last_bits = part.last_bits;
          }
        }
      }
    };
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
      merge(query);
    }
    std::vector<MetricSeriesInfo> series;
    for (const auto& [name_rank, part] : parts) {
      if (series.empty() || series.back().name != name_rank.first) {
        // Ordered by rank within a name, so the first part of a name is its lowest rank.
        series.push_back(MetricSeriesInfo{name_rank.first, 0, 0, name_rank.second, part.first_step,
                                          chunk::value_of(part.first_bits), part.last_step,
                                          chunk::value_of(part.last_bits)});
      }
      series.back().points += part.points;
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
