// `expctl watch [RUN]`: a live view of a run's ranks, read from the store while the run writes.

#include <iostream>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "expctl/api/watch.hpp"
#include "expctl/cli/command.hpp"
#include "expctl/cli/support_slurm.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::cli {

namespace {

struct WatchOptions {
  std::string selector;
  std::string format = "text";
  double interval_s = 1.0;
  bool once = false;
};

class Printer {
 public:
  explicit Printer(std::string format) : m_json(format == "json"), m_terminal(::isatty(STDOUT_FILENO) == 1) {}

  void print(const api::WatchView& view) {
    if (m_json) {
      std::cout << api::view_json(view).dump() << std::endl;  // one line per refresh, for scripts
      return;
    }
    const std::string text = util::terminal_safe(api::view_text(view));
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
  auto ask_slurm = std::chrono::steady_clock::now();  // a run --slurm's job: at most every 10 s
  while (true) {
    api::WatchView view = api::watch_view(db, id);
    quiet.update(view);
    printer.print(view);
    if (!view.ended() && std::chrono::steady_clock::now() >= ask_slurm) {
      ask_slurm = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      if (const auto ended = ended_slurm_jobs({view.run}); !ended.empty()) {
        // Nothing would end the run, nor this watch: say why and how to set it right.
        std::cerr << "expctl: " << ended_slurm_job_text(ended.front()) << '\n';
        globals.result = util::ExitCode::run_failed;
        return;
      }
    }
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
      "ends by itself when the run ends (exit 0); a run of `run --slurm` whose job Slurm says has ended\n"
      "while the run reads queued or running ends it too, with a line saying how to set the run right\n"
      "(exit 1). RUN defaults to the newest running run, else the newest;\n"
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
