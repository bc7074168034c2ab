// Slots: disjoint core (and GPU) sets for points that run at the same time.

#include <set>

#include <catch2/catch.hpp>

#include "expctl/sweep/slots.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
using sweep::plan_slots;

TEST_CASE("slots: two slots on two cores get one core each") {
  const std::vector<int> cpus{0, 1};
  const auto slots = plan_slots(2, cpus, {});
  REQUIRE(slots.size() == 2);
  CHECK(slots[0].cpus == std::vector<int>{0});
  CHECK(slots[1].cpus == std::vector<int>{1});
  CHECK(slots[0].gpus.empty());
  CHECK(slots[1].index == 1);
}

TEST_CASE("slots: uneven splits differ by one core at most and never share a core") {
  const std::vector<int> cpus{0, 1, 2, 3, 4, 5, 6, 8};
  const auto slots = plan_slots(3, cpus, {});
  std::set<int> seen;
  size_t total = 0;
  for (const auto& slot : slots) {
    CHECK(slot.cpus.size() >= 2);
    CHECK(slot.cpus.size() <= 3);
    total += slot.cpus.size();
    seen.insert(slot.cpus.begin(), slot.cpus.end());
  }
  CHECK(total == cpus.size());
  CHECK(seen.size() == cpus.size());
}

TEST_CASE("slots: GPUs are split too, and one slot leaves CUDA_VISIBLE_DEVICES alone") {
  const std::vector<int> cpus{0, 1, 2, 3};
  const std::vector<std::string> gpus{"0", "1", "2", "3"};
  const auto two = plan_slots(2, cpus, gpus);
  CHECK(two[0].gpus == std::vector<std::string>{"0", "1"});
  CHECK(two[1].gpus == std::vector<std::string>{"2", "3"});
  const auto one = plan_slots(1, cpus, gpus);
  CHECK(one[0].cpus == cpus);
  CHECK(one[0].gpus.empty());
}

TEST_CASE("slots: more slots than cores or GPUs is refused with the largest that works") {
  const std::vector<int> cpus{0, 1};
  CHECK_THROWS_WITH(plan_slots(3, cpus, {}),
                    "--parallel 3 needs 3 cores, but this process may run on 2 (0-1): slots would share cores; use "
                    "--parallel 2 at most");
  const std::vector<int> many{0, 1, 2, 3};
  const std::vector<std::string> gpus{"0", "1"};
  CHECK_THROWS_WITH(plan_slots(4, many, gpus),
                    "--parallel 4 needs a GPU per slot, but 2 are visible (0,1): use --parallel 2 at most");
  CHECK_THROWS_AS(plan_slots(0, cpus, {}), util::UsageError);
}

TEST_CASE("slots: CUDA_VISIBLE_DEVICES names the GPUs when set, else the driver's count does") {
  CHECK(sweep::visible_gpus(std::string("2, 5"), 8) == std::vector<std::string>{"2", "5"});
  CHECK(sweep::visible_gpus(std::string(""), 8).empty());
  CHECK(sweep::visible_gpus(std::nullopt, 2) == std::vector<std::string>{"0", "1"});
  CHECK(sweep::visible_gpus(std::nullopt, 0).empty());
}

TEST_CASE("slots: this process's cores and their list format") {
  CHECK_FALSE(sweep::allowed_cpus().empty());
  const std::vector<int> cpus{0, 1, 2, 5, 7, 8};
  CHECK(sweep::cpu_list_text(cpus) == "0-2,5,7-8");
  const std::vector<int> one{3};
  CHECK(sweep::cpu_list_text(one) == "3");
}
