#include <catch2/catch.hpp>

#include "expctl/launch/hostlist.hpp"

using namespace expctl::launch;
using Hosts = std::vector<std::string>;

TEST_CASE("hostlist: plain names, ranges with padding and lists", "[launch][hostlist]") {
  CHECK(*expand_hostlist("gpu3") == Hosts{"gpu3"});
  CHECK(*expand_hostlist("node[01-04,07],gpu3") == Hosts{"node01", "node02", "node03", "node04", "node07", "gpu3"});
  CHECK(*expand_hostlist("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(*expand_hostlist("a,b[1-2]-ib") == Hosts{"a", "b1-ib", "b2-ib"});
  CHECK(*expand_hostlist("rack[1-2]-n[1-2]") == Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"});
  CHECK(*first_host("node[01-04,07],gpu3") == "node01");
}

TEST_CASE("hostlist: malformed lists say what is wrong", "[launch][hostlist]") {
  CHECK(expand_hostlist("node[01-04").error().message == "unbalanced \"[\"");
  CHECK(expand_hostlist("node01]").error().message == "unbalanced \"]\"");
  CHECK(expand_hostlist("node[[1]]").error().message == "nested \"[\"");
  CHECK(expand_hostlist("node[9-3]").error().message == "range 9-3 runs backwards");
  CHECK(expand_hostlist("node[a-b]").error().message == "\"a\" is not a number");
  CHECK(expand_hostlist("a,,b").error().message == "empty host name");
  CHECK(expand_hostlist("").error().message == "empty host name");
  CHECK(expand_hostlist("n[0-99999999]").error().message == "range 0-99999999 is too large");
}

TEST_CASE("hostlist: Slurm's tasks-per-node lists", "[launch][hostlist]") {
  CHECK(*expand_tasks_per_node("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(*expand_tasks_per_node("4") == std::vector<int>{4});
  CHECK(expand_tasks_per_node("2(x3").error().message == "\"2(x3\" lacks its closing \")\"");
  CHECK(expand_tasks_per_node("x").error().message == "\"x\" is not a number");
}
