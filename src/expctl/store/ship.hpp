#pragma once
/// The shipper: brings what a node-local SQLite store holds into a PostgreSQL store, in batches,
/// so that training only ever writes to local disk (local first, shipped later).
///
/// Series travel as the node holds them (both stores keep the chunks of series_chunks.hpp): the
/// node's sealed chunks the server lacks go by COPY as they are (their bytes, never decoded), its
/// open chunk as points. Each batch is one server transaction: first the server's chunks and points
/// in the steps the batch covers are deleted (its points of a chunk the node sealed since, or a
/// series the node rewrote), then the batch goes in, and the last step shipped of each series is
/// recorded (ship_progress). A pass killed mid-batch therefore leaves the server as it was before
/// the batch, and the next pass sends the batch again; a replay never duplicates. The
/// run rows (status, summary, ranks, artifacts, tags) are upserted, and a run whose final state
/// has been shipped whole is skipped by later passes (ship_state). Shipping the same store twice,
/// or two merged copies of it, changes nothing. `expctl merge` into a server uses this path.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "expctl/store/store.hpp"

namespace expctl::util {
class InterruptSignals;
}

namespace expctl::store {

struct ShipOptions {
  /// Points per server transaction: large enough that COPY dominates, small enough that a batch
  /// replayed after a crash costs a second or so. A chunk is never split: a batch holds whole
  /// chunks up to this many points (one alone may hold more), then a series' open points.
  std::size_t batch_points = 50'000;
  /// Only this run (all runs when unset).
  std::optional<std::string> run_id{};
  /// Stop between batches once this has passed (what was committed stays; a run whose last batch
  /// was not sent keeps its state on the server as it was): a run's exit waits for its last pass
  /// a bounded time.
  std::optional<std::chrono::steady_clock::time_point> deadline{};
  /// Stop between batches (and between runs) once this reads true, as at the deadline: a
  /// foreground shipper (`sync --follow`) stopped by Ctrl-C does not finish a long pass first.
  const std::atomic<bool>* cancel = nullptr;
};

struct ShipReport {
  std::int64_t runs_considered = 0;  ///< local runs looked at
  std::int64_t runs_shipped = 0;     ///< run rows written or brought up to date
  std::int64_t points_shipped = 0;   ///< metric points sent (the server may have had some already)
  std::int64_t batches = 0;          ///< server transactions that carried points
  /// Runs whose final state is on the server after the pass, as "id digest" (the run as read then).
  std::set<std::string> complete{};
  std::vector<std::string> shipped{};  ///< ids of the runs_shipped, in id order
  std::vector<std::string> whole{};    ///< ids of the runs the server held whole already (skipped)
  std::int64_t specs_added = 0;        ///< specs the server did not have
  std::int64_t environments_added = 0;
  std::int64_t tags_added = 0;  ///< tags of the shipped runs the server did not have
};

/// `expctl merge SRC --into postgresql://…` (store::merge_store with a server as the destination):
/// one ship() of the store at `source` (opened for reading), as a MergeResult: `added` the runs
/// shipped (new to the server, or brought up to date), `present` those it held whole already,
/// `points_added` the points sent (the server may have had some). Run folders are not copied.
MergeResult merge_by_shipping(Store& server, const std::filesystem::path& source);

/// One pass: sends what `local` (SQLite) has and `server` (PostgreSQL) lacks. Throws
/// store::Error (kind unreachable, busy, ...) when the server fails; what was committed stays.
ShipReport ship(Store& local, Store& server, const ShipOptions& options = {});

/// How far the server is behind `local`: runs whose final state is not shipped, and points of
/// `local` past each series' shipped step (0 and 0: caught up). Reads only.
struct ShipLag {
  std::int64_t runs_behind = 0;
  std::int64_t points_behind = 0;
  std::int64_t runs_local = 0;  ///< runs of `local` looked at (0: it does not have the run asked for)
};
/// `run_id`: only that run's lag.
ShipLag ship_lag(Store& local, Store& server, const std::optional<std::string>& run_id = std::nullopt);

/// What a server knows of how a run reached it: the node that shipped it last, when, and whether
/// that pass had the run's final state (complete) or the run was still going.
struct ShippedRun {
  std::string node{};
  std::string shipped_at{};  ///< format_utc
  bool complete = false;
  bool lost = false;  ///< the node found the run's expctl gone (its final state is `lost`)
};
/// nullopt for a run the server did not get from a shipper (written there directly, or unknown).
std::optional<ShippedRun> shipped_run(Store& server, const std::string& run_id);

/// The wait before the next shipping pass: `interval` after a pass that worked; after a failed
/// one 1 s, doubled after each further failure up to k_most_retry. (In milliseconds: as seconds,
/// half of the first retry was 0 s, and a stopped server was retried ~1 000 times a second, which
/// took a core from training: 1.7x the step time of the quick start.) `expctl run`'s shipper and
/// `sync --follow` both pace by it.
class ShipPacer {
 public:
  static constexpr std::chrono::milliseconds k_first_retry{1000};
  static constexpr std::chrono::milliseconds k_most_retry{30000};
  explicit ShipPacer(std::chrono::milliseconds interval) : m_interval(interval) {}
  std::chrono::milliseconds after(bool worked) {
    if (worked) {
      m_retry = k_first_retry;
      return m_interval;
    }
    return std::exchange(m_retry, std::min(m_retry * 2, k_most_retry));
  }

 private:
  std::chrono::milliseconds m_interval;
  std::chrono::milliseconds m_retry = k_first_retry;
};

/// The one shipper loop: a pass every `interval`, on its own connections; a failing server never
/// reaches the caller: it reconnects with backoff (ShipPacer: 1 s doubling to 30 s). Two modes:
///
/// - background (the one `expctl run` starts when --db names a server): a thread of its own that
///   reports through `note` (the first failure, and when shipping works again). finish() (or the
///   destructor) stops it after a last pass whatever the backoff was waiting for, retried until
///   `final_wait` has passed while the server is away, and says what is left.
/// - foreground (`expctl sync --follow`): no thread; follow() runs the passes on the caller's
///   thread, reports each pass through `on_pass`, and waits between passes on the condition
///   variable that stop() (or a signal of the process's util::InterruptSignals) wakes, so Ctrl-C
///   ends it at once, never after the pause (which is up to --interval, 3600 s, or the 30 s
///   backoff). A pass under way stops at its next batch; no last pass: what was committed stays,
///   and the next pass of anyone sends the rest.
class BackgroundShipper {
 public:
  using Note = std::function<void(const std::string&)>;
  /// One foreground pass, as follow() reports it.
  struct Pass {
    ShipReport report{};                   ///< what it shipped (nothing when it failed)
    std::optional<std::string> problem{};  ///< the server's failure, when it failed
    bool first_failure = false;            ///< it failed, and the pass before it did not
    bool recovered = false;                ///< it worked, and the pass before it failed
  };
  using PassNote = std::function<void(const Pass&)>;
  /// Selects the foreground mode's constructor.
  struct Foreground {};
  static constexpr Foreground foreground{};
  /// How long a run's exit waits for its last pass by default.
  static constexpr std::chrono::milliseconds k_final_wait{5000};
  BackgroundShipper(std::string local, std::string server, Note note,
                    std::chrono::milliseconds interval = std::chrono::seconds(2),
                    std::chrono::milliseconds final_wait = k_final_wait);
  /// Foreground mode: nothing runs until follow().
  BackgroundShipper(Foreground, std::string local, std::string server, PassNote on_pass,
                    std::chrono::milliseconds interval);
  ~BackgroundShipper();

  /// Foreground mode: passes on this thread until stop() is called or one of `signals` arrives
  /// (or had arrived: its pipe is readable); returns what every pass shipped. The process's
  /// interrupt signals are blocked in this thread meanwhile, so they reach the watcher that
  /// wakes the wait, and no database call here sees EINTR.
  ShipReport follow(const util::InterruptSignals* signals = nullptr);
  /// Ends follow()'s wait at once and its pass at the next batch (any thread).
  void stop();

  /// What the last pass left: nothing (caught_up), or the runs and points not on the server, and
  /// why (the server away: points_behind then counts the points of the runs whose final state
  /// did not arrive, an upper bound).
  struct Leftover {
    bool caught_up() const { return runs_behind == 0; }
    std::int64_t runs_behind = 0;
    std::int64_t points_behind = 0;
    bool exact = true;                     ///< points_behind read from the server (false: an upper bound)
    std::optional<std::string> problem{};  ///< the server's failure, when it was away
  };
  /// Background mode: stops the thread after the last pass (at most `final_wait`, longer only for a batch under
  /// way) and returns what is left; later calls return the same.
  Leftover finish();
  BackgroundShipper(const BackgroundShipper&) = delete;
  BackgroundShipper& operator=(const BackgroundShipper&) = delete;

  /// What every pass so far has shipped.
  ShipReport totals() const;
  /// The last pass's failure, or nullopt when it succeeded.
  std::optional<std::string> problem() const;
  /// Passes that failed so far (each one connection attempt to a server that is away).
  std::int64_t failed_passes() const;

 private:
  void loop();
  /// false when the server failed; `deadline`: stop between batches then (the last pass)
  bool pass(std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  /// The wait between passes; false once stopped.
  bool wait(std::chrono::milliseconds wait);
  Leftover leftover();

  std::string m_local;
  std::string m_server;
  Note m_note;
  PassNote m_on_pass;
  std::chrono::milliseconds m_interval;
  std::chrono::milliseconds m_final_wait{0};
  Clock::time_point m_started;         ///< when it was made: the runs that changed since are its own
  bool m_foreground = false;           ///< made for follow(): no thread, no finish()
  std::optional<Leftover> m_leftover;  ///< once finish() ran
  std::set<std::string> m_complete;    ///< ShipReport::complete of the last pass that worked
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::atomic<bool> m_cancel{false};  ///< foreground: a pass under way stops at its next batch
  ShipReport m_totals;
  std::optional<std::string> m_problem;
  std::int64_t m_failed_passes = 0;
  std::optional<Store> m_local_store;
  std::optional<Store> m_server_store;
  std::thread m_thread;
};

}  // namespace expctl::store
