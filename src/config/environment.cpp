#include "config/environment.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace rb::cfg {

std::optional<std::string> env_value(const char* name, bool empty_is_unset) {
  const char* v = std::getenv(name);
  if (v == nullptr || (empty_is_unset && *v == '\0')) return std::nullopt;
  return std::string(v);
}

void env_fail(const char* name, const std::string& value, const std::string& expected) {
  throw ConfigError(Location{std::string("environment variable ") + name, 0, 0}, "",
                    "expected " + expected + ", got '" + value + "'; fix it or unset it");
}

std::int64_t env_int(const char* name, const std::string& value, std::int64_t min, std::int64_t max,
                     const std::string& meaning) {
  const std::string expected = "an integer between " + std::to_string(min) + " and " +
                               std::to_string(max) + (meaning.empty() ? "" : " (" + meaning + ")");
  // strtoll alone would take " 4", "4abc" and an overflow: the whole text must be the number.
  const std::size_t digits = (!value.empty() && (value[0] == '-' || value[0] == '+')) ? 1 : 0;
  if (value.size() == digits || value.find_first_not_of("0123456789", digits) != std::string::npos)
    env_fail(name, value, expected);
  errno = 0;
  const long long n = std::strtoll(value.c_str(), nullptr, 10);
  if (errno == ERANGE || n < min || n > max) env_fail(name, value, expected);
  return n;
}

double env_number(const char* name, const std::string& value, double min,
                  const std::string& meaning) {
  std::ostringstream expected;
  expected << "a number >= " << min << (meaning.empty() ? "" : " (" + meaning + ")");
  char* end = nullptr;
  errno = 0;
  const double x = value.empty() ? NAN : std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x) || x < min)
    env_fail(name, value, expected.str());
  return x;
}

std::string env_choice(const char* name, const std::string& value,
                       const std::vector<std::string>& choices) {
  for (const std::string& c : choices)
    if (value == c) return value;
  std::string expected = "one of " + join(choices, "|");
  const std::string hint = did_you_mean(value, choices);
  if (!hint.empty()) expected += " (did you mean '" + hint + "'?)";
  env_fail(name, value, expected);
}

}  // namespace rb::cfg
