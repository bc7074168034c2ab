#include "expctl/serve/assets.hpp"

#include <cstddef>

namespace expctl::serve {

// Defined in the generated assets_data.cpp (cmake/ExpctlEmbed.cmake).
extern const Asset k_assets[];
extern const std::size_t k_asset_count;

std::optional<Asset> find_asset(std::string_view path) {
  for (std::size_t i = 0; i < k_asset_count; ++i) {
    if (k_assets[i].path == path) {
      return k_assets[i];
    }
  }
  return std::nullopt;
}

std::string_view index_page() {
  return find_asset("/")->bytes;
}

}  // namespace expctl::serve
