// The rules of series as chunks, for every backend (series_chunks.hpp).
#include "expctl/store/series_chunks.hpp"

#include <algorithm>
#include <cmath>

namespace expctl::store::detail {

namespace {

constexpr auto k_size = static_cast<std::size_t>(chunk::k_chunk_points);

void seal_points(ChunkTables& tables, const SeriesKeyRank& series, std::span<const std::int64_t> steps,
                 std::span<const std::uint64_t> bits) {
  tables.put_chunk(series, chunk::summarize(steps, bits), chunk::encode(steps, bits));
}

/// Opens again every sealed chunk of the series with last_step >= `from`: its points go back to
/// the open chunk (all above the chunks that stay sealed). Returns how many.
std::int64_t open_from(ChunkTables& tables, const SeriesKeyRank& series, std::int64_t from) {
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  tables.take_chunks(series, from, steps, bits);
  if (!steps.empty()) {
    tables.stage(series, steps, bits);
  }
  return static_cast<std::int64_t>(steps.size());
}

/// Writes `batch` into the open chunk as it is, replacing points of the same steps.
void stage_batch(ChunkTables& tables, const SeriesKeyRank& series, std::span<const StepBits> batch) {
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  for (const auto& [step, pattern] : batch) {
    steps.push_back(step);
    bits.push_back(pattern);
  }
  tables.stage(series, steps, bits);
}

/// Appends `batch` (every step above the series' last) to its open chunk, which holds `open`
/// points. Where that fills chunks, they are sealed from the open points and the batch in memory:
/// only what is left over is written row by row (a point of a long batch is never written and
/// then deleted).
void append(ChunkTables& tables, const SeriesKeyRank& series, std::span<const StepBits> batch, std::int64_t open) {
  if (open + static_cast<std::int64_t>(batch.size()) < chunk::k_chunk_points) {
    stage_batch(tables, series, batch);
    return;
  }
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  if (open > 0) {
    tables.first_open(series, chunk::k_chunk_points, steps, bits);
    tables.unstage(series, steps.back());
  }
  for (const auto& [step, pattern] : batch) {
    steps.push_back(step);
    bits.push_back(pattern);
  }
  std::size_t from = 0;
  for (; steps.size() - from >= k_size; from += k_size) {
    seal_points(tables, series, std::span(steps).subspan(from, k_size), std::span(bits).subspan(from, k_size));
  }
  if (from < steps.size()) {
    tables.stage(series, std::span(steps).subspan(from), std::span(bits).subspan(from));
  }
}

/// Seals the series' open points k_chunk_points at a time (seal_open_series seals the last fewer).
void seal(ChunkTables& tables, const SeriesKeyRank& series) {
  while (tables.tail(series).open_points >= chunk::k_chunk_points) {
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
    tables.first_open(series, chunk::k_chunk_points, steps, bits);
    seal_points(tables, series, steps, bits);
    tables.unstage(series, steps.back());
  }
}

}  // namespace

void write_series(ChunkTables& tables, std::map<SeriesKeyRank, std::vector<StepBits>> points) {
  std::map<SeriesKeyRank, std::int64_t> rewrites;
  for (auto& [series, batch] : points) {
    if (batch.empty()) {
      continue;
    }
    const SeriesTail tail = tables.tail(series);
    std::optional<std::int64_t> last = tail.open_last;
    if (tail.sealed_last && (!last || *tail.sealed_last > *last)) {
      last = tail.sealed_last;
    }
    if (last) {
      const std::int64_t before = *last;
      const auto count =
          std::count_if(batch.begin(), batch.end(), [&](const StepBits& p) { return p.first <= before; });
      if (count > 0) {
        rewrites[series] = count;
      }
    }
    // The series' points in step order; of a step given twice the last value wins.
    std::stable_sort(batch.begin(), batch.end(),
                     [](const StepBits& a, const StepBits& b) { return a.first < b.first; });
    std::vector<StepBits> kept;
    kept.reserve(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (i + 1 == batch.size() || batch[i + 1].first != batch[i].first) {
        kept.push_back(batch[i]);
      }
    }
    batch = std::move(kept);
    std::int64_t open = tail.open_points;
    const std::int64_t low = batch.front().first;
    if (tail.sealed_last && low <= *tail.sealed_last) {
      open += open_from(tables, series, low);  // steps written again into sealed chunks
    } else if (tail.sealed_last && !tail.open_last && tail.sealed_points < chunk::k_chunk_points) {
      open += open_from(tables, series, *tail.sealed_last);  // a resumed run continues its open chunk
    }
    if (last && low <= *last) {
      // Steps written again: replaced in the open chunk (what they fell into is open now).
      stage_batch(tables, series, batch);
      seal(tables, series);
    } else {
      append(tables, series, batch, open);
    }
  }
  tables.add_rewrites(rewrites);
}

void seal_open_series(ChunkTables& tables) {
  std::vector<ChunkTables::Pending> chunks;
  for (const SeriesKeyRank& series : tables.open_series()) {
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
    tables.first_open(series, std::numeric_limits<std::int64_t>::max(), steps, bits);
    if (steps.empty()) {
      continue;
    }
    for (std::size_t from = 0; from < steps.size(); from += k_size) {
      const std::size_t count = std::min(k_size, steps.size() - from);
      const auto some_steps = std::span(steps).subspan(from, count);
      const auto some_bits = std::span(bits).subspan(from, count);
      chunks.push_back({series, chunk::summarize(some_steps, some_bits), chunk::encode(some_steps, some_bits)});
    }
    tables.unstage(series, steps.back());
  }
  tables.put_last_chunks(chunks);
}

bool SeriesCollector::full(int rank) const {
  const auto found = m_ranks.find(rank);
  return found != m_ranks.end() && found->second.steps.size() >= m_limit;
}

void SeriesCollector::add_chunk(int rank, std::string_view data) {
  m_steps.clear();
  m_bits.clear();
  chunk::decode(data, m_steps, m_bits);
  for (std::size_t i = 0; i < m_steps.size(); ++i) {
    add(rank, m_steps[i], m_bits[i]);
  }
}

void SeriesCollector::add(int rank, std::int64_t step, std::uint64_t bits) {
  SeriesColumns& columns = m_ranks.try_emplace(rank, SeriesColumns{rank, {}, {}}).first->second;
  if (step > m_after && step <= m_upto && columns.steps.size() < m_limit) {
    columns.steps.push_back(step);
    columns.values.push_back(chunk::value_of(bits));
  }
}

std::vector<SeriesColumns> SeriesCollector::take() {
  std::vector<SeriesColumns> out;
  for (auto& [rank, columns] : m_ranks) {
    if (!columns.steps.empty()) {
      out.push_back(std::move(columns));
    }
  }
  m_ranks.clear();
  return out;
}

namespace {

/// Widens a rank's aggregate's step range to [first, last].
void extend_steps(SeriesAggregate& into, std::int64_t first, std::int64_t last) {
  const bool empty = into.count + into.nan_count == 0;
  into.first_step = empty ? first : std::min(into.first_step, first);
  into.last_step = empty ? last : std::max(into.last_step, last);
}

}  // namespace

std::pair<SeriesAggregate, bool>& AggregateCollector::of(int rank) {
  return m_ranks.try_emplace(rank, SeriesAggregate{rank, 0, 0, 0.0, 0.0, 0.0, 0, 0}, false).first->second;
}

void AggregateCollector::add_head(const ChunkHead& head) {
  auto& [into, any] = of(head.rank);
  extend_steps(into, head.first_step, head.last_step);
  into.nan_count += head.nan_points;
  into.count += head.points - head.nan_points;
  into.sum += head.sum;
  if (head.min && head.max) {
    into.min = any ? std::min(into.min, *head.min) : *head.min;
    into.max = any ? std::max(into.max, *head.max) : *head.max;
    any = true;
  }
}

void AggregateCollector::add_chunk(int rank, std::string_view data, std::int64_t after_step) {
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  chunk::decode(data, steps, bits);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i] > after_step) {
      add(rank, steps[i], chunk::value_of(bits[i]));
    }
  }
}

void AggregateCollector::add(int rank, std::int64_t step, double value) {
  auto& [into, any] = of(rank);
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

std::vector<SeriesAggregate> AggregateCollector::take() const {
  std::vector<SeriesAggregate> out;
  for (const auto& [rank, entry] : m_ranks) {
    out.push_back(entry.first);
  }
  return out;
}

void SeriesInfoCollector::add(const std::string& name, int rank, std::int64_t points, std::int64_t first_step,
                              std::uint64_t first_bits, std::int64_t last_step, std::uint64_t last_bits) {
  const Part part{points, first_step, first_bits, last_step, last_bits};
  const auto [it, added] = m_parts.try_emplace({name, rank}, part);
  if (added) {
    return;
  }
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

std::vector<MetricSeriesInfo> SeriesInfoCollector::take() const {
  std::vector<MetricSeriesInfo> series;
  for (const auto& [name_rank, part] : m_parts) {
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
}

namespace {

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

void append_newest(std::string_view data, int rank, const std::string& name, std::size_t count,
                   std::vector<MetricPoint>& points) {
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  chunk::decode(data, steps, bits);
  for (std::size_t i = steps.size(); i-- > 0 && points.size() < count;) {
    points.push_back(MetricPoint{rank, steps[i], name, chunk::value_of(bits[i])});
  }
}

std::vector<SeriesEnvelope> envelope_from_heads(std::span<const ChunkHead> heads,
                                                const std::map<int, std::int64_t>& open, std::size_t buckets,
                                                std::int64_t after_step, std::int64_t upto_step,
                                                const PointsBetween& points) {
  buckets = std::max<std::size_t>(buckets, 1);
  std::map<int, std::vector<ChunkHead>> by_rank;
  for (const ChunkHead& head : heads) {
    by_rank[head.rank].push_back(head);
  }
  for (const auto& [rank, count] : open) {
    by_rank.try_emplace(rank);
  }
  std::vector<SeriesEnvelope> out;
  for (const auto& [rank_key, rank_heads] : by_rank) {
    const int rank = rank_key;  // a copy: clang 14 cannot capture a structured binding
    const auto found = open.find(rank);
    const std::int64_t open_points = found == open.end() ? 0 : found->second;
    std::int64_t total = open_points;
    for (const ChunkHead& head : rank_heads) {
      total += head.points;
    }
    const auto size =
        static_cast<std::size_t>((total + static_cast<std::int64_t>(buckets) - 1) / static_cast<std::int64_t>(buckets));
    if (size < k_size) {
      out.push_back(envelope_of(points(rank, after_step, upto_step), size));
      continue;
    }
    // Buckets of whole chunks, from their headers; the chunks `after_step` and `upto_step` cut
    // and the open points are read point by point (the cut chunks count whole in `size`).
    const std::size_t group = size / k_size;
    SeriesEnvelope envelope{rank, {}};
    const auto add_points = [&](const SeriesColumns& columns) {
      for (const SeriesBucket& bucket : envelope_of(columns, size).buckets) {
        envelope.buckets.push_back(bucket);
      }
    };
    std::size_t from = 0;
    std::size_t end = rank_heads.size();
    if (!rank_heads.empty() && rank_heads.front().first_step <= after_step) {
      add_points(points(rank, after_step, std::min(rank_heads.front().last_step, upto_step)));
      from = 1;
    }
    const bool cut_last = end > from && rank_heads.back().last_step > upto_step;
    end -= cut_last ? 1 : 0;
    for (; from < end; from += group) {
      envelope.buckets.push_back(bucket_of(std::span(rank_heads).subspan(from, std::min(group, end - from))));
    }
    if (cut_last) {
      add_points(points(rank, end > 0 ? rank_heads[end - 1].last_step : after_step, upto_step));
    }
    if (open_points > 0) {
      add_points(points(rank, rank_heads.empty() ? after_step : rank_heads.back().last_step, upto_step));
    }
    out.push_back(std::move(envelope));
  }
  return out;
}

}  // namespace expctl::store::detail
