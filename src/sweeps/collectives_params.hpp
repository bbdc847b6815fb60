#pragma once
// The collectives sweep's parameters as parsed from its keys (collectives_parse.cpp; the key
// table is collectives_keys()), every value checked against the world it will run on.
#include <cstdint>
#include <vector>

#include "profiling/collective_table.hpp"
#include "profiling/engine.hpp"
#include "profiling/groups.hpp"
#include "sweeps/sweep.hpp"

namespace rb::coll_sweep {

struct CollParams {
  std::vector<coll::Op> ops;
  std::vector<prof::DType> dtypes;
  std::vector<bool> in_place;
  std::vector<groups::Spec> groups;
  std::vector<std::uint64_t> sizes;  // requested message sizes, min_bytes * factor^k <= max_bytes
  std::uint64_t max_bytes = 0;
  std::int64_t warmup = 0;  // as parsed: a key left out is its default in collectives_keys()
  std::int64_t iterations = 0;
  bool check = true;
  int root = 0;
  bool host = true;  // the host backend: buffers in host memory
};

// Throws cfg::ConfigError naming the key and line.
CollParams parse(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb::coll_sweep
