// Typed access to ringbench YAML nodes. yaml-cpp converts loosely (as<int> reads "010" as
// octal, as<std::string> accepts "5" and 5 alike, duplicate keys are silently kept), so the
// accessors here parse scalars themselves and treat anything unexpected as a ConfigError
// that names the file, line, column, key path, what was expected and what was found.
#include "config/node.hpp"

#include "config/bytes.hpp"
#include "config/text_checks.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>

namespace rb::cfg {
namespace {

// The message is a single line a terminal shows as it is (the driver prints one error per line
// and tools grep them): newlines become spaces, and bytes that are not UTF-8 (a name in
// Latin-1, a binary file) or control characters are written \xNN.
std::string one_line(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_length(s, i);
    if (c == '\n' || c == '\r') {
      out += ' ';
      ++i;
    } else if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7F) && c != '\t')) {
      out += std::string("\\x") + hex[c >> 4] + hex[c & 0xF];
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string format_what(const Location& where, const std::string& key, const std::string& message) {
  std::string out = where.file.empty() ? std::string("<config>") : where.file;
  if (where.line > 0) {
    out += ":" + std::to_string(where.line);
    if (where.column > 0) out += ":" + std::to_string(where.column);
  }
  out += ": ";
  if (!key.empty()) out += "key '" + key + "': ";
  return one_line(out + message);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::size_t levenshtein(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// How a found value is shown after "got": short, one line, never the whole document.
std::string describe(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "an empty value (null)";
    case YAML::NodeType::Sequence:
      return n.size() == 0 ? "an empty list []" : "a list";
    case YAML::NodeType::Map:
      return n.size() == 0 ? "an empty map {}" : "a map";
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      s = one_line(s);
      // A quoted scalar is a string in YAML even when it looks like a number.
      if (n.Tag() == "!") return "the string \"" + s + "\"";
      if (s.empty()) return "an empty string";
      // Numbers read best bare ("got -2"), words quoted ("got 'abc'").
      if (s.find_first_of("0123456789") != std::string::npos &&
          s.find_first_not_of("0123456789+-.eE") == std::string::npos)
        return s;
      return "'" + s + "'";
    }
    default:
      return "an undefined value";
  }
}

bool is_plain_scalar(const YAML::Node& n) {
  return n.IsScalar() && n.Tag() != "!";
}

// The value was quoted although a number or bool was expected: say how to fix it.
std::string quote_hint(const YAML::Node& n) {
  return (n.IsScalar() && n.Tag() == "!") ? " (remove the quotes)" : "";
}

enum class IntParse { Ok, NotAnInteger, OutOfRange };

// Decimal with an optional sign, or 0x-prefixed hex. No octal: "010" is ten.
IntParse parse_int(const std::string& text, std::int64_t& value) {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  int base = 10;
  if (text.size() - i > 2 && text[i] == '0' && (text[i + 1] == 'x' || text[i + 1] == 'X')) {
    base = 16;
    i += 2;
  }
  if (i == text.size()) return IntParse::NotAnInteger;
  unsigned long long magnitude = 0;
  bool overflow = false;
  for (; i < text.size(); ++i) {
    int digit;
    char c = text[i];
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else
      return IntParse::NotAnInteger;
    if (magnitude > (~0ULL - digit) / base)
      overflow = true;
    else
      magnitude = magnitude * base + digit;
  }
  const unsigned long long limit =
      negative ? 1ULL + static_cast<unsigned long long>(INT64_MAX) : INT64_MAX;
  if (overflow || magnitude > limit) return IntParse::OutOfRange;
  value =
      negative ? static_cast<std::int64_t>(0ULL - magnitude) : static_cast<std::int64_t>(magnitude);
  return IntParse::Ok;
}

std::string int_expectation(std::int64_t min, std::int64_t max) {
  if (min == INT64_MIN && max == INT64_MAX) return "an integer";
  if (max == INT64_MAX) return "an integer >= " + std::to_string(min);
  if (min == INT64_MIN) return "an integer <= " + std::to_string(max);
  return "an integer between " + std::to_string(min) + " and " + std::to_string(max);
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string double_expectation(double min, double max) {
  bool low = min > -1e308, high = max < 1e308;
  if (!low && !high) return "a number";
  if (!high) return "a number >= " + number_text(min);
  if (!low) return "a number <= " + number_text(max);
  return "a number between " + number_text(min) + " and " + number_text(max);
}

// Validates `v` as an integer in [min, max]; errors point at v.
std::int64_t int_of(const Node& v, std::int64_t min, std::int64_t max) {
  const YAML::Node& y = v.yaml();
  const std::string expected = "expected " + int_expectation(min, max);
  if (!is_plain_scalar(y)) v.fail("", expected + ", got " + describe(y) + quote_hint(y));
  std::int64_t value = 0;
  switch (parse_int(y.Scalar(), value)) {
    case IntParse::NotAnInteger:
      v.fail("", expected + ", got " + describe(y));
    case IntParse::OutOfRange:
      v.fail("", expected + ", got " + describe(y) + ", which does not fit in 64 bits");
    case IntParse::Ok:
      break;
  }
  if (value < min || value > max) v.fail("", expected + ", got " + std::to_string(value));
  return value;
}

std::string string_of(const Node& v) {
  const YAML::Node& y = v.yaml();
  if (!y.IsScalar()) v.fail("", "expected a string, got " + describe(y));
  // The config reader refuses these first (yaml_guard.cpp); a Node built from YAML::Load alone
  // (a sweep's own document) reaches here: a NUL would cut the string short where it is used.
  if (y.Scalar().find('\0') != std::string::npos)
    v.fail("",
           "the value contains a NUL byte (\\0), which would cut it short where it is used; "
           "remove it");
  return y.Scalar();
}

// "one of a|b|c", and the aliases after it: "one of fp32|bf16 (or float32|bfloat16)".
std::string one_of(const std::vector<std::string>& choices, const Aliases& aliases) {
  std::vector<std::string> other;
  for (const auto& alias : aliases) other.push_back(alias.first);
  return "one of " + join(choices, "|") + (other.empty() ? "" : " (or " + join(other, "|") + ")");
}

std::string choice_of(const Node& v, const std::vector<std::string>& choices,
                      const Aliases& aliases) {
  const std::string expected = "expected " + one_of(choices, aliases);
  const YAML::Node& y = v.yaml();
  if (!y.IsScalar()) v.fail("", expected + ", got " + describe(y));
  const std::string s = y.Scalar();
  if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
  for (const auto& [alias, choice] : aliases)
    if (s == alias) return choice;
  std::string message = expected + ", got '" + one_line(s) + "'";
  std::vector<std::string> spellings = choices;
  for (const auto& alias : aliases) spellings.push_back(alias.first);
  std::string suggestion = did_you_mean(s, spellings);
  if (!suggestion.empty()) message += "; did you mean '" + suggestion + "'?";
  v.fail("", message);
}

// Byte sizes are parsed by rb::parse_bytes (config/bytes.hpp), shared with the command line;
// here only the config's wording of what went wrong (expected, suffix, did you mean).
std::uint64_t bytes_of(const Node& v, std::uint64_t min) {
  const YAML::Node& y = v.yaml();
  const std::string expected =
      "expected a byte size (a non-negative integer, optionally followed by " +
      join(byte_suffixes(), ", ") + ")";
  if (!y.IsScalar()) v.fail("", expected + ", got " + describe(y));
  const std::string text = y.Scalar();
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) v.fail("", expected + ", got '" + one_line(text) + "'");
  const std::optional<std::uint64_t> parsed = parse_bytes(text);
  if (!parsed) {
    std::size_t s = digits;
    if (s < text.size() && text[s] == ' ') ++s;  // "64 MiB"
    const std::string suffix = text.substr(s);
    const std::vector<std::string> known = byte_suffixes();
    if (std::find(known.begin(), known.end(), suffix) != known.end() || suffix.empty())
      v.fail("", "byte size '" + one_line(text) + "' does not fit in 64 bits");
    std::string message = "expected a byte-size suffix " + join(known, "|") + ", got '" +
                          one_line(suffix) + "' in '" + one_line(text) + "'";
    const std::string suggestion = did_you_mean(suffix, known);
    if (!suggestion.empty()) message += "; did you mean '" + suggestion + "'?";
    v.fail("", message);
  }
  if (*parsed < min) {
    std::string got = std::to_string(*parsed);
    if (got != text) got = "'" + one_line(text) + "' (" + got + " bytes)";
    v.fail("", "expected a byte size >= " + std::to_string(min) + ", got " + got);
  }
  return *parsed;
}

// The (key, value) pair for `key`, first occurrence; yaml-cpp's own lookup converts keys
// with as<std::string>, which would also match non-scalar keys in surprising ways.
std::optional<std::pair<YAML::Node, YAML::Node>> find_entry(const YAML::Node& map,
                                                            const std::string& key) {
  if (!map.IsDefined() || !map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key)
      return std::make_pair(it->first, it->second);
  return std::nullopt;
}

// A default-constructed Node (an absent optional section): accessors return fallbacks.
bool is_unset(const Node& n) {
  const YAML::Node& y = n.yaml();
  return !y.IsDefined() || (y.IsNull() && y.Mark().is_null());
}

Location location_of(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return Location{file, 0, 0};
  return Location{file, mark.line + 1, mark.column + 1};
}

}  // namespace

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

ConfigError::ConfigError(Location where, std::string key, std::string message)
    : std::runtime_error(format_what(where, key, message)),
      where_(std::move(where)),
      key_(std::move(key)),
      message_(std::move(message)) {}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.empty()) return "";
  // A case slip ("Host", "MIB") is the likeliest typo; prefer it over edit distance.
  for (const std::string& c : candidates)
    if (lower(c) == lower(word)) return c;
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    std::size_t d = levenshtein(word, c);
    // Never "suggest" a word that shares nothing with the typo (e.g. "x" -> "y").
    if (d >= std::max(word.size(), c.size())) continue;
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

Node::Node(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

Location Node::location() const {
  if (!node_.IsDefined()) return location_of(file_, key_mark_);
  YAML::Mark mark = node_.Mark();
  // An empty value is marked at the next token, possibly lines below its key.
  if (node_.IsNull() && !key_mark_.is_null() && (mark.is_null() || mark.line != key_mark_.line))
    mark = key_mark_;
  return location_of(file_, mark);
}

std::string Node::key_path(const std::string& key) const {
  if (key.empty()) return path_;
  return path_.empty() ? key : path_ + "." + key;
}

void Node::fail(const std::string& key, const std::string& message) const {
  if (!key.empty() && has(key)) {
    Node value = child(key);
    throw ConfigError(value.location(), value.path(), message);
  }
  throw ConfigError(location(), key_path(key), message);
}

bool Node::has(const std::string& key) const {
  return find_entry(node_, key).has_value();
}

Node Node::child(const std::string& key) const {
  require_map();
  auto entry = find_entry(node_, key);
  if (!entry) fail("", "missing required key '" + key + "'");
  Node out(entry->second, file_, key_path(key));
  out.key_mark_ = entry->first.Mark();
  return out;
}

Node Node::element(std::size_t index) const {
  if (!node_.IsSequence()) fail("", "expected a list, got " + describe(node_));
  if (index >= node_.size())
    fail("", "list index " + std::to_string(index) + " is out of range (the list has " +
                 std::to_string(node_.size()) + " elements)");
  return Node(node_[index], file_, path_ + "[" + std::to_string(index) + "]");
}

std::size_t Node::size() const {
  return node_.IsDefined() ? node_.size() : 0;
}

std::vector<std::string> Node::keys() const {
  require_map();
  std::vector<std::string> out;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar())
      throw ConfigError(location_of(file_, it->first.Mark()), path_,
                        "expected a plain key, got " + describe(it->first) + " as a key");
    out.push_back(it->first.Scalar());
  }
  return out;
}

void Node::require_map() const {
  if (!node_.IsDefined() || !node_.IsMap()) fail("", "expected a map, got " + describe(node_));
  // yaml-cpp keeps both entries of a duplicated key and lookups see only the first, so a
  // repeated key would silently ignore the user's second value.
  std::map<std::string, int> seen;  // key -> 1-based line of its first occurrence
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) continue;  // reported by keys()
    const std::string& k = it->first.Scalar();
    Location here = location_of(file_, it->first.Mark());
    auto [pos, inserted] = seen.emplace(k, here.line);
    if (!inserted)
      throw ConfigError(here, key_path(k),
                        "duplicate key '" + k + "' in the same map, at lines " +
                            std::to_string(pos->second) + " and " + std::to_string(here.line) +
                            "; keep only one");
  }
}

void Node::allow_only(const std::vector<std::string>& allowed) const {
  const std::vector<std::string> present = keys();  // also checks the map and duplicates
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string& k = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    std::string message = "unknown key '" + k + "'";
    std::string suggestion = did_you_mean(k, allowed);
    if (!suggestion.empty())
      message += "; did you mean '" + suggestion + "'?";
    else if (allowed.empty())
      message += "; this map takes no keys";
    else
      message += "; expected one of: " + join(allowed, ", ");
    throw ConfigError(location_of(file_, it->first.Mark()), key_path(k), message);
  }
}

std::int64_t Node::get_int(const std::string& key, std::int64_t fallback, std::int64_t min,
                           std::int64_t max) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  return int_of(child(key), min, max);
}

std::int64_t Node::require_int(const std::string& key, std::int64_t min, std::int64_t max) const {
  return int_of(child(key), min, max);
}

double Node::get_double(const std::string& key, double fallback, double min, double max) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  Node v = child(key);
  const YAML::Node& y = v.yaml();
  const std::string expected = "expected " + double_expectation(min, max);
  if (!is_plain_scalar(y)) v.fail("", expected + ", got " + describe(y) + quote_hint(y));
  const std::string text = y.Scalar();
  // strtod alone would also take "inf", "nan" and hex floats.
  bool plain_number =
      !text.empty() && text.find_first_not_of("0123456789+-.eE") == std::string::npos;
  char* end = nullptr;
  errno = 0;
  double value = plain_number ? std::strtod(text.c_str(), &end) : 0.0;
  if (!plain_number || end != text.c_str() + text.size() || errno == ERANGE ||
      !std::isfinite(value))
    v.fail("", expected + ", got " + describe(y));
  if (value < min || value > max) v.fail("", expected + ", got " + text);
  return value;
}

bool Node::get_bool(const std::string& key, bool fallback) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  Node v = child(key);
  const YAML::Node& y = v.yaml();
  bool value = false;
  // yaml-cpp's conversion takes true/false, yes/no, on/off, y/n in three letter cases.
  if (!is_plain_scalar(y) || !YAML::convert<bool>::decode(y, value))
    v.fail("", "expected true or false, got " + describe(y) + quote_hint(y));
  return value;
}

std::string Node::get_string(const std::string& key, const std::string& fallback) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  return string_of(child(key));
}

std::string Node::require_string(const std::string& key) const {
  return string_of(child(key));
}

std::string Node::get_choice(const std::string& key, const std::string& fallback,
                             const std::vector<std::string>& choices,
                             const Aliases& aliases) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  return choice_of(child(key), choices, aliases);
}

std::uint64_t Node::get_bytes(const std::string& key, std::uint64_t fallback,
                              std::uint64_t min) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  return bytes_of(child(key), min);
}

void Node::check_list_length() const {
  if (!node_.IsSequence() || node_.size() <= kMaxListValues) return;
  fail("", "a list may hold at most " + std::to_string(kMaxListValues) + " values, got " +
               std::to_string(node_.size()) +
               ": the sweep records its lists as HDF5 attributes, "
               "which HDF5 limits to 64 KiB (8 bytes a value); split the sweep into several "
               "sweeps, each with a part of the list");
}

std::vector<std::int64_t> Node::get_int_list(const std::string& key,
                                             const std::vector<std::int64_t>& fallback,
                                             std::int64_t min, std::int64_t max) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  Node v = child(key);
  const YAML::Node& y = v.yaml();
  const std::string expected = int_expectation(min, max);
  if (y.IsScalar()) return {int_of(v, min, max)};
  if (!y.IsSequence() || y.size() == 0)
    v.fail("", "expected " + expected + " or a non-empty list of them, got " + describe(y));
  v.check_list_length();
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < y.size(); ++i) {
    Node e = v.element(i);
    if (!e.yaml().IsScalar())
      e.fail("", "expected " + expected + " (a list element), got " + describe(e.yaml()) +
                     "; lists do not nest");
    out.push_back(int_of(e, min, max));
  }
  return out;
}

std::vector<std::string> Node::get_choice_list(const std::string& key,
                                               const std::vector<std::string>& fallback,
                                               const std::vector<std::string>& choices,
                                               const Aliases& aliases) const {
  if (is_unset(*this)) return fallback;
  require_map();
  if (!has(key)) return fallback;
  Node v = child(key);
  const YAML::Node& y = v.yaml();
  if (y.IsScalar()) return {choice_of(v, choices, aliases)};
  if (!y.IsSequence() || y.size() == 0)
    v.fail("", "expected " + one_of(choices, aliases) + " or a non-empty list of them, got " +
                   describe(y));
  v.check_list_length();
  std::vector<std::string> out;
  for (std::size_t i = 0; i < y.size(); ++i) {
    Node e = v.element(i);
    if (!e.yaml().IsScalar())
      e.fail("", "expected " + one_of(choices, aliases) + " (a list element), got " +
                     describe(e.yaml()) + "; lists do not nest");
    out.push_back(choice_of(e, choices, aliases));
  }
  return out;
}

}  // namespace rb::cfg
