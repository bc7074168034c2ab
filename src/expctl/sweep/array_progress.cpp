#include "expctl/sweep/array_progress.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"
#include "expctl/sweep/plan.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::sweep {

namespace fs = std::filesystem;

namespace {

fs::path record_path(const fs::path& dir, const std::string& job) {
  return dir / fmt::format("array-{}.json", job);
}

std::optional<ArrayRecord> read_record(const fs::path& path) {
  const auto text = util::read_file(path);
  if (!text) {
    return std::nullopt;
  }
  try {
    const auto document = nlohmann::json::parse(*text);
    ArrayRecord record;
    record.job = document.at("job").get<std::string>();
    record.sweep_hash = document.at("sweep").get<std::string>();
    record.points = document.at("points").get<std::vector<size_t>>();
    record.submitted_at = document.at("submitted_at").get<std::string>();
    record.merged = document.value("merged", false);
    return record;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// Slurm's job ids grow: a later submission has the larger id (compared as numbers).
bool submitted_before(const ArrayRecord& a, const ArrayRecord& b) {
  if (a.submitted_at != b.submitted_at) {
    return a.submitted_at < b.submitted_at;
  }
  return a.job.size() != b.job.size() ? a.job.size() < b.job.size() : a.job < b.job;
}

// The newest step rank 0 stored, from the series every run records (a program run may log only
// its own: then its loss, then nothing).
std::optional<std::int64_t> newest_step(const store::Store& task_store, const std::string& run) {
  for (const char* series : {util::metric::step_time_ms, util::metric::loss}) {
    const auto points = task_store.recent_metrics(run, series, 0, 1);
    if (!points.empty()) {
      return points.back().step;
    }
  }
  return std::nullopt;
}

void read_task_store(const fs::path& store_file, const std::string& job, ArrayPoint& point) {
  if (!fs::exists(store_file)) {
    return;
  }
  try {
    const auto task_store = store::Store::open(store_file.string(), store::OpenMode::read_only);
    // The task's runs carry "slurm-job:<array>_<task>" (a later array's task reuses the store).
    const auto runs = task_store.list_runs({.tag = util::tag::slurm_array_task(job, std::to_string(point.point))});
    for (const store::RunRecord& run : runs) {
      point.completed += run.status == store::RunStatus::completed ? 1 : 0;
    }
    const auto newest =
        std::max_element(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    if (newest != runs.end()) {
      point.state = std::string(store::to_string(newest->status));
      point.run = newest->id;
      point.step = newest_step(task_store, newest->id);
    }
  } catch (const util::Failure&) {
    point.state = "unreadable";  // being created, or damaged: the next look (or the merge) says
  }
}

}  // namespace

fs::path array_dir(const Sweep& sweep, const fs::path& store_file) {
  return store_file.parent_path() / ("sweep-" + sweep.name);
}

void write_array_record(const fs::path& dir, const ArrayRecord& record) {
  const nlohmann::json document = {{"kind", "sweep-array"},
                                   {"job", record.job},
                                   {"sweep", record.sweep_hash},
                                   {"points", record.points},
                                   {"submitted_at", record.submitted_at},
                                   {"merged", record.merged}};
  const fs::path path = record_path(dir, record.job);
  const auto written = util::write_file_atomic(path, document.dump(2) + "\n");
  EXPCTL_CHECK(written.has_value(), util::LaunchError, "cannot write the array's record {}: {}", path.string(),
               written ? "" : written.error().message);
}

void mark_array_merged(const fs::path& dir, const std::string& job) {
  if (auto record = read_record(record_path(dir, job))) {
    record->merged = true;
    write_array_record(dir, *record);
  }
}

std::vector<ArrayRecord> array_records(const fs::path& dir, const std::string& sweep_hash) {
  std::vector<ArrayRecord> records;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("array-") && name.ends_with(".json")) {
      if (auto record = read_record(entry.path()); record && record->sweep_hash == sweep_hash) {
        records.push_back(std::move(*record));
      }
    }
  }
  std::sort(records.begin(), records.end(), submitted_before);
  return records;
}

std::vector<ArrayPoint> array_points(const Sweep& sweep, const fs::path& dir) {
  std::map<size_t, std::string> newest;  // point -> the job of its newest submission
  std::map<size_t, bool> merged;
  for (const ArrayRecord& record : array_records(dir, sweep.hash)) {
    for (const size_t point : record.points) {
      newest[point] = record.job;
      merged[point] = record.merged;
    }
  }
  std::vector<ArrayPoint> points;
  for (const auto& [index, job] : newest) {
    if (merged[index] || index >= sweep.points.size()) {
      continue;
    }
    ArrayPoint point{.point = index, .job = job};
    read_task_store(dir / fmt::format("task-{}.db", index), job, point);
    points.push_back(std::move(point));
  }
  return points;
}

bool held_by_array(const ArrayPoint& point) {
  // A completed newest run: the task is between its point's runs, or done and not merged yet.
  return point.state == "queued" || point.state == "running" || point.state == "completed" || point.state == "diverged";
}

nlohmann::json array_json(const std::vector<ArrayPoint>& points) {
  const auto or_null = [](const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(nullptr); };
  nlohmann::json list = nlohmann::json::array();
  for (const ArrayPoint& point : points) {
    list.push_back({{"point", point.point},
                    {"job", point.job},
                    {"state", point.state},
                    {"run", or_null(point.run)},
                    {"step", or_null(point.step)},
                    {"completed", point.completed},
                    {"slurm_state", or_null(point.slurm_state)}});
  }
  return list;
}

std::vector<std::string> array_lines(const std::vector<ArrayPoint>& points) {
  // array job -> state -> the points' texts
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_job;
  for (const ArrayPoint& point : points) {
    std::string text = std::to_string(point.point);
    if (point.state == "running" && point.step) {
      text += fmt::format(" (step {})", *point.step);
    }
    std::string state = point.state;
    if (point.state == "completed") {
      state = "completed, not merged yet,";
    }
    by_job[point.job][state].push_back(std::move(text));
  }
  std::vector<std::string> lines;
  for (const auto& [job, states] : by_job) {
    std::vector<std::string> parts;
    for (const auto& [state, texts] : states) {
      parts.push_back(fmt::format("{} point{} {}", state, texts.size() == 1 ? "" : "s", util::join(texts, ", ")));
    }
    lines.push_back(fmt::format("array {}: {}", job, util::join(parts, "; ")));
  }
  return lines;
}

}  // namespace expctl::sweep
