// `expctl serve`: a read-only web dashboard over the store (docs/serve.md).

#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/serve/security.hpp"
#include "expctl/serve/server.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/sweep_run/execute.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::cli {

namespace {

struct ServeCommandOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string token_file;
  int login_days = 0;
  std::vector<std::string> allow_hosts;
  std::size_t max_connections = 512;
  std::vector<std::string> sweep_files;
};

std::string url_host(const std::string& host) {
  if (host == "0.0.0.0" || host == "::") {
    return "127.0.0.1";  // a wildcard is reached here through loopback
  }
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

void run_serve(const ServeCommandOptions& options, const GlobalOptions& globals) {
  serve::ServeOptions serve_options;
  serve_options.host = options.host;
  serve_options.port = options.port;
  serve_options.allow_hosts = options.allow_hosts;
  serve_options.max_connections = options.max_connections;
  serve_options.login_lifetime = std::chrono::hours(24) * options.login_days;
  for (const auto& file : options.sweep_files) {
    // Loaded now, once: a request names a sweep, never a file. A bad file stops here (exit 2).
    auto loaded = std::make_shared<const sweep::Sweep>(sweep::load_sweep(file));
    for (const auto& other : serve_options.sweeps) {
      EXPCTL_CHECK(other->name != loaded->name, util::UsageError,
                   "--sweep {}: another sweep file is named {} too: the sweep page tells sweeps by name, rename one",
                   file, util::quoted(loaded->name));
    }
    serve_options.array_dirs[loaded->name] = sweep_run::task_store_dir(
        *loaded, {globals.db_path, globals.local_db, store_is_file(globals), globals.verbosity});
    serve_options.sweeps.push_back(std::move(loaded));
  }
  serve_options.token = options.token_file.empty() ? serve::make_token() : serve::read_token_file(options.token_file);
  // The store must be there now: a dashboard over nothing is a mistake to report, not to serve.
  // Named as the store names itself: a password in a --db URL is masked (it printed whole).
  // An older SQLite store is refused, not migrated: serve never writes (docs/serve.md).
  const std::string where = open_store(globals, store::OpenMode::read_only, /*upgrade=*/false).location();

  // SIGINT and SIGTERM are taken by one thread (sigwait) that stops the server: no process-wide
  // handler, and every server thread inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  serve::Server server([globals] { return open_store(globals, store::OpenMode::read_only, /*upgrade=*/false); },
                       serve_options);
  const int port = server.bind();
  std::cout << fmt::format("expctl serve: {} read-only on {}:{}\n", where, options.host, port);
  // A token of one's own (--token-file) is not printed: stdout goes to logs and terminals' scrollback.
  std::cout << (options.token_file.empty()
                    ? fmt::format("open  http://{}:{}/?token={}\n", url_host(options.host), port, serve_options.token)
                    : fmt::format("open  http://{}:{}/?token=<the token in {}>\n", url_host(options.host), port,
                                  options.token_file));
  if (!serve::is_loopback_host(options.host)) {
    std::cout << "note: listening beyond this host without TLS: put a reverse proxy with TLS in front "
                 "(docs/serve.md, \"Running it for a team\")\n";
  }
  std::cout << "Ctrl-C stops it" << std::endl;
  std::thread waiter([&server, stop_signals] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.stop();
  });
  server.run();
  // run() returned on its own (not by a signal): wake the waiter.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
}

void setup_serve(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ServeCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "serve",
      "Serve a read-only web dashboard over the store: the runs table (filter, sort, pages), a run's\n"
      "page (spec, status and root cause, per-rank curves of loss, samples/s and step time, live while\n"
      "it trains, its log, where each rank's step time went), two runs compared with the verdict\n"
      "`expctl compare` prints, and the sweeps given with --sweep across their points.\n"
      "Safe by default: it listens on 127.0.0.1 only, and every request needs the random token printed\n"
      "at start (open the printed URL once; the browser keeps it in a cookie), or --token-file's.\n"
      "Only GET is answered, no request body is read, foreign Host and Origin headers are refused.\n"
      "For a team, bind it behind a reverse proxy with TLS (docs/serve.md).\n"
      "Examples:\n"
      "  expctl serve\n"
      "  expctl --db results/expctl.db serve --port 9000\n"
      "  expctl serve --sweep experiments/sweep-quickstart.yaml\n"
      "  expctl serve --host 10.0.0.5 --token-file ~/.expctl-token --allow-host dash.example.com");
  command->add_option("--host", options->host,
                      "Address to listen on (default 127.0.0.1: this host only; 0.0.0.0: every interface)");
  command->add_option("--port", options->port, "TCP port (default 8080; 0: any free port)")->check(CLI::Range(0, 65535));
  command->add_option("--token-file", options->token_file,
                      "Read the access token from FILE (16+ characters) instead of drawing a random one")
      ->option_text("FILE");
  command
      ->add_option("--login-days", options->login_days,
                   "Keep a browser logged in for N days (a persistent cookie); default 0: until the\n"
                   "browser closes")
      ->option_text("N")
      ->check(CLI::Range(0, 400));
  command->add_option("--allow-host", options->allow_hosts,
                      "Also answer requests whose Host is NAME (a reverse proxy's public name; repeatable)")
      ->option_text("NAME")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("--max-connections", options->max_connections,
                      "Connections served at once (default 512); more wait their turn")
      ->check(CLI::Range(1, 4096));
  command
      ->add_option("--sweep", options->sweep_files,
                   "Show this sweep's results across its points on the sweep page (/sweep), as\n"
                   "`expctl sweep FILE --report` prints them; read once at start (repeatable)")
      ->option_text("FILE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->footer(exit_codes_footer());
  command->callback([options, globals] { run_serve(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(serve, 42, setup_serve);

}  // namespace expctl::cli
