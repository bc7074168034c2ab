#pragma once
/// Aligned plain-text tables for `list`, `show`, `verify`, `env` and reports.

#include <string>
#include <vector>

namespace expctl::util {

class TextTable {
 public:
  enum class Align { left, right };

  explicit TextTable(std::vector<std::string> header);
  /// Column alignment (default left); numbers read best right-aligned.
  void set_align(size_t column, Align align);
  /// Adds a row; missing cells are blank, extra cells are an internal error.
  void add_row(std::vector<std::string> cells);
  size_t rows() const { return m_rows.size(); }
  /// Columns separated by two spaces, header underlined with dashes, no trailing spaces.
  std::string render() const;

 private:
  std::vector<std::string> m_header;
  std::vector<Align> m_align;
  std::vector<std::vector<std::string>> m_rows;
};

}  // namespace expctl::util
