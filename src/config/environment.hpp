#pragma once
// Environment variables read like config values: a value that does not have the expected form
// is a ConfigError naming the variable, the form it takes and what it held, e.g.
//   environment variable RINGBENCH_RANKS_PER_NODE: expected an integer between 1 and 1048576
//   (ranks per simulated node), got 'abc'; fix it or unset it
// (app/environment.cpp checks every variable ringbench and Kokkos read before either uses one).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/node.hpp"

namespace rb::cfg {

// The value of `name`; nullopt when it is unset, or set to "" and `empty_is_unset`.
std::optional<std::string> env_value(const char* name, bool empty_is_unset = true);

// Throws the ConfigError of `name` holding `value` where `expected` was wanted.
[[noreturn]] void env_fail(const char* name, const std::string& value, const std::string& expected);

// `value` (of variable `name`) as a plain decimal integer in [min, max] (an optional sign, digits,
// nothing else); `meaning` follows the range in the message ("ranks per simulated node").
std::int64_t env_int(const char* name, const std::string& value, std::int64_t min, std::int64_t max,
                     const std::string& meaning);

// `value` as a finite number >= min.
double env_number(const char* name, const std::string& value, double min,
                  const std::string& meaning);

// `value` as one of `choices` (exact, case-sensitive).
std::string env_choice(const char* name, const std::string& value,
                       const std::vector<std::string>& choices);

}  // namespace rb::cfg
