#include "expctl/launch/hostlist.hpp"

#include <charconv>

#include <fmt/format.h>

#include "expctl/util/strings.hpp"

namespace expctl::launch {

namespace {

using util::Expected;
using util::make_error;

// A typo such as node[1-100000000] must fail instead of allocating gigabytes.
constexpr size_t k_max_hosts = 1 << 20;

Expected<std::vector<std::string>> split_top_level(std::string_view text) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (const char c : text) {
    if (c == '[') {
      if (++depth > 1)
        return make_error("nested \"[\"");
    } else if (c == ']') {
      if (--depth < 0)
        return make_error("unbalanced \"]\"");
    }
    if (c == ',' && depth == 0) {
      items.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0)
    return make_error("unbalanced \"[\"");
  items.push_back(std::move(current));
  return items;
}

Expected<unsigned long> parse_number(std::string_view digits) {
  unsigned long value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return make_error(fmt::format("\"{}\" is not a number", digits));
  }
  return value;
}

// "01-04" -> 01,02,03,04 (padding from the lower bound, as Slurm does); "7" -> 7.
Expected<std::vector<std::string>> expand_range(std::string_view range) {
  const size_t dash = range.find('-');
  const std::string_view low_text = range.substr(0, dash);
  const std::string_view high_text = dash == std::string_view::npos ? low_text : range.substr(dash + 1);
  const auto low = parse_number(low_text);
  const auto high = parse_number(high_text);
  if (!low)
    return tl::unexpected(low.error());
  if (!high)
    return tl::unexpected(high.error());
  if (*high < *low)
    return make_error(fmt::format("range {} runs backwards", range));
  if (*high - *low >= k_max_hosts)
    return make_error(fmt::format("range {} is too large", range));
  std::vector<std::string> out;
  for (unsigned long value = *low; value <= *high; ++value) {
    out.push_back(fmt::format("{:0{}}", value, low_text.size()));
  }
  return out;
}

Expected<std::vector<std::string>> expand_item(std::string_view item) {
  const size_t open = item.find('[');
  if (open == std::string_view::npos) {
    return std::vector<std::string>{std::string(item)};
  }
  const size_t close = item.find(']', open);
  const std::string_view prefix = item.substr(0, open);
  const auto suffixes = expand_item(item.substr(close + 1));
  if (!suffixes)
    return tl::unexpected(suffixes.error());
  std::vector<std::string> out;
  for (const std::string& range : util::split(item.substr(open + 1, close - open - 1), ',')) {
    const auto numbers = expand_range(range);
    if (!numbers)
      return tl::unexpected(numbers.error());
    for (const std::string& number : *numbers) {
      for (const std::string& suffix : *suffixes) {
        out.push_back(fmt::format("{}{}{}", prefix, number, suffix));
        if (out.size() > k_max_hosts)
          return make_error("the hostlist is too large");
      }
    }
  }
  return out;
}

}  // namespace

Expected<std::vector<std::string>> expand_hostlist(std::string_view hostlist) {
  const auto items = split_top_level(hostlist);
  if (!items)
    return tl::unexpected(items.error());
  std::vector<std::string> hosts;
  for (const std::string& item : *items) {
    if (item.empty())
      return make_error("empty host name");
    auto expanded = expand_item(item);
    if (!expanded)
      return expanded;
    hosts.insert(hosts.end(), expanded->begin(), expanded->end());
    if (hosts.size() > k_max_hosts)
      return make_error("the hostlist is too large");
  }
  return hosts;
}

Expected<std::string> first_host(std::string_view hostlist) {
  auto hosts = expand_hostlist(hostlist);
  if (!hosts)
    return tl::unexpected(hosts.error());
  return std::move(hosts->front());
}

Expected<std::vector<int>> expand_tasks_per_node(std::string_view text) {
  std::vector<int> counts;
  for (const std::string& item : util::split(text, ',')) {
    const size_t paren = item.find("(x");
    const auto count = parse_number(std::string_view(item).substr(0, paren));
    if (!count)
      return tl::unexpected(count.error());
    unsigned long repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')')
        return make_error(fmt::format("\"{}\" lacks its closing \")\"", item));
      const auto parsed = parse_number(std::string_view(item).substr(paren + 2, item.size() - paren - 3));
      if (!parsed)
        return tl::unexpected(parsed.error());
      repeat = *parsed;
    }
    if (repeat > k_max_hosts || counts.size() + repeat > k_max_hosts)
      return make_error("the list is too large");
    counts.insert(counts.end(), repeat, static_cast<int>(*count));
  }
  return counts;
}

}  // namespace expctl::launch
