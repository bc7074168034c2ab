#pragma once
/// The dashboard's files, compiled into the binary (cmake/ExpctlEmbed.cmake turns each into a
/// byte array at build time): the page, its script and style, and Debian's Chart.js. The server
/// answers only these names; nothing is read from disk or fetched at run time.

#include <optional>
#include <string_view>

namespace expctl::serve {

struct Asset {
  std::string_view path;          ///< "/assets/app.js"
  std::string_view content_type;  ///< with charset for text
  std::string_view bytes;
};

/// The asset served at `path`, or nullopt.
std::optional<Asset> find_asset(std::string_view path);

/// The page every view loads (the page rows of routes.hpp), with their list and header links
/// filled in from the route table.
std::string_view index_page();

}  // namespace expctl::serve
