#pragma once
// The one vocabulary of element types: configs, messages, `--help` and policy files spell a
// dtype by its short name; the long name is an alias a config may use instead (the sweeps once
// disagreed: bf16 in one, bfloat16 in another). Each sweep accepts a subset (its key spec's
// choices); the enums (attn::DType here, prof::DType of the collectives' data) keep their own
// tables of which names they carry.
#include <string_view>

#include "attention.hpp"

namespace rb {

struct DTypeSpelling {
  std::string_view name;       // canonical, short
  std::string_view long_name;  // the alias; empty where the type has no other name
};

inline constexpr DTypeSpelling kDTypeSpellings[] = {{"fp32", "float32"},  {"fp16", "float16"},
                                                    {"bf16", "bfloat16"}, {"fp64", "float64"},
                                                    {"tf32", ""},         {"int32", ""}};

// The short name of `spelled` (a short or a long name), or empty when the vocabulary lacks it.
constexpr std::string_view canonical_dtype(std::string_view spelled) {
  for (const DTypeSpelling& s : kDTypeSpellings)
    if (spelled == s.name || (!s.long_name.empty() && spelled == s.long_name)) return s.name;
  return {};
}

// The long name of a canonical name (itself where there is none): what the GEMM engine and
// the collectives' tables take, and what their output files have always carried.
constexpr std::string_view long_dtype_name(std::string_view name) {
  for (const DTypeSpelling& s : kDTypeSpellings)
    if (name == s.name) return s.long_name.empty() ? s.name : s.long_name;
  return name;
}

namespace detail {
constexpr bool attention_names_are_canonical() {
  for (const attn::DTypeName& d : attn::kDTypeNames)
    if (canonical_dtype(d.name) != d.name) return false;
  return true;
}
}  // namespace detail
static_assert(detail::attention_names_are_canonical(),
              "attn::kDTypeNames must use the short names of kDTypeSpellings");

}  // namespace rb
