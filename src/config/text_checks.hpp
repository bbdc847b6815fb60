#pragma once
// Checks on a config's bytes, before YAML reads them: what YAML would accept but ringbench could
// not keep (a NUL byte, UTF-16/32: the output's /run config_text is a C string and would end at
// the first zero byte), and where yaml-cpp's own error would not say what is wrong (a key longer
// than YAML's 1024-character limit on keys written without '?': "end of map flow not found").
#include <cstddef>
#include <optional>
#include <string>

namespace rb::cfg {

// Throws a ConfigError at FILE:LINE:COLUMN when the text is UTF-16 or UTF-32 (by its byte-order
// mark, or the zero bytes of its first character, as YAML itself detects the encoding), holds a
// NUL byte anywhere, or a byte that is not UTF-8 (a comment in Latin-1 too: the output keeps
// the config as UTF-8 text, which readers decode).
void check_config_bytes(const std::string& text, const std::string& file);

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 if there is none.
std::size_t utf8_length(const std::string& s, std::size_t i);

// YAML's limit on an implicit key (one without '?'): on one line, at most 1024 characters,
// quotes included. yaml-cpp enforces it, and its error then names the map or the ':'.
inline constexpr std::size_t kMaxImplicitKeyChars = 1024;

// A key on one line longer than kMaxImplicitKeyChars: where it starts (1-based), its length and
// its first characters, for a message.
struct OverlongKey {
  int line = 0;
  int column = 0;
  std::size_t length = 0;
  std::string start;
};

// The first such key in the text, if any. A line scan (quotes and comments respected within a
// line): it explains a YAML syntax error, and is not used to accept or refuse a file alone.
std::optional<OverlongKey> find_overlong_key(const std::string& text);

}  // namespace rb::cfg
