#include "expctl/serve/assets.hpp"

#include <cstddef>
#include <string>

#include "expctl/serve/routes.hpp"
#include "expctl/util/error.hpp"

namespace expctl::serve {

// Defined in the generated assets_data.cpp (cmake/ExpctlEmbed.cmake).
extern const Asset k_assets[];
extern const std::size_t k_asset_count;

namespace {

/// `text` with its one `marker` replaced by `with`.
std::string replace_marker(std::string text, std::string_view marker, const std::string& with) {
  const auto at = text.find(marker);
  EXPCTL_ASSERT(at != std::string::npos && text.find(marker, at + 1) == std::string::npos,
                "index.html must hold {} once", marker);
  return text.replace(at, marker.size(), with);
}

}  // namespace

std::optional<Asset> find_asset(std::string_view path) {
  for (std::size_t i = 0; i < k_asset_count; ++i) {
    if (k_assets[i].path == path) {
      return k_assets[i];
    }
  }
  return std::nullopt;
}

std::string_view index_page() {
  // The page list and the header's links come from the route table (routes.hpp), filled in once.
  static const std::string page =
      replace_marker(replace_marker(std::string(find_asset("/")->bytes), "@PAGE_LIST@", page_list_json()), "@PAGE_NAV@",
                     page_nav_html());
  return page;
}

}  // namespace expctl::serve
