#include "expctl/train/checkpoint_files.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::train {
namespace {

using nlohmann::json;

std::filesystem::path index_path(const std::filesystem::path& checkpoint) {
  auto path = checkpoint;
  return path.replace_extension(".json");
}

// An index field: `fallback` when absent, nullopt when of another type than the index writes (a
// string rank, a fractional or out-of-range step: found by fuzz_checkpoint_index, they threw
// nlohmann's type errors out of a resume, or converted 1e300 to an integer, undefined behaviour).
std::optional<std::int64_t> integer_field(const json& document, const char* key, std::int64_t fallback,
                                          std::int64_t low, std::int64_t high) {
  const auto found = document.find(key);
  if (found == document.end()) {
    return fallback;
  }
  if (!found->is_number_integer() || (found->is_number_unsigned() && found->get<std::uint64_t>() > std::uint64_t(high))) {
    return std::nullopt;
  }
  const auto value = found->get<std::int64_t>();
  return value >= low && value <= high ? std::optional(value) : std::nullopt;
}

std::optional<std::string> string_field(const json& document, const char* key) {
  const auto found = document.find(key);
  if (found == document.end()) {
    return std::string();
  }
  return found->is_string() ? std::optional(found->get<std::string>()) : std::nullopt;
}

// The index of a checkpoint, or nullopt when it is missing, not JSON, or not shaped as
// write_checkpoint_index writes it (then the checkpoint is treated as never written).
std::optional<CheckpointFile> read_index(const std::filesystem::path& index) {
  const auto text = util::read_file(index);
  if (!text) {
    return std::nullopt;
  }
  const json document = json::parse(*text, nullptr, false);
  if (!document.is_object() || !document.contains("step") || !document.contains("sha256")) {
    return std::nullopt;
  }
  constexpr auto k_max = std::numeric_limits<std::int64_t>::max();
  const auto rank = integer_field(document, "rank", -1, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  const auto step = integer_field(document, "step", -1, std::numeric_limits<std::int64_t>::min(), k_max);
  const auto size_bytes = integer_field(document, "size_bytes", -1, std::numeric_limits<std::int64_t>::min(), k_max);
  auto sha256 = string_field(document, "sha256");
  auto run_id = string_field(document, "run_id");
  if (!rank || !step || !size_bytes || !sha256 || !run_id) {
    return std::nullopt;
  }
  CheckpointFile file;
  file.rank = static_cast<int>(*rank);
  file.step = *step;
  file.sha256 = std::move(*sha256);
  file.size_bytes = *size_bytes;
  file.run_id = std::move(*run_id);
  file.path = std::filesystem::path(index).replace_extension(".pt");
  return file;
}

// "rank3-step120.pt" -> rank 3; nullopt for other names.
std::optional<int> rank_of(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  int rank = -1;
  long long step = -1;
  char tail[8] = {};
  if (std::sscanf(name.c_str(), "rank%d-step%lld.%7s", &rank, &step, tail) != 3 || rank < 0) {
    return std::nullopt;
  }
  return rank;
}

}  // namespace

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int rank, std::int64_t step) {
  return dir / fmt::format("rank{}-step{}.pt", rank, step);
}

void write_checkpoint_index(const CheckpointFile& file) {
  const json document = {
      {"run_id", file.run_id}, {"rank", file.rank},       {"step", file.step},
      {"sha256", file.sha256}, {"size_bytes", file.size_bytes}};
  const auto path = index_path(file.path);
  const auto written = util::write_file_atomic(path, document.dump() + "\n");
  EXPCTL_CHECK(written.has_value(), util::TrainError, "{}: cannot write the checkpoint index: {}", path.string(),
               written.has_value() ? "" : written.error().message);
}

std::vector<CheckpointFile> list_checkpoints(const std::filesystem::path& dir, int rank) {
  std::vector<CheckpointFile> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() != ".json" || rank_of(entry.path()) != rank) {
      continue;
    }
    // An index that names another rank than its file is listed, and refused by verify_checkpoint.
    if (auto file = read_index(entry.path()); file && file->step >= 0) {
      files.push_back(std::move(*file));
    }
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return files;
}

std::string verify_checkpoint(const CheckpointFile& file, std::string_view run_id) {
  // An index that does not say whose checkpoint it is cannot be told from another run's or rank's
  // copied here: refused like one that names another (issue 49).
  if (!run_id.empty() && file.run_id.empty()) {
    return fmt::format(
        "{}: its index {} names no run, so it cannot be told from another run's checkpoint: "
        "remove it",
        file.path.string(), index_path(file.path).filename().string());
  }
  if (file.rank < 0) {
    return fmt::format(
        "{}: its index {} names no rank, so it cannot be told from another rank's checkpoint: "
        "remove it",
        file.path.string(), index_path(file.path).filename().string());
  }
  if (!run_id.empty() && file.run_id != run_id) {
    return fmt::format("{}: written by run {}, not by this run {} (a checkpoint of another run was copied here): "
                       "remove it",
                       file.path.string(), file.run_id, run_id);
  }
  if (const auto named = rank_of(file.path); named != file.rank) {
    return fmt::format("{}: its index says rank {} (a checkpoint of another rank was copied here): remove it",
                       file.path.string(), file.rank);
  }
  std::error_code error;
  const auto size = std::filesystem::file_size(file.path, error);
  if (error) {
    return fmt::format("{}: missing ({})", file.path.string(), error.message());
  }
  if (static_cast<std::int64_t>(size) != file.size_bytes) {
    return fmt::format("{}: {} bytes, its index says {} (the file is truncated or was replaced)",
                       file.path.string(), size, file.size_bytes);
  }
  const auto sha = util::sha256_file(file.path);
  if (!sha || *sha != file.sha256) {
    return fmt::format("{}: SHA-256 differs from its index (the file is corrupt)", file.path.string());
  }
  return {};
}

std::optional<CheckpointFile> newest_intact(const std::filesystem::path& dir, int rank,
                                            std::vector<std::string>* problems, std::string_view run_id) {
  for (auto& file : list_checkpoints(dir, rank)) {
    auto problem = verify_checkpoint(file, run_id);
    if (problem.empty()) {
      return std::move(file);
    }
    if (problems != nullptr) {
      problems->push_back(std::move(problem));
    }
  }
  return std::nullopt;
}

std::optional<CheckpointFile> intact_at(const std::filesystem::path& dir, int rank, std::int64_t step,
                                        std::string* problem, std::string_view run_id) {
  for (auto& file : list_checkpoints(dir, rank)) {
    if (file.step != step) {
      continue;
    }
    auto found = verify_checkpoint(file, run_id);
    if (found.empty()) {
      return std::move(file);
    }
    if (problem != nullptr) {
      *problem = std::move(found);
    }
    return std::nullopt;
  }
  if (problem != nullptr) {
    *problem = fmt::format("{}: missing (rank {} has no checkpoint of step {})",
                           checkpoint_path(dir, rank, step).string(), rank, step);
  }
  return std::nullopt;
}

void prune_checkpoints(const std::filesystem::path& dir, int rank) {
  const auto files = list_checkpoints(dir, rank);
  std::set<std::string> kept;
  for (std::size_t i = 0; i < files.size() && i < k_checkpoints_kept; ++i) {
    kept.insert(files[i].path.stem().string());
  }
  std::error_code error;
  std::vector<std::filesystem::path> doomed;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (rank_of(entry.path()) == rank && !kept.contains(entry.path().stem().string()) &&
        (entry.path().extension() == ".pt" || entry.path().extension() == ".json")) {
      doomed.push_back(entry.path());
    }
  }
  // A .pt whose index is still to be written belongs to a write in progress: only a newer
  // complete checkpoint makes it stale, so nothing newer than the newest kept one is removed.
  const std::int64_t newest = files.empty() ? -1 : files.front().step;
  for (const auto& path : doomed) {
    long long step = 0;
    int parsed_rank = 0;
    if (std::sscanf(path.filename().c_str(), "rank%d-step%lld", &parsed_rank, &step) == 2 && step > newest) {
      continue;
    }
    std::filesystem::remove(path, error);
  }
}

std::int64_t newest_resumable(const std::filesystem::path& dir, int rank, std::vector<std::string>* problems,
                              std::string_view run_id) {
  const auto before = problems->size();
  if (const auto newest = newest_intact(dir, rank, problems, run_id)) {
    return newest->step;
  }
  return problems->size() > before ? k_none_intact : k_no_checkpoint;
}

std::int64_t common_step(std::span<const std::int64_t> newest) {
  return newest.empty() ? k_no_checkpoint : *std::min_element(newest.begin(), newest.end());
}

ResumePoint resume_point(const std::filesystem::path& dir, const std::vector<int>& ranks, std::string_view run_id) {
  std::vector<std::int64_t> newest;
  std::vector<std::vector<std::string>> problems(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    newest.push_back(newest_resumable(dir, ranks[i], &problems[i], run_id));
  }
  const std::int64_t common = common_step(newest);
  const std::size_t first = static_cast<std::size_t>(std::find(newest.begin(), newest.end(), common) - newest.begin());
  ResumePoint point;
  if (common == k_none_intact) {
    point.refusal = problems[first].front();
    return point;
  }
  if (common == k_no_checkpoint) {
    if (std::any_of(newest.begin(), newest.end(), [](std::int64_t step) { return step >= 0; })) {
      point.note = fmt::format("rank {} holds no complete checkpoint (the run ended during its first): every rank "
                               "starts again from step 0",
                               ranks[first]);
    }
    return point;
  }
  for (const int rank : ranks) {
    if (!intact_at(dir, rank, common, &point.refusal, run_id)) {
      for (const auto& passed_over : problems) {
        for (const auto& problem : passed_over) {
          point.refusal += "; passed over " + problem;
        }
      }
      return point;
    }
  }
  point.step = common;
  // Newer checkpoints that were refused (corrupt, another run's, another rank's) are named: the
  // resume is right, but the user should know why it starts earlier than the newest file.
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    for (const auto& problem : problems[i]) {
      point.note += (point.note.empty() ? "resuming from step " + std::to_string(common) + "; passed over " : "; ") +
                    problem;
    }
  }
  return point;
}

}  // namespace expctl::train
