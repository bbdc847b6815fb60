// Key tables: the builders, what --help shows of a key, and KeyReader, which reads a map's
// values and its defaults through the same Node accessors, so a default obeys the key's own
// constraint and an error reads the same whether or not a table is involved.
#include "config/key_spec.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "dtype_names.hpp"

namespace rb::cfg {
namespace {

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string range_text(const std::string& min, const std::string& max, bool has_min, bool has_max) {
  if (has_min && has_max) return min + " .. " + max;
  if (has_min) return ">= " + min;
  if (has_max) return "<= " + max;
  return "";
}

KeySpec make(std::string name, KeyType type, std::string fallback, std::string description) {
  KeySpec s;
  s.name = std::move(name);
  s.type = type;
  s.fallback = std::move(fallback);
  s.description = std::move(description);
  return s;
}

// The long names of the short ones in `names`, as aliases a config may use.
Aliases dtype_aliases(const std::vector<std::string>& names) {
  Aliases out;
  for (const std::string& name : names) {
    const std::string_view long_name = long_dtype_name(name);
    if (long_name != name) out.emplace_back(std::string(long_name), name);
  }
  return out;
}

void flatten_into(const std::vector<KeySpec>& keys, const std::string& prefix,
                  std::vector<KeySpec>& out) {
  for (const KeySpec& k : keys) {
    KeySpec shown = k;
    shown.name = prefix + k.name;
    shown.keys.clear();
    out.push_back(shown);
    if (k.type == KeyType::Map) flatten_into(k.keys, shown.name + ".", out);
  }
}

}  // namespace

KeySpec KeySpec::on_cuda(std::string text) const {
  KeySpec s = *this;
  s.cuda_fallback = std::move(text);
  return s;
}

KeySpec KeySpec::computed(std::string note) const {
  KeySpec s = *this;
  s.fallback.clear();
  s.fallback_note = std::move(note);
  return s;
}

KeySpec KeySpec::limited(std::string text) const {
  KeySpec s = *this;
  s.constraint = std::move(text);
  return s;
}

KeySpec KeySpec::or_list() const {
  KeySpec s = *this;
  if (type == KeyType::Integer) s.type = KeyType::Integers;
  if (type == KeyType::Choice) s.type = KeyType::Choices;
  if (type == KeyType::DType) s.type = KeyType::DTypes;
  return s;
}

std::string KeySpec::type_text() const {
  // In KeyType's order.
  static const char* const kTypeTexts[] = {
      "integer",        "integer or list", "number",        "bool",   "byte size", "choice",
      "choice or list", "dtype",           "dtype or list", "string", "map"};
  if (type == KeyType::Other) return type_name;
  return kTypeTexts[static_cast<int>(type)];
}

std::string KeySpec::default_text() const {
  if (!fallback_note.empty()) return fallback_note;
  if (fallback.empty()) return type == KeyType::Map ? "its keys' defaults" : "none";
  if (cuda_fallback.empty()) return fallback;
  return cuda_fallback + " (cuda), " + fallback + " (host)";
}

std::string KeySpec::constraint_text() const {
  if (!constraint.empty()) return constraint;
  switch (type) {
    case KeyType::Integer:
    case KeyType::Integers:
      return range_text(std::to_string(min), std::to_string(max), min != INT64_MIN,
                        max != INT64_MAX);
    case KeyType::Number:
      return range_text(number_text(low), number_text(high), low > -1e308, high < 1e308);
    case KeyType::Bytes:
      return ">= " + std::to_string(min);
    case KeyType::Choice:
    case KeyType::Choices:
      return join(choices, "|");
    case KeyType::DType:
    case KeyType::DTypes: {
      std::vector<std::string> aliases;
      for (const auto& alias : dtype_aliases(choices)) aliases.push_back(alias.first);
      return join(choices, "|") + (aliases.empty() ? "" : " (or " + join(aliases, "|") + ")");
    }
    default:
      return "";
  }
}

namespace key {

KeySpec integer(std::string name, std::string fallback, std::int64_t min, std::int64_t max,
                std::string description) {
  KeySpec s = make(std::move(name), KeyType::Integer, std::move(fallback), std::move(description));
  s.min = min;
  s.max = max;
  return s;
}

KeySpec choice(std::string name, std::string fallback, std::vector<std::string> choices,
               std::string description) {
  KeySpec s = make(std::move(name), KeyType::Choice, std::move(fallback), std::move(description));
  s.choices = std::move(choices);
  return s;
}

KeySpec flag(std::string name, std::string fallback, std::string description) {
  return make(std::move(name), KeyType::Bool, std::move(fallback), std::move(description));
}

// A number's range is a double's; the integer's fields are left unbounded.
KeySpec number(std::string name, std::string fallback, double low, double high,
               std::string description) {
  KeySpec s = make(std::move(name), KeyType::Number, std::move(fallback), std::move(description));
  std::tie(s.low, s.high) = std::make_pair(low, high);
  return s;
}

KeySpec dtype(std::string name, std::string fallback, std::vector<std::string> names,
              std::string description) {
  KeySpec s =
      choice(std::move(name), std::move(fallback), std::move(names), std::move(description));
  s.type = KeyType::DType;
  return s;
}

KeySpec bytes(std::string name, std::string fallback, std::uint64_t min, std::string description) {
  KeySpec s = integer(std::move(name), std::move(fallback), static_cast<std::int64_t>(min),
                      INT64_MAX, std::move(description));
  s.type = KeyType::Bytes;
  return s;
}

KeySpec text(std::string name, std::string fallback, std::string description) {
  return make(std::move(name), KeyType::Text, std::move(fallback), std::move(description));
}

KeySpec map(std::string name, std::vector<KeySpec> keys, std::string description) {
  KeySpec s = make(std::move(name), KeyType::Map, "", std::move(description));
  s.keys = std::move(keys);
  return s;
}

KeySpec other(std::string name, std::string type_name, std::string fallback_note,
              std::string constraint, std::string description) {
  KeySpec s = make(std::move(name), KeyType::Other, "", std::move(description));
  s.type_name = std::move(type_name);
  s.fallback_note = std::move(fallback_note);
  s.constraint = std::move(constraint);
  return s;
}

KeySpec required(KeySpec spec) {
  return spec.computed("required");
}

}  // namespace key

std::vector<KeySpec> sweep_keys(const std::string& type, std::vector<KeySpec> keys) {
  std::vector<KeySpec> out = {
      key::text("type", "", "the sweep type: " + type).computed("required"),
      key::text("name", "", "the HDF5 group under /sweeps; unique in the file")
          .computed("the type")};
  out.insert(out.end(), std::make_move_iterator(keys.begin()), std::make_move_iterator(keys.end()));
  return out;
}

std::vector<KeySpec> flattened(const std::vector<KeySpec>& keys) {
  std::vector<KeySpec> out;
  flatten_into(keys, "", out);
  return out;
}

std::string describe_keys(const std::vector<KeySpec>& keys) {
  std::string out;
  for (const KeySpec& k : flattened(keys)) {
    out += "  " + k.name + ": " + k.type_text() + ", default " + k.default_text();
    const std::string limit = k.constraint_text();
    if (!limit.empty()) out += "; " + limit;
    out += "\n      " + k.description + "\n";
  }
  return out;
}

void check_keys(const Node& node, const std::vector<KeySpec>& keys) {
  std::vector<std::string> allowed;
  for (const KeySpec& k : keys) allowed.push_back(k.name);
  node.allow_only(allowed);
}

KeyReader::KeyReader(const Node& node, const std::vector<KeySpec>& keys, Backend backend)
    : node_(node), keys_(&keys), backend_(backend) {
  const YAML::Node& y = node_.yaml();
  if (!y.IsDefined() || (y.IsNull() && y.Mark().is_null())) return;  // absent: all defaults
  check_keys(node_, keys);
}

const KeySpec& KeyReader::spec(const std::string& key) const {
  for (const KeySpec& k : *keys_)
    if (k.name == key) return k;
  throw std::logic_error("key '" + key + "' is not in its table");
}

const KeySpec& KeyReader::spec(const std::string& key, KeyType type) const {
  const KeySpec& k = spec(key);
  if (k.type != type)
    throw std::logic_error("key '" + key + "' is read as another type than its spec's");
  return k;
}

Node KeyReader::source(const KeySpec& s) const {
  if (node_.has(s.name)) return node_;
  const std::string& text =
      backend_ == Backend::Cuda && !s.cuda_fallback.empty() ? s.cuda_fallback : s.fallback;
  if (text.empty())
    throw std::logic_error("key '" + s.name + "' has no default in its table; pass one");
  YAML::Node holder(YAML::NodeType::Map);
  holder[s.name] = YAML::Load(text);
  return Node(holder, "<the default of " + s.name + ">", node_.path());
}

std::int64_t KeyReader::integer(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Integer);
  return source(s).get_int(key, 0, s.min, s.max);
}

std::int64_t KeyReader::integer(const std::string& key, std::int64_t fallback) const {
  const KeySpec& s = spec(key, KeyType::Integer);
  return node_.get_int(key, fallback, s.min, s.max);
}

std::int64_t KeyReader::integer_below(const std::string& key, std::int64_t limit) const {
  const KeySpec& s = spec(key, KeyType::Integer);
  return source(s).get_int(key, 0, s.min, std::min(s.max, limit - 1));
}

std::vector<std::int64_t> KeyReader::integers(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Integers);
  return source(s).get_int_list(key, {}, s.min, s.max);
}

std::vector<std::int64_t> KeyReader::integers(const std::string& key,
                                              const std::vector<std::int64_t>& fallback) const {
  const KeySpec& s = spec(key, KeyType::Integers);
  return node_.get_int_list(key, fallback, s.min, s.max);
}

double KeyReader::number(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Number);
  return source(s).get_double(key, 0, s.low, s.high);
}

double KeyReader::number(const std::string& key, double fallback) const {
  const KeySpec& s = spec(key, KeyType::Number);
  return node_.get_double(key, fallback, s.low, s.high);
}

bool KeyReader::flag(const std::string& key) const {
  return source(spec(key, KeyType::Bool)).get_bool(key, false);
}

std::uint64_t KeyReader::bytes(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Bytes);
  return source(s).get_bytes(key, 0, static_cast<std::uint64_t>(s.min));
}

std::string KeyReader::choice(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Choice);
  return source(s).get_choice(key, "", s.choices);
}

std::vector<std::string> KeyReader::choices(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Choices);
  return source(s).get_choice_list(key, {}, s.choices);
}

std::vector<std::string> KeyReader::choices(const std::string& key,
                                            const std::vector<std::string>& fallback) const {
  const KeySpec& s = spec(key, KeyType::Choices);
  return node_.get_choice_list(key, fallback, s.choices);
}

std::vector<std::string> KeyReader::choices(const std::string& key,
                                            const std::vector<std::string>& fallback,
                                            const std::vector<std::string>& allowed) const {
  spec(key, KeyType::Choices);
  return node_.get_choice_list(key, fallback, allowed);
}

std::string KeyReader::dtype(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::DType);
  return source(s).get_choice(key, "", s.choices, dtype_aliases(s.choices));
}

std::vector<std::string> KeyReader::dtypes(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::DTypes);
  return source(s).get_choice_list(key, {}, s.choices, dtype_aliases(s.choices));
}

std::string KeyReader::text(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Text);
  return source(s).get_string(key, "");
}

void KeyReader::check(const std::string& key) const {
  const KeySpec& s = spec(key);
  if (s.type == KeyType::Map || s.type == KeyType::Other) return;  // the parser's own code
  const Node from = source(s);
  switch (s.type) {
    case KeyType::Integer:
    case KeyType::Integers:
      from.get_int_list(key, {}, s.min, s.max);  // a scalar reads as a list of one
      break;
    case KeyType::Number:
      from.get_double(key, 0, s.low, s.high);
      break;
    case KeyType::Bool:
      from.get_bool(key, false);
      break;
    case KeyType::Bytes:
      from.get_bytes(key, 0, static_cast<std::uint64_t>(s.min));
      break;
    case KeyType::Text:
      from.get_string(key, "");
      break;
    default:  // the choices and dtypes
      from.get_choice_list(key, {}, s.choices, dtype_aliases(s.choices));
  }
}

KeyReader KeyReader::map(const std::string& key) const {
  const KeySpec& s = spec(key, KeyType::Map);
  if (!node_.has(key)) return KeyReader(Node(), s.keys, backend_);
  const Node child = node_.child(key);
  child.require_map();
  return KeyReader(child, s.keys, backend_);
}

}  // namespace rb::cfg
