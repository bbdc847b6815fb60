#pragma once
// The parsed `contention` sweep (docs/sweeps/contention.md), shared by its parser, its phase
// runner (contention.cpp), the workloads and the feeder (workloads.cpp) and the
// re-binding between phases (binding.cpp). A value the config leaves out is its key's default
// in contention_keys() (parse.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "attention.hpp"
#include "config/config.hpp"

namespace rb::contention {

// The attention blocks of one workload: a forward pass, then (backward) its backward pass,
// timed together; one point per (kernel path, rows), so phases can disagree on the fastest path.
struct AttentionShape {
  std::vector<std::string> kernels;  // kernel paths of the device's table, or auto
  int batch = 0;
  int heads = 0;
  int head_dim = 0;
  std::vector<std::int64_t> rows;  // query rows = key/value rows, one block each
  attn::DType dtype = attn::DType::BF16;
  bool causal = false;
  bool backward = true;
};

// The host feeder: pageable copies plus CPU work, like a data loader's workers.
struct FeederParams {
  std::uint64_t copy_bytes = 0;  // per pageable copy (host and, on cuda, H2D)
  int threads = 0;               // feeding threads per feeder rank
};

// What one point measures: a workload and, for the attention blocks, a kernel path and rows
// (path "" and rows 0 for the other workloads). Every phase measures the same items.
struct Item {
  std::string workload;
  std::string path;
  std::int64_t rows = 0;
};

enum class PhaseKind { Alone, Unbound, Bound };

struct Phase {
  PhaseKind kind = PhaseKind::Alone;
  BindingPolicy policy = BindingPolicy::None;  // Bound only
  std::string name;     // "alone", "concurrent_unbound", "concurrent_bound:core", ...
  std::string binding;  // "launcher", "unbound" or the policy name (points/binding)
};

struct Params {
  std::vector<Phase> phases;           // always in the order alone, unbound, bound per policy
  std::vector<std::string> workloads;  // measured by every measuring rank, in this order
  std::vector<Item> items;             // per phase: workloads in order, each per path, then rows
  int feeders = 0;                     // the last `feeders` ranks feed instead of measuring
  int world_size = 1;
  bool gpu = false;  // backend cuda
  std::int64_t iterations = 0;
  double duration_s = 0;  // > 0: iterations per workload from a probe
  std::int64_t warmup = 0;
  double cooldown_s = 0;
  double monitor_interval_s = 0;
  AttentionShape attention;       // the GPU attention block (workload attention)
  AttentionShape host_attention;  // the host block (workload host_attention)
  int gemm_size = 0;
  std::string gemm_dtype;  // the compute engine's (long) name of the dtype
  std::uint64_t copy_bytes = 0;
  std::uint64_t triad_bytes = 0;  // per array
  FeederParams feeder;

  int measuring_ranks() const { return world_size - feeders; }
  bool is_feeder(int rank) const { return rank >= measuring_ranks(); }
};

}  // namespace rb::contention
