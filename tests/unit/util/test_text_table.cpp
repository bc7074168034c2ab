#include <catch2/catch.hpp>

#include "expctl/util/text_table.hpp"

TEST_CASE("text_table: aligned columns, underlined header, no trailing spaces") {
  expctl::util::TextTable table({"field", "value"});
  table.set_align(1, expctl::util::TextTable::Align::right);
  table.add_row({"lr", "0.001"});
  table.add_row({"batch_size", "64"});
  CHECK(table.render() ==
        "field       value\n"
        "----------  -----\n"
        "lr          0.001\n"
        "batch_size     64\n");
}
