#pragma once
/// One TensorBoard event file, written as TensorFlow's EventFileWriter does: a new file named
/// `events.out.tfevents.<unix seconds>.<hostname>.<pid>.<suffix>` whose first event says
/// file_version "brain.Event:2", then scalar events. TensorBoard shows one writer per folder (a
/// "run"), so each series that should get its own line gets its own folder and writer.
///
/// Records go through a stdio buffer; flush() hands them to the kernel, so a reader (TensorBoard
/// polls its folders) sees every step written before it, and flush(true) also fdatasync()s.
/// Errors are ExportError (exit 1) with a one-line message naming the file. Not thread-safe.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "expctl/tensorboard/event_proto.hpp"
#include "expctl/util/error.hpp"

namespace expctl::tensorboard {

/// An event file or folder that cannot be written (exit 1), or an output that is in the way of
/// an export (thrown with ExitCode::usage).
EXPCTL_DEFINE_FAILURE(ExportError, util::ExitCode::run_failed);

/// True for a file name TensorBoard reads as an event file (it contains "tfevents").
bool is_event_file_name(std::string_view name);

class EventWriter {
 public:
  /// Creates `dir` (with its parents) and a new event file in it, never replacing one, whose first
  /// record is the file_version event at `wall_time` (seconds since the Unix epoch).
  EventWriter(const std::filesystem::path& dir, std::string_view suffix, double wall_time);
  EventWriter(EventWriter&&) noexcept;
  EventWriter& operator=(EventWriter&&) noexcept;
  /// Closes the file; errors are lost here, so call close() to see them.
  ~EventWriter();

  const std::filesystem::path& path() const { return m_path; }
  /// Values written by add_scalar(s) so far.
  std::int64_t scalars() const { return m_scalars; }

  /// One scalar event; `value` is stored as a float32 simple_value, as TensorBoard reads it.
  void add_scalar(std::string_view tag, std::int64_t step, double value, double wall_time);
  /// One event carrying several values of one step (cheaper than one event per value).
  void add_scalars(std::int64_t step, double wall_time, std::span<const Scalar> values);
  /// SessionLog START at `step` (see session_start_event).
  void add_session_start(std::int64_t step, double wall_time);
  /// Hands buffered records to the kernel; `sync` also waits for them to reach the disk.
  void flush(bool sync = false);
  /// Flushes and closes; later calls do nothing.
  void close();

 private:
  void write_record(std::string_view event);
  [[noreturn]] void fail(std::string_view what) const;

  std::filesystem::path m_path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> m_file;
  std::int64_t m_scalars = 0;
};

}  // namespace expctl::tensorboard
