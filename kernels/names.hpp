#pragma once
// The words that name an enum's values in configs, output files and messages: each enum's in one
// table of {value, name} rows, read both ways by these helpers, so that the spelling, the parser
// and the list of choices cannot drift apart. A row is anything that splits into (value, name):
// std::pair, or an aggregate such as attn::DTypeName. Here in the kernels layer because the
// kernel path table speaks of dtypes too; src/ reads its tables with the same helpers.
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rb {

namespace names_detail {
template <class Row>
auto value_in(const Row& row) {
  const auto& [value, name] = row;
  return value;
}
}  // namespace names_detail

// The value type of a table's rows.
template <class Row>
using NamedValue = decltype(names_detail::value_in(std::declval<const Row&>()));

// Items joined by sep ("a, b, c"): lists of names in messages.
inline std::string joined(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

// The name of `v`, or `otherwise` where the table has no row for it.
template <class Row, std::size_t N, class Value>
const char* name_of(const Row (&table)[N], Value v, const char* otherwise = "?") {
  for (const auto& [value, name] : table)
    if (value == v) return name;
  return otherwise;
}

// Every name, in the table's order: the choices a config key accepts.
template <class Row, std::size_t N>
std::vector<std::string> names_of(const Row (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& [value, name] : table) out.push_back(name);
  return out;
}

// The value named `text`, if any row names it.
template <class Row, std::size_t N>
std::optional<NamedValue<Row>> find_value(const Row (&table)[N], std::string_view text) {
  for (const auto& [value, name] : table)
    if (text == name) return value;
  return std::nullopt;
}

// The value named `text`; else std::invalid_argument "unknown WHAT 'TEXT' (a, b, c)".
template <class Row, std::size_t N>
NamedValue<Row> value_of(const Row (&table)[N], const std::string& text, const std::string& what) {
  if (const auto v = find_value(table, text)) return *v;
  throw std::invalid_argument("unknown " + what + " '" + text + "' (" + joined(names_of(table)) +
                              ")");
}

}  // namespace rb
