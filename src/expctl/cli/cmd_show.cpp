// `expctl show RUN`: everything the store knows about one run.

#include <algorithm>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/api/runs.hpp"
#include "expctl/compare/phases.hpp"
#include "expctl/spec/convert.hpp"
#include "expctl/spec/field_table.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::cli {

namespace {

using api::RunDetails;

struct ShowOptions {
  std::string selector;
  std::string format = "text";
};

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
                        run.owner.value_or("?"), run.heartbeat_at ? short_time(*run.heartbeat_at) : "-", run.id);
  }
  return text;
}

void print_fields(const RunDetails& details) {
  const store::RunRecord& run = details.run;
  std::vector<std::pair<std::string, std::string>> fields{
      {"run", run.id},
      {"name", run.name},
      {"status", status_text(run)},
      {"root cause", run.root_cause.empty() ? "-" : run.root_cause},
      {"spec", run.spec_hash + (details.spec ? " (" + details.spec->name + ")" : "")},
      {"environment", or_dash(run.environment_hash)},
      {"started", short_time(run.started_at) + " UTC"},
      {"ended", run.ended_at ? short_time(*run.ended_at) + " UTC" : "-"},
      {"duration", duration_text(run.duration_seconds()) + (run.ended_at ? "" : " so far")},
      {"run dir", run.run_dir.string()},
      {"tags", run.tags.empty() ? "-" : util::join(run.tags, ", ")},
  };
  for (const auto& [key, value] : fields) {
    std::cout << fmt::format("{:<12} {}\n", key, value);
  }
}

void print_section(const std::string& title, const util::TextTable& table) {
  std::cout << '\n' << title << '\n' << (table.rows() == 0 ? "  (none)\n" : indented(table.render()));
}

// "n/a" for a phase the run did not time (a program's run, unless the program logs it).
std::string share_text(const std::optional<double>& share) {
  return share ? fmt::format("{:.1f}%", 100.0 * *share) : "n/a";
}

// The spec's fields in the field table's order under their section (the first part of the path),
// each value with "default" beside it when it equals the field's default; one alignment for all.
void print_hyperparameters(const RunDetails& details) {
  if (!details.values.is_object() || details.values.empty()) {
    std::cout << "\nhyperparameters\n  (not recorded for this run)\n";
    return;
  }
  std::cout << (details.every_field
                    ? "\nhyperparameters (as resolved; \"default\" marks a value the spec left as it was)\n"
                    : "\nhyperparameters (the stored spec's hashed fields; the run folder's resolved.json is gone)\n");
  struct Row {
    std::string section, key, value;
    bool is_default;
  };
  std::vector<Row> rows;
  size_t key_width = 0;
  size_t value_width = 0;
  for (const spec::Field& field : spec::fields()) {
    const nlohmann::json* value = api::json_at(details.values, field.path);
    if (value == nullptr) {
      continue;
    }
    const std::string_view path = field.path;
    const size_t dot = path.find('.');
    Row row{dot == std::string_view::npos ? "general" : std::string(path.substr(0, dot)),
            std::string(dot == std::string_view::npos ? path : path.substr(dot + 1)), value_text(*value),
            *value == spec::default_value(field)};
    key_width = std::max(key_width, row.key.size());
    value_width = std::max(value_width, std::min<size_t>(row.value.size(), 24));
    rows.push_back(std::move(row));
  }
  // The top-level fields are apart in the table (container.image sits between name and seed):
  // each section's rows together, sections in the order they first appear.
  std::vector<std::string> order;
  for (const Row& row : rows) {
    if (std::find(order.begin(), order.end(), row.section) == order.end()) {
      order.push_back(row.section);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& x, const Row& y) {
    return std::find(order.begin(), order.end(), x.section) < std::find(order.begin(), order.end(), y.section);
  });
  std::string section;
  for (const Row& row : rows) {
    if (row.section != section) {
      section = row.section;
      std::cout << "  " << section << '\n';
    }
    std::string line = fmt::format("    {:<{}}  {:<{}}  {}", row.key, key_width, row.value, value_width,
                                   row.is_default ? "default" : "");
    line.erase(line.find_last_not_of(' ') + 1);
    std::cout << line << '\n';
  }
}

// Per rank: where the step time went, and a bar of it (d data, f forward, b backward, c comm
// wait, o optimizer, . other), 40 characters for the whole step; no bar without phase timers.
util::TextTable phase_table(const std::vector<compare::RankPhases>& phases) {
  util::TextTable table({"rank", "step ms", "data", "fwd", "bwd", "comm", "opt", "other", "straggler mean/max",
                         "d f b c o ."});
  for (size_t column = 1; column < 9; ++column) {
    table.set_align(column, util::TextTable::Align::right);
  }
  for (const compare::RankPhases& row : phases) {
    const auto& s = row.shares;
    std::string bar;
    for (const auto& [share, mark] : {std::pair{s.data, 'd'}, {s.forward, 'f'}, {s.backward, 'b'}, {s.comm, 'c'},
                                      {s.optimizer, 'o'}, {row.other, '.'}}) {
      bar.append(static_cast<std::size_t>(share.value_or(0.0) * 40.0 + 0.5), mark);
    }
    table.add_row({std::to_string(row.rank), fmt::format("{:.3f}", row.step_time_ms), share_text(s.data),
                   share_text(s.forward), share_text(s.backward), share_text(s.comm), share_text(s.optimizer),
                   share_text(row.other),
                   row.straggler_mean ? fmt::format("{:.2f}/{:.2f}", *row.straggler_mean, *row.straggler_max) : "-",
                   s.any() ? bar : "not measured"});
  }
  return table;
}

void print_tables(const RunDetails& details) {
  util::TextTable ranks({"rank", "host", "pid", "status", "exit", "signal"});
  for (const store::RankRecord& rank : details.ranks) {
    ranks.add_row({std::to_string(rank.rank), rank.host, or_dash(rank.pid), std::string(store::to_string(rank.status)),
                   or_dash(rank.exit_code), or_dash(rank.signal)});
  }
  print_section("ranks", ranks);

  print_section("phases (share of step time, whole run)", phase_table(details.phases));
  if (!details.phases.empty()) {
    std::cout << "  bar: 40 characters = one step; d data wait, f forward, b backward, c communication wait,\n"
                 "       o optimizer, . other\n";
  }

  util::TextTable artifacts({"path", "bytes", "sha256"});
  artifacts.set_align(1, util::TextTable::Align::right);
  for (const store::ArtifactRecord& artifact : details.artifacts) {
    artifacts.add_row({artifact.path, std::to_string(artifact.size_bytes), artifact.sha256});
  }
  print_section("artifacts", artifacts);

  util::TextTable metrics({"metric", "points", "ranks", "first (step)", "last (step)"});
  for (size_t column = 1; column < 5; ++column) {
    metrics.set_align(column, util::TextTable::Align::right);
  }
  for (const store::MetricSeriesInfo& series : details.metrics) {
    metrics.add_row({series.name, std::to_string(series.points), std::to_string(series.ranks),
                     fmt::format("{} ({})", number_text(series.first_value), series.first_step),
                     fmt::format("{} ({})", number_text(series.last_value), series.last_step)});
  }
  print_section("metrics", metrics);

  util::TextTable summary({"key", "value"});
  add_summary_rows(summary, "", api::parse_object(details.run.summary_json, nlohmann::json::object()));
  if (summary.rows() == 0) {
    std::cout << "\nsummary\n  (none yet)\n";
  } else {
    print_section("summary", summary);
  }
}

/// A run on a team server: which node shipped it last and when, whether its final state is there,
/// and how many of this node's points of it are not (nullopt for a SQLite store). One field of
/// `show`, kept apart from the rest of its output.
std::optional<nlohmann::json> shipping_of(store::Store& db, const GlobalOptions& globals, const std::string& run_id) {
  if (store_is_file(globals)) {
    return std::nullopt;
  }
  const auto shipped = store::shipped_run(db, run_id);
  const auto lag = node_lag(globals, db, run_id);
  const bool local = lag && lag->lag.runs_local > 0;  // this node has the run
  nlohmann::json field = {{"node", nullptr}, {"shipped_at", nullptr}, {"complete", nullptr},
                          {"local_points_behind", local ? nlohmann::json(lag->lag.points_behind) : nullptr}};
  if (shipped) {
    field.update({{"node", shipped->node}, {"shipped_at", shipped->shipped_at}, {"complete", shipped->complete}});
  }
  return field;
}

std::string shipping_text(const nlohmann::json& field) {
  std::string text = field["node"].is_null()
                         ? "not by a shipper (written to the server directly)"
                         : fmt::format("from {} at {} UTC, {}", field["node"].get<std::string>(),
                                       short_time(field["shipped_at"].get<std::string>()),
                                       field["complete"].get<bool>() ? "final state" : "while it ran");
  if (!field["local_points_behind"].is_null()) {
    const auto behind = field["local_points_behind"].get<std::int64_t>();
    text += behind == 0 ? "; this node has nothing more of it"
                        : fmt::format("; this node has {} point(s) more (expctl sync)", behind);
  }
  return text;
}

void run_show(const ShowOptions& options, const GlobalOptions& globals) {
  store::Store db = open_store(globals, store::OpenMode::read_only);
  const RunDetails details = api::read_details(db, options.selector, "show");
  const auto shipping = shipping_of(db, globals, details.run.id);
  if (options.format == "json") {
    nlohmann::json document = api::details_json(details);
    document["shipped"] = shipping.value_or(nullptr);
    print_json(document);
    return;
  }
  print_fields(details);
  if (shipping) {
    std::cout << fmt::format("{:<12} {}\n", "shipped", shipping_text(*shipping));
  }
  print_hyperparameters(details);
  print_tables(details);
}

void setup_show(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ShowOptions>();
  CLI::App* command =
      app.add_subcommand("show",
                         "Show everything recorded about one run: its fields, tags, ranks, artifacts, metrics\n"
                         "(points, first and last value) and the summary the runner wrote.\n"
                         "RUN: a run id or unique prefix (see 'expctl list'), @latest, @latest~N, tag:NAME (the\n"
                         "newest run with the tag), spec:HASHPREFIX or a spec file (the newest run of it).\n"
                         "Text output groups the resolved hyperparameters by section and marks defaults; JSON\n"
                         "output adds the environment fingerprint (\"environment\", null when none was taken) and\n"
                         "the spec's values (\"spec\".\"values\").\n"
                         "Examples:\n"
                         "  expctl show 20261129-223118-3fa9c2\n"
                         "  expctl show 20261129-2231 --format json");
  command->add_option("run", options->selector, "Any selector that names one run (see above)")->required()->option_text("RUN");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_show(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(show, 31, setup_show);

}  // namespace expctl::cli
