#pragma once
// The table of sweep types (registry.cpp): one row per sweep, like nccl-tests' per-benchmark
// tables. Adding a sweep: its file pair in src/sweeps/ (its key table and parser), one row here
// and docs/sweeps/<type>.md.
#include <memory>
#include <vector>

#include "sweeps/sweep.hpp"

namespace rb {

struct SweepKind {
  const char* type;
  SweepParser parse;
  SweepKeys keys;       // its key table: --help TYPE, and the check of docs/sweeps/<type>.md
  const char* summary;  // one line for --help
};

const std::vector<SweepKind>& sweep_kinds();

// Looks up spec.type (unknown type: ConfigError with did-you-mean) and parses it.
std::unique_ptr<Sweep> parse_sweep(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
