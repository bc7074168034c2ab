#pragma once
/// The run folder's record journal (RUN_DIR/records.journal): every record a rank sends to its
/// supervisor is appended to it as it arrives, before the recorder batches it for the store. A
/// supervisor that dies by SIGKILL (the OOM killer, a CI timeout) loses the batch it had not yet
/// written, but not the journal: `expctl resume` replays the records of every invocation that
/// never ended before it starts the ranks again, so no step a rank reported is missing from the
/// record. The journal also says when each invocation started and when it was last heard from, so
/// a resume counts the killed invocations and their time.
///
/// The format is text, one line each (a line cut short by SIGKILL is ignored):
///
///   S <invocation> <unix seconds>           an invocation started
///   R <unix seconds> <rank> <record>        a record of a rank (the control-channel payload, or
///                                           a program's metrics line), as the supervisor read it
///   E <invocation> <unix seconds>           that invocation ended and its summary is stored
///   T <invocation> <unix seconds>           an earlier invocation that never ended was last
///                                           heard from then (its records are in the store)
///
/// When an invocation ends, its records are in the store: the journal is written again with its
/// markers only, so it holds the records of at most the invocation under way. A long invocation's
/// journal is bounded too: past k_journal_compact_bytes, while the recorder keeps up, it is written
/// again with the markers and the records of the last k_journal_keep_seconds only (older ones are
/// in the store), so a run of a million steps keeps megabytes, not gigabytes.

#include <cstddef>
#include <deque>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace expctl::run {

inline constexpr const char* k_journal_file = "records.journal";
/// A journal past this size is compacted (RecordJournal::compact).
inline constexpr std::size_t k_journal_compact_bytes = std::size_t{64} << 20;
/// Compaction keeps the records of this many seconds, and at most k_journal_keep_bytes of them.
inline constexpr double k_journal_keep_seconds = 30.0;
inline constexpr std::size_t k_journal_keep_bytes = std::size_t{16} << 20;

/// What a journal says about the invocations before this one.
struct JournalHistory {
  struct Invocation {
    int number = 0;
    double started = 0.0;    ///< unix seconds
    double last_seen = 0.0;  ///< its last record, or its start
    bool ended = false;
    std::vector<std::pair<int, std::string>> records;  ///< (rank, record), in arrival order
  };
  std::vector<Invocation> invocations;

  /// The invocations that never ended (their supervisor was killed): each one's records are
  /// replayed by a resume, and each one counts as an invocation with the time it was heard from.
  std::vector<const Invocation*> unfinished() const;
  /// Seconds from each unfinished invocation's start to its last record, summed.
  double unfinished_seconds() const;
};

/// Reads `run_dir`'s journal (an absent or unreadable one is empty).
JournalHistory read_journal(const std::filesystem::path& run_dir);

/// The journal of one invocation: appends its start marker when opened, each record as it
/// arrives, and its end marker on end(). A journal that cannot be written (a full disk) notes it
/// once through `warn` and stops journaling; the run goes on (the store remains its record).
class RecordJournal {
 public:
  /// `compact_bytes`: the size past which wants_compaction() (k_journal_compact_bytes).
  RecordJournal(std::filesystem::path run_dir, std::function<void(const std::string&)> warn,
                std::size_t compact_bytes = k_journal_compact_bytes);
  ~RecordJournal();
  RecordJournal(const RecordJournal&) = delete;
  RecordJournal& operator=(const RecordJournal&) = delete;

  /// This invocation's number (1 for a run's first).
  int invocation() const { return m_invocation; }
  /// What the journal held before this invocation started.
  const JournalHistory& history() const { return m_history; }
  void append(int rank, std::string_view record);
  /// The earlier invocations' records were handed to the recorder (a resume's replay): their
  /// memory goes; their numbers and times stay for the summary.
  void release_replayed();
  /// The journal has grown past its compaction size.
  bool wants_compaction() const { return m_fd >= 0 && m_bytes > m_compact_bytes; }
  /// Writes the journal again with the markers (earlier invocations' records dropped: a resume
  /// replayed them into the store) and this invocation's records of the last
  /// k_journal_keep_seconds. Call only while the recorder keeps up (Recorder::keeping_up), so
  /// that every older record is in the store.
  void compact();
  /// The invocation ended and its summary is stored: the journal keeps only the markers.
  void end();

 private:
  void write_line(const std::string& line);
  // The markers of every invocation before this one and this one's start.
  std::string markers(bool ended_too) const;

  std::filesystem::path m_path;
  std::function<void(const std::string&)> m_warn;
  JournalHistory m_history;
  int m_invocation = 1;
  double m_started = 0.0;
  int m_fd = -1;
  std::size_t m_compact_bytes = k_journal_compact_bytes;
  std::size_t m_bytes = 0;                              // written since the file was last written whole
  std::deque<std::pair<double, std::string>> m_recent;  // this invocation's lines (time, line), newest last
  std::size_t m_recent_bytes = 0;
};

}  // namespace expctl::run
