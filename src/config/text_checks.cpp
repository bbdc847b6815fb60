#include "config/text_checks.hpp"

#include <algorithm>
#include <cstdint>

#include "config/node.hpp"

namespace rb::cfg {
namespace {

// The text's encoding when it is UTF-16 or UTF-32 ("UTF-16LE", ...), and how that shows in its
// first bytes; empty for UTF-8. YAML 1.2 (section 5.2) detects the encoding the same way: a
// byte-order mark, or the zero bytes of an ASCII first character.
std::pair<std::string, std::string> wide_encoding(const std::string& t) {
  const auto b = [&](std::size_t i) { return i < t.size() ? static_cast<int>(uint8_t(t[i])) : -1; };
  const char* bom = "byte-order mark ";
  const char* zeros = "no byte-order mark; zero bytes in its first character";
  if (b(0) == 0 && b(1) == 0 && b(2) == 0xFE && b(3) == 0xFF)
    return {"UTF-32BE", std::string(bom) + "00 00 FE FF"};
  if (b(0) == 0xFF && b(1) == 0xFE && b(2) == 0 && b(3) == 0)
    return {"UTF-32LE", std::string(bom) + "FF FE 00 00"};
  if (b(0) == 0 && b(1) == 0 && b(2) == 0 && b(3) > 0) return {"UTF-32BE", zeros};
  if (b(0) > 0 && b(1) == 0 && b(2) == 0 && b(3) == 0) return {"UTF-32LE", zeros};
  if (b(0) == 0xFE && b(1) == 0xFF) return {"UTF-16BE", std::string(bom) + "FE FF"};
  if (b(0) == 0xFF && b(1) == 0xFE) return {"UTF-16LE", std::string(bom) + "FF FE"};
  if (b(0) == 0 && b(1) > 0) return {"UTF-16BE", zeros};
  if (b(0) > 0 && b(1) == 0) return {"UTF-16LE", zeros};
  return {};
}

// 1-based line and column (in bytes) of text[pos].
Location location_at(const std::string& text, std::size_t pos, const std::string& file) {
  const auto end = text.begin() + static_cast<std::ptrdiff_t>(pos);
  const int line = 1 + static_cast<int>(std::count(text.begin(), end, '\n'));
  const std::size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
  const std::size_t line_start = nl == std::string::npos ? 0 : nl + 1;
  return Location{file, line, static_cast<int>(pos - line_start) + 1};
}

bool ends_plain_key(const std::string& line, std::size_t colon) {
  if (colon + 1 >= line.size()) return true;
  const char next = line[colon + 1];
  return next == ' ' || next == '\t' || next == '\r' || next == ',' || next == ']' || next == '}';
}

// The first key longer than the limit on one line (offsets into `line`), scanning it once:
// a key is what stands between the last flow indicator ('{', '[', ','), sequence or key marker
// ('- ', '? ') or the line's start and a ':' ending a key; quoted parts and comments are skipped.
// The token's first and last non-blank characters are tracked as it goes: a line of a million
// blanks costs a million steps, not a million squared.
std::optional<std::pair<std::size_t, std::size_t>> long_key_in(const std::string& line) {
  constexpr std::size_t kNone = std::string::npos;
  std::size_t first = kNone, last = kNone;  // the current token's non-blank ends
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      last = i;
      if (quote == '"' && c == '\\')
        last = ++i;  // an escape: the next character is never the quote
      else if (c == quote && quote == '\'' && i + 1 < line.size() && line[i + 1] == '\'')
        last = ++i;
      else if (c == quote)
        quote = 0;
      continue;
    }
    const bool blank = c == ' ' || c == '\t';
    const bool at_token_start = !blank && first == kNone;
    if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) break;
    if (c == '{' || c == '[' || c == ',' || c == ']' || c == '}' ||
        ((c == '-' || c == '?') && at_token_start && i + 1 < line.size() && line[i + 1] == ' ')) {
      first = last = kNone;  // the next token starts after it
      continue;
    }
    if (c == ':' && first != kNone && ends_plain_key(line, i)) {
      if (last + 1 - first > kMaxImplicitKeyChars) return std::make_pair(first, last + 1 - first);
      first = last = kNone;
      continue;
    }
    if (blank) continue;
    if (at_token_start) {
      first = i;
      if (c == '"' || c == '\'') quote = c;
    }
    last = i;
  }
  return std::nullopt;
}

}  // namespace

std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  const std::size_t n = c < 0x80           ? 1
                        : (c >> 5) == 0x6  ? 2
                        : (c >> 4) == 0xE  ? 3
                        : (c >> 3) == 0x1E ? 4
                                           : 0;
  if (n == 0 || (n == 2 && c < 0xC2) || c > 0xF4 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((byte(i + k) >> 6) != 0x2) return 0;
  const unsigned char second = n > 1 ? byte(i + 1) : 0;
  if ((c == 0xE0 && second < 0xA0) || (c == 0xED && second >= 0xA0) ||  // overlong, surrogate
      (c == 0xF0 && second < 0x90) || (c == 0xF4 && second >= 0x90))    // overlong, > U+10FFFF
    return 0;
  return n;
}

void check_config_bytes(const std::string& text, const std::string& file) {
  const auto [encoding, how] = wide_encoding(text);
  if (!encoding.empty())
    throw ConfigError(Location{file, 1, 1}, "",
                      "the file is " + encoding + " encoded (" + how +
                          "): save it as UTF-8; the output keeps the config verbatim as "
                          "UTF-8 text in /run config_text, which would end at the first zero "
                          "byte");
  const std::size_t nul = text.find('\0');
  if (nul != std::string::npos)
    throw ConfigError(location_at(text, nul, file), "",
                      "a NUL byte (\\0) here: the output keeps the config verbatim in /run "
                      "config_text, which would end at it; remove it (in a comment too)");
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_length(text, i);
    if (n == 0) {
      static const char* const hex = "0123456789ABCDEF";
      const auto b = static_cast<unsigned char>(text[i]);
      throw ConfigError(location_at(text, i, file), "",
                        std::string("byte 0x") + hex[b >> 4] + hex[b & 15] +
                            " here is not UTF-8 (a Latin-1 character?): save the file as UTF-8 "
                            "(in a comment too); the output keeps the config verbatim as UTF-8 "
                            "text in /run config_text");
    }
    i += n;
  }
}

std::optional<OverlongKey> find_overlong_key(const std::string& text) {
  std::size_t line_start = 0;
  for (int line = 1; line_start <= text.size(); ++line) {
    std::size_t end = text.find('\n', line_start);
    if (end == std::string::npos) end = text.size();
    // Only a line longer than the limit can hold such a key: most lines cost one comparison.
    if (end - line_start > kMaxImplicitKeyChars) {
      const std::string this_line = text.substr(line_start, end - line_start);
      if (const auto key = long_key_in(this_line))
        return OverlongKey{line, static_cast<int>(key->first) + 1, key->second,
                           this_line.substr(key->first, 24)};
    }
    line_start = end + 1;
  }
  return std::nullopt;
}

}  // namespace rb::cfg
