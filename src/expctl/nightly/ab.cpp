#include "expctl/nightly/ab.hpp"

#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "expctl/spec/spec.hpp"
#include "expctl/util/error.hpp"

namespace expctl::nightly {

namespace {

run::RunRequest side_request(const AbRequest& ab, bool side_b) {
  run::RunRequest request;
  request.spec_file = side_b ? ab.spec_b : ab.spec_a;
  request.overrides = ab.set_both;
  const auto& own = side_b ? ab.set_b : ab.set_a;
  request.overrides.insert(request.overrides.end(), own.begin(), own.end());
  request.tags = ab.tags;
  request.tags.push_back("ab:" + ab.name);
  request.tags.push_back(fmt::format("ab:{}:{}", ab.name, side_b ? 'b' : 'a'));
  request.open_store = ab.open_store;
  request.observer = ab.observer;
  request.stop = ab.stop;
  return request;
}

// One run of one side; false when the experiment must stop (interrupted); throws when it was
// refused or failed.
bool run_side(const AbRequest& ab, const run::RunRequest& request, char side, int index, std::vector<std::string>& ids,
              AbRuns& runs) {
  if (ab.starting) {
    ab.starting(side, index, request);
  }
  const auto result = run::run_spec(request);
  if (ab.finished) {
    ab.finished(side, result);
  }
  if (!result.refusal.empty()) {
    throw util::UsageError(fmt::format("side {}: {}", side, result.refusal));
  }
  const std::string id = result.run ? result.run->id : std::string("-");
  if (result.exit_code == util::ExitCode::interrupted) {
    runs.interrupted = true;
    return false;
  }
  if (result.exit_code != util::ExitCode::ok) {
    throw util::TrainError(fmt::format("side {}: run {} did not complete ({}); the A/B experiment stops", side, id,
                                       result.run ? result.run->root_cause.substr(0, result.run->root_cause.find('\n'))
                                                  : std::string("no run recorded")));
  }
  ids.push_back(id);
  return true;
}

}  // namespace

std::string ab_experiment_name() {
  return fmt::format("ab-{:%Y%m%d-%H%M%S}", fmt::gmtime(std::time(nullptr)));
}

AbRuns run_ab(const AbRequest& ab) {
  const auto request_a = side_request(ab, false);
  const auto request_b = side_request(ab, true);
  // Both sides are validated before the first run: a typo on side B must not cost side A's runs.
  for (const auto* request : {&request_a, &request_b}) {
    (void)spec::load_spec(request->spec_file, spec::LoadOptions{request->overrides});
  }
  AbRuns runs;
  for (int index = 1; index <= ab.repeat; ++index) {
    // The seed override comes last, so it wins over a --set seed=...: a pair shares its seed.
    const auto seeded = [&](run::RunRequest request) {
      if (ab.vary_seed) {
        request.overrides.push_back(fmt::format("seed={}", index));
      }
      return request;
    };
    if (!run_side(ab, seeded(request_a), 'A', index, runs.a, runs) ||
        !run_side(ab, seeded(request_b), 'B', index, runs.b, runs)) {
      break;
    }
  }
  return runs;
}

}  // namespace expctl::nightly
