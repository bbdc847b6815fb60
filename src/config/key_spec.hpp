#pragma once
// A config map's keys in one table: name, type, default, constraint and a one-line description
// per key. A sweep's parser reads its map through its table (KeyReader: unknown keys refused, the
// default and the range taken from the table), `ringbench --help TYPE` prints the table, and a
// test holds docs/sweeps/<type>.md against it, so a key added to the table is accepted, defaulted
// and documented at once.
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/node.hpp"

namespace rb::cfg {

enum class KeyType {
  Integer,
  Integers,  // an integer or a list of them
  Number,
  Bool,
  Bytes,  // "64KiB", "1MiB" or a plain integer
  Choice,
  Choices,  // a choice or a list of them
  DType,    // a dtype of the one vocabulary (kernels/dtype_names.hpp): short or long name
  DTypes,
  Text,
  Map,    // its own keys (KeySpec::keys); shown and documented as parent.child
  Other,  // read by the sweep's own code (a list of groups, a policy file, ...)
};

struct KeySpec {
  std::string name;
  KeyType type = KeyType::Other;
  // The default as YAML text, read by the same accessor as a value in the file ("20",
  // "[8, 1024]", "1MiB"); empty where the parser computes it (`fallback_note` says how).
  std::string fallback;
  std::string cuda_fallback;  // the cuda backend's default, where it differs from `fallback`
  std::string fallback_note;  // the default in words: "the world size", "required", ...
  std::int64_t min = INT64_MIN, max = INT64_MAX;  // Integer(s); Bytes: min
  double low = -1e308, high = 1e308;              // Number
  std::vector<std::string> choices;               // Choice(s); DType(s): the short names
  std::string type_name;                          // Other: what the value is
  std::string constraint;  // shown instead of the one the type implies (ranges the world sets)
  std::string description;
  std::vector<KeySpec> keys;  // Map

  KeySpec on_cuda(std::string text) const;   // the cuda backend's default differs
  KeySpec computed(std::string note) const;  // the parser computes the default
  KeySpec limited(std::string text) const;   // the constraint, in words
  KeySpec or_list() const;  // an integer, choice or dtype that may also be a list of them
  std::string type_text() const;
  std::string default_text() const;  // "20", "1GiB (cuda), 32MiB (host)", "the world size"
  std::string constraint_text() const;
};

// The builders a table is written with; `fallback` is YAML text ("" where computed or required).
namespace key {
KeySpec integer(std::string name, std::string fallback, std::int64_t min, std::int64_t max,
                std::string description);
KeySpec number(std::string name, std::string fallback, double low, double high,
               std::string description);
KeySpec flag(std::string name, std::string fallback, std::string description);
KeySpec bytes(std::string name, std::string fallback, std::uint64_t min, std::string description);
KeySpec choice(std::string name, std::string fallback, std::vector<std::string> choices,
               std::string description);
// `names`: the short names (kernels/dtype_names.hpp); their long names are accepted too.
KeySpec dtype(std::string name, std::string fallback, std::vector<std::string> names,
              std::string description);
KeySpec text(std::string name, std::string fallback, std::string description);
KeySpec map(std::string name, std::vector<KeySpec> keys, std::string description);
KeySpec other(std::string name, std::string type_name, std::string fallback_note,
              std::string constraint, std::string description);
KeySpec required(KeySpec spec);  // no default: the parser refuses the map without it
}  // namespace key

// A sweep's table: `type` and `name` (config.cpp reads them), then the sweep's own keys.
std::vector<KeySpec> sweep_keys(const std::string& type, std::vector<KeySpec> keys);

// Every key, a Map's as parent.child after the map itself: what --help and the docs list.
std::vector<KeySpec> flattened(const std::vector<KeySpec>& keys);

// The table for `ringbench --help TYPE`: one entry per key, its type, default and constraint
// on the first line and its description below.
std::string describe_keys(const std::vector<KeySpec>& keys);

// Refuses keys of `node` (a map) that `keys` lacks, with a did-you-mean.
void check_keys(const Node& node, const std::vector<KeySpec>& keys);

// A map read through its table. Construction refuses keys the table lacks (with a did-you-mean);
// each getter checks the value against the key's spec and, where the key is absent, reads the
// spec's default for this backend through the same accessor, so the table is the one source of
// both. A getter given its own `fallback` is for a key whose default the parser computes. The
// table must outlive the reader (tables are function-local statics).
class KeyReader {
 public:
  KeyReader(const Node& node, const std::vector<KeySpec>& keys, Backend backend = Backend::Host);

  const Node& node() const { return node_; }
  bool has(const std::string& key) const { return node_.has(key); }

  std::int64_t integer(const std::string& key) const;
  std::int64_t integer(const std::string& key, std::int64_t fallback) const;
  // Below a bound the run sets (a rank below the world size), within the spec's range too.
  std::int64_t integer_below(const std::string& key, std::int64_t limit) const;
  std::vector<std::int64_t> integers(const std::string& key) const;
  std::vector<std::int64_t> integers(const std::string& key,
                                     const std::vector<std::int64_t>& fallback) const;
  double number(const std::string& key) const;
  double number(const std::string& key, double fallback) const;
  bool flag(const std::string& key) const;
  std::uint64_t bytes(const std::string& key) const;
  std::string choice(const std::string& key) const;
  std::vector<std::string> choices(const std::string& key) const;
  std::vector<std::string> choices(const std::string& key,
                                   const std::vector<std::string>& fallback) const;
  // Choices only this build knows (its kernel paths): the spec says them in words.
  std::vector<std::string> choices(const std::string& key, const std::vector<std::string>& fallback,
                                   const std::vector<std::string>& allowed) const;
  std::string dtype(const std::string& key) const;  // the short name, however spelled
  std::vector<std::string> dtypes(const std::string& key) const;
  std::string text(const std::string& key) const;
  // A Map key: its keys checked against its table; absent, every key takes its default.
  KeyReader map(const std::string& key) const;
  // Reads `key` as its spec's type and drops the value: the check of a value or a default.
  void check(const std::string& key) const;

 private:
  const KeySpec& spec(const std::string& key) const;
  const KeySpec& spec(const std::string& key, KeyType type) const;
  // The node to read `s` from: the map when it has the key, else one holding the default.
  Node source(const KeySpec& s) const;

  Node node_;
  const std::vector<KeySpec>* keys_;
  Backend backend_;
};

}  // namespace rb::cfg
