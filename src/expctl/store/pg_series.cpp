// PostgreSQL backend members for metric series (schema v6): sealed chunks in metric_chunks (the
// bytes chunk_codec.hpp writes, as bytea) and the open chunk's points in metric_points, written
// and read by the rules of series_chunks.hpp, as the SQLite store does.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "expctl/store/pg_backend.hpp"
#include "expctl/store/series_chunks.hpp"

namespace expctl::store {

namespace {

using detail::PgConnection;
using detail::PgFormat;
using detail::PgParams;
using detail::PgResult;
using detail::SeriesKeyRank;

std::string text(std::int64_t number) {
  return std::to_string(number);
}

/// `numbers` as an SQL array literal ("{1,2,3}"), for `unnest($n::bigint[])`.
template <typename Number>
std::string array_text(std::span<const Number> numbers) {
  std::string out = "{";
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    out += (i == 0 ? "" : ",") + std::to_string(static_cast<std::int64_t>(numbers[i]));
  }
  return out + "}";
}

std::string hex(std::string_view bytes) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += k_digits[byte >> 4];
    out += k_digits[byte & 15];
  }
  return out;
}

/// A header value as text: NULL where the SQLite store holds NULL too (min and max when every
/// value is NaN, a NaN sum).
PgParams::value_type header_real(double value, bool present) {
  return present && !std::isnan(value) ? std::optional(PgConnection::real_text(value)) : std::nullopt;
}

/// One run's chunk tables on the server, in the caller's transaction (series_chunks.hpp).
class PgChunkTables final : public detail::ChunkTables {
 public:
  PgChunkTables(PgConnection& connection, std::string run_id) : m_connection(connection), m_run_id(std::move(run_id)) {}

  detail::SeriesTail tail(const SeriesKeyRank& series) override {
    const PgResult row = m_connection.exec(
        "SELECT c.last_step, c.points, o.last, o.points FROM (SELECT 1) one "
        "LEFT JOIN LATERAL (SELECT last_step, points FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND "
        "rank = $3 ORDER BY first_step DESC LIMIT 1) c ON true "
        "CROSS JOIN LATERAL (SELECT max(step) AS last, count(*) AS points FROM (SELECT step FROM metric_points "
        "WHERE run_id = $1 AND key_id = $2 AND rank = $3 ORDER BY step DESC LIMIT $4) s) o",
        params(series, text(chunk::k_chunk_points)), PgFormat::binary);
    detail::SeriesTail tail;
    if (!row.is_null(0, 0)) {
      tail.sealed_last = row.int64(0, 0);
      tail.sealed_points = row.int64(0, 1);
    }
    if (!row.is_null(0, 2)) {
      tail.open_last = row.int64(0, 2);
      tail.open_points = row.int64(0, 3);
    }
    return tail;
  }

  void take_chunks(const SeriesKeyRank& series, std::int64_t from, std::vector<std::int64_t>& steps,
                   std::vector<std::uint64_t>& bits) override {
    const PgResult rows = m_connection.exec(
        "WITH taken AS (DELETE FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND rank = $3 AND "
        "last_step >= $4 RETURNING first_step, data) SELECT data FROM taken ORDER BY first_step",
        params(series, text(from)), PgFormat::binary);
    for (int row = 0; row < rows.rows(); ++row) {
      chunk::decode(rows.bytes(row, 0), steps, bits);
    }
  }

  void stage(const SeriesKeyRank& series, std::span<const std::int64_t> steps,
             std::span<const std::uint64_t> bits) override {
    m_connection.exec(
        "INSERT INTO metric_points (run_id, key_id, rank, step, bits) SELECT $1, $2, $3, s, b FROM "
        "unnest($4::bigint[], $5::bigint[]) AS t(s, b) "
        "ON CONFLICT (run_id, key_id, rank, step) DO UPDATE SET bits = excluded.bits",
        params(series, array_text(steps), array_text(bits)));
  }

  void first_open(const SeriesKeyRank& series, std::int64_t limit, std::vector<std::int64_t>& steps,
                  std::vector<std::uint64_t>& bits) override {
    const PgResult rows = m_connection.exec(
        "SELECT step, bits FROM metric_points WHERE run_id = $1 AND key_id = $2 AND rank = $3 ORDER BY step LIMIT $4",
        params(series, text(limit)), PgFormat::binary);
    for (int row = 0; row < rows.rows(); ++row) {
      steps.push_back(rows.int64(row, 0));
      bits.push_back(static_cast<std::uint64_t>(rows.int64(row, 1)));
    }
  }

  void unstage(const SeriesKeyRank& series, std::int64_t upto) override {
    m_connection.exec("DELETE FROM metric_points WHERE run_id = $1 AND key_id = $2 AND rank = $3 AND step <= $4",
                      params(series, text(upto)));
  }

  void put_chunk(const SeriesKeyRank& series, const chunk::Header& header, std::string_view data) override {
    const bool any = header.nan_count < header.count;
    PgParams row = params(series, text(header.first_step));
    for (auto& value : PgParams{text(header.last_step), text(header.count), text(header.nan_count),
                                header_real(header.min, any), header_real(header.max, any),
                                header_real(header.sum, true), text(static_cast<std::int64_t>(header.first_bits)),
                                text(static_cast<std::int64_t>(header.last_bits)), "\\x" + hex(data)}) {
      row.push_back(std::move(value));
    }
    m_connection.exec(
        "INSERT INTO metric_chunks (run_id, key_id, rank, first_step, last_step, points, nan_points, min_value, "
        "max_value, sum_value, first_bits, last_bits, data) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::bytea)",
        row);
  }

  void add_rewrites(const std::map<SeriesKeyRank, std::int64_t>& /*rewrites*/) override {
    // A team server is shipped to, never from: no shipper reads its rewrite counts.
  }

  std::vector<SeriesKeyRank> open_series() override {
    const PgResult rows =
        m_connection.exec("SELECT DISTINCT key_id, rank FROM metric_points WHERE run_id = $1", {m_run_id});
    std::vector<SeriesKeyRank> series;
    for (int row = 0; row < rows.rows(); ++row) {
      series.push_back({rows.int64(row, 0), static_cast<int>(rows.int64(row, 1))});
    }
    return series;
  }

 private:
  template <typename... More>
  PgParams params(const SeriesKeyRank& series, More... more) const {
    return PgParams{m_run_id, text(series.key), text(series.rank), std::move(more)...};
  }

  PgConnection& m_connection;
  std::string m_run_id;
};

/// A chunk header from binary columns rank, first_step, last_step, points, nan_points, min_value,
/// max_value, sum_value, first_bits, last_bits.
detail::ChunkHead chunk_head(const PgResult& rows, int row) {
  const auto optional_real = [&](int column) {
    return rows.is_null(row, column) ? std::nullopt : std::optional<double>(rows.real(row, column));
  };
  return detail::ChunkHead{static_cast<int>(rows.int64(row, 0)),
                           rows.int64(row, 1),
                           rows.int64(row, 2),
                           rows.int64(row, 3),
                           rows.int64(row, 4),
                           optional_real(5),
                           optional_real(6),
                           rows.real(row, 7),
                           static_cast<std::uint64_t>(rows.int64(row, 8)),
                           static_cast<std::uint64_t>(rows.int64(row, 9))};
}

constexpr const char* k_head_columns =
    "rank, first_step, last_step, points, nan_points, min_value, max_value, sum_value, first_bits, last_bits";

}  // namespace

namespace detail {

std::string chunk_copy_row(const std::string& run_id, std::int64_t key, int rank, const chunk::Header& header,
                           std::string_view data) {
  const bool any = header.nan_count < header.count;
  const auto real = [](double value, bool present) {
    return present && !std::isnan(value) ? PgConnection::real_text(value) : std::string("\\N");
  };
  // COPY's text format: a backslash is written twice, so bytea's "\x" hex form is "\\x".
  return fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t\\\\x{}\n", run_id, key, rank, header.first_step,
                     header.last_step, header.count, header.nan_count, real(header.min, any), real(header.max, any),
                     real(header.sum, true), static_cast<std::int64_t>(header.first_bits),
                     static_cast<std::int64_t>(header.last_bits), hex(data));
}

void chunk_metrics_rows(PgConnection& connection) {
  // Read through a cursor, so a big table is never held whole; chunks go in by COPY, a few MB a time.
  connection.exec(
      "DECLARE expctl_old_points NO SCROLL CURSOR FOR SELECT run_id, key_id, rank, step, value FROM metrics "
      "ORDER BY run_id, key_id, rank, step");
  std::string run_id;
  SeriesKeyRank series{-1, -1};
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  std::string copy;
  const auto flush = [&] {
    if (!steps.empty()) {
      copy +=
          chunk_copy_row(run_id, series.key, series.rank, chunk::summarize(steps, bits), chunk::encode(steps, bits));
      steps.clear();
      bits.clear();
    }
  };
  const auto send = [&] {
    if (!copy.empty()) {
      connection.copy_in(k_chunk_copy, copy);
      copy.clear();
    }
  };
  while (true) {
    const PgResult rows = connection.exec("FETCH 100000 FROM expctl_old_points", {}, PgFormat::binary);
    if (rows.rows() == 0) {
      break;
    }
    for (int row = 0; row < rows.rows(); ++row) {
      const SeriesKeyRank row_series{rows.int64(row, 1), static_cast<int>(rows.int64(row, 2))};
      const std::string_view row_run = rows.bytes(row, 0);
      if (row_run != run_id || row_series != series ||
          static_cast<std::int64_t>(steps.size()) == chunk::k_chunk_points) {
        flush();
        run_id = row_run;
        series = row_series;
      }
      steps.push_back(rows.int64(row, 3));
      bits.push_back(chunk::bits_of(rows.real(row, 4)));
    }
    if (copy.size() > (8U << 20)) {
      send();
    }
  }
  flush();
  send();
  connection.exec("CLOSE expctl_old_points");
  connection.exec("DROP TABLE metrics");
}

}  // namespace detail

std::optional<std::int64_t> PgBackend::metric_key(const std::string& name) {
  const PgResult row = m_connection.exec("SELECT id FROM metric_keys WHERE name = $1", {name});
  return row.rows() == 0 ? std::nullopt : std::optional(row.int64(0, 0));
}

void PgBackend::append_metrics(const std::string& run_id, std::span<const MetricPoint> points) {
  if (points.empty()) {
    return;
  }
  const std::vector<int> keys = key_ids(points);
  if (m_version < 6) {
    // A store opened at an older schema (tests building one as an older expctl wrote it): a row
    // per point, as then.
    std::vector<std::int64_t> columns[3];
    std::string values = "{";
    for (std::size_t i = 0; i < points.size(); ++i) {
      columns[0].push_back(keys[i]);
      columns[1].push_back(points[i].rank);
      columns[2].push_back(points[i].step);
      values += (i == 0 ? "" : ",") + PgConnection::real_text(points[i].value);
    }
    m_connection.transaction([&] {
      hold_run(run_id);
      m_connection.exec(
          "INSERT INTO metrics (run_id, key_id, rank, step, value) SELECT $1, k, r, s, v FROM "
          "unnest($2::integer[], $3::integer[], $4::bigint[], $5::float8[]) AS t(k, r, s, v) "
          "ON CONFLICT (run_id, key_id, rank, step) DO UPDATE SET value = excluded.value",
          {run_id, array_text<std::int64_t>(columns[0]), array_text<std::int64_t>(columns[1]),
           array_text<std::int64_t>(columns[2]), values + "}"});
    });
    return;
  }
  std::map<SeriesKeyRank, std::vector<detail::StepBits>> by_series;
  for (std::size_t i = 0; i < points.size(); ++i) {
    by_series[{keys[i], points[i].rank}].emplace_back(points[i].step, chunk::bits_of(points[i].value));
  }
  m_connection.transaction([&] {
    hold_series(run_id);
    PgChunkTables tables(m_connection, run_id);
    detail::write_series(tables, by_series);
  });
}

void PgBackend::seal_run(const std::string& run_id) {
  m_connection.transaction([&] {
    hold_series(run_id);
    PgChunkTables tables(m_connection, run_id);
    detail::seal_open_series(tables);
  });
}

void PgBackend::hold_series(const std::string& run_id) {
  hold_run(run_id);
  // One writer of a run's series at a time: a series' tail is read and then written (sealing,
  // opening again), which two sessions must not interleave. Released at the transaction's end.
  m_connection.exec("SELECT pg_advisory_xact_lock(hashtextextended($1, 7301946585227550003))", {run_id});
}

std::vector<SeriesColumns> PgBackend::read_series(std::int64_t key, const std::string& run_id, std::optional<int> rank,
                                                  std::int64_t after, std::int64_t upto, std::size_t limit) {
  detail::SeriesCollector collector(after, upto, limit);
  const PgParams params{run_id, text(key), rank ? std::optional(text(*rank)) : std::nullopt, text(after), text(upto)};
  const PgResult chunks = m_connection.exec(
      "SELECT rank, data FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND ($3::integer IS NULL OR rank = $3) "
      "AND last_step > $4 AND first_step <= $5 ORDER BY rank, first_step",
      params, PgFormat::binary);
  for (int row = 0; row < chunks.rows(); ++row) {
    const auto r = static_cast<int>(chunks.int64(row, 0));
    if (!collector.full(r)) {
      collector.add_chunk(r, chunks.bytes(row, 1));
    }
  }
  const PgResult open = m_connection.exec(
      "SELECT rank, step, bits FROM metric_points WHERE run_id = $1 AND key_id = $2 AND "
      "($3::integer IS NULL OR rank = $3) AND step > $4 AND step <= $5 ORDER BY rank, step",
      params, PgFormat::binary);
  for (int row = 0; row < open.rows(); ++row) {
    collector.add(static_cast<int>(open.int64(row, 0)), open.int64(row, 1),
                  static_cast<std::uint64_t>(open.int64(row, 2)));
  }
  return collector.take();
}

std::vector<MetricPoint> PgBackend::metrics(const std::string& run_id, const MetricFilter& filter) {
  return read_snapshot([&] {
    // The run's metric keys in name order, each series read whole.
    const PgResult keys = m_connection.exec(
        "SELECT id, name FROM metric_keys k WHERE ($2::text IS NULL OR name = $2) AND "
        "(EXISTS (SELECT 1 FROM metric_chunks c WHERE c.run_id = $1 AND c.key_id = k.id) OR "
        "EXISTS (SELECT 1 FROM metric_points p WHERE p.run_id = $1 AND p.key_id = k.id)) ORDER BY name",
        {run_id, filter.name});
    std::vector<MetricPoint> points;
    for (int row = 0; row < keys.rows(); ++row) {
      const std::string name = keys.text(row, 1);
      for (const SeriesColumns& rank :
           read_series(keys.int64(row, 0), run_id, filter.rank, detail::k_no_step, detail::k_last_step)) {
        for (std::size_t i = 0; i < rank.steps.size(); ++i) {
          points.push_back(MetricPoint{rank.rank, rank.steps[i], name, rank.values[i]});
        }
      }
    }
    return points;
  });
}

std::vector<MetricPoint> PgBackend::recent_metrics(const std::string& run_id, const std::string& name, int rank,
                                                   int count) {
  return read_snapshot([&] {
    std::vector<MetricPoint> points;
    const auto key = metric_key(name);
    if (!key || count <= 0) {
      return points;
    }
    // Newest first: the open chunk's points, then sealed chunks backwards until `count` are read.
    const PgResult open = m_connection.exec(
        "SELECT step, bits FROM metric_points WHERE run_id = $1 AND key_id = $2 AND rank = $3 "
        "ORDER BY step DESC LIMIT $4",
        {run_id, text(*key), text(rank), text(count)}, PgFormat::binary);
    for (int row = 0; row < open.rows(); ++row) {
      points.push_back(
          MetricPoint{rank, open.int64(row, 0), name, chunk::value_of(static_cast<std::uint64_t>(open.int64(row, 1)))});
    }
    if (std::cmp_less(points.size(), count)) {
      // The chunks needed: their headers newest first, until they hold enough points.
      const PgParams params{run_id, text(*key), text(rank),
                            text(points.empty() ? detail::k_last_step : points.back().step)};
      const PgResult heads = m_connection.exec(
          "SELECT first_step, points FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND rank = $3 AND "
          "last_step < $4 ORDER BY first_step DESC",
          params, PgFormat::binary);
      std::int64_t wanted = count - static_cast<std::int64_t>(points.size());
      int needed = 0;
      for (; needed < heads.rows() && wanted > 0; ++needed) {
        wanted -= heads.int64(needed, 1);
      }
      if (needed > 0) {
        PgParams from = params;
        from.push_back(text(heads.int64(needed - 1, 0)));
        const PgResult chunks = m_connection.exec(
            "SELECT data FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND rank = $3 AND last_step < $4 AND "
            "first_step >= $5 ORDER BY first_step DESC",
            from, PgFormat::binary);
        for (int row = 0; row < chunks.rows() && std::cmp_less(points.size(), count); ++row) {
          detail::append_newest(chunks.bytes(row, 0), rank, name, static_cast<std::size_t>(count), points);
        }
      }
    }
    std::reverse(points.begin(), points.end());
    return points;
  });
}

std::vector<SeriesColumns> PgBackend::series_columns(const std::string& run_id, const std::string& name,
                                                     std::int64_t after_step) {
  return read_snapshot([&] {
    const auto key = metric_key(name);
    return key ? read_series(*key, run_id, std::nullopt, after_step, detail::k_last_step)
               : std::vector<SeriesColumns>{};
  });
}

std::vector<SeriesColumns> PgBackend::series_columns_between(const std::string& run_id, const std::string& name,
                                                             std::int64_t after_step, std::int64_t upto_step) {
  return read_snapshot([&] {
    // read_series reads only the chunks that hold steps of the range.
    const auto key = metric_key(name);
    return key ? read_series(*key, run_id, std::nullopt, after_step, upto_step) : std::vector<SeriesColumns>{};
  });
}

std::vector<SeriesAggregate> PgBackend::series_aggregates(const std::string& run_id, const std::string& name,
                                                          std::int64_t after_step) {
  return read_snapshot([&] {
    detail::AggregateCollector ranks;
    const auto key = metric_key(name);
    if (!key) {
      return std::vector<SeriesAggregate>{};
    }
    const PgParams params{run_id, text(*key), text(after_step)};
    // Whole chunks past `after_step` count from their headers; the one it falls in point by point.
    const PgResult whole = m_connection.exec(
        fmt::format("SELECT {} FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND first_step > $3",
                    k_head_columns),
        params, PgFormat::binary);
    for (int row = 0; row < whole.rows(); ++row) {
      ranks.add_head(chunk_head(whole, row));
    }
    const PgResult straddling = m_connection.exec(
        "SELECT rank, data FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND first_step <= $3 AND "
        "last_step > $3",
        params, PgFormat::binary);
    for (int row = 0; row < straddling.rows(); ++row) {
      ranks.add_chunk(static_cast<int>(straddling.int64(row, 0)), straddling.bytes(row, 1), after_step);
    }
    const PgResult open =
        m_connection.exec("SELECT rank, step, bits FROM metric_points WHERE run_id = $1 AND key_id = $2 AND step > $3",
                          params, PgFormat::binary);
    for (int row = 0; row < open.rows(); ++row) {
      ranks.add(static_cast<int>(open.int64(row, 0)), open.int64(row, 1),
                chunk::value_of(static_cast<std::uint64_t>(open.int64(row, 2))));
    }
    return ranks.take();
  });
}

std::vector<SeriesEnvelope> PgBackend::series_envelope(const std::string& run_id, const std::string& name,
                                                       std::size_t buckets, std::int64_t after_step,
                                                       std::int64_t upto_step) {
  return read_snapshot([&] {
    const auto key = metric_key(name);
    if (!key) {
      return std::vector<SeriesEnvelope>{};
    }
    const PgParams params{run_id, text(*key), text(after_step), text(upto_step)};
    const PgResult chunks = m_connection.exec(
        fmt::format("SELECT {} FROM metric_chunks WHERE run_id = $1 AND key_id = $2 AND last_step > $3 AND "
                    "first_step <= $4 ORDER BY rank, first_step",
                    k_head_columns),
        params, PgFormat::binary);
    std::vector<detail::ChunkHead> heads;
    for (int row = 0; row < chunks.rows(); ++row) {
      heads.push_back(chunk_head(chunks, row));
    }
    const PgResult open_rows = m_connection.exec(
        "SELECT rank, count(*) FROM metric_points WHERE run_id = $1 AND key_id = $2 AND step > $3 AND step <= $4 "
        "GROUP BY rank",
        params, PgFormat::binary);
    std::map<int, std::int64_t> open;
    for (int row = 0; row < open_rows.rows(); ++row) {
      open[static_cast<int>(open_rows.int64(row, 0))] = open_rows.int64(row, 1);
    }
    return detail::envelope_from_heads(heads, open, buckets, after_step, upto_step,
                                       [&](int rank, std::int64_t after, std::int64_t upto) {
                                         const auto read = read_series(*key, run_id, rank, after, upto);
                                         return read.empty() ? SeriesColumns{rank, {}, {}} : read.front();
                                       });
  });
}

std::vector<MetricSeriesInfo> PgBackend::metric_series(const std::string& run_id) {
  return read_snapshot([&] {
    // Per (name, rank): the chunks' headers and the open chunk's points, each a key range.
    detail::SeriesInfoCollector parts;
    // {0}: the table, {1}: its points, {2} {3}: a row's first and last step, {4} {5}: their values.
    constexpr const char* k_parts = R"sql(
SELECT k.name, t.rank, {1}, min(t.{2}),
  (SELECT {4} FROM {0} f WHERE f.run_id = t.run_id AND f.key_id = t.key_id AND f.rank = t.rank
   ORDER BY {2} LIMIT 1),
  max(t.{3}),
  (SELECT {5} FROM {0} l WHERE l.run_id = t.run_id AND l.key_id = t.key_id AND l.rank = t.rank
   ORDER BY {2} DESC LIMIT 1)
FROM {0} t JOIN metric_keys k ON k.id = t.key_id WHERE t.run_id = $1
GROUP BY k.name, t.run_id, t.key_id, t.rank)sql";
    for (const auto& table :
         {std::array{"metric_chunks", "sum(t.points)::bigint", "first_step", "last_step", "first_bits", "last_bits"},
          std::array{"metric_points", "count(*)", "step", "step", "bits", "bits"}}) {
      const PgResult rows = m_connection.exec(
          fmt::format(fmt::runtime(k_parts), table[0], table[1], table[2], table[3], table[4], table[5]), {run_id},
          PgFormat::binary);
      for (int row = 0; row < rows.rows(); ++row) {
        parts.add(rows.text(row, 0), static_cast<int>(rows.int64(row, 1)), rows.int64(row, 2), rows.int64(row, 3),
                  static_cast<std::uint64_t>(rows.int64(row, 4)), rows.int64(row, 5),
                  static_cast<std::uint64_t>(rows.int64(row, 6)));
      }
    }
    return parts.take();
  });
}

std::vector<std::string> PgBackend::metric_names(const std::string& run_id) {
  // One probe of each table's primary key (run_id, key_id, ...) per name the store knows.
  const PgResult rows = m_connection.exec(R"sql(
SELECT k.name FROM metric_keys k
WHERE EXISTS (SELECT 1 FROM metric_chunks c WHERE c.run_id = $1 AND c.key_id = k.id)
   OR EXISTS (SELECT 1 FROM metric_points p WHERE p.run_id = $1 AND p.key_id = k.id) ORDER BY k.name)sql",
                                          {run_id});
  std::vector<std::string> names;
  for (int row = 0; row < rows.rows(); ++row) {
    names.push_back(rows.text(row, 0));
  }
  return names;
}

}  // namespace expctl::store
