// The `contention` sweep's config (docs/sweeps/contention.md): every key checked as it is
// read, errors with file, line and key (cfg::Node), before any rank does any work.
#include <algorithm>
#include <climits>
#include <sstream>
#include <string>
#include <vector>

#include "kernel_paths.hpp"
#include "ring/problem.hpp"
#include "sweeps/contention/contention.hpp"
#include "sweeps/contention/workloads.hpp"

namespace rb::contention {
namespace {

const std::vector<std::string> kPhaseKinds = {"alone", "concurrent_unbound", "concurrent_bound"};
const std::vector<std::string> kPolicies = {"core", "numa", "gpu-near"};

// The node of element i of a list key (or the key itself when it is a scalar).
cfg::Node element_of(const cfg::Node& n, const std::string& key, std::size_t i) {
  const cfg::Node list = n.child(key);
  return list.is_sequence() ? list.element(i) : list;
}

template <class T>
void refuse_duplicates(const cfg::Node& n, const std::string& key, const std::vector<T>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::find(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v[i]) !=
        v.begin() + static_cast<std::ptrdiff_t>(i)) {
      std::ostringstream s;
      s << v[i];
      element_of(n, key, i).fail("", "'" + s.str() + "' is listed twice");
    }
}

BindingPolicy policy_of(const std::string& name) {
  if (name == "core") return BindingPolicy::Core;
  if (name == "numa") return BindingPolicy::Numa;
  return BindingPolicy::GpuNear;
}

void parse_workloads(const cfg::Node& n, Params& p) {
  const std::vector<std::string> fallback =
      p.gpu ? std::vector<std::string>{"attention", "triad"} : std::vector<std::string>{"triad"};
  p.workloads = n.get_choice_list("workloads", fallback, workload_names());
  refuse_duplicates(n, "workloads", p.workloads);
  if (p.gpu) return;
  for (std::size_t i = 0; i < p.workloads.size(); ++i)
    if (needs_gpu(p.workloads[i]))
      element_of(n, "workloads", i)
          .fail("", "workload '" + p.workloads[i] +
                        "' runs on the GPU and needs the cuda backend (this run uses the host "
                        "backend, where the workloads are triad and host_attention)");
}

// Phases in the one order they run, concurrent_bound once per policy.
void parse_phases(const cfg::Node& n, Params& p) {
  const auto kinds = n.get_choice_list("phases", kPhaseKinds, kPhaseKinds);
  refuse_duplicates(n, "phases", kinds);
  const bool bound = std::find(kinds.begin(), kinds.end(), "concurrent_bound") != kinds.end();
  const std::vector<std::string> fallback =
      p.gpu ? kPolicies : std::vector<std::string>{"core", "numa"};
  const auto policies = n.get_choice_list("policies", fallback, kPolicies);
  refuse_duplicates(n, "policies", policies);
  if (!bound && n.has("policies"))
    n.fail("policies",
           "policies are the bindings of the concurrent_bound phase, which `phases` leaves out");
  for (std::size_t i = 0; i < policies.size() && !p.gpu; ++i)
    if (policies[i] == "gpu-near")
      element_of(n, "policies", i)
          .fail("",
                "policy gpu-near binds next to the rank's GPU and needs the cuda backend "
                "(this run uses the host backend; use core or numa)");
  auto has = [&](const std::string& k) {
    return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
  };
  if (has("alone"))
    p.phases.push_back({PhaseKind::Alone, BindingPolicy::None, "alone", "launcher"});
  if (has("concurrent_unbound"))
    p.phases.push_back({PhaseKind::Unbound, BindingPolicy::None, "concurrent_unbound", "unbound"});
  if (bound)
    for (const auto& pol : policies)
      p.phases.push_back({PhaseKind::Bound, policy_of(pol), "concurrent_bound:" + pol, pol});
}

// Every listed path must run this block in this build (the kernel path table's own refusal).
void check_kernels(const cfg::Node& a, const AttentionShape& s, attn::Device device) {
  for (std::size_t i = 0; i < s.kernels.size(); ++i) {
    const std::string why = attn::kernel_refusal({s.kernels[i], "default"}, device, s.dtype,
                                                 s.head_dim, s.causal, false);
    if (!why.empty()) element_of(a, "kernel", i).fail("", why);
  }
}

// `key` (attention or host_attention): a map of the block shape, `kernel` and `rows` a name
// or number or a list of them (one point each); `check` the paths when the workload will run.
AttentionShape parse_shape(const cfg::Node& n, const std::string& key, AttentionShape s,
                           attn::Device device, bool check) {
  if (!n.has(key)) return s;
  const cfg::Node a = n.child(key);
  a.require_map();
  a.allow_only({"kernel", "batch", "heads", "head_dim", "rows", "dtype", "causal", "backward"});
  s.kernels = a.get_choice_list("kernel", s.kernels, attn::kernel_choices(device));
  refuse_duplicates(a, "kernel", s.kernels);
  s.batch = static_cast<int>(a.get_int("batch", s.batch, 1, 1024));
  s.heads = static_cast<int>(a.get_int("heads", s.heads, 1, 1024));
  s.head_dim = static_cast<int>(a.get_int("head_dim", s.head_dim, 8, 512));
  s.rows = a.get_int_list("rows", s.rows, 1, 1 << 22);
  refuse_duplicates(a, "rows", s.rows);
  s.dtype =
      ring::dtype_from_string(a.get_choice("dtype", ring::to_string(s.dtype), ring::dtype_names()));
  s.causal = a.get_bool("causal", s.causal);
  s.backward = a.get_bool("backward", s.backward);
  if (check) check_kernels(a, s, device);
  return s;
}

void parse_gemm(const cfg::Node& n, Params& p) {
  if (!n.has("gemm")) return;
  const cfg::Node g = n.child("gemm");
  g.require_map();
  g.allow_only({"size", "dtype"});
  p.gemm_size = static_cast<int>(g.get_int("size", p.gemm_size, 16, 65536));
  // The attention blocks' short names, and the compute sweep's long ones.
  const std::string t = g.get_choice(
      "dtype", "bf16", {"bf16", "fp16", "tf32", "fp32", "bfloat16", "float16", "float32"});
  p.gemm_dtype = t == "bf16" ? "bfloat16" : t == "fp16" ? "float16" : t == "fp32" ? "float32" : t;
}

void parse_feeders(const cfg::Node& n, Params& p) {
  p.feeders = static_cast<int>(n.get_int("feeders", 0, 0, INT_MAX));
  if (p.feeders >= p.world_size)
    n.fail("feeders", "feeders: " + std::to_string(p.feeders) + " of " +
                          std::to_string(p.world_size) +
                          " ranks leaves no rank to measure (at most " +
                          std::to_string(p.world_size - 1) + ")");
  if (!n.has("feeder")) return;
  const cfg::Node f = n.child("feeder");
  f.require_map();
  f.allow_only({"copy_bytes", "threads"});
  p.feeder.copy_bytes = f.get_bytes("copy_bytes", p.feeder.copy_bytes, 4096);
  p.feeder.threads = static_cast<int>(f.get_int("threads", p.feeder.threads, 1, 256));
}

void parse_timing(const cfg::Node& n, Params& p) {
  if (n.has("iterations") && n.has("duration_s"))
    n.fail("duration_s", "give iterations or duration_s, not both");
  p.iterations = n.get_int("iterations", p.iterations, 1, 1000000);
  p.duration_s = n.get_double("duration_s", 0.0, 0.001, 86400.0);
  p.warmup = n.get_int("warmup", p.warmup, 0, 100000);
  p.cooldown_s = n.get_double("cooldown_s", p.cooldown_s, 0.0, 3600.0);
  p.monitor_interval_s =
      static_cast<double>(n.get_int("monitor_interval_ms", 100, 1, 60000)) / 1000.0;
}

// Per phase: the workloads in config order; an attention block per kernel path, then per rows.
std::vector<Item> make_items(const Params& p) {
  std::vector<Item> items;
  for (const auto& w : p.workloads) {
    const AttentionShape* a = w == "attention"        ? &p.attention
                              : w == "host_attention" ? &p.host_attention
                                                      : nullptr;
    if (a == nullptr) {
      items.push_back({w, "", 0});
      continue;
    }
    for (const auto& k : a->kernels)
      for (std::int64_t r : a->rows) items.push_back({w, k, r});
  }
  return items;
}

}  // namespace

Params parse_params(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "phases", "policies", "workloads", "feeders", "iterations",
                "duration_s", "warmup", "cooldown_s", "monitor_interval_ms", "attention",
                "host_attention", "gemm", "copy_bytes", "triad_bytes", "feeder"});
  Params p;
  p.world_size = ctx.world_size;
  p.gpu = ctx.backend == Backend::Cuda;
  parse_workloads(n, p);
  parse_phases(n, p);
  parse_feeders(n, p);
  parse_timing(n, p);
  const auto uses = [&](const char* w) {
    return std::find(p.workloads.begin(), p.workloads.end(), w) != p.workloads.end();
  };
  p.attention =
      parse_shape(n, "attention", p.attention, attn::Device::Cuda, p.gpu && uses("attention"));
  AttentionShape host;  // small enough for a CPU: ~0.25 GFLOP per forward+backward
  host.heads = 4;
  host.head_dim = 64;
  host.rows = {256};
  host.dtype = attn::DType::F32;
  p.host_attention =
      parse_shape(n, "host_attention", host, attn::Device::Host, uses("host_attention"));
  p.items = make_items(p);
  parse_gemm(n, p);
  p.copy_bytes = n.get_bytes("copy_bytes", p.copy_bytes, 4096);
  p.triad_bytes = n.get_bytes("triad_bytes", p.triad_bytes, 4096);
  return p;
}

}  // namespace rb::contention
