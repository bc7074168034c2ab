// Prints the false-positive and detection rates of loss questions answered across seeds
// (`expctl ab --vary-seed`, docs/compare.md "Loss and accuracy across seeds"): the seeded
// simulation of tests/unit/compare/seed_simulation.hpp through the real compare::compare_runs.
//   expctl_seed_power [TRIALS]     (default 4000; deterministic for a given TRIALS)
#include <cstdlib>

#include "../../tests/unit/compare/seed_simulation.hpp"

using namespace expctl::compare;
using namespace expctl::compare::testing;

int main(int argc, char** argv) {
  const size_t trials = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4000;
  const std::vector<ThresholdOverride> tight = {parse_threshold_override("final_train_loss=+0.5%")};
  fmt::print("{} comparisons per row; 5 seeds a side, paired by seed; final_train_loss, eval_loss and eval_accuracy\n"
             "judged together (paired t, Holm, level 0.01); seed-to-seed spread of ln(loss): 3 %\n\n",
             trials);
  fmt::print("{:>10}  {:>6}  {:>15}  {:>11}  {:>19}  {:>23}\n", "pair noise", "change", "any significant",
             "any flagged", "loss found (higher)", "loss regression at +0.5%");
  for (const double pair : {0.001, 0.003, 0.005, 0.01}) {
    for (const double change : {0.0, 0.01}) {
      const SeedModel model{0.03, pair, change, 5};
      const SeedRates rates = seed_rates(model, trials, 20261205, tight);
      fmt::print("{:>9.1f}%  {:>+5.0f}%  {:>14.2f}%  {:>10.2f}%  {:>18.2f}%  {:>22.2f}%\n", 100 * pair, 100 * change,
                 100 * rates.any_significant, 100 * rates.any_flagged, 100 * rates.loss_detected,
                 100 * rates.loss_regression);
    }
  }
  return 0;
}
