// fuzz_serve_request: one HTTP request to `expctl serve`, through serve::Server::answer: the same
// bounded head reader (serve::scan_request_head), then parsing (cpp-httplib's), limits, security
// checks, token and routes as a connection from 127.0.0.1, over a store of a few runs (metrics,
// phases, tags, a hostile name) and one sweep.
//
// Input: the request's target (path and query) on the first line, then header lines; the target
// adds the request line `GET <target> HTTP/1.1`, `Host: 127.0.0.1:8080` and the token, so the
// fuzzer reaches the routes. An input that starts with "RAW\n" is sent as it is instead (the
// request line, method, Host and token are then the fuzzer's too). Run ids are drawn anew in each
// process, so "@RUN@" and "@RUN2@" in the input stand for the ids of two stored runs.
//
// A finding, besides a crash or a sanitizer report: an answer that is not HTTP, or a 500 (every
// route turns a bad request into 400/404; a 500 is an exception the request caused), or a prefix
// of the request on which the head reader decides other than on the whole (a socket hands it each
// longer prefix as the bytes arrive, so a decision must not change with more bytes).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "fuzz_support.hpp"

#include "expctl/serve/security.hpp"
#include "expctl/serve/server.hpp"
#include "expctl/store/store.hpp"

namespace {

constexpr std::string_view k_token = "fuzz-token-0123456789abcdef";

// The sweep's base: a small valid spec (flow style, one mapping a line).
constexpr std::string_view k_base =
    "name: base\n"
    "data: {dataset: synthetic, num_samples: 256, num_classes: 4, input_shape: [8], batch_size: 16}\n"
    "model: {arch: mlp, hidden_sizes: [8]}\n"
    "train: {max_steps: 4}\n";

std::vector<std::string> g_runs;  // ids of the stored runs

std::string make_store() {
  using namespace expctl;
  const std::string path = (fuzz::scratch() / "serve.db").string();
  store::Store db = store::Store::open(path);
  const std::string hash(64, 'a');
  db.put_spec(hash, R"({"name":"fuzz"})", "fuzz");
  for (const std::string name : {"alpha", "<script>alert(1)</script>", "run,with:odd&chars"}) {
    const auto run = db.create_run({hash, std::nullopt, name, std::nullopt});
    g_runs.push_back(run.id);
    db.add_tag(run.id, "tag-" + std::to_string(name.size()));
    std::vector<store::MetricPoint> points;
    for (int rank = 0; rank < 2; ++rank) {
      db.add_rank(run.id, {.rank = rank, .host = "node"});
      for (int step = 1; step <= 20; ++step) {
        const double ms = 10.0 + rank;
        for (const auto& [metric, value] : {std::pair<const char*, double>{"loss", 1.0 / step},
                                            {"samples_per_sec", 100.0},
                                            {"step_time_ms", ms},
                                            {"data_wait_ms", ms * 0.1},
                                            {"forward_ms", ms * 0.3},
                                            {"backward_ms", ms * 0.4},
                                            {"comm_wait_ms", ms * 0.1},
                                            {"optimizer_ms", ms * 0.05},
                                            {"straggler_score", 1.0 + rank * 0.1}}) {
          points.push_back({rank, step, metric, value});
        }
      }
    }
    db.append_metrics(run.id, points);
    db.set_summary(run.id, R"({"final_train_loss":0.05,"steps":20})");
    if (name != "alpha") {
      db.finish_run(run.id, store::RunStatus::completed, 0, "");
    }
  }
  return path;
}

expctl::serve::Server& server() {
  using namespace expctl;
  static std::optional<serve::Server> instance;
  if (!instance) {
    const std::string path = make_store();
    fuzz::write_file(fuzz::scratch() / "base.yaml", k_base);
    fuzz::write_file(fuzz::scratch() / "sweep.yaml", "base: base.yaml\nname: lr\ngrid:\n  optim.lr: [0.01, 0.1]\n");
    serve::ServeOptions options;
    options.port = 8080;
    options.token = std::string(k_token);
    options.store_connections = 1;
    options.sweeps.push_back(std::make_shared<const sweep::Sweep>(sweep::load_sweep(fuzz::scratch() / "sweep.yaml")));
    instance.emplace([path] { return store::Store::open(path, store::OpenMode::read_only); }, options);
  }
  return *instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input = expctl::fuzz::as_text(data, size);
  std::string request;
  if (input.starts_with("RAW\n")) {
    request = std::string(input.substr(4));
  } else {
    const auto end = input.find('\n');
    const std::string_view target = input.substr(0, end);
    const std::string_view headers = end == std::string_view::npos ? std::string_view{} : input.substr(end + 1);
    request = "GET " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer " +
              std::string(k_token) + "\r\n";
    expctl::fuzz::for_each_line(headers, [&](std::string_view line) {
      request.append(line).append("\r\n");
      return true;
    });
    request += "\r\n";
  }
  auto& served = server();
  for (const auto& [mark, id] :
       {std::pair<std::string_view, const std::string&>{"@RUN2@", g_runs[1]}, {"@RUN@", g_runs[0]}}) {
    for (auto at = request.find(mark); at != std::string::npos; at = request.find(mark, at + id.size())) {
      request.replace(at, mark.size(), id);
    }
  }
  using expctl::serve::HeadScan;
  const HeadScan whole = expctl::serve::scan_request_head(request);
  const std::size_t step = std::max<std::size_t>(1, request.size() / 64);
  for (std::size_t n = 0; n < request.size(); n += step) {
    const HeadScan part = expctl::serve::scan_request_head(std::string_view(request).substr(0, n));
    if (part.state != HeadScan::State::need_more &&
        (part.state != whole.state || part.status != whole.status || part.head_bytes != whole.head_bytes)) {
      std::fprintf(stderr, "the head reader decided on %zu bytes otherwise than on all %zu\n", n, request.size());
      std::abort();
    }
  }
  const std::string answer = served.answer(request);
  if (!answer.empty() && !answer.starts_with("HTTP/1.1 ")) {
    std::abort();  // not an HTTP answer
  }
  if (answer.starts_with("HTTP/1.1 500")) {
    std::fprintf(stderr, "500 for this request:\n%s\nanswer:\n%s\n", request.c_str(), answer.c_str());
    std::abort();
  }
  return 0;
}
