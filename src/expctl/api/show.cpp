#include "expctl/api/show.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "expctl/spec/convert.hpp"
#include "expctl/spec/field_table.hpp"
#include "expctl/util/display.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::api {

namespace {

template <typename T>
std::string or_dash(const std::optional<T>& value) {
  return value ? fmt::format("{}", *value) : "-";
}

std::string number_text(double value) {
  return fmt::format("{:.6g}", value);
}

/// A value as a person reads it: numbers to 6 significant digits, strings bare, lists of scalars
/// joined with ", ", a mapping as "key=value" pairs; never raw JSON (a list of objects is counted:
/// --format json has it).
std::string value_text(const nlohmann::json& value) {
  if (value.is_number_float()) {
    return number_text(value.get<double>());
  }
  if (value.is_string()) {
    return value.get<std::string>().empty() ? "\"\"" : value.get<std::string>();
  }
  if (value.is_array()) {
    std::vector<std::string> items;
    for (const auto& item : value) {
      if (item.is_structured()) {
        return fmt::format("{} entries (--format json lists them)", value.size());
      }
      items.push_back(value_text(item));
    }
    return items.empty() ? "(none)" : util::join(items, ", ");
  }
  if (value.is_object()) {
    std::vector<std::string> items;
    for (const auto& [key, item] : value.items()) {
      if (item.is_structured()) {
        return fmt::format("{} entries (--format json lists them)", value.size());
      }
      items.push_back(key + "=" + value_text(item));
    }
    return items.empty() ? "(none)" : util::join(items, ", ");
  }
  return value.is_null() ? "-" : value.dump();
}

/// Summary rows: nested objects become dotted keys, so no row carries a JSON document.
void add_summary_rows(util::TextTable& table, const std::string& prefix, const nlohmann::json& object) {
  for (const auto& [key, value] : object.items()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object() && !value.empty()) {
      add_summary_rows(table, name, value);
    } else {
      table.add_row({name, value_text(value)});
    }
  }
}

std::string indented(const std::string& block) {
  std::istringstream lines(block);
  std::string out;
  for (std::string line; std::getline(lines, line);) {
    out += "  " + line + '\n';
  }
  return out;
}

std::string status_text(const store::RunRecord& run) {
  std::string text(store::to_string(run.status));
  if (run.exit_code) {
    text += fmt::format(" (exit {})", *run.exit_code);
  }
  if (run.status == store::RunStatus::lost) {
    text += fmt::format(": its owner {} is gone (last heartbeat {} UTC); continue it with `expctl resume {}`",
                        run.owner.value_or("?"), run.heartbeat_at ? util::short_utc(*run.heartbeat_at) : "-", run.id);
  }
  if (run.status == store::RunStatus::queued) {
    text += fmt::format(
        ": its scheduler's job starts it (root cause says what it waits for); `expctl cancel {}` "
        "stops it",
        run.id);
  }
  return text;
}

std::string field_line(const std::string& key, const std::string& value) {
  return fmt::format("{:<12} {}\n", key, value);
}

std::string fields_text(const RunDetails& details) {
  const store::RunRecord& run = details.run;
  std::vector<std::pair<std::string, std::string>> fields{
      {"run", run.id},
      {"name", run.name},
      {"status", status_text(run)},
      {"root cause", run.root_cause.empty() ? "-" : run.root_cause},
      {"spec", run.spec_hash + (details.spec ? " (" + details.spec->name + ")" : "")},
      {"environment", or_dash(run.environment_hash)},
      {"started", util::short_utc(run.started_at) + " UTC"},
      {"ended", run.ended_at ? util::short_utc(*run.ended_at) + " UTC" : "-"},
      {"duration", util::duration_text(run.duration_seconds()) + (run.ended_at ? "" : " so far")},
      {"run dir", run.run_dir.string()},
      {"tags", run.tags.empty() ? "-" : util::join(run.tags, ", ")},
  };
  std::string text;
  for (const auto& [key, value] : fields) {
    text += field_line(key, value);
  }
  return text;
}

std::string shipping_text(const Shipping& shipping) {
  std::string text;
  if (!shipping.shipped) {
    text = "not by a shipper (written to the server directly)";
  } else if (shipping.shipped->complete) {
    text = fmt::format("from {} at {} UTC, final state{}", shipping.shipped->node,
                       util::short_utc(shipping.shipped->shipped_at),
                       shipping.shipped->lost ? " (that node found its expctl run gone: lost)" : "");
  } else {
    // Only the node can ship how it ended: until then the run is what it was when last shipped.
    text = fmt::format("not shipped since {} UTC from {} (it was running then; its final state has not arrived)",
                       util::short_utc(shipping.shipped->shipped_at), shipping.shipped->node);
  }
  if (shipping.local_points_behind) {
    const std::int64_t behind = *shipping.local_points_behind;
    text += behind == 0 ? "; this node has nothing more of it"
                        : fmt::format("; this node has {} point(s) more (expctl sync)", behind);
  }
  return text;
}

std::string section_text(const std::string& title, const util::TextTable& table) {
  return '\n' + title + '\n' + (table.rows() == 0 ? "  (none)\n" : indented(table.render()));
}

// "n/a" for a phase the run did not time (a program's run, unless the program logs it).
std::string share_text(const std::optional<double>& share) {
  return share ? fmt::format("{:.1f}%", 100.0 * *share) : "n/a";
}

// Each section's rows under its name, each value with "default" beside it when it equals the
// field's default; one alignment for all.
std::string hyperparameters_text(const RunDetails& details) {
  if (!details.values.is_object() || details.values.empty()) {
    return "\nhyperparameters\n  (not recorded for this run)\n";
  }
  std::string text =
      details.every_field
          ? "\nhyperparameters (as resolved; \"default\" marks a value the spec left as it was)\n"
          : "\nhyperparameters (the stored spec's hashed fields; the run folder's resolved.json is gone)\n";
  const std::vector<HyperparameterRow> rows = hyperparameter_rows(details);
  std::vector<std::string> values;
  size_t key_width = 0;
  size_t value_width = 0;
  for (const HyperparameterRow& row : rows) {
    values.push_back(value_text(row.value));
    key_width = std::max(key_width, row.key.size());
    value_width = std::max(value_width, std::min<size_t>(values.back().size(), 24));
  }
  std::string section;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].section != section) {
      section = rows[i].section;
      text += "  " + section + '\n';
    }
    std::string line = fmt::format("    {:<{}}  {:<{}}  {}", rows[i].key, key_width, values[i], value_width,
                                   rows[i].is_default ? "default" : "");
    line.erase(line.find_last_not_of(' ') + 1);
    text += line + '\n';
  }
  return text;
}

// A bar of where the step time went (d data, f forward, b backward, c comm wait, o optimizer,
// . other), 40 characters for the whole step.
std::string phase_bar(const compare::RankPhases& row) {
  const auto& s = row.shares;
  std::string bar;
  for (const auto& [share, mark] : {std::pair{s.data, 'd'},
                                    {s.forward, 'f'},
                                    {s.backward, 'b'},
                                    {s.comm, 'c'},
                                    {s.optimizer, 'o'},
                                    {row.other, '.'}}) {
    bar.append(static_cast<std::size_t>(share.value_or(0.0) * 40.0 + 0.5), mark);
  }
  return bar;
}

// Per rank: where the step time went, and its bar; no bar without phase timers.
util::TextTable phase_table(const std::vector<compare::RankPhases>& phases) {
  util::TextTable table(
      {"rank", "step ms", "data", "fwd", "bwd", "comm", "opt", "other", "straggler mean/max", "d f b c o ."});
  for (size_t column = 1; column < 9; ++column) {
    table.set_align(column, util::TextTable::Align::right);
  }
  for (const compare::RankPhases& row : phases) {
    const auto& s = row.shares;
    table.add_row({std::to_string(row.rank), fmt::format("{:.3f}", row.step_time_ms), share_text(s.data),
                   share_text(s.forward), share_text(s.backward), share_text(s.comm), share_text(s.optimizer),
                   share_text(row.other),
                   row.straggler_mean ? fmt::format("{:.2f}/{:.2f}", *row.straggler_mean, *row.straggler_max) : "-",
                   s.any() ? phase_bar(row) : "not measured"});
  }
  return table;
}

std::string ranks_text(const RunDetails& details) {
  util::TextTable ranks({"rank", "host", "pid", "status", "exit", "signal"});
  for (const store::RankRecord& rank : details.ranks) {
    ranks.add_row({std::to_string(rank.rank), rank.host, or_dash(rank.pid), std::string(store::to_string(rank.status)),
                   or_dash(rank.exit_code), or_dash(rank.signal)});
  }
  return section_text("ranks", ranks);
}

std::string phases_text(const RunDetails& details) {
  std::string text = section_text("phases (share of step time, whole run)", phase_table(details.phases));
  if (!details.phases.empty()) {
    text +=
        "  bar: 40 characters = one step; d data wait, f forward, b backward, c communication wait,\n"
        "       o optimizer, . other\n";
  }
  return text;
}

std::string artifacts_text(const RunDetails& details) {
  util::TextTable artifacts({"path", "bytes", "sha256"});
  artifacts.set_align(1, util::TextTable::Align::right);
  for (const store::ArtifactRecord& artifact : details.artifacts) {
    artifacts.add_row({artifact.path, std::to_string(artifact.size_bytes), artifact.sha256});
  }
  return section_text("artifacts", artifacts);
}

std::string metrics_text(const RunDetails& details) {
  util::TextTable metrics({"metric", "points", "ranks", "first (step)", "last (step)"});
  for (size_t column = 1; column < 5; ++column) {
    metrics.set_align(column, util::TextTable::Align::right);
  }
  for (const store::MetricSeriesInfo& series : details.metrics) {
    metrics.add_row({series.name, std::to_string(series.points), std::to_string(series.ranks),
                     fmt::format("{} ({})", number_text(series.first_value), series.first_step),
                     fmt::format("{} ({})", number_text(series.last_value), series.last_step)});
  }
  return section_text("metrics", metrics);
}

std::string summary_text(const RunDetails& details) {
  util::TextTable summary({"key", "value"});
  add_summary_rows(summary, "", parse_object(details.run.summary_json, nlohmann::json::object()));
  return summary.rows() == 0 ? "\nsummary\n  (none yet)\n" : section_text("summary", summary);
}

}  // namespace

nlohmann::json shipping_json(const Shipping& shipping) {
  nlohmann::json field = {
      {"node", nullptr},
      {"shipped_at", nullptr},
      {"complete", nullptr},
      {"local_points_behind",
       shipping.local_points_behind ? nlohmann::json(*shipping.local_points_behind) : nlohmann::json(nullptr)}};
  if (shipping.shipped) {
    field.update({{"node", shipping.shipped->node},
                  {"shipped_at", shipping.shipped->shipped_at},
                  {"complete", shipping.shipped->complete},
                  {"lost", shipping.shipped->lost}});
  }
  return field;
}

std::vector<HyperparameterRow> hyperparameter_rows(const RunDetails& details) {
  std::vector<HyperparameterRow> rows;
  for (const spec::Field& field : spec::fields()) {
    const nlohmann::json* value = json_at(details.values, field.path);
    if (value == nullptr) {
      continue;
    }
    const std::string_view path = field.path;
    const size_t dot = path.find('.');
    rows.push_back({dot == std::string_view::npos ? "general" : std::string(path.substr(0, dot)),
                    std::string(dot == std::string_view::npos ? path : path.substr(dot + 1)), *value,
                    *value == spec::default_value(field)});
  }
  // The top-level fields are apart in the table (container.image sits between name and seed):
  // each section's rows together, sections in the order they first appear.
  std::vector<std::string> order;
  for (const HyperparameterRow& row : rows) {
    if (std::find(order.begin(), order.end(), row.section) == order.end()) {
      order.push_back(row.section);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const HyperparameterRow& x, const HyperparameterRow& y) {
    return std::find(order.begin(), order.end(), x.section) < std::find(order.begin(), order.end(), y.section);
  });
  return rows;
}

std::string details_text(const RunDetails& details, const std::optional<Shipping>& shipping) {
  std::string text = fields_text(details);
  if (shipping) {
    text += field_line("shipped", shipping_text(*shipping));
  }
  return text + hyperparameters_text(details) + ranks_text(details) + phases_text(details) + artifacts_text(details) +
         metrics_text(details) + summary_text(details);
}

}  // namespace expctl::api
