// The `contention` sweep's config (docs/sweeps/contention.md): every key checked as it is
// read, errors with file, line and key (cfg::Node), before any rank does any work.
#include <algorithm>
#include <climits>
#include <sstream>
#include <string>
#include <vector>

#include "dtype_names.hpp"
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

void parse_workloads(const cfg::KeyReader& r, Params& p) {
  const cfg::Node& n = r.node();
  p.workloads = r.choices("workloads");
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
void parse_phases(const cfg::KeyReader& r, Params& p) {
  const cfg::Node& n = r.node();
  const auto kinds = r.choices("phases");
  refuse_duplicates(n, "phases", kinds);
  const bool bound = std::find(kinds.begin(), kinds.end(), "concurrent_bound") != kinds.end();
  const auto policies = r.choices("policies");
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
// or number or a list of them (one point each); `check` the paths when the workload will run
// and the map is given (its defaults are each device's own).
AttentionShape parse_shape(const cfg::KeyReader& r, const std::string& key, attn::Device device,
                           bool check) {
  const cfg::KeyReader ar = r.map(key);
  const cfg::Node& a = ar.node();
  AttentionShape s;
  s.kernels = ar.choices("kernel");
  refuse_duplicates(a, "kernel", s.kernels);
  s.batch = static_cast<int>(ar.integer("batch"));
  s.heads = static_cast<int>(ar.integer("heads"));
  s.head_dim = static_cast<int>(ar.integer("head_dim"));
  s.rows = ar.integers("rows");
  refuse_duplicates(a, "rows", s.rows);
  s.dtype = ring::dtype_from_string(ar.dtype("dtype"));
  s.causal = ar.flag("causal");
  s.backward = ar.flag("backward");
  if (check && r.has(key)) check_kernels(a, s, device);
  return s;
}

void parse_gemm(const cfg::KeyReader& r, Params& p) {
  const cfg::KeyReader g = r.map("gemm");
  p.gemm_size = static_cast<int>(g.integer("size"));
  // The compute engine takes the long names (the compute sweep's).
  p.gemm_dtype = long_dtype_name(g.dtype("dtype"));
}

void parse_feeders(const cfg::KeyReader& r, Params& p) {
  const cfg::Node& n = r.node();
  p.feeders = static_cast<int>(r.integer("feeders"));
  if (p.feeders >= p.world_size)
    n.fail("feeders", "feeders: " + std::to_string(p.feeders) + " of " +
                          std::to_string(p.world_size) +
                          " ranks leaves no rank to measure (at most " +
                          std::to_string(p.world_size - 1) + ")");
  const cfg::KeyReader f = r.map("feeder");
  p.feeder.copy_bytes = f.bytes("copy_bytes");
  p.feeder.threads = static_cast<int>(f.integer("threads"));
}

void parse_timing(const cfg::KeyReader& r, Params& p) {
  const cfg::Node& n = r.node();
  if (n.has("iterations") && n.has("duration_s"))
    n.fail("duration_s", "give iterations or duration_s, not both");
  p.iterations = r.integer("iterations");
  p.duration_s = r.number("duration_s", 0.0);
  p.warmup = r.integer("warmup");
  p.cooldown_s = r.number("cooldown_s");
  p.monitor_interval_s = static_cast<double>(r.integer("monitor_interval_ms")) / 1000.0;
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

// The block maps: the same keys, each device's kernel paths and default shape (the host's small
// enough for a CPU: ~0.25 GFLOP per forward+backward).
std::vector<cfg::KeySpec> block_keys(attn::Device device, const std::string& heads,
                                     const std::string& head_dim, const std::string& rows,
                                     const std::string& storage) {
  using namespace cfg::key;
  return {
      choice("kernel", "[auto]", attn::kernel_choices(device),
             "kernel paths of the device's table, or auto; one point each")
          .or_list(),
      integer("batch", "1", 1, 1024, "batch of the block"),
      integer("heads", heads, 1, 1024, "heads of the block"),
      integer("head_dim", head_dim, 8, 512, "head dimension"),
      integer("rows", rows, 1, 1 << 22, "query rows = key/value rows; one point each").or_list(),
      dtype("dtype", storage, ring::dtype_names(), "storage dtype of Q, K, V"),
      flag("causal", "false", "causal masking"),
      flag("backward", "true", "each iteration a forward block, then its backward block")};
}

}  // namespace
}  // namespace rb::contention

namespace rb {

const std::vector<cfg::KeySpec>& contention_keys() {
  using namespace cfg::key;
  using contention::block_keys;
  static const std::vector<cfg::KeySpec> keys = cfg::sweep_keys(
      "contention",
      {choice("phases", "[" + cfg::join(contention::kPhaseKinds, ", ") + "]",
              contention::kPhaseKinds, "phases to run; always in the order of this list")
           .or_list(),
       choice("policies", "[core, numa]", contention::kPolicies,
              "one concurrent_bound phase each; gpu-near needs the cuda backend")
           .or_list()
           .on_cuda("[core, numa, gpu-near]"),
       choice("workloads", "[triad]", contention::workload_names(),
              "what each measuring rank times, in this order, in every phase")
           .or_list()
           .on_cuda("[attention, triad]"),
       integer("feeders", "0", 0, INT_MAX, "the last N ranks feed instead of measuring")
           .limited("0 .. world size - 1"),
       integer("iterations", "30", 1, 1000000, "timed repetitions of each workload per point"),
       number("duration_s", "", 0.001, 86400.0,
              "instead of iterations: about this long per point (not together with iterations)")
           .computed("none"),
       integer("warmup", "3", 0, 100000, "untimed repetitions before each point's timed ones"),
       number("cooldown_s", "1.0", 0.0, 3600.0, "sleep between turns and phases"),
       integer("monitor_interval_ms", "100", 1, 60000, "sampling interval of the monitors"),
       map("attention", block_keys(attn::Device::Cuda, "8", "128", "[4096]", "bf16"),
           "the GPU block (workload attention)"),
       map("host_attention", block_keys(attn::Device::Host, "4", "64", "[256]", "fp32"),
           "the host block (workload host_attention)"),
       map("gemm",
           {integer("size", "4096", 16, 65536, "n of the n x n x n GEMM"),
            dtype("dtype", "bf16", {"bf16", "fp16", "tf32", "fp32"}, "GEMM type")},
           "the cuBLASLt GEMM (workload gemm)"),
       bytes("copy_bytes", "64MiB", 4096, "size of each copy of the copy workloads"),
       bytes("triad_bytes", "64MiB", 4096, "per array of the STREAM triad"),
       map("feeder",
           {bytes("copy_bytes", "16MiB", 4096, "per pageable copy (host and, on cuda, H2D)"),
            integer("threads", "1", 1, 256, "feeding threads per feeder rank")},
           "what each feeder rank does")});
  return keys;
}

}  // namespace rb

namespace rb::contention {

Params parse_params(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, contention_keys(), ctx.backend);
  Params p;
  p.world_size = ctx.world_size;
  p.gpu = ctx.backend == Backend::Cuda;
  parse_workloads(r, p);
  parse_phases(r, p);
  parse_feeders(r, p);
  parse_timing(r, p);
  const auto uses = [&](const char* w) {
    return std::find(p.workloads.begin(), p.workloads.end(), w) != p.workloads.end();
  };
  p.attention = parse_shape(r, "attention", attn::Device::Cuda, p.gpu && uses("attention"));
  p.host_attention = parse_shape(r, "host_attention", attn::Device::Host, uses("host_attention"));
  p.items = make_items(p);
  parse_gemm(r, p);
  p.copy_bytes = r.bytes("copy_bytes");
  p.triad_bytes = r.bytes("triad_bytes");
  return p;
}

}  // namespace rb::contention
