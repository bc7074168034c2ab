// `expctl show RUN`: everything the store knows about one run.

#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/compare/phases.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::cli {

namespace {

struct ShowOptions {
  std::string selector;
  std::string format = "text";
};

/// Everything `show` prints, read once.
struct RunDetails {
  store::RunRecord run;
  std::optional<store::SpecRecord> spec;
  std::optional<std::string> environment;
  std::vector<store::RankRecord> ranks;
  std::vector<store::ArtifactRecord> artifacts;
  std::vector<store::MetricSeriesInfo> metrics;
  std::vector<compare::RankPhases> phases;
};

RunDetails read_details(const store::Store& db, const std::string& selector) {
  RunDetails details{db.find_run(selector), {}, {}, {}, {}, {}, {}};
  const store::RunRecord& run = details.run;
  details.spec = db.spec(run.spec_hash);
  if (run.environment_hash) {
    details.environment = db.environment(*run.environment_hash);
  }
  details.ranks = db.ranks(run.id);
  details.artifacts = db.artifacts(run.id);
  details.metrics = db.metric_series(run.id);
  details.phases =
      compare::run_phases(db, run.id, nlohmann::json::parse(run.summary_json, nullptr, /*allow_exceptions=*/false));
  return details;
}

/// A stored JSON object, or `fallback` if the text is not one (the store only accepts objects).
nlohmann::json parse_object(const std::string& text, nlohmann::json fallback) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : fallback;
}

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

template <typename T>
std::string or_dash(const std::optional<T>& value) {
  return value ? fmt::format("{}", *value) : "-";
}

std::string number_text(double value) {
  return fmt::format("{:.6g}", value);
}

/// Numbers to 6 significant digits, strings bare, anything else as compact JSON.
std::string summary_value_text(const nlohmann::json& value) {
  if (value.is_number_float()) {
    return number_text(value.get<double>());
  }
  return value.is_string() ? value.get<std::string>() : value.dump();
}

nlohmann::json details_json(const RunDetails& details) {
  nlohmann::json document = json_envelope("show");
  document["run"] = run_json(details.run);
  document["spec"] = {{"hash", details.run.spec_hash}, {"name", details.spec ? details.spec->name : ""}};
  document["summary"] = parse_object(details.run.summary_json, nlohmann::json::object());
  document["environment"] = details.environment ? parse_object(*details.environment, nullptr) : nullptr;
  document["ranks"] = nlohmann::json::array();
  for (const store::RankRecord& rank : details.ranks) {
    document["ranks"].push_back({{"rank", rank.rank},
                                 {"host", rank.host},
                                 {"pid", or_null(rank.pid)},
                                 {"environment_hash", or_null(rank.environment_hash)},
                                 {"status", store::to_string(rank.status)},
                                 {"exit_code", or_null(rank.exit_code)},
                                 {"signal", or_null(rank.signal)}});
  }
  document["phases"] = compare::phases_json(details.phases);
  document["artifacts"] = nlohmann::json::array();
  for (const store::ArtifactRecord& artifact : details.artifacts) {
    document["artifacts"].push_back(
        {{"path", artifact.path}, {"sha256", artifact.sha256}, {"size_bytes", artifact.size_bytes}});
  }
  document["metrics"] = nlohmann::json::array();
  for (const store::MetricSeriesInfo& series : details.metrics) {
    // NaN has no JSON spelling: nlohmann writes it as null.
    document["metrics"].push_back({{"name", series.name},
                                   {"points", series.points},
                                   {"ranks", series.ranks},
                                   {"first_rank", series.first_rank},
                                   {"first_step", series.first_step},
                                   {"first_value", series.first_value},
                                   {"last_step", series.last_step},
                                   {"last_value", series.last_value}});
  }
  return document;
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
  const nlohmann::json values = parse_object(details.run.summary_json, nlohmann::json::object());
  for (const auto& [key, value] : values.items()) {
    summary.add_row({key, summary_value_text(value)});
  }
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
  const RunDetails details = read_details(db, options.selector);
  const auto shipping = shipping_of(db, globals, details.run.id);
  if (options.format == "json") {
    nlohmann::json document = details_json(details);
    document["shipped"] = shipping.value_or(nullptr);
    print_json(document);
    return;
  }
  print_fields(details);
  if (shipping) {
    std::cout << fmt::format("{:<12} {}\n", "shipped", shipping_text(*shipping));
  }
  print_tables(details);
}

void setup_show(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ShowOptions>();
  CLI::App* command =
      app.add_subcommand("show",
                         "Show everything recorded about one run: its fields, tags, ranks, artifacts, metrics\n"
                         "(points, first and last value) and the summary the runner wrote.\n"
                         "RUN is a run id or any unique prefix of one (see 'expctl list').\n"
                         "JSON output adds the environment fingerprint (\"environment\", null when none was taken).\n"
                         "Examples:\n"
                         "  expctl show 20261129-223118-3fa9c2\n"
                         "  expctl show 20261129-2231 --format json");
  command->add_option("run", options->selector, "Run id or unique prefix")->required()->option_text("RUN");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_show(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(show, 31, setup_show);

}  // namespace expctl::cli
