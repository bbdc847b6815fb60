#pragma once
// Limits checked on a config's text before yaml-cpp builds its tree: the tree of a few lines of
// nested aliases (`&a [..]`, `*a` repeated) holds billions of nodes, and building or walking it
// would keep every rank busy for minutes before any check could run.
#include <cstddef>
#include <cstdint>
#include <string>

namespace rb::cfg {

// Nodes the expanded document may hold (every scalar, null, sequence and map, each alias counted
// as the size of what its anchor holds). Real configs have a few thousand.
inline constexpr std::uint64_t kMaxYamlNodes = 1'000'000;

// Streams the text's YAML events (no tree is built; an alias costs O(1)) and throws a
// ConfigError naming the file and the line where the expansion passes `max_nodes`, the line and
// key path of an alias inside the collection its anchor names (`x: &a [*a]`: a value containing
// itself, on which every walk of the tree would recurse until the stack overflows), or the line
// where a quoted scalar opens whose quote is never closed (yaml-cpp ends such a scalar at the
// end of the file without an error, or reports a later line). A syntax error at or after a key
// longer than YAML's 1024 characters is that key (text_checks.hpp), named at its start; other
// syntax errors are left to the parser that follows (this returns on them).
void check_yaml_expansion(const std::string& text, const std::string& file,
                          std::uint64_t max_nodes = kMaxYamlNodes);

// Whether the quoted scalar whose opening quote (' or ") is at text[open] has a closing quote
// (YAML's rules: \" escapes in double quotes, '' in single quotes).
bool quote_is_closed(const std::string& text, std::size_t open);

}  // namespace rb::cfg
