#pragma once
// Typed, position-aware access to one YAML node of a ringbench config.
// Every accessor validates as it reads and throws ConfigError naming the file,
// line, column, full key path and what was expected, so sweeps never see raw YAML.
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace rb::cfg {

struct Location {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown (missing file, empty document)
  int column = 0;  // 1-based
};

class ConfigError : public std::runtime_error {
 public:
  // key: full dotted path such as "sweeps[1].ring_sizes"; may be empty for whole-file errors.
  ConfigError(Location where, std::string key, std::string message);
  const Location& where() const { return where_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  Location where_;
  std::string key_;
  std::string message_;
};

// Returns the closest candidate (Damerau-free Levenshtein) when it is close enough
// to be a plausible typo, otherwise an empty string.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// items joined by sep ("a, b, c"): lists in messages and in text attributes.
std::string join(const std::vector<std::string>& items, const std::string& sep);

// The most values a list in a config may hold. Sweeps record their lists (seq_lengths,
// ring_sizes, block_rows, causal, ...) as HDF5 attributes of their group, and HDF5 keeps an
// attribute in its object header, at most 64 KiB: 8 bytes a value, about 8180 values. A longer
// list would pass validation and planning and abort every rank when the sweep starts writing, so
// it is refused here, with room to spare for the attribute's name and types.
inline constexpr std::size_t kMaxListValues = 8000;

// Other spellings a choice answers to, as (alias, choice): the long dtype names of the short ones.
using Aliases = std::vector<std::pair<std::string, std::string>>;

class Node {
 public:
  Node() = default;
  Node(YAML::Node node, std::string file, std::string path);

  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  Location location() const;
  const YAML::Node& yaml() const { return node_; }
  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }

  bool has(const std::string& key) const;
  Node child(const std::string& key) const;  // required: error if missing
  Node element(std::size_t index) const;     // for sequences
  std::size_t size() const;                  // sequence length
  std::vector<std::string> keys() const;     // map keys in file order

  // Rejects keys outside `allowed`, with a did-you-mean suggestion.
  void allow_only(const std::vector<std::string>& allowed) const;
  void require_map() const;

  // Optional scalars with defaults; range checks are inclusive.
  std::int64_t get_int(const std::string& key, std::int64_t fallback, std::int64_t min = INT64_MIN,
                       std::int64_t max = INT64_MAX) const;
  std::int64_t require_int(const std::string& key, std::int64_t min = INT64_MIN,
                           std::int64_t max = INT64_MAX) const;
  double get_double(const std::string& key, double fallback, double min = -1e308,
                    double max = 1e308) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::string require_string(const std::string& key) const;
  // An alias is accepted and returned as its choice.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices,
                         const Aliases& aliases = {}) const;
  // Byte counts: plain integers or "64KiB", "1MiB", "2GiB", "1KB", "1MB" (powers of 10).
  std::uint64_t get_bytes(const std::string& key, std::uint64_t fallback,
                          std::uint64_t min = 0) const;

  // A scalar or a sequence of scalars; each element range-checked.
  std::vector<std::int64_t> get_int_list(const std::string& key,
                                         const std::vector<std::int64_t>& fallback,
                                         std::int64_t min = INT64_MIN,
                                         std::int64_t max = INT64_MAX) const;
  std::vector<std::string> get_choice_list(const std::string& key,
                                           const std::vector<std::string>& fallback,
                                           const std::vector<std::string>& choices,
                                           const Aliases& aliases = {}) const;

  // Refuses a list (this node) of more than kMaxListValues values, at the list. The list
  // accessors call it; a sweep that reads a list itself calls it too.
  void check_list_length() const;

  // Throws ConfigError at this node (or at `key` below it when present).
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  std::string key_path(const std::string& key) const;
  YAML::Node node_;
  std::string file_;
  std::string path_;
  // Where this node's key sits in its map: yaml-cpp marks an empty value ("key:" with
  // nothing after it) at the NEXT token, often a later line, so errors about it use this.
  YAML::Mark key_mark_ = YAML::Mark::null_mark();
};

}  // namespace rb::cfg
