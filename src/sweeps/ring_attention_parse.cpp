// The ring_attention sweep's parser: typed parameters from the config node, and every point
// (S x ring size x layout x dtype x scheme) validated before any collective work, each refusal
// at its key with the numbers (docs/sweeps/ring_attention.md).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "config/policy_file.hpp"
#include "kernel_paths.hpp"
#include "kernel_policy.hpp"
#include "ring/hybrid_attention.hpp"
#include "ring/parity.hpp"
#include "ring/ulysses_attention.hpp"
#include "sweeps/ring_attention.hpp"
#include "sweeps/ring_attention_parts.hpp"

namespace rb::ring_sweep {
namespace {

// head_dim, or embed_dim / num_heads (a head_dim given as well must agree).
int parse_head_dim(const cfg::KeyReader& r, int num_heads) {
  const cfg::Node& n = r.node();
  if (!n.has("embed_dim")) return static_cast<int>(r.integer("head_dim"));
  const std::int64_t e = r.integer("embed_dim", 0);
  const std::string es = std::to_string(e), hs = std::to_string(num_heads);
  if (e % num_heads != 0)
    n.fail("embed_dim", "embed_dim " + es + " is not divisible by num_heads " + hs + " (" + es +
                            " % " + hs + " = " + std::to_string(e % num_heads) + ")");
  const int head_dim = static_cast<int>(e / num_heads);
  if (n.has("head_dim") && n.get_int("head_dim", 0) != head_dim)
    n.fail("head_dim", "head_dim " + std::to_string(n.get_int("head_dim", 0)) +
                           " contradicts embed_dim / num_heads = " + es + " / " + hs + " = " +
                           std::to_string(head_dim));
  return head_dim;
}

void parse_dilation(const cfg::KeyReader& r, RingParams& p) {
  const cfg::Node& n = r.node();
  p.segment_lengths = r.integers("segment_lengths", {});
  p.dilation_rates = r.integers("dilation_rates", {});
  if (p.segment_lengths.size() != p.dilation_rates.size())
    n.fail(
        p.segment_lengths.size() < p.dilation_rates.size() ? "segment_lengths" : "dilation_rates",
        "segment_lengths has " + std::to_string(p.segment_lengths.size()) +
            " entries and dilation_rates " + std::to_string(p.dilation_rates.size()) +
            ": one dilation rate per segment length");
  for (std::size_t i = 0; i < p.segment_lengths.size(); ++i) {
    const std::string w = std::to_string(p.segment_lengths[i]),
                      r = std::to_string(p.dilation_rates[i]);
    const std::string entry = " (entry " + std::to_string(i) + ")";
    if (p.dilation_rates[i] > p.segment_lengths[i])
      n.fail("dilation_rates",
             "dilation rate " + r + entry + " is larger than its segment length " + w);
    if (p.segment_lengths[i] % p.dilation_rates[i] != 0)
      n.fail("segment_lengths", "segment length " + w + entry +
                                    " is not divisible by its dilation rate " + r + ": " + w +
                                    " % " + r + " = " +
                                    std::to_string(p.segment_lengths[i] % p.dilation_rates[i]));
  }
}

// `powers_of_two` lets one file serve a 1-, 2-, 4- or 8-GPU node: the scaling series is
// whatever this world allows, rather than a list that fails on smaller allocations.
std::vector<std::int64_t> parse_ring_sizes(const cfg::KeyReader& r, int world) {
  const cfg::Node& n = r.node();
  std::vector<std::int64_t> sizes;
  const bool powers = n.has("ring_sizes") && n.child("ring_sizes").yaml().IsScalar() &&
                      n.child("ring_sizes").yaml().Scalar() == "powers_of_two";
  if (!powers) sizes = r.integers("ring_sizes", {world});
  for (std::int64_t R = 1; powers && R <= world && world % R == 0; R *= 2) sizes.push_back(R);
  if (powers && sizes.back() != world) sizes.push_back(world);
  const std::string ws = std::to_string(world);
  for (auto R : sizes)
    if (R > world || world % R != 0)
      n.fail("ring_sizes", "ring size " + std::to_string(R) + " does not divide the world size " +
                               ws + " (" + ws + " % " + std::to_string(R) + " = " +
                               std::to_string(world % R) +
                               "): the world splits into world / ring size concurrent rings");
  return sizes;
}

// `kernel` and `kernel_tile` against the kernel path table, for every dtype of the sweep.
// Where `auto` has one path to choose from (the host), that path's limits are auto's, and a
// block it refuses is blamed on the head dim rather than on a kernel nobody named.
void parse_kernel(const cfg::KeyReader& r, RingParams& p) {
  const cfg::Node& n = r.node();
  const attn::Device device = p.backend == Backend::Cuda ? attn::Device::Cuda : attn::Device::Host;
  p.kernel = r.text("kernel");
  p.kernel_tile = r.text("kernel_tile");
  // For auto the table checks the block against the path auto would run, so a refusal is
  // about the shape (head_dim), not about the kernel key the user left alone.
  const bool is_auto = p.kernel == "auto";
  const std::string blamed = is_auto ? (n.has("embed_dim") ? "embed_dim" : "head_dim") : "kernel";
  auto fail_if = [&](const std::string& key, const std::string& why) {
    if (!why.empty()) n.fail(key, why);
  };
  for (const std::string& dt : p.dtypes) {
    auto refusal = [&](const std::string& tile) {
      return attn::kernel_refusal({p.kernel, tile}, device, ring::dtype_from_string(dt), p.head_dim,
                                  p.causal, !p.segment_lengths.empty());
    };
    fail_if(blamed, refusal("default"));
    fail_if("kernel_tile", refusal(p.kernel_tile));
  }
}

// The sweep's own `kernel_policy`, else the top level's. A policy steers only `auto`: one given
// to a sweep that names its kernel is a mistake worth stopping for.
void parse_policy(const cfg::Node& n, const ParseContext& ctx, RingParams& p) {
  if (!n.has("kernel_policy")) {
    p.policy = ctx.kernel_policy;
    return;
  }
  if (p.kernel != "auto")
    n.fail("kernel_policy", "a tuned policy steers kernel: auto, but this sweep names kernel '" +
                                p.kernel + "'; remove one of the two");
  p.policy = parse_kernel_policy(n, "kernel_policy");
}

// A dtype's default tolerance as a message writes it (2e-02 -> "0.02"): %g.
std::string short_default(attn::DType t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ring::default_tolerance(t));
  return buf;
}

void parse_validate(const cfg::KeyReader& r, RingParams& p) {
  const cfg::KeyReader vr = r.map("validate");
  const cfg::Node& v = vr.node();
  p.dump = vr.flag("dump");
  p.parity_mode = ring::parity_mode_from_string(vr.choice("reference"));
  if (v.get_string("sample_rows", "auto") != "auto")
    p.sample_rows = static_cast<int>(vr.integer("sample_rows", 0));
  // Absent: the dtype's default (p.tolerance stays 0, ring::tolerance_for). An explicit 0 used to
  // mean the same without a word; as a tolerance it could never pass a bf16 run, so it is refused.
  p.tolerance = vr.number("tolerance", 0.0);
  if (v.has("tolerance") && !(p.tolerance > 0))
    v.fail("tolerance", "tolerance must be > 0; leave it out for the dtype's default (bf16 " +
                            short_default(attn::DType::BF16) + ", fp16 " +
                            short_default(attn::DType::F16) + ", fp32 " +
                            short_default(attn::DType::F32) + ")");
}

// num_kv_heads (GQA/MQA): default num_heads; must divide it. The kernels see expanded K/V
// (ring/kv_expansion.hpp) on both paths.
void parse_kv_heads(const cfg::KeyReader& r, RingParams& p) {
  const cfg::Node& n = r.node();
  p.num_kv_heads = static_cast<int>(r.integer("num_kv_heads", p.num_heads));
  const std::string kv = std::to_string(p.num_kv_heads), h = std::to_string(p.num_heads);
  if (p.num_kv_heads > p.num_heads || p.num_heads % p.num_kv_heads != 0)
    n.fail("num_kv_heads", "num_kv_heads " + kv + " must divide num_heads " + h +
                               " (each K/V head serves num_heads / num_kv_heads query heads)");
}

// scheme: ring (default), allgather, ulysses, hybrid, auto, or a list of them (one point each);
// hybrid with ulysses_degree; auto with an optional cp_policy. The other schemes' collectives:
// ring/group_transport.hpp (MPI on the host path, NCCL on the GPU path).
void parse_schemes(const cfg::KeyReader& r, const ParseContext& ctx, RingParams& p) {
  const cfg::Node& n = r.node();
  p.schemes = r.choices("scheme");
  const auto asks = [&](const char* name) {
    return std::find(p.schemes.begin(), p.schemes.end(), name) != p.schemes.end();
  };
  if (asks("hybrid") && !n.has("ulysses_degree"))
    n.fail("scheme",
           "scheme hybrid needs ulysses_degree: the ranks of each Ulysses subgroup (e.g. the GPUs "
           "of a node)");
  if (!asks("hybrid") && n.has("ulysses_degree"))
    n.fail("ulysses_degree", "ulysses_degree is hybrid's (scheme: hybrid, or a list with it)");
  if (asks("hybrid")) p.ulysses_degree = static_cast<int>(r.integer("ulysses_degree", 1));
  if (n.has("ulysses_head_groups") && !asks("ulysses") && !asks("auto"))
    n.fail("ulysses_head_groups",
           "ulysses_head_groups is the Ulysses scheme's (scheme: ulysses or auto, or a list with "
           "one of them)");
  p.ulysses_head_groups.clear();
  for (std::int64_t g : r.integers("ulysses_head_groups"))
    p.ulysses_head_groups.push_back(static_cast<int>(g));
  if (p.ulysses_head_groups.size() > 1 && asks("auto"))
    n.fail("ulysses_head_groups",
           "a list of ulysses_head_groups gives scheme ulysses one point each; scheme auto "
           "runs one Ulysses point, so give it one value");
  if (n.has("cp_policy") && !asks("auto"))
    n.fail("cp_policy", "a tuned CP policy steers scheme: auto, but this sweep names scheme " +
                            cfg::join(p.schemes, ", ") +
                            "; add auto to scheme, or remove cp_policy");
  if (n.has("cp_policy")) p.cp_policy = parse_cp_policy(n, "cp_policy");
  p.ranks_per_node = std::max(1, ctx.world_size / std::max(1, ctx.node_count));
}

// transport: auto (default), nccl, copy_engine, or a list (one point each): the GPU path's;
// the host path moves K/V with MPI. overlap_repeats: the calibration after each ring point.
void parse_transport(const cfg::KeyReader& r, const ParseContext& ctx, RingParams& p) {
  p.transports = r.choices("transport");
  for (const std::string& t : p.transports)
    if (t != "auto" && ctx.backend != Backend::Cuda)
      r.node().fail("transport", "transport " + t +
                                     " needs backend: cuda (the host path moves K/V with MPI); "
                                     "remove the key or use auto");
  p.overlap_repeats = static_cast<int>(r.integer("overlap_repeats"));
}

// The point as parsed for one scheme; validation errors name `scheme_key` (the config key that
// asked for the scheme).
Point make_point(const cfg::Node& n, const RingParams& p, std::int64_t S, std::int64_t R,
                 const std::string& layout, const std::string& dtype, ring::Scheme scheme,
                 int degree, const std::string& scheme_key, int head_groups) {
  Point pt;
  pt.scheme = scheme;
  ring::Problem& pr = pt.problem;
  pr.batch = p.batch;
  pr.heads = p.num_heads;
  pr.kv_heads = p.num_kv_heads;
  pr.head_dim = p.head_dim;
  pr.seq_len = S;
  pr.ring_size = static_cast<int>(R);
  pr.layout = ring::layout_from_string(layout);
  pr.causal = p.causal;
  pr.dtype = ring::dtype_from_string(dtype);
  for (std::size_t i = 0; i < p.segment_lengths.size(); ++i)
    pr.branches.push_back({p.segment_lengths[i], p.dilation_rates[i]});
  const std::string e = ring::problem_error(pr);
  if (!e.empty()) {
    // A branch's own inconsistency is the segment's fault; one against S is the sequence's.
    const bool seg = e.rfind("branch", 0) == 0 && e.find("sequence length") == std::string::npos &&
                     e.find("longer than") == std::string::npos;
    n.fail(seg ? "segment_lengths" : "seq_lengths", "point S=" + std::to_string(S) +
                                                        ", ring size " + std::to_string(R) +
                                                        ", layout " + layout + ": " + e);
  }
  if (scheme == ring::Scheme::Ulysses) {
    const std::string why = ring::ulysses_problem_error(pr);
    if (!why.empty()) n.fail(scheme_key, "ulysses at ring size " + std::to_string(R) + ": " + why);
    pt.ulysses_degree = static_cast<int>(R);
    pt.head_groups = head_groups;
    const std::string groups = ring::ulysses_head_groups_error(pr, pt.head_groups);
    if (!groups.empty())
      n.fail("ulysses_head_groups", "ulysses at ring size " + std::to_string(R) + ": " + groups);
  }
  if (scheme == ring::Scheme::Hybrid) {
    const std::string why = ring::hybrid_problem_error(pr, degree);
    if (!why.empty())
      n.fail(scheme_key == "scheme" ? "ulysses_degree" : scheme_key,
             "hybrid at ring size " + std::to_string(R) + ", layout " + layout + ": " + why);
    pt.ulysses_degree = degree;
  }
  pt.num_rings = static_cast<int>(p.world_size / R);
  pt.scheme_source = "none: scheme " + std::string(ring::to_string(scheme)) + " named";
  pt.label = point_label(p, pt);
  return pt;
}

// scheme: auto at one point: the CP policy's scheme where it measured one near this shape, else
// the ring (the built-in rule). The policy is assumed to apply here until the driver decides
// (RingAttentionSweep::settle_auto_points).
Point make_auto_point(const cfg::Node& n, const RingParams& p, std::int64_t S, std::int64_t R,
                      const std::string& layout, const std::string& dtype) {
  Point probe = make_point(n, p, S, R, layout, dtype, ring::Scheme::Ring, 1, "scheme", 1);
  const CpPolicySource source = p.cp_policy ? p.cp_policy->source : CpPolicySource{};
  const CpRange* range =
      source.policy ? source.policy->pick(cp_shape_of(p, probe.problem), S / R) : nullptr;
  Point pt = probe;
  if (range != nullptr) {
    const ring::Scheme scheme = ring::scheme_from_string(range->scheme);
    pt = make_point(n, p, S, R, layout, dtype, scheme, range->ulysses_degree, "cp_policy",
                    p.ulysses_head_groups.front());
  }
  pt.scheme_auto = true;
  pt.scheme_from_policy = range != nullptr;
  pt.scheme_source = range != nullptr ? source.description
                     : source.policy
                         ? "built-in (" + source.policy->file + ": no measured shape within reach)"
                         : source.description;
  pt.label = point_label(p, pt);
  return pt;
}

}  // namespace

std::string point_label(const RingParams& p, const Point& pt) {
  const ring::Problem& pr = pt.problem;
  // The ring's labels carry no scheme, as before schemes existed (--estimate-from matches labels).
  const std::string name =
      pt.scheme == ring::Scheme::Hybrid ? "hybrid(U=" + std::to_string(pt.ulysses_degree) + ")"
      : pt.head_groups > 1
          ? std::string(ring::to_string(pt.scheme)) + "(G=" + std::to_string(pt.head_groups) + ")"
          : std::string(ring::to_string(pt.scheme));
  const std::string by = pt.scheme_auto                    ? "auto:" + name + " "
                         : pt.scheme == ring::Scheme::Ring ? ""
                                                           : name + " ";
  return by + "S=" + std::to_string(pr.seq_len) + " R=" + std::to_string(pr.ring_size) + " (" +
         std::to_string(pt.num_rings) + (pt.num_rings == 1 ? " ring) " : " rings) ") +
         (p.causal ? "causal " : "") + ring::to_string(pr.layout) + " " +
         ring::to_string(pr.dtype) + " b=" + std::to_string(p.batch) +
         " h=" + std::to_string(p.num_heads) +
         (p.num_kv_heads == p.num_heads ? "" : " kvh=" + std::to_string(p.num_kv_heads)) +
         " d=" + std::to_string(p.head_dim) + (p.segment_lengths.empty() ? "" : " dilated") +
         (p.backward ? " fwd+bwd" : " fwd") +
         (pt.transport == ring::TransportAsk::Auto ? "" : " via " + ring::to_string(pt.transport));
}

CpShape cp_shape_of(const RingParams& p, const ring::Problem& pr) {
  CpShape s;
  s.dtype = ring::to_string(pr.dtype);
  s.head_dim = p.head_dim;
  s.num_heads = p.num_heads;
  s.num_kv_heads = p.num_kv_heads;
  s.causal = p.causal;
  s.layout = ring::to_string(pr.layout);
  s.dilation = cp_dilation_text(p.segment_lengths, p.dilation_rates);
  s.ring_size = pr.ring_size;
  s.span = cp_span(pr.ring_size, p.ranks_per_node);
  return s;
}

Parsed parse(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, rb::ring_attention_keys(), ctx.backend);
  const cfg::Node& n = spec.node;
  RingParams p;
  p.world_size = ctx.world_size;
  p.backend = ctx.backend;
  p.batch = static_cast<int>(r.integer("batch"));
  if (!n.has("seq_lengths"))
    n.fail("seq_lengths", "required: the total sequence lengths to sweep, e.g. [4096, 16384]");
  p.seq_lengths = r.integers("seq_lengths", {});
  p.num_heads = static_cast<int>(r.integer("num_heads"));
  p.head_dim = parse_head_dim(r, p.num_heads);
  parse_kv_heads(r, p);
  p.causal = r.flag("causal");
  p.layouts = r.choices("layout", {p.causal ? "zigzag" : "contiguous"});
  p.dtypes = r.dtypes("dtype");
  parse_dilation(r, p);
  parse_kernel(r, p);
  parse_policy(n, ctx, p);
  p.ring_sizes = parse_ring_sizes(r, ctx.world_size);
  p.ring_order = ring::parse_ring_order(r.choice("ring_order"));
  p.warmup = r.integer("warmup");
  p.iterations = r.integer("iterations");
  p.backward = r.flag("backward");
  p.seed = r.integer("seed");
  parse_validate(r, p);
  parse_schemes(r, ctx, p);
  parse_transport(r, ctx, p);

  std::vector<Point> points;
  for (auto S : p.seq_lengths)
    for (auto R : p.ring_sizes)
      for (const auto& layout : p.layouts)
        for (const auto& dtype : p.dtypes)
          for (const std::string& scheme : p.schemes)
            for (int groups : scheme == "ulysses" ? p.ulysses_head_groups : std::vector<int>{1})
              for (const std::string& transport : p.transports) {
                Point pt = scheme == "auto" ? make_auto_point(n, p, S, R, layout, dtype)
                                            : make_point(n, p, S, R, layout, dtype,
                                                         ring::scheme_from_string(scheme),
                                                         p.ulysses_degree, "scheme", groups);
                pt.transport = *ring::transport_ask_from_string(transport);
                pt.label = point_label(p, pt);
                points.push_back(std::move(pt));
              }
  return {std::move(p), std::move(points)};
}

}  // namespace rb::ring_sweep

namespace rb {
namespace {

std::vector<std::string> scheme_choices() {
  std::vector<std::string> choices = ring::scheme_names();
  choices.push_back("auto");
  return choices;
}

}  // namespace

const std::vector<cfg::KeySpec>& ring_attention_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> validate = {
      flag("dump", "false", "write the first point's tensors under dump/"),
      choice("reference", "auto", ring::parity_mode_names(),
             "which parity reference checks each point"),
      integer("sample_rows", "", 2, 1 << 20, "rows per rank compared in sampled mode, or auto")
          .computed("auto"),
      number("tolerance", "", 0.0, 1.0, "largest *_max_rel that passes parity (> 0)")
          .computed("by dtype: fp32 2e-4, fp16 5e-3, bf16 2e-2")};
  static const std::vector<cfg::KeySpec> table = cfg::sweep_keys(
      "ring_attention",
      {integer("batch", "1", 1, 1 << 20, "batch size"),
       required(integer("seq_lengths", "", 1, std::int64_t{1} << 40,
                        "total sequence lengths S of the ring (all ranks together)")
                    .or_list()),
       integer("num_heads", "8", 1, 1 << 16, "query heads"),
       integer("num_kv_heads", "", 1, 1 << 16, "K/V heads (GQA/MQA); must divide num_heads")
           .computed("num_heads"),
       integer("head_dim", "64", 1, 1024, "head dimension (host path <= 256)"),
       integer("embed_dim", "", 1, 1 << 24,
               "instead of head_dim: head_dim = embed_dim / num_heads"),
       dtype("dtype", "[fp32]", ring::dtype_names(), "storage dtype of Q, K, V, dO")
           .or_list()
           .on_cuda("[bf16]"),
       flag("causal", "false", "causal masking"),
       choice("layout", "", ring::layout_names(), "how positions are sharded over the ring")
           .or_list()
           .computed("zigzag if causal, else contiguous"),
       integer("segment_lengths", "", 1, INT64_MAX, "LongNet segment length per branch")
           .or_list()
           .computed("none (one exact branch)"),
       integer("dilation_rates", "", 1, INT64_MAX, "LongNet dilation rate per branch")
           .or_list()
           .computed("none"),
       integer("ring_sizes", "", 1, 1 << 20, "ranks per ring; world / ring size rings at once")
           .or_list()
           .computed("the world size")
           .limited("1 .. 1048576 dividing the world size, or powers_of_two"),
       choice("ring_order", "node_aware", {"node_aware", "rank"}, "which ranks form each ring"),
       integer("warmup", "2", 0, 1000000, "untimed iterations before the timed ones"),
       integer("iterations", "5", 1, 1000000, "timed iterations"),
       flag("backward", "true", "also run and time the backward"),
       integer("seed", "1234", 0, INT64_MAX, "seed of the deterministic inputs"),
       text("kernel", "auto", "the kernel path").limited("auto or a path of this run's device"),
       text("kernel_tile", "default", "the path's tile variant")
           .limited("a tile of the path's row in the kernel path table"),
       other("kernel_policy", "file or map", "the top-level kernel_policy, else none",
             "FILE or {file: FILE, strict: BOOL}", "the tuned policy kernel: auto follows"),
       map("validate", validate, "the parity check"),
       choice("scheme", "[ring]", scheme_choices(),
              "how the ring's group meets every key; one point each")
           .or_list(),
       integer("ulysses_degree", "", 1, 1 << 20, "ranks of each Ulysses subgroup of hybrid")
           .computed("required with scheme hybrid"),
       integer("ulysses_head_groups", "1", 1, 32,
               "Ulysses: each rank's heads in this many groups, one all-to-all in flight while "
               "the group before computes; one Ulysses point each")
           .or_list()
           .limited("1 .. 32 dividing num_heads / R and num_kv_heads / R"),
       other("cp_policy", "file or map", "none", "FILE or {file: FILE, strict: BOOL}",
             "the tuned CP policy scheme: auto follows"),
       choice("transport", "[auto]", ring::transport_ask_names(),
              "how the ring's K/V (and Ulysses' all-to-alls) travel on the GPU path; one point "
              "each")
           .or_list(),
       integer("overlap_repeats", "3", 0, 1000, "repeats of the overlap calibration; 0: off")});
  return table;
}

}  // namespace rb
