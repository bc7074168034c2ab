#include "expctl/api/group.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "expctl/api/dashboard.hpp"
#include "expctl/api/runs.hpp"
#include "expctl/compare/statistics.hpp"

namespace expctl::api {

namespace {

// A run's stored spec values (the hashed fields), read once per spec hash.
class SpecValues {
 public:
  explicit SpecValues(const store::Store& store) : m_store(store) {}
  const nlohmann::json& of(const std::string& hash) {
    auto found = m_values.find(hash);
    if (found == m_values.end()) {
      const auto spec = m_store.spec(hash);
      found = m_values.emplace(hash, spec ? canonical_values(*spec) : nlohmann::json(nullptr)).first;
    }
    return found->second;
  }

 private:
  const store::Store& m_store;
  std::map<std::string, nlohmann::json> m_values;
};

nlohmann::json seed_of(const nlohmann::json& values) {
  return values.is_object() && values.contains("seed") ? values.at("seed") : nlohmann::json(nullptr);
}

// The values but the seed: what the runs of one configuration share.
std::string configuration_key(nlohmann::json values) {
  if (!values.is_object()) {
    return {};
  }
  values.erase("seed");
  return values.dump();
}

// Dotted paths of the leaves (arrays are leaves) in `value`, in its order.
void flatten(const std::string& prefix, const nlohmann::json& value,
             std::vector<std::pair<std::string, nlohmann::json>>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, item] : value.items()) {
      flatten(prefix.empty() ? key : prefix + "." + key, item, out);
    }
    return;
  }
  out.emplace_back(prefix, value);
}

nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<store::RunRecord> seed_group(const store::Store& store, const store::RunRecord& run) {
  SpecValues values(store);
  const nlohmann::json& own = values.of(run.spec_hash);
  if (!own.is_object()) {
    return {run};
  }
  const std::string key = configuration_key(own);
  std::vector<store::RunRecord> group;
  for (const store::RunRecord& other : store.list_runs()) {
    if (other.id == run.id || other.spec_hash == run.spec_hash ||
        configuration_key(values.of(other.spec_hash)) == key) {
      group.push_back(other);
      if (group.size() == k_max_group_runs) {
        break;
      }
    }
  }
  if (std::none_of(group.begin(), group.end(), [&](const store::RunRecord& r) { return r.id == run.id; })) {
    // The run asked about is always a member (it was past the first k_max_group_runs).
    if (group.size() == k_max_group_runs) {
      group.pop_back();
    }
    group.push_back(run);
  }
  return group;
}

nlohmann::json band_document(const store::Store& store, const BandQuery& query) {
  const std::int64_t from = query.from_step.value_or(std::numeric_limits<std::int64_t>::min());
  const std::int64_t to = query.to_step.value_or(std::numeric_limits<std::int64_t>::max());
  const std::size_t budget = std::clamp<std::size_t>(query.points, 1, k_max_series_points);
  SpecValues values(store);
  nlohmann::json document = json_envelope("band");
  document["metric"] = query.metric;
  document["confidence"] = query.confidence;
  document["rank"] = 0;
  // Each member's lowest rank, cut to [from, to].
  std::vector<store::SeriesColumns> series;
  nlohmann::json members = nlohmann::json::array();
  for (const store::RunRecord& run : query.runs) {
    auto ranks =
        store.series_columns(run.id, query.metric, from == std::numeric_limits<std::int64_t>::min() ? from : from - 1);
    store::SeriesColumns own;
    if (!ranks.empty()) {
      own = std::move(ranks.front());
      const auto end = std::upper_bound(own.steps.begin(), own.steps.end(), to) - own.steps.begin();
      own.steps.resize(static_cast<std::size_t>(end));
      own.values.resize(static_cast<std::size_t>(end));
    }
    members.push_back({{"id", run.id},
                       {"name", run.name},
                       {"status", store::to_string(run.status)},
                       {"seed", seed_of(values.of(run.spec_hash))},
                       {"rank", own.rank},
                       {"points", own.steps.size()}});
    series.push_back(std::move(own));
  }
  document["members"] = std::move(members);
  // The distinct steps of all members, cut into buckets of consecutive steps.
  std::vector<std::int64_t> steps;
  for (const auto& member : series) {
    steps.insert(steps.end(), member.steps.begin(), member.steps.end());
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  const std::size_t size = steps.size() <= budget ? 1 : (steps.size() + budget - 1) / budget;
  const std::size_t buckets = (steps.size() + size - 1) / size;
  // Per member and bucket: the sum and count of its finite values there.
  std::vector<std::vector<double>> sums(series.size(), std::vector<double>(buckets, 0.0));
  std::vector<std::vector<std::size_t>> counts(series.size(), std::vector<std::size_t>(buckets, 0));
  for (std::size_t m = 0; m < series.size(); ++m) {
    std::size_t at = 0;  // index in `steps` of the member's current step (both ascending)
    for (std::size_t i = 0; i < series[m].steps.size(); ++i) {
      while (steps[at] < series[m].steps[i]) {
        ++at;
      }
      if (std::isfinite(series[m].values[i])) {
        sums[m][at / size] += series[m].values[i];
        counts[m][at / size] += 1;
      }
    }
  }
  nlohmann::json xs = nlohmann::json::array();
  nlohmann::json means = nlohmann::json::array();
  nlohmann::json lows = nlohmann::json::array();
  nlohmann::json highs = nlohmann::json::array();
  nlohmann::json ns = nlohmann::json::array();
  std::vector<double> at_bucket;
  for (std::size_t b = 0; b < buckets; ++b) {
    at_bucket.clear();
    for (std::size_t m = 0; m < series.size(); ++m) {
      if (counts[m][b] > 0) {
        at_bucket.push_back(sums[m][b] / static_cast<double>(counts[m][b]));
      }
    }
    xs.push_back(steps[std::min(steps.size(), (b + 1) * size) - 1]);
    ns.push_back(at_bucket.size());
    if (at_bucket.size() >= 2 &&
        std::all_of(at_bucket.begin(), at_bucket.end(), [](double v) { return std::isfinite(v); })) {
      const compare::PairedTest interval = compare::paired_t_test(at_bucket, query.confidence);
      means.push_back(finite_or_null(interval.mean));
      lows.push_back(finite_or_null(interval.low));
      highs.push_back(finite_or_null(interval.high));
    } else {
      means.push_back(at_bucket.size() == 1 ? finite_or_null(at_bucket.front()) : nlohmann::json(nullptr));
      lows.push_back(nullptr);
      highs.push_back(nullptr);
    }
  }
  document["downsampled"] = size > 1;
  document["x"] = std::move(xs);
  document["mean"] = std::move(means);
  document["low"] = std::move(lows);
  document["high"] = std::move(highs);
  document["n"] = std::move(ns);
  return document;
}

nlohmann::json spec_diff_document(const store::Store& store, const std::vector<store::RunRecord>& runs) {
  SpecValues values(store);
  nlohmann::json document = json_envelope("spec-diff");
  document["runs"] = nlohmann::json::array();
  std::vector<std::string> paths;
  std::vector<std::map<std::string, nlohmann::json>> fields(runs.size());
  std::vector<std::string> metric_names;
  std::vector<nlohmann::json> summaries;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const nlohmann::json& own = values.of(runs[r].spec_hash);
    std::vector<std::pair<std::string, nlohmann::json>> leaves;
    if (own.is_object()) {
      flatten("", own, leaves);
    }
    for (auto& [path, value] : leaves) {
      if (std::find(paths.begin(), paths.end(), path) == paths.end()) {
        paths.push_back(path);
      }
      fields[r][path] = std::move(value);
    }
    summaries.push_back(parse_object(runs[r].summary_json, nlohmann::json::object()));
    for (const auto& [key, value] : summaries.back().items()) {
      if (value.is_number() && std::find(metric_names.begin(), metric_names.end(), key) == metric_names.end()) {
        metric_names.push_back(key);
      }
    }
    nlohmann::json row = run_json(runs[r]);
    row.erase("run_dir");  // a path on the server's disk: nothing a page needs
    row["seed"] = seed_of(own);
    document["runs"].push_back(std::move(row));
  }
  nlohmann::json differing = nlohmann::json::array();
  std::size_t same = 0;
  for (const std::string& path : paths) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& run : fields) {
      const auto found = run.find(path);
      row.push_back(found == run.end() ? nlohmann::json(nullptr) : found->second);
    }
    if (std::all_of(row.begin(), row.end(), [&](const nlohmann::json& v) { return v == row.front(); })) {
      ++same;
      continue;
    }
    differing.push_back({{"path", path}, {"values", std::move(row)}});
  }
  nlohmann::json metrics = nlohmann::json::array();
  for (const std::string& name : metric_names) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& summary : summaries) {
      const auto found = summary.find(name);
      row.push_back(found != summary.end() && found->is_number() ? *found : nlohmann::json(nullptr));
    }
    metrics.push_back({{"name", name}, {"values", std::move(row)}});
  }
  document["fields"] = std::move(differing);
  document["same"] = same;
  document["metrics"] = std::move(metrics);
  return document;
}

}  // namespace expctl::api
