#pragma once
/// The results store: a database behind the Backend seam (backend.hpp) plus a folder per run,
/// `<runs root>/<run-id>/` (spec.json, logs/, checkpoints/). The default database is one SQLite
/// file (WAL, foreign keys, versioned schema) and the default runs root the `runs/` folder beside
/// it; the runs root is a setting of its own (StoreOptions), so a store on a server keeps its run
/// folders on the node that ran them.
///
/// Every write is one transaction (SQLite: `BEGIN IMMEDIATE`, retried while another process
/// holds the write lock), so several expctl processes may write one database at once without
/// losing rows. Errors are util::StoreError with one-line messages that name the database; those
/// from the database itself are store::Error with a FailureKind (failure.hpp). Input problems
/// (unknown run, bad selector, newer schema, not a database) exit 2, environmental ones (disk
/// full, I/O, read-only file) exit 1.
///
/// A Store is one connection: use it from one thread at a time and never across fork().

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "expctl/store/backend.hpp"
#include "expctl/store/failure.hpp"
#include "expctl/store/types.hpp"
#include "expctl/util/process_identity.hpp"

namespace expctl::store {

/// read_write creates the database (and its folder) when missing; read_only requires it to exist,
/// never creates it, and refuses writes (it still upgrades an older schema in place, where the
/// storage is writable). read_only opens with SQLite's mode=ro, and reads a database on read-only
/// storage or a full disk (where the -wal/-shm files cannot be made) as immutable; read_write
/// falls back to the same reading there, and its writes then fail with the cause in one line.
enum class OpenMode { read_write, read_only };

/// A `running` run whose owner is on another host, and that has not heartbeated for this long,
/// is read as `lost` (its owner on this host is checked directly instead; see derive_run_status).
inline constexpr std::chrono::seconds k_lost_after{120};

/// The status a run stored as `stored` has now. Only `running` changes: it is `lost` when its
/// owner is a process of this host that is gone (or of an earlier boot of this host), or a process
/// of another host whose last heartbeat is older than k_lost_after at `now`. A run with no owner
/// recorded (stores from before schema v3), or no heartbeat from another host, stays `running`.
RunStatus derive_run_status(RunStatus stored, const std::optional<util::ProcessIdentity>& owner,
                            std::optional<Clock::time_point> heartbeat_at, Clock::time_point now);

/// The folder that holds run folders for the SQLite database at `database`: `<database dir>/runs`
/// (the default runs root of a SQLite store).
std::filesystem::path runs_root(const std::filesystem::path& database);

/// The databases a store can live in.
enum class StoreKind { sqlite, postgresql };

/// Newest schema version this expctl reads and writes (of a SQLite store; each backend numbers
/// its own migrations).
int latest_schema_version(StoreKind kind = StoreKind::sqlite);

/// Where a store lives, parsed from --db / EXPCTL_DB.
struct StoreLocation {
  StoreKind kind = StoreKind::sqlite;
  /// SQLite: the file's path ("sqlite:" prefix removed). PostgreSQL: the libpq connection string
  /// as given (a postgresql:// or postgres:// URL, or keyword=value pairs such as "service=team").
  std::string target{};
};

/// `sqlite:PATH` or a plain path is SQLite; `postgresql://...`, `postgres://...` and libpq
/// keyword=value strings (`service=`, `host=`, `dbname=`, ...) are PostgreSQL.
StoreLocation parse_store_location(const std::string& location);

/// How a store is opened, besides its location.
struct StoreOptions {
  /// Where run folders go. Default: `runs/` beside a SQLite file; for a store on a server,
  /// `results/runs` under the current directory (run folders stay on the node that ran them).
  std::optional<std::filesystem::path> runs_root{};
  /// An older SQLite store is migrated in place when opened, even for reading. false: it is
  /// refused in one line naming the command that upgrades it (`expctl serve`, which never writes).
  bool upgrade = true;
};

/// One rank's points of one metric series as columns (bulk readers want no per-point name).
struct SeriesColumns {
  int rank = 0;
  std::vector<std::int64_t> steps{};  ///< ascending
  std::vector<double> values{};       ///< NaN where the stored value is NaN (NULL)
};

/// Per-rank aggregates of one metric series, computed in SQL (no point leaves the database).
struct SeriesAggregate {
  int rank = 0;
  std::int64_t count = 0;      ///< points with a value (not NaN)
  std::int64_t nan_count = 0;  ///< NaN points (stored as NULL)
  double sum = 0.0;            ///< of the values that are not NaN
  double min = 0.0;            ///< of the values that are not NaN (0 when there are none)
  double max = 0.0;
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
};

/// One bucket of a downsampled series: consecutive points, the steps they span, and their min,
/// max (of the values that are not NaN; NaN when none is) and last value.
struct SeriesBucket {
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  std::int64_t points = 0;
  double min = 0.0;
  double max = 0.0;
  double last = 0.0;
};

/// One rank's series in buckets, in step order.
struct SeriesEnvelope {
  int rank = 0;
  std::vector<SeriesBucket> buckets{};
};

/// The buckets of `columns` (one rank's points), `size` consecutive points each (the last fewer).
SeriesEnvelope envelope_of(const SeriesColumns& columns, std::size_t size);

class Store {
 public:
  /// Opens (read_write: creating) the store at `location` (see parse_store_location; a plain path
  /// is a SQLite file) and migrates it to the latest schema. Throws StoreError for a missing file
  /// (read_only), a file that is not an expctl database, or a schema newer than
  /// latest_schema_version() ("written by a newer expctl ...: upgrade expctl").
  static Store open(const std::string& location, OpenMode mode = OpenMode::read_write,
                    const StoreOptions& options = {});
  /// Wraps an open backend (tests, and backends opened by hand) with run folders under `runs_root`.
  static Store from_backend(std::unique_ptr<Backend> backend, std::filesystem::path runs_root);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  /// Absolute path of the database file of a SQLite store; empty for a store on a server.
  const std::filesystem::path& path() const;
  /// The store as the user named it, safe to print (a server's password masked).
  const std::string& location() const;
  /// The folder that holds the run folders (absolute).
  const std::filesystem::path& runs_dir() const;
  /// runs_dir()/`run_id`: the one place a run id becomes a path. Throws StoreError unless the id
  /// has the run-id grammar (is_run_id), so nothing read from a row ever names a folder outside.
  std::filesystem::path run_folder(const std::string& run_id) const;
  /// How this store's run folders name it (their store.json, detail::k_store_marker): a SQLite
  /// store beside its runs/ folder by its file name, any other by its absolute path, a server by
  /// its masked location.
  std::string folder_owner() const;
  /// Leaves out of `runs` (with a warning naming each) rows whose id is not a run id: what a
  /// backend read is checked with before anything uses it.
  void drop_invalid_ids(std::vector<RunRecord>& runs) const;
  /// The database behind this store.
  Backend& backend() { return *m_backend; }
  /// Schema version of the open database (latest_schema_version() unless opened for testing).
  int schema_version() const;
  /// The same store on a connection of its own, read-only, for a reading thread (a Store is one
  /// connection and must not be shared between threads); nullopt where the backend has none to
  /// open (a backend wrapped by hand). Throws store::Error as open() does.
  std::optional<Store> open_reader() const;

  /// Records a spec under its hash; a hash already present is left as it is.
  void put_spec(const std::string& hash, const std::string& canonical, const std::string& name);
  /// Records an environment fingerprint (a JSON object) under its hash; an existing hash is kept.
  void put_environment(const std::string& hash, const std::string& json_text);
  std::optional<SpecRecord> spec(const std::string& hash) const;
  /// The fingerprint JSON stored under `hash`, or nullopt.
  std::optional<std::string> environment(const std::string& hash) const;

  /// Records a `running` run with a new id, owned by the calling process (heartbeat_at = now; with
  /// run.queued a `queued` run owned by no process),
  /// and publishes its folder (spec.json holding the canonical spec, logs/, checkpoints/)
  /// atomically: the folder appears complete or not at all, and only together with the row.
  RunRecord create_run(const NewRun& run);
  /// Ends a run: status (not `running`, `lost` or `queued`), exit code, root cause (may be empty),
  /// ended_at = now.
  void finish_run(const std::string& run_id, RunStatus status, int exit_code, const std::string& root_cause);
  /// Marks an interrupted, failed, diverged or lost run `running` again for `expctl resume`, owned
  /// by the calling process (clears ended_at, exit code and root cause). Throws StoreError for a
  /// run that is running (its owner alive), completed or queued (its job would start it too).
  void resume_run(const std::string& run_id);
  /// A queued run's job started: the run becomes `running`, owned by the calling process, with
  /// `environment_hash` (already put_environment) as its fingerprint when given (its first start
  /// on the job's node). Throws StoreError unless the run is `queued`.
  void start_queued_run(const std::string& run_id, const std::optional<std::string>& environment_hash);
  /// The run waits for a scheduler's job again (`run --slurm` submitted or requeued it): `queued`,
  /// owned by no process, `root_cause` saying what it waits for. Throws StoreError for a completed run.
  void queue_run(const std::string& run_id, const std::string& root_cause);
  /// Says that the run's owner is alive: heartbeat_at = now (one UPDATE; the runner calls it every
  /// few seconds, well within k_lost_after).
  void heartbeat(const std::string& run_id);
  /// Replaces the run's summary with `json_text`, which must be a JSON object.
  void set_summary(const std::string& run_id, const std::string& json_text);

  /// Adds rank `rank.rank` of a run (each rank once).
  void add_rank(const std::string& run_id, const RankRecord& rank);
  /// Records how a rank ended (or changed status).
  void update_rank(const std::string& run_id, int rank, RunStatus status, std::optional<int> exit_code,
                   std::optional<int> signal);

  /// Appends metric points in one transaction. A point that exists already (same run, name,
  /// rank, step) is replaced: a resumed run re-logs the steps after its checkpoint.
  void append_metrics(const std::string& run_id, std::span<const MetricPoint> points);
  /// Records an artifact; the same path again replaces its hash and size.
  void add_artifact(const std::string& run_id, const ArtifactRecord& artifact);
  /// Forgets an artifact (e.g. a checkpoint that was pruned); false when the run had no such path.
  bool remove_artifact(const std::string& run_id, const std::string& path);
  /// Tags a run (no whitespace, no commas; adding a tag twice is harmless).
  void add_tag(const std::string& run_id, const std::string& tag);
  /// Removes a tag; returns false when the run did not have it.
  bool remove_tag(const std::string& run_id, const std::string& tag);

  /// Runs matching `filter`, newest first (by start time, then creation order). Statuses are as
  /// derive_run_status says, and so is the status filter (`running` excludes lost runs).
  std::vector<RunRecord> list_runs(const RunFilter& filter = {}) const;
  /// The run whose id is `selector` or starts with it. Throws StoreError (exit 2) naming the
  /// selector when none matches, or listing the candidates when several do.
  RunRecord find_run(const std::string& selector) const;
  /// The run with exactly this id, or nullopt.
  std::optional<RunRecord> run(const std::string& run_id) const;

  /// Metric points of a run, ordered by name, rank, step.
  std::vector<MetricPoint> metrics(const std::string& run_id, const MetricFilter& filter = {}) const;
  /// The last `count` points of one rank's series, in step order (an index range: cheap enough to
  /// poll every second while the run writes).
  std::vector<MetricPoint> recent_metrics(const std::string& run_id, const std::string& name, int rank,
                                          int count) const;
  /// Every rank's points of series `name` with step > `after_step`, one SeriesColumns per rank
  /// (ordered by rank, then step): a primary-key range scan that builds no per-point strings, the
  /// fast path for long runs (compare reads 100k-step series with it).
  /// With `upto_step`, only the points with step <= upto_step (a zoomed chart's range): both
  /// backends read the chunks that hold such steps and no other.
  std::vector<SeriesColumns> series_columns(const std::string& run_id, const std::string& name,
                                            std::int64_t after_step = std::numeric_limits<std::int64_t>::min(),
                                            std::int64_t upto_step = std::numeric_limits<std::int64_t>::max()) const;
  /// Aggregates of series `name` per rank over the steps > `after_step`, computed by SQLite
  /// (count, NaN count, sum, min, max, first and last step), ordered by rank.
  std::vector<SeriesAggregate> series_aggregates(
      const std::string& run_id, const std::string& name,
      std::int64_t after_step = std::numeric_limits<std::int64_t>::min()) const;
  /// Series `name` per rank (ordered by rank) over the steps in (`after_step`, `upto_step`],
  /// downsampled for a chart into about `buckets` buckets (at least 1) of consecutive points. Where
  /// a bucket spans a stored chunk or more (4 096 points), it is read from the chunks' headers and
  /// no point of them is decoded (only the chunks that `after_step` and `upto_step` fall in are),
  /// on both backends (series_chunks.hpp); a finer bucketing reads every point, as series_columns
  /// does.
  std::vector<SeriesEnvelope> series_envelope(const std::string& run_id, const std::string& name, std::size_t buckets,
                                              std::int64_t after_step = std::numeric_limits<std::int64_t>::min(),
                                              std::int64_t upto_step = std::numeric_limits<std::int64_t>::max()) const;
  /// One line per metric name (ordered by name).
  std::vector<MetricSeriesInfo> metric_series(const std::string& run_id) const;
  /// The names of the run's series (ordered by name): one index probe per metric name the store
  /// knows, where metric_series counts every point (a run page lists its charts with it before
  /// any series is read).
  std::vector<std::string> metric_names(const std::string& run_id) const;
  std::vector<ArtifactRecord> artifacts(const std::string& run_id) const;  ///< ordered by path
  /// Ordered by rank. A rank stored `running` in a run that is not (its exit was never written:
  /// the disk was full, the supervisor was killed) reads as `lost`.
  std::vector<RankRecord> ranks(const std::string& run_id) const;

  // Cleaning the store: expctl rm and expctl gc (store/cleanup.cpp).
  /// Deletes the run's row with everything that hangs off it, then its folder; returns the bytes
  /// the folder held. Throws StoreError for an unknown run (the folder is left alone then).
  std::int64_t remove_run(const std::string& run_id);
  /// Folders under runs_dir() older than `min_age` whose run the database does not hold (a
  /// crash between removing a row and its folder, a database replaced by hand), and that are this
  /// store's own: a folder names the store that created it (folder_owner), and one named by
  /// another store is never an orphan here (runs/ may be shared: a node's store and a server as
  /// --db, two task stores of a Slurm array). A folder from before folders named their store is
  /// an orphan only when no expctl database beside runs/ knows it either. Hidden folders (a run
  /// being created), names that are not run ids and young folders (a row not yet committed) are
  /// never listed.
  std::vector<std::filesystem::path> orphaned_folders(std::chrono::seconds min_age = std::chrono::hours(1)) const;
  /// Bytes of the database (Backend::database_bytes) and of every run folder together: a
  /// finished run's folder as measured when it ended (or by remeasure_folder) where the backend
  /// remembers it (SQLite), every other folder walked now.
  std::int64_t database_bytes() const;
  std::int64_t folders_bytes() const;
  /// Bytes compact() would give back, and the compaction itself (Backend::compact).
  std::int64_t reclaimable_bytes() const;
  void compact();
  /// Bytes under `path` (a file or a folder tree; 0 when missing).
  static std::int64_t bytes_under(const std::filesystem::path& path);
  /// Measures a finished run's folder again and remembers its bytes (after gc took files from it):
  /// folders_bytes walks only the folders whose bytes are not remembered.
  void remeasure_folder(const std::string& run_id);
  /// Measures and remembers every finished run's folder whose size is not remembered (runs from
  /// before schema v5, or ended while the store could not take the size); returns how many.
  int remember_folder_sizes();

 private:
  Store(std::unique_ptr<Backend> backend, std::filesystem::path runs_root, std::filesystem::path file);
  RunRecord with_folder(RunRecord run) const;
  std::unique_ptr<Backend> m_backend;
  std::filesystem::path m_runs_root;
  std::filesystem::path m_file;  ///< SQLite only
};

// ---------------------------------------------------------------------------------------------
// Merging stores (`expctl merge`): runs recorded on other machines or by Slurm array tasks,
// brought into one database. Implemented in merge.cpp.

/// What merging one source did.
struct MergeResult {
  std::filesystem::path source;
  std::vector<std::string> added;            ///< run ids copied in
  std::vector<std::string> present;          ///< run ids that were there already, with the same content
  std::int64_t specs_added = 0;
  std::int64_t environments_added = 0;
  std::int64_t tags_added = 0;               ///< tags of new runs, and tags of present runs the destination lacked
  std::int64_t points_added = 0;             ///< metric points written (a server: sent; it may have had some)
  std::vector<std::string> folders_copied;   ///< run folders copied (MergeOptions::copy_run_folders)
  std::vector<std::string> folders_missing;  ///< runs whose folder the source's runs/ does not have
};

struct MergeOptions {
  /// Also copy each run's folder from `<source dir>/runs/<id>` to the destination's runs/ (never
  /// replacing a folder that is there).
  bool copy_run_folders = false;
};

/// Brings every run of the expctl database at `source` (with its spec, environment, ranks,
/// metrics, artifacts' records and tags) into `destination`, in one transaction. Idempotent: a
/// run already present with the same content is left as it is (its missing tags are added), so
/// merging twice changes nothing. Throws StoreError (exit 2) naming the run when a run id exists
/// in both with different content (status, summary, ranks, metrics or artifacts), and then merges
/// nothing of `source`. The source is never written: it is read through a snapshot (SQLite's
/// backup API) into a temporary file beside the destination, which an older schema is migrated in.
/// A PostgreSQL destination takes the source through the shipper's idempotent path instead
/// (store::merge_by_shipping, ship.hpp): the same MergeResult, without run folders.
MergeResult merge_store(Store& destination, const std::filesystem::path& source, const MergeOptions& options = {});

/// "ok", or what PRAGMA integrity_check and foreign_key_check report, one problem a line.
std::string check_integrity(Store& store);

}  // namespace expctl::store
