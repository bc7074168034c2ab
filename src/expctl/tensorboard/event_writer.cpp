#include "expctl/tensorboard/event_writer.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/util/process_identity.hpp"

namespace expctl::tensorboard {
namespace {

constexpr int k_name_attempts = 100;

/// events.out.tfevents.<unix seconds>.<hostname>.<pid>.<suffix>, with "-<n>" after the suffix
/// for the n-th attempt when a file of the plain name exists already.
std::string file_name(std::string_view suffix, int attempt) {
  std::string name =
      fmt::format("events.out.tfevents.{}.{}.{}.{}", std::time(nullptr), util::host_name(), ::getpid(), suffix);
  return attempt == 0 ? name : fmt::format("{}-{}", name, attempt);
}

void create_folder(const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  EXPCTL_CHECK(!error, ExportError, "cannot create folder {} for TensorBoard event files: {}", dir.string(),
               error.message());
}

/// A new file in `dir` (O_EXCL: never an existing one), and its path.
std::pair<std::FILE*, std::filesystem::path> create_file(const std::filesystem::path& dir, std::string_view suffix) {
  for (int attempt = 0;; ++attempt) {
    std::filesystem::path path = dir / file_name(suffix, attempt);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      std::FILE* file = ::fdopen(fd, "wb");
      const int error = errno;
      if (file == nullptr) {
        ::close(fd);
      }
      EXPCTL_CHECK(file != nullptr, ExportError, "cannot open TensorBoard event file {}: {}", path.string(),
                   std::strerror(error));
      return {file, std::move(path)};
    }
    EXPCTL_CHECK(errno == EEXIST && attempt + 1 < k_name_attempts, ExportError,
                 "cannot create TensorBoard event file {}: {}", path.string(), std::strerror(errno));
  }
}

}  // namespace

bool is_event_file_name(std::string_view name) { return name.find("tfevents") != std::string_view::npos; }

EventWriter::EventWriter(const std::filesystem::path& dir, std::string_view suffix, double wall_time)
    : m_file(nullptr, &std::fclose) {
  create_folder(dir);
  auto [file, path] = create_file(dir, suffix);
  m_path = std::move(path);
  m_file.reset(file);
  write_record(file_version_event(wall_time));
}

EventWriter::EventWriter(EventWriter&&) noexcept = default;
EventWriter& EventWriter::operator=(EventWriter&&) noexcept = default;
EventWriter::~EventWriter() = default;

void EventWriter::add_scalar(std::string_view tag, std::int64_t step, double value, double wall_time) {
  const Scalar scalar{tag, static_cast<float>(value)};
  add_scalars(step, wall_time, std::span(&scalar, 1));
}

void EventWriter::add_scalars(std::int64_t step, double wall_time, std::span<const Scalar> values) {
  if (!values.empty()) {
    write_record(scalars_event(step, wall_time, values));
    m_scalars += static_cast<std::int64_t>(values.size());
  }
}

void EventWriter::add_session_start(std::int64_t step, double wall_time) {
  write_record(session_start_event(step, wall_time));
}

void EventWriter::write_record(std::string_view event) {
  if (!m_file) {
    fail("it is closed");
  }
  const std::string record = tfrecord(event);
  if (std::fwrite(record.data(), 1, record.size(), m_file.get()) != record.size()) {
    fail(std::strerror(errno));
  }
}

void EventWriter::flush(bool sync) {
  if (!m_file) {
    return;
  }
  if (std::fflush(m_file.get()) != 0 || (sync && ::fdatasync(::fileno(m_file.get())) != 0)) {
    fail(std::strerror(errno));
  }
}

void EventWriter::close() {
  if (!m_file) {
    return;
  }
  std::FILE* file = m_file.release();
  if (std::fclose(file) != 0) {
    fail(std::strerror(errno));
  }
}

void EventWriter::fail(std::string_view what) const {
  throw ExportError(fmt::format("cannot write TensorBoard event file {}: {}", m_path.string(), what));
}

}  // namespace expctl::tensorboard
