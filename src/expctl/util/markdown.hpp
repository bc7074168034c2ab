#pragma once
/// Text from runs, specs, suites and programs placed into Markdown (`compare --format markdown`,
/// the nightly summary, `sweep --report --format markdown`), which CI posts as a pull request's
/// comment or a job's summary. A run name, a metric name a program logged or a spec's value must
/// stay that text: never a link, an image, HTML, or the end of a table cell or of a line.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::util {

/// `text` as literal Markdown text: '\', '[', ']', '<', '>', '&' and '|' backslash-escaped (no
/// link, image, HTML tag or entity, table cell end can start in it), line breaks and other control
/// characters as spaces (a list item or table row stays one line). Emphasis and code marks ('*',
/// '_', '`') are left: the product's own texts use code spans, and they cannot reach outside the
/// line.
std::string md_text(std::string_view text);

/// `text` as one inline code span, shown as it is: fenced by more backticks than its longest run
/// of them; '|' as "\|" (GitHub's tables end a cell there even inside code); line breaks and
/// other control characters as spaces.
std::string md_code(std::string_view text);

/// A table row's cells as Markdown: md_text of each, or md_code of those in `code_columns`.
std::vector<std::string> md_cells(const std::vector<std::string>& cells,
                                  const std::vector<std::size_t>& code_columns = {});

/// "| a | b |\n" of cells already Markdown (md_cells).
std::string md_row(const std::vector<std::string>& markdown_cells);

}  // namespace expctl::util
