#include "config/bytes.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace rb {
namespace {

struct Unit {
  const char* suffix;
  std::uint64_t factor;
};
const Unit kByteUnits[] = {
    {"B", 1ULL},         {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20},    {"GiB", 1ULL << 30},
    {"TiB", 1ULL << 40}, {"KB", 1000ULL},     {"MB", 1000ULL * 1000}, {"GB", 1000ULL * 1000 * 1000},
};

}  // namespace

std::vector<std::string> byte_suffixes() {
  std::vector<std::string> out;
  for (const Unit& u : kByteUnits) out.push_back(u.suffix);
  return out;
}

std::optional<std::uint64_t> parse_bytes(const std::string& text, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<std::uint64_t> {
    if (why) *why = w;
    return std::nullopt;
  };
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) return fail("not a byte size");
  std::uint64_t number = 0;
  for (std::size_t k = 0; k < i; ++k)
    if (__builtin_mul_overflow(number, 10u, &number) ||
        __builtin_add_overflow(number, static_cast<unsigned>(text[k] - '0'), &number))
      return fail("does not fit in 64 bits");
  std::size_t s = i;
  if (s < text.size() && text[s] == ' ') ++s;  // "64 MiB"
  const std::string suffix = text.substr(s);
  std::uint64_t factor = 1;
  if (!suffix.empty()) {
    const Unit* unit = nullptr;
    for (const Unit& u : kByteUnits)
      if (suffix == u.suffix) unit = &u;
    if (!unit) return fail("unknown suffix '" + suffix + "'");
    factor = unit->factor;
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(number, factor, &bytes)) return fail("does not fit in 64 bits");
  return bytes;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double b = bytes;
  while (std::fabs(b) >= 1024.0 && u < 5) {
    b /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0 || b == std::floor(b))
    std::snprintf(buf, sizeof buf, "%.0f %s", b, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

}  // namespace rb
