#include "expctl/store/run_folder.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"

namespace expctl::store::detail {

namespace fs = std::filesystem;

namespace {

/// Random suffixes are 24 bits (6 hex digits); a later id in the same second steps up from the
/// greatest one by 1..widest, so ids still sort by start and the next one is hard to guess. Two
/// stores that hold the same greatest id (array tasks' stores merged from a common one) must not
/// then pick the same next id, or merging them is refused: with a fixed widest of 256 they did
/// once in 256 (the merge test failed so). Now widest is 1/256 of the room left, at most 2^16:
/// about once in 2^15 to 2^16, and still room for some 5 000 runs per second and store (the first
/// suffix is below 2^23, and each run takes on average 1/512 of what is left).
constexpr unsigned k_suffix_limit = 1u << 24;
constexpr unsigned k_max_step = 1u << 16;
constexpr unsigned k_room_share = 256;
constexpr size_t k_second_length = 15;  // "YYYYMMDD-HHMMSS"

unsigned random_below(unsigned limit) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return std::uniform_int_distribution<unsigned>(0, limit - 1)(rng);
}

void throw_if_error(const util::Expected<void>& result) {
  if (!result) {
    throw util::StoreError(result.error().message, util::ExitCode::run_failed);
  }
}

}  // namespace

std::string run_id_second(Clock::time_point time) {
  const std::time_t whole = Clock::to_time_t(time);
  std::tm utc{};
  ::gmtime_r(&whole, &utc);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                     utc.tm_min, utc.tm_sec);
}

std::string make_run_id(Clock::time_point time, const std::optional<std::string>& greatest_same_second) {
  const std::string second = run_id_second(time);
  unsigned suffix = random_below(k_suffix_limit / 2);
  if (greatest_same_second) {
    EXPCTL_ASSERT(greatest_same_second->size() == k_second_length + 7, "run id \"{}\"", *greatest_same_second);
    const unsigned greatest =
        static_cast<unsigned>(std::stoul(greatest_same_second->substr(k_second_length + 1), nullptr, 16));
    const unsigned room = k_suffix_limit - 1 - greatest;  // 6 hex digits: greatest < k_suffix_limit
    suffix = greatest + 1 + random_below(std::clamp(room / k_room_share, 1u, k_max_step));
    if (suffix >= k_suffix_limit) {
      throw util::StoreError(fmt::format("too many runs started in the second {} (their ids' 6 hex digits are used "
                                         "up): wait a second and retry",
                                         second),
                             util::ExitCode::run_failed);
    }
  }
  return fmt::format("{}-{:06x}", second, suffix);
}

std::optional<std::string> folder_owner(const fs::path& folder) {
  std::ifstream in(folder / k_store_marker);
  if (!in) {
    return std::nullopt;
  }
  const auto marker = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!marker.is_object() || !marker.contains("store") || !marker["store"].is_string()) {
    return std::nullopt;
  }
  return marker["store"].get<std::string>();
}

namespace {

std::string marker_text(const std::string& owner) {
  return nlohmann::json{{"store", owner}}.dump() + "\n";
}

}  // namespace

void write_folder_owner(const fs::path& folder, const std::string& owner) {
  throw_if_error(util::write_file_atomic(folder / k_store_marker, marker_text(owner)));
}

void publish_run_folder(const fs::path& root, const std::string& id, const std::string& canonical_spec,
                        const std::string& owner) {
  const fs::path staging = root / fmt::format(".staging-{}-{:06x}", id, random_below(k_suffix_limit));
  try {
    fs::create_directories(root);
    fs::create_directory(staging);
    fs::create_directory(staging / "logs");
    fs::create_directory(staging / "checkpoints");
    throw_if_error(util::write_file_atomic(staging / "spec.json", canonical_spec));
    throw_if_error(util::write_file_atomic(staging / k_store_marker, marker_text(owner)));
    throw_if_error(util::publish_directory(staging, root / id));
  } catch (const fs::filesystem_error& error) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw util::StoreError(
        fmt::format("cannot create the run folder \"{}\": {}", (root / id).string(), error.code().message()),
        util::ExitCode::run_failed);
  } catch (const util::StoreError&) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
}

void check_resumable(const std::string& run_id, RunStatus status, const ResumeHow& how) {
  if (how.queued) {
    EXPCTL_CHECK(status == RunStatus::queued, util::StoreError,
                 "run {} is {}, not queued: its job cannot start it (`expctl show {}` says why)", run_id,
                 to_string(status), run_id);
    return;
  }
  EXPCTL_CHECK(status != RunStatus::queued, util::StoreError,
               "run {} is queued: the scheduler's job starts it (`expctl cancel {}` first to resume it here)", run_id,
               run_id);
  EXPCTL_CHECK(status != RunStatus::running && status != RunStatus::completed, util::StoreError,
               "run {} is {}: only an interrupted, failed, diverged or lost run can be resumed", run_id,
               to_string(status));
}

void check_queueable(const std::string& run_id, const std::string& status) {
  EXPCTL_CHECK(status != to_string(RunStatus::completed), util::StoreError,
               "run {} is completed: a completed run is never queued again", run_id);
}

}  // namespace expctl::store::detail
