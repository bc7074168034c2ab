// Store: what every backend shares (validation, run folders, derived statuses), over the Backend.
#include "expctl/store/store.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <nlohmann/json.hpp>

#include "expctl/store/pg_backend.hpp"
#include "expctl/store/pg_schema.hpp"
#include "expctl/store/run_folder.hpp"
#include "expctl/store/schema.hpp"
#include "expctl/store/selector.hpp"
#include "expctl/store/sqlite_backend.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store {

namespace fs = std::filesystem;

namespace {

/// Where a store on a server keeps this node's run folders unless told otherwise: where the
/// default SQLite store (results/expctl.db) keeps them.
constexpr const char* k_default_server_runs_root = "results/runs";

/// How many candidates an ambiguous selector's message lists.
constexpr int k_max_candidates = 5;

/// libpq's connection keywords that may start a keyword=value connection string
/// (https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-PARAMKEYWORDS).
constexpr std::array<std::string_view, 8> k_conninfo_keywords = {"service=", "host=",   "hostaddr=", "dbname=",
                                                                  "port=",    "user=",   "sslmode=",  "options="};

bool is_lower_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void check_spec_hash(const std::string& hash) {
  EXPCTL_CHECK(hash.size() == 64 && is_lower_hex(hash), util::StoreError,
               "spec hash {} is not 64 lowercase hex digits (as printed by 'expctl hash')", util::quoted(hash));
}

/// Parses `json_text` and throws StoreError unless it is a JSON object.
void check_json_object(const std::string& json_text, const std::string& what) {
  const auto parsed = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  EXPCTL_CHECK(parsed.is_object(), util::StoreError, "{} must be a JSON object, got: {}", what,
               util::quoted(json_text.substr(0, 60)));
}

void check_tag(const std::string& tag) {
  const bool bad_char = std::any_of(
      tag.begin(), tag.end(), [](char c) { return c == ',' || static_cast<unsigned char>(c) <= ' ' || c == '\x7f'; });
  EXPCTL_CHECK(!tag.empty() && !bad_char, util::StoreError,
               "tag {} is not valid: tags are non-empty and have no spaces, commas or control characters",
               util::quoted(tag));
}

bool starts_with_any(std::string_view text, std::span<const std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view prefix) { return text.starts_with(prefix); });
}

}  // namespace

int latest_schema_version(StoreKind kind) {
  return kind == StoreKind::sqlite ? detail::schema_latest() : detail::pg_schema_latest();
}

RunStatus derive_run_status(RunStatus stored, const std::optional<util::ProcessIdentity>& owner,
                            std::optional<Clock::time_point> heartbeat_at, Clock::time_point now) {
  if (stored != RunStatus::running || !owner) {
    return stored;
  }
  switch (owner->liveness()) {
    case util::Liveness::alive:
      return RunStatus::running;
    case util::Liveness::dead:
      return RunStatus::lost;
    case util::Liveness::unknown_elsewhere:
      return heartbeat_at && now - *heartbeat_at > k_lost_after ? RunStatus::lost : RunStatus::running;
  }
  return stored;
}

fs::path runs_root(const fs::path& database) {
  return fs::absolute(database).parent_path() / "runs";
}

StoreLocation parse_store_location(const std::string& location) {
  if (location.starts_with("postgresql://") || location.starts_with("postgres://") ||
      starts_with_any(location, k_conninfo_keywords)) {
    return {StoreKind::postgresql, location};
  }
  if (location.starts_with("sqlite:")) {
    return {StoreKind::sqlite, location.substr(std::string_view("sqlite:").size())};
  }
  return {StoreKind::sqlite, location};
}

Store Store::open(const std::string& location, OpenMode mode, const StoreOptions& options) {
  const StoreLocation where = parse_store_location(location);
  if (where.kind == StoreKind::sqlite) {
    auto backend = detail::open_sqlite(where.target, mode, detail::schema_latest(), options.upgrade);
    fs::path file = backend->path();
    fs::path root = options.runs_root ? fs::absolute(*options.runs_root) : runs_root(file);
    return Store(std::move(backend), std::move(root), std::move(file));
  }
  auto backend = detail::open_postgres(where.target, mode, detail::pg_schema_latest());
  return Store(std::move(backend), fs::absolute(options.runs_root.value_or(k_default_server_runs_root)), {});
}

Store Store::from_backend(std::unique_ptr<Backend> backend, fs::path runs_root) {
  const auto* sqlite = dynamic_cast<const SqliteBackend*>(backend.get());
  fs::path file = sqlite ? sqlite->path() : fs::path();
  return Store(std::move(backend), fs::absolute(runs_root), std::move(file));
}

Store::Store(std::unique_ptr<Backend> backend, fs::path runs_root, fs::path file)
    : m_backend(std::move(backend)), m_runs_root(std::move(runs_root)), m_file(std::move(file)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

const fs::path& Store::path() const {
  return m_file;
}
const std::string& Store::location() const {
  return m_backend->display();
}
const fs::path& Store::runs_dir() const {
  return m_runs_root;
}
int Store::schema_version() const {
  return m_backend->schema_version();
}
std::optional<Store> Store::open_reader() const {
  auto reader = m_backend->open_reader();
  if (!reader) {
    return std::nullopt;
  }
  return Store(std::move(reader), m_runs_root, m_file);
}

RunRecord Store::with_folder(RunRecord run) const {
  run.run_dir = run_folder(run.id);
  return run;
}

std::string Store::folder_owner() const {
  if (m_file.empty()) {
    return location();  // a server: its masked location (no password)
  }
  // Beside its runs/ folder (the default), a store is named by its file name alone, so a results
  // folder moved or copied whole keeps its folders' owner.
  return m_runs_root == runs_root(m_file) ? m_file.filename().string() : m_file.string();
}

fs::path Store::run_folder(const std::string& run_id) const {
  EXPCTL_CHECK(is_run_id(run_id), util::StoreError, "{}", invalid_run_id_text(run_id, location()));
  return m_runs_root / run_id;
}

void Store::drop_invalid_ids(std::vector<RunRecord>& runs) const {
  std::erase_if(runs, [&](const RunRecord& run) {
    if (is_run_id(run.id)) {
      return false;
    }
    util::log::warn(fmt::format("{}; the row is left out (delete it with the database's own tools)",
                                invalid_run_id_text(run.id, location())));
    return true;
  });
}

void Store::put_spec(const std::string& hash, const std::string& canonical, const std::string& name) {
  check_spec_hash(hash);
  m_backend->put_spec(hash, canonical, name);
}

void Store::put_environment(const std::string& hash, const std::string& json_text) {
  EXPCTL_CHECK(!hash.empty(), util::StoreError, "environment hash is empty");
  check_json_object(json_text, "an environment fingerprint");
  m_backend->put_environment(hash, json_text);
}

std::optional<SpecRecord> Store::spec(const std::string& hash) const {
  return m_backend->spec(hash);
}

std::optional<std::string> Store::environment(const std::string& hash) const {
  return m_backend->environment(hash);
}

RunRecord Store::create_run(const NewRun& run) {
  check_spec_hash(run.spec_hash);
  return with_folder(m_backend->create_run(run, [&](const std::string& id, const std::string& canonical) {
    detail::publish_run_folder(m_runs_root, id, canonical, folder_owner());
  }));
}

void Store::finish_run(const std::string& run_id, RunStatus status, int exit_code, const std::string& root_cause) {
  EXPCTL_CHECK(status != RunStatus::running && status != RunStatus::lost && status != RunStatus::queued,
               util::StoreError, "finish_run of {} needs an end status, not {}", run_id, to_string(status));
  m_backend->finish_run(run_id, status, exit_code, root_cause);
  remeasure_folder(run_id);
}

void Store::resume_run(const std::string& run_id) {
  m_backend->resume_run(run_id, {});
}

void Store::start_queued_run(const std::string& run_id, const std::optional<std::string>& environment_hash) {
  m_backend->resume_run(run_id, {.queued = true, .environment_hash = environment_hash});
}

void Store::queue_run(const std::string& run_id, const std::string& root_cause) {
  m_backend->queue_run(run_id, root_cause);
}

void Store::heartbeat(const std::string& run_id) {
  m_backend->heartbeat(run_id);
}

void Store::set_summary(const std::string& run_id, const std::string& json_text) {
  check_json_object(json_text, "a run summary");
  m_backend->set_summary(run_id, json_text);
}

void Store::add_rank(const std::string& run_id, const RankRecord& rank) {
  m_backend->add_rank(run_id, rank);
}

void Store::update_rank(const std::string& run_id, int rank, RunStatus status, std::optional<int> exit_code,
                        std::optional<int> signal) {
  m_backend->update_rank(run_id, rank, status, exit_code, signal);
}

void Store::append_metrics(const std::string& run_id, std::span<const MetricPoint> points) {
  if (points.empty()) {
    return;
  }
  for (const MetricPoint& point : points) {
    EXPCTL_CHECK(!point.name.empty() && point.rank >= 0, util::StoreError,
                 "metric point of run {} has an empty name or a negative rank", util::quoted(run_id));
  }
  m_backend->append_metrics(run_id, points);
}

void Store::add_artifact(const std::string& run_id, const ArtifactRecord& artifact) {
  EXPCTL_CHECK(!artifact.path.empty() && artifact.size_bytes >= 0 && artifact.sha256.size() == 64, util::StoreError,
               "artifact {} of run {} needs a path, a 64-hex sha256 and a size >= 0", util::quoted(artifact.path),
               util::quoted(run_id));
  m_backend->add_artifact(run_id, artifact);
}

bool Store::remove_artifact(const std::string& run_id, const std::string& path) {
  return m_backend->remove_artifact(run_id, path);
}

void Store::add_tag(const std::string& run_id, const std::string& tag) {
  check_tag(tag);
  m_backend->add_tag(run_id, tag);
}

bool Store::remove_tag(const std::string& run_id, const std::string& tag) {
  return m_backend->remove_tag(run_id, tag);
}

std::vector<RunRecord> Store::list_runs(const RunFilter& filter) const {
  EXPCTL_CHECK(is_lower_hex(filter.spec_hash_prefix), util::StoreError, "spec hash prefix {} is not lowercase hex",
               util::quoted(filter.spec_hash_prefix));
  // `running` and `lost` runs are both stored as running and told apart only once read, so for
  // those the status and the limit are applied after reading.
  const bool derived = filter.status == RunStatus::running || filter.status == RunStatus::lost;
  RunFilter stored = filter;
  if (derived) {
    stored.status = RunStatus::running;
    stored.limit = 0;
  }
  auto runs = m_backend->list_runs(stored);
  drop_invalid_ids(runs);
  if (derived) {
    std::erase_if(runs, [&](const RunRecord& run) { return run.status != *filter.status; });
    if (filter.limit > 0 && runs.size() > filter.limit) {
      runs.resize(filter.limit);
    }
  }
  for (RunRecord& run : runs) {
    run.run_dir = m_runs_root / run.id;  // drop_invalid_ids kept run ids only
  }
  return runs;
}

std::optional<RunRecord> Store::run(const std::string& run_id) const {
  if (!is_run_id(run_id)) {
    return std::nullopt;  // no folder name, no query: an id outside the grammar names no run
  }
  auto found = m_backend->run(run_id);
  return found ? std::optional(with_folder(std::move(*found))) : std::nullopt;
}

RunRecord Store::find_run(const std::string& selector) const {
  EXPCTL_CHECK(!selector.empty(), util::StoreError, "empty run selector: give a run id or its first characters");
  if (auto exact = run(selector)) {  // run() answers nullopt for anything but a run id
    return *exact;
  }
  // Only the start of a run id can match one (is_run_id_prefix): anything else reaches no query.
  auto [count, candidates] = is_run_id_prefix(selector) ? m_backend->runs_with_prefix(selector, k_max_candidates)
                                                        : std::pair<std::int64_t, std::vector<RunRecord>>{0, {}};
  drop_invalid_ids(candidates);
  if (count <= k_max_candidates) {
    count = static_cast<std::int64_t>(candidates.size());  // all of them were read: rows left out do not count
  }
  if (count == 0) {
    std::vector<std::string> ids;
    for (const RunRecord& known : m_backend->list_runs({})) {
      ids.push_back(known.id);
    }
    throw util::StoreError(no_match_text(selector, location(), "", "run ids", closest_names(ids, selector)));
  }
  if (count == 1) {
    return with_folder(candidates.front());
  }
  std::vector<std::string> ids;
  for (const RunRecord& candidate : candidates) {
    ids.push_back(candidate.id);
  }
  throw util::StoreError(fmt::format("run selector {} is ambiguous: it matches {} runs ({}{}); give more of the id",
                                     util::quoted(selector), count, util::join(ids, ", "),
                                     count > k_max_candidates ? ", ..." : ""));
}

std::vector<MetricPoint> Store::metrics(const std::string& run_id, const MetricFilter& filter) const {
  return m_backend->metrics(run_id, filter);
}

std::vector<MetricPoint> Store::recent_metrics(const std::string& run_id, const std::string& name, int rank,
                                              int count) const {
  return m_backend->recent_metrics(run_id, name, rank, count);
}

std::vector<SeriesColumns> Store::series_columns(const std::string& run_id, const std::string& name,
                                                 std::int64_t after_step, std::int64_t upto_step) const {
  if (upto_step == std::numeric_limits<std::int64_t>::max()) {
    return m_backend->series_columns(run_id, name, after_step);
  }
  return m_backend->series_columns_between(run_id, name, after_step, upto_step);
}

std::vector<SeriesColumns> Backend::series_columns_between(const std::string& run_id, const std::string& name,
                                                           std::int64_t after_step, std::int64_t upto_step) {
  auto columns = series_columns(run_id, name, after_step);
  for (SeriesColumns& rank : columns) {
    const auto end = std::upper_bound(rank.steps.begin(), rank.steps.end(), upto_step) - rank.steps.begin();
    rank.steps.resize(static_cast<std::size_t>(end));
    rank.values.resize(static_cast<std::size_t>(end));
  }
  return columns;
}

SeriesEnvelope envelope_of(const SeriesColumns& columns, std::size_t size) {
  SeriesEnvelope envelope{columns.rank, {}};
  size = std::max<std::size_t>(size, 1);
  for (std::size_t start = 0; start < columns.steps.size(); start += size) {
    const std::size_t end = std::min(columns.steps.size(), start + size);
    SeriesBucket bucket{columns.steps[start],
                        columns.steps[end - 1],
                        static_cast<std::int64_t>(end - start),
                        std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::quiet_NaN(),
                        columns.values[end - 1]};
    for (std::size_t i = start; i < end; ++i) {
      const double value = columns.values[i];
      if (!std::isnan(value)) {
        bucket.min = std::isnan(bucket.min) ? value : std::min(bucket.min, value);
        bucket.max = std::isnan(bucket.max) ? value : std::max(bucket.max, value);
      }
    }
    envelope.buckets.push_back(bucket);
  }
  return envelope;
}

std::vector<SeriesEnvelope> Backend::series_envelope(const std::string& run_id, const std::string& name,
                                                     std::size_t buckets, std::int64_t after_step,
                                                     std::int64_t upto_step) {
  std::vector<SeriesEnvelope> out;
  for (const SeriesColumns& rank : series_columns_between(run_id, name, after_step, upto_step)) {
    out.push_back(envelope_of(
        rank, (rank.steps.size() + std::max<std::size_t>(buckets, 1) - 1) / std::max<std::size_t>(buckets, 1)));
  }
  return out;
}

std::vector<SeriesEnvelope> Store::series_envelope(const std::string& run_id, const std::string& name,
                                                   std::size_t buckets, std::int64_t after_step,
                                                   std::int64_t upto_step) const {
  return m_backend->series_envelope(run_id, name, buckets, after_step, upto_step);
}

std::vector<SeriesAggregate> Store::series_aggregates(const std::string& run_id, const std::string& name,
                                                      std::int64_t after_step) const {
  return m_backend->series_aggregates(run_id, name, after_step);
}

std::vector<MetricSeriesInfo> Store::metric_series(const std::string& run_id) const {
  return m_backend->metric_series(run_id);
}

std::vector<std::string> Store::metric_names(const std::string& run_id) const {
  return m_backend->metric_names(run_id);
}

std::vector<ArtifactRecord> Store::artifacts(const std::string& run_id) const {
  return m_backend->artifacts(run_id);
}

std::vector<RankRecord> Store::ranks(const std::string& run_id) const {
  auto ranks = m_backend->ranks(run_id);
  const auto owner = run(run_id);
  for (auto& rank : ranks) {
    if (rank.status == RunStatus::running && owner && owner->status != RunStatus::running) {
      rank.status = RunStatus::lost;
    }
  }
  return ranks;
}

namespace detail {

SqliteBackend& sqlite_backend(Store& store, const char* what) {
  auto* sqlite = dynamic_cast<SqliteBackend*>(&store.backend());
  EXPCTL_CHECK(sqlite != nullptr, util::StoreError, "{} needs a SQLite store, and {} is not one", what,
               store.location());
  return *sqlite;
}

}  // namespace detail

}  // namespace expctl::store
