// `expctl watch [RUN]`: a live view of a run's ranks, read from the store while the run writes.

#include <iostream>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "expctl/api/watch.hpp"
#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::cli {

namespace {

using nlohmann::json;

struct WatchOptions {
  std::string selector;
  std::string format = "text";
  double interval_s = 1.0;
  bool once = false;
};

// "n/a": the phase is not timed in this run (a program's, unless it logs it).
std::string percent(const std::optional<double>& share) {
  return share ? fmt::format("{:.0f}%", 100.0 * *share) : "n/a";
}

template <typename T>
std::string or_dash(const std::optional<T>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : "-";
}

std::vector<std::string> phase_cells(const std::optional<api::PhaseShares>& phases) {
  if (!phases) {
    return {"-", "-", "-", "-", "-"};
  }
  return {percent(phases->data), percent(phases->forward), percent(phases->backward), percent(phases->comm),
          percent(phases->optimizer)};
}

std::string straggler_cell(const api::RankView& rank) {
  return rank.straggler_score ? fmt::format("{:.2f}{}", *rank.straggler_score, rank.straggler ? " *" : "") : "-";
}

std::string rank_table(const api::WatchView& view) {
  util::TextTable table({"rank", "status", "step", "loss", "samples/s", "step ms", "data", "fwd", "bwd", "comm",
                         "opt", "straggler", "quiet"});
  for (std::size_t column = 2; column < 13; ++column) {
    table.set_align(column, util::TextTable::Align::right);
  }
  for (const auto& rank : view.ranks) {
    std::vector<std::string> cells = {std::to_string(rank.rank), std::string(store::to_string(rank.status)),
                                      or_dash(rank.step, "{}"), or_dash(rank.loss, "{:.4f}"),
                                      or_dash(rank.samples_per_sec, "{:.0f}"), or_dash(rank.step_time_ms, "{:.2f}")};
    for (auto& cell : phase_cells(rank.phases)) {
      cells.push_back(std::move(cell));
    }
    cells.push_back(straggler_cell(rank));
    cells.push_back(or_dash(rank.quiet_for_s, "{:.0f}s"));
    table.add_row(std::move(cells));
  }
  return table.render();
}

std::string headline(const api::WatchView& view) {
  const std::string of = view.total_steps ? fmt::format("/{}", *view.total_steps) : "";
  return fmt::format("run {}  {}  step {}{}{}", view.run.id, store::to_string(view.run.status), view.latest_step(), of,
                     view.waiting());
}

class Printer {
 public:
  explicit Printer(std::string format) : m_json(format == "json"), m_terminal(::isatty(STDOUT_FILENO) == 1) {}

  void print(const api::WatchView& view) {
    if (m_json) {
      std::cout << api::view_json(view).dump() << std::endl;  // one line per refresh, for scripts
      return;
    }
    const std::string text = util::terminal_safe(headline(view) + "\n" + rank_table(view));
    if (m_terminal) {
      std::cout << "\x1b[H\x1b[2J" << text << std::flush;  // redraw in place
    } else if (text != m_last) {
      std::cout << text << std::endl;  // a log gets a table only when something changed
    }
    m_last = text;
  }

 private:
  bool m_json;
  bool m_terminal;
  std::string m_last;
};

void run_watch(const WatchOptions& options, GlobalOptions& globals) {
  const store::Store db = open_store(globals, store::OpenMode::read_only);
  const std::string id = api::watched_run(db, options.selector);
  Printer printer(options.format);
  api::QuietClock quiet;
  while (true) {
    api::WatchView view = api::watch_view(db, id);
    quiet.update(view);
    printer.print(view);
    if (view.ended() || options.once) {
      if (options.format != "json" && view.ended()) {
        std::cout << util::terminal_safe(
            fmt::format("run {} ended: {}{}\n", id, store::to_string(view.run.status),
                        view.run.root_cause.empty() ? "" : " (" + view.run.root_cause + ")"));
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options.interval_s));
  }
}

void setup_watch(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<WatchOptions>();
  CLI::App* command = app.add_subcommand(
      "watch",
      "Watch a run's ranks live: one row per rank with its step, loss, samples/s, mean step time,\n"
      "where the time went over the last 10 steps (data wait, forward, backward, exposed\n"
      "communication wait, optimizer), the straggler score (the rank's compute time over the\n"
      "median rank's; '*' from 1.2) and how long its step has not changed ('quiet'). Reads the\n"
      "store read-only, so it works from another terminal or host while `expctl run` writes, and\n"
      "ends by itself when the run ends. RUN defaults to the newest running run, else the newest;\n"
      "otherwise any selector that names one run: an id or prefix, @latest, @latest~N, tag:NAME, spec:HASH.\n"
      "--format json prints one JSON object per refresh, one per line.\n"
      "Examples:\n"
      "  expctl watch\n"
      "  expctl watch 20261201-1207 --format json | jq -c '.ranks[] | [.rank, .step, .straggler_score]'");
  command->add_option("run", options->selector, "Any selector that names one run (default: see above)")
      ->option_text("[RUN]");
  add_format_option(command, options->format);
  command->add_option("--interval", options->interval_s, "Seconds between refreshes (default 1)")
      ->check(CLI::Range(0.1, 60.0));
  command->add_flag("--once", options->once, "Print the view once and exit");
  command->callback([options, globals] { run_watch(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(watch, 37, setup_watch);

}  // namespace expctl::cli
