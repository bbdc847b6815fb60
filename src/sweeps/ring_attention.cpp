#include "sweeps/ring_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "config/policy_file.hpp"
#include "kernel_paths.hpp"
#include "kernel_policy.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "ring/allgather_attention.hpp"
#include "ring/hybrid_attention.hpp"
#include "ring/inputs.hpp"
#include "ring/parity.hpp"
#include "ring/problem.hpp"
#include "ring/ring_attention.hpp"
#include "ring/ring_comms.hpp"
#include "ring/ring_order.hpp"
#include "ring/ulysses_attention.hpp"
#include "sweeps/oom_point.hpp"

namespace rb {
namespace {

struct RingParams {
  int batch = 1;
  int num_heads = 8;
  int num_kv_heads = 8;  // GQA/MQA: K/V heads, each shared by num_heads / num_kv_heads query heads
  int head_dim = 64;
  std::vector<std::int64_t> seq_lengths;
  std::vector<std::int64_t> ring_sizes;
  std::vector<std::string> layouts;
  std::vector<std::string> dtypes;
  bool causal = false;
  std::vector<std::int64_t> segment_lengths, dilation_rates;
  std::int64_t warmup = 2;
  std::int64_t iterations = 5;
  bool backward = true;
  std::int64_t seed = 1234;
  std::string kernel = "auto";
  std::string kernel_tile = "default";
  // The tuned policy `kernel: auto` follows (the sweep's own `kernel_policy`, else the top
  // level's); null: the built-in rule.
  std::shared_ptr<KernelPolicyUse> policy;
  bool dump = false;
  int sample_rows = 0;  // 0: auto (ring::sampled_rows_per_rank)
  ring::ParityMode parity_mode = ring::ParityMode::Auto;  // validate.reference
  double tolerance = 0.0;  // 0: the dtype's default
  int world_size = 1;
  Backend backend = Backend::Host;
  // node_aware: rings cut from the ranks grouped node by node, so they cross nodes as few
  // times as the layout allows; rank: world order (rank r in ring r / R).
  ring::RingOrder ring_order = ring::RingOrder::NodeAware;
  // How the context-parallel group meets every key (ring/cp_attention.hpp); one point each.
  std::vector<ring::Scheme> schemes{ring::Scheme::Ring};
  int ulysses_degree = 0;  // hybrid's Ulysses subgroup size (required with scheme hybrid)
};

struct Point {
  ring::Problem problem;
  ring::Scheme scheme = ring::Scheme::Ring;
  int ulysses_degree = 1;  // ranks splitting heads: hybrid U, ulysses R, 1 otherwise
  int num_rings = 1;
  std::string label;
};

std::string short_number(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double per_second(double amount, double seconds) { return seconds > 0 ? amount / seconds : kNaN; }

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> shard_as_doubles(const std::vector<unsigned char>& bytes, const ring::Problem& p) {
  std::vector<double> out(bytes.size() / attn::dtype_size(p.dtype));  // Q/dO or (GQA) smaller K/V
  for (std::size_t i = 0; i < out.size(); ++i) {
    float f = 0;
    if (p.dtype == attn::DType::F32) {
      std::memcpy(&f, bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h = 0;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      f = p.dtype == attn::DType::BF16 ? attn::bf16_to_float(h) : attn::half_to_float(h);
    }
    out[i] = f;
  }
  return out;
}

std::vector<double> medians(const std::vector<std::vector<double>>& per_step) {
  std::vector<double> m;
  for (const auto& samples : per_step) m.push_back(stats::median(samples));
  return m;
}

bool on_any_rank(MPI_Comm world, bool mine) {
  int local = mine ? 1 : 0, any = 0;
  RB_MPI_CHECK(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, world));
  return any != 0;
}

// This rank's inputs of one point, in storage bytes; kept for the dump.
struct Shards {
  std::vector<unsigned char> q, k, v, dO;
};

Shards make_shards(const ring::Problem& p, int ring_rank, std::uint64_t seed, bool backward) {
  using ring::Tensor;
  Shards s;
  s.q = ring::make_shard(p, ring_rank, seed, Tensor::Q);
  s.k = ring::make_shard(p, ring_rank, seed, Tensor::K);
  s.v = ring::make_shard(p, ring_rank, seed, Tensor::V);
  if (backward) s.dO = ring::make_shard(p, ring_rank, seed, Tensor::dO);
  return s;
}

// The worst relative error over the world (every ring) against the tolerance: empty when
// within it, else which tensor and by how much (the same text on every rank).
// The attending pairs this rank computes per step: the ring's and all-gather's split the work
// by query rows (ring::step_pairs, per K/V owner); Ulysses gives every rank heads / group of the
// heads over the whole sequence, i.e. an equal share of all pairs, in its one step.
std::vector<std::int64_t> scheme_step_pairs(const Point& pt, int ring_rank) {
  if (pt.scheme == ring::Scheme::Hybrid) {  // its inner ring's steps, padded to R
    const ring::Problem inner = ring::hybrid_inner_problem(pt.problem, pt.ulysses_degree);
    std::vector<std::int64_t> out = ring::step_pairs(inner, ring_rank / pt.ulysses_degree);
    out.resize(static_cast<std::size_t>(pt.problem.ring_size), 0);
    return out;
  }
  if (pt.scheme != ring::Scheme::Ulysses) return ring::step_pairs(pt.problem, ring_rank);
  const int R = pt.problem.ring_size;
  std::int64_t total = 0;
  for (int r = 0; r < R; ++r)
    for (std::int64_t x : ring::step_pairs(pt.problem, r)) total += x;
  std::vector<std::int64_t> out(static_cast<std::size_t>(R), 0);
  out[0] = total / R;
  return out;
}

std::string parity_verdict(MPI_Comm world, const ring::ParityReport& par, double tolerance) {
  const double mine[4] = {par.out.max_rel, par.dq.max_rel, par.dk.max_rel, par.dv.max_rel};
  double local[4], worst[4];
  for (int i = 0; i < 4; ++i) local[i] = std::isnan(mine[i]) ? -1.0 : mine[i];
  RB_MPI_CHECK(MPI_Allreduce(local, worst, 4, MPI_DOUBLE, MPI_MAX, world));
  const char* names[4] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i)
    if (worst[i] > tolerance)
      return std::string(names[i]) + " max rel error " + short_number(worst[i]) + " > tolerance " +
             short_number(tolerance);
  return "";
}

// What this rank measured at one point; record() puts it into the points table.
struct PointResult {
  std::string status = "ok";  // ok | oom | parity_failed, the same on every rank
  std::string failure;        // parity_failed: which tensor and by how much
  std::int64_t ring_id = -1, ring_rank = -1;
  std::vector<std::int64_t> ring_members;
  std::int64_t ring_nodes = -1, crossing_hops = -1;
  bool comm_created = false;  // this point created its ring size's communicators
  double comm_create_s = 0.0;
  std::string kernel_path;
  attn::BlockCalls block_calls;  // per iteration (forward + backward)
  std::string oom_message;  // empty: this rank did not run out (another one did)
  std::int64_t oom_requested = -1, oom_free = -1;
  std::vector<double> forward_s, backward_s, total_s;  // per timed iteration
  std::vector<double> step_compute, step_wait, backward_step_compute, backward_step_wait;
  std::vector<std::int64_t> step_pairs;
  std::int64_t bytes_sent = -1, peak_memory = -1;
  double forward_flop = kNaN;
  ring::ParityReport parity;
  double parity_s = kNaN;
};

// Every metric of the sweep, declared on every rank (the table checks they agree). R: the
// largest ring size (smaller rings leave NaN / -1 in the steps they do not have).
// Every per-rank metric of a point: name, units, description, value type (d number, i integer,
// t text) and inner shape (- scalar, I iterations, R ring steps of the largest ring, 4 tensors).
struct MetricColumn {
  const char* name;
  const char* units;
  const char* what;
  char type;
  char shape;
};

const MetricColumn kMetricColumns[] = {
  {"ring_id", "1", "which ring this rank belongs to (ring_order: rank gives world rank / ring size)", 'i', '-'},
  {"ring_rank", "1", "this rank's position in its ring (ring_order: rank gives world rank % ring size)", 'i', '-'},
  {"ring_members", "1", "world ranks of this rank's ring in ring order (member i sends to member i+1); -1 pads rings smaller than the largest", 'i', 'R'},
  {"ring_nodes", "1", "distinct nodes among this rank's ring members", 'i', '-'},
  {"ring_crossing_hops", "1", "hops of this rank's ring (including the last back to the first) whose two ranks are on different nodes", 'i', '-'},
  {"comm_created", "1", "1: this point created its ring size's MPI (and NCCL) ring communicators; 0: it reused those of an earlier point of the same ring size", 'i', '-'},
  {"comm_create_time_s", "s", "seconds this rank spent creating the ring communicators at this point (0 when reused)", 'd', '-'},
  {"status", "1", "ok | oom | parity_failed (the same on every rank)", 't', '-'},
  {"kernel_path", "1", "the attention backend's name (its headline path; what ran is paths_ran)", 't', '-'},
  {"paths_ran", "1", "the kernel paths that ran this point's blocks: one name, or each with its block calls per iteration, most first (`cudnn 6 / flash 2`), from block_calls_*", 't', '-'},
  {"forward_time_s", "s", "wall time of each timed forward pass (after a world barrier)", 'd', 'I'},
  {"backward_time_s", "s", "wall time of each timed backward pass (NaN without backward)", 'd', 'I'},
  {"total_time_s", "s", "forward plus backward wall time of each timed iteration", 'd', 'I'},
  {"step_compute_s", "s", "forward: median over iterations of each ring step's block-kernel time", 'd', 'R'},
  {"step_wait_s", "s", "forward: median over iterations of each ring step's exposed communication (time blocked waiting for the next K/V block)", 'd', 'R'},
  {"backward_step_compute_s", "s", "backward: median over iterations of each ring step's kernel time (incl. adding dK/dV partial sums)", 'd', 'R'},
  {"backward_step_wait_s", "s", "backward: median over iterations of each ring step's exposed communication; the last step includes the final dK/dV hop home", 'd', 'R'},
  {"step_pairs", "1", "attending (query, key) pairs computed at each ring step, summed over batch, heads and branches", 'i', 'R'},
  {"bytes_sent_bytes", "B", "bytes this rank sent to its ring neighbour per iteration (forward + backward)", 'i', '-'},
  {"peak_memory_bytes", "B", "high-water mark of the attention backend's allocations during the point", 'i', '-'},
  {"forward_flop", "FLOP", "forward FLOPs of this rank per iteration (FlashAttention convention: 4 d per attending pair)", 'd', '-'},
  {"forward_tflops", "TFLOP/s", "forward_flop / median forward_time_s", 'd', '-'},
  {"backward_tflops", "TFLOP/s", "2.5 x forward_flop / median backward_time_s", 'd', '-'},
  {"total_tflops", "TFLOP/s", "(forward + backward FLOPs) / median total_time_s", 'd', '-'},
  {"lse_max_abs", "1", "max |lse - lse_ref| (natural log) over this rank's checked query rows", 'd', '-'},
  {"parity_elements", "1", "elements compared with the reference for O, dQ, dK, dV", 'i', '4'},
  {"parity_mode", "1", "full | sampled | off: the reference that checked the point (validate.reference, auto resolved); off: not checked", 't', '-'},
  {"parity_sampled", "1", "1: sampled heads and rows were checked, 0: every element", 'i', '-'},
  {"parity_reference_bytes", "B", "host bytes this rank's parity reference held at its largest (full: O(S), sampled: O(S/R))", 'i', '-'},
  {"parity_note", "1", "which heads and rows were compared, and where the dK/dV normaliser came from", 't', '-'},
  {"parity_time_s", "s", "host time of this rank's reference computation and comparison (outside the timed regions)", 'd', '-'},
  {"oom_requested_bytes", "B", "allocation that failed on this rank (-1: this rank did not run out)", 'i', '-'},
  {"oom_free_bytes", "B", "memory free when that allocation failed", 'i', '-'},
  {"oom_message", "1", "the allocation failure on this rank (empty if none)", 't', '-'},
};

void declare_metrics(h5::PointsTable& t, std::uint64_t R, std::uint64_t I) {
  for (const MetricColumn& c : kMetricColumns) {
    std::vector<std::uint64_t> inner;
    if (c.shape == 'I') inner = {I};
    if (c.shape == 'R') inner = {R};
    if (c.shape == '4') inner = {4};
    const h5::Meta meta{c.units, c.what};
    if (c.type == 'd') t.metric(c.name, meta, inner);
    if (c.type == 'i') t.int_metric(c.name, meta, inner);
    if (c.type == 't') t.text_metric(c.name, meta);
  }
  for (const char* tensor : {"out", "dq", "dk", "dv"}) {
    const std::string n = tensor;
    t.metric(n + "_max_abs", {"1", "max |" + n + " - reference| over this rank's checked elements"});
    t.metric(n + "_max_rel", {"1", n + "_max_abs / max |reference| over the same elements"});
  }
}

// The rows of the kernel path table this sweep's device has: one block-call count each.
std::vector<std::string> device_paths(bool host) {
  std::vector<std::string> out;
  for (const attn::KernelPath& k : attn::kernel_paths())
    if (k.built && (k.device == attn::Device::Host) == host) out.push_back(k.name);
  return out;
}

void declare_block_calls(h5::PointsTable& t, bool host) {
  for (const std::string& path : device_paths(host))
    t.int_metric("block_calls_" + path,
                 {"1", "block calls (forward + backward) that ran on kernel path " + path +
                           " in one iteration"});
  t.int_metric("policy_block_calls",
               {"1", "of those, block calls whose path the tuned policy chose (kernel: auto)"});
}

// What ran, for the screen, the JSON and the report: "flash", or "cudnn 6 / flash 2" (calls per
// iteration, most first) when several paths shared the blocks; "-" when no block ran.
std::string paths_ran(const attn::BlockCalls& calls) {
  std::vector<std::pair<std::string, std::int64_t>> ran;
  for (const auto& entry : calls.by_path)
    if (entry.second > 0) ran.push_back(entry);
  if (ran.empty()) return "-";
  if (ran.size() == 1) return ran[0].first;
  std::stable_sort(ran.begin(), ran.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [name, n] : ran) out += (out.empty() ? "" : " / ") + name + " " + std::to_string(n);
  return out;
}

// Every iteration runs the same blocks: the counts of one.
attn::BlockCalls per_iteration(attn::BlockCalls calls, std::int64_t iterations) {
  for (auto& entry : calls.by_path) entry.second /= iterations;
  calls.from_policy /= iterations;
  return calls;
}

void record_block_calls(h5::PointsTable& t, std::size_t pi, const attn::BlockCalls& calls) {
  for (const auto& [path, n] : calls.by_path) t.set_int("block_calls_" + path, pi, n);
  t.set_int("policy_block_calls", pi, calls.from_policy);
}

void record_parity(h5::PointsTable& t, std::size_t pi, const PointResult& r) {
  const ring::ParityReport& par = r.parity;
  t.set_text("parity_mode", pi, ring::to_string(par.mode));
  if (par.mode == ring::ParityMode::Off) {
    t.set_text("parity_note", pi, "not checked: validate.reference is off");
    return;
  }
  const std::pair<const char*, const ring::ErrorStats*> errors[] = {
      {"out", &par.out}, {"dq", &par.dq}, {"dk", &par.dk}, {"dv", &par.dv}};
  for (const auto& [name, e] : errors) {
    t.set(std::string(name) + "_max_abs", pi, e->max_abs);
    t.set(std::string(name) + "_max_rel", pi, e->max_rel);
  }
  t.set("lse_max_abs", pi, par.lse.max_abs);
  t.set_int("parity_elements", pi, {par.out.compared, par.dq.compared, par.dk.compared, par.dv.compared});
  t.set_int("parity_sampled", pi, par.sampled ? 1 : 0);
  t.set_int("parity_reference_bytes", pi, par.reference_bytes);
  t.set_text("parity_note", pi, par.note.empty() ? std::string("every element of every head checked") : par.note);
  t.set("parity_time_s", pi, r.parity_s);
}

void record(h5::PointsTable& t, std::size_t pi, const PointResult& r) {
  t.set_int("ring_id", pi, r.ring_id);
  t.set_int("ring_rank", pi, r.ring_rank);
  t.set_int("ring_members", pi, r.ring_members);
  t.set_int("ring_nodes", pi, r.ring_nodes);
  t.set_int("ring_crossing_hops", pi, r.crossing_hops);
  t.set_int("comm_created", pi, r.comm_created ? 1 : 0);
  t.set("comm_create_time_s", pi, r.comm_create_s);
  t.set_text("status", pi, r.status);
  t.set_text("kernel_path", pi, r.kernel_path);
  if (r.status == "oom") {
    t.set_int("oom_requested_bytes", pi, r.oom_requested);
    t.set_int("oom_free_bytes", pi, r.oom_free);
    t.set_text("oom_message", pi, r.oom_message);
    return;
  }
  record_block_calls(t, pi, r.block_calls);
  t.set_text("paths_ran", pi, paths_ran(r.block_calls));
  t.set("forward_time_s", pi, r.forward_s);
  t.set("backward_time_s", pi, r.backward_s);
  t.set("total_time_s", pi, r.total_s);
  t.set("step_compute_s", pi, r.step_compute);
  t.set("step_wait_s", pi, r.step_wait);
  t.set("backward_step_compute_s", pi, r.backward_step_compute);
  t.set("backward_step_wait_s", pi, r.backward_step_wait);
  t.set_int("step_pairs", pi, r.step_pairs);
  t.set_int("bytes_sent_bytes", pi, r.bytes_sent);
  t.set_int("peak_memory_bytes", pi, r.peak_memory);
  const double fwd = r.forward_flop, bwd = r.backward_s.empty() ? 0.0 : 2.5 * fwd;
  t.set("forward_flop", pi, fwd);
  t.set("forward_tflops", pi, per_second(fwd, stats::median(r.forward_s)) / 1e12);
  if (!r.backward_s.empty())
    t.set("backward_tflops", pi, per_second(bwd, stats::median(r.backward_s)) / 1e12);
  t.set("total_tflops", pi, per_second(fwd + bwd, stats::median(r.total_s)) / 1e12);
  record_parity(t, pi, r);
}

std::vector<h5::Headline> ring_headlines() {
  using h5::OverInner, h5::OverRanks;
  std::vector<h5::Headline> h = {{"forward_time_s", OverInner::Median, OverRanks::Max},
                                 {"backward_time_s", OverInner::Median, OverRanks::Max},
                                 {"forward_tflops", OverInner::None, OverRanks::Mean},
                                 {"total_tflops", OverInner::None, OverRanks::Mean},
                                 {"step_wait_s", OverInner::Sum, OverRanks::Max, "ring steps"},
                                 {"status", OverInner::None, OverRanks::Rank0},
                                 {"parity_mode", OverInner::None, OverRanks::Rank0},
                                 {"kernel_path", OverInner::None, OverRanks::Rank0},
                                 {"paths_ran", OverInner::None, OverRanks::Rank0}};
  for (const char* tensor : {"out", "dq", "dk", "dv"})
    h.push_back({std::string(tensor) + "_max_rel", OverInner::None, OverRanks::Max});
  return h;
}

// The largest relative error of the four checked tensors; NaN when none was checked.
double worst_rel_error(const h5::PointRecord& r) {
  double worst = NAN;
  for (const char* tensor : {"out", "dq", "dk", "dv"}) {
    const double e = r.num(std::string(tensor) + "_max_rel");
    if (!std::isnan(e) && !(e <= worst)) worst = e;
  }
  return worst;
}

// The parity column: the status, and how the point was checked when not every element was.
std::string parity_cell(const h5::PointRecord& r) {
  const std::string status = r.text("status"), mode = r.text("parity_mode");
  if (status != "ok") return status;
  if (mode == "off") return "off";
  return mode == "sampled" ? "ok (sampled)" : "ok";
}

std::string ring_table(const std::string& title, const std::vector<h5::PointRecord>& records) {
  // A scheme column only where a sweep compares schemes: a ring sweep reads as before.
  bool schemes = false;
  for (const auto& r : records) schemes = schemes || (!r.text("scheme").empty() && r.text("scheme") != "ring");
  std::vector<h5::TextTable::Column> cols = {{"S"}, {"R"}, {"rings"}};
  if (schemes) cols.emplace_back("scheme", "", true);
  for (auto c : std::vector<h5::TextTable::Column>{{"layout", "", true}, {"dtype", "", true},
                   {"kernel", "", true}, {"fwd", "(ms)"}, {"bwd", "(ms)"},
                   {"fwd", "(TFLOP/s/GPU)"}, {"fwd+bwd", "(TFLOP/s/GPU)"}, {"wait", "(% fwd)"},
                   {"parity", "", true}, {"max rel err"}})
    cols.push_back(c);
  h5::TextTable t(std::move(cols));
  for (const auto& r : records) {
    // The mask is the sweep's, not a key: the point's label says it.
    const std::string label = r.text("label");
    std::string layout = r.text("layout");
    if (label.find(" causal ") != std::string::npos) layout += " causal";
    if (label.find(" dilated") != std::string::npos) layout += " dilated";
    const double fwd_ms = r.num("forward_time_s") * 1e3;
    std::vector<std::string> row = {h5::fixed(r.num("seq_len"), 0), h5::fixed(r.num("ring_size"), 0),
                                    h5::fixed(r.num("num_rings"), 0)};
    if (schemes) row.push_back(r.text("scheme"));
    // What ran, never the backend's headline name (rank 0's blocks; every rank runs the same calls).
    const std::string ran = r.text("paths_ran").empty() ? r.text("kernel_path") : r.text("paths_ran");
    for (auto cell : {layout, r.text("dtype"), ran, h5::sig3(fwd_ms),
                      h5::sig3(r.num("backward_time_s") * 1e3), h5::sig3(r.num("forward_tflops")),
                      h5::sig3(r.num("total_tflops")), h5::fixed(100.0 * r.num("step_wait_s") * 1e3 / fwd_ms, 1),
                      parity_cell(r), h5::sig3(worst_rel_error(r))})
      row.push_back(cell);
    t.row(std::move(row));
  }
  return t.render(title + " ring attention, forward and backward",
                  {"ms: median over iterations, slowest rank; TFLOP/s/GPU: each rank's FLOPs / its "
                   "median time, mean over ranks (FlashAttention convention); wait: exposed "
                   "forward communication summed over ring steps (allgather, ulysses: its "
                   "collectives), slowest rank, as % of fwd; "
                   "parity: rank 0's verdict (sampled: sampled heads and rows against the streamed "
                   "reference; off: not checked, validate.reference: off), max rel err: largest over "
                   "ranks and O, dQ, dK, dV"});
}

const char* const kFlopConvention =
    "FlashAttention: forward 4*d per attending (query, key) pair actually computed "
    "(summed over batch, heads and dilation branches; masked pairs not counted); "
    "backward 2.5x forward";

class RingAttentionSweep final : public Sweep {
 public:
  RingAttentionSweep(RingParams p, std::vector<Point> points)
      : p_(std::move(p)), points_(std::move(points)) {}
  std::string type() const override { return "ring_attention"; }

  std::vector<std::string> plan() const override {
    return timed_plan(points_, p_.iterations, p_.warmup);
  }
  std::size_t point_count() const override { return points_.size(); }
  std::string iterations_text() const override { return rb::iterations_text(p_.iterations, p_.warmup); }
  // Per point and iteration: this rank's attention FLOPs at the device rate plus the bytes its
  // scheme sends at the link rate (ring: R - 1 hops of K and V; backward: 2.5x the FLOPs, K, V,
  // dK, dV hops; the other schemes' collectives: ring::bytes_sent_per_iteration).
  double estimated_seconds(const CostAssumptions& a) const override {
    double total = 0;
    for (const Point& pt : points_) {
      const ring::Problem& pr = pt.problem;
      const double rows = static_cast<double>(pr.local_rows());
      double flop = 4.0 * pr.batch * pr.heads * pr.head_dim * rows * static_cast<double>(pr.seq_len);
      if (pr.causal) flop /= 2;
      if (p_.backward) flop *= 3.5;
      const double step_bytes =
          static_cast<double>(ring::bytes_sent_per_iteration(pr, pt.scheme, p_.backward, pt.ulysses_degree));
      const double iteration = flop / (a.device_tflops * 1e12) + step_bytes / a.link_Bps +
                               (pr.ring_size - 1) * a.latency_s;
      total += static_cast<double>(p_.iterations + p_.warmup) * iteration + a.point_overhead_s +
               ring::parity_seconds(pr, parity_options(), p_.backward);
    }
    return total;
  }
  std::vector<std::shared_ptr<KernelPolicyUse>> kernel_policies() const override {
    if (p_.policy && p_.kernel == "auto") return {p_.policy};
    return {};
  }

  std::uint64_t estimated_output_bytes() const override {
    std::uint64_t total = 4096;
    // Every point's metrics are as wide as the largest ring's (padded), plus ~40 scalars.
    const std::uint64_t per_rank = 8ull * (3ull * static_cast<std::uint64_t>(p_.iterations) +
                                           5ull * max_ring_size() + 40);
    total += points_.size() * (per_rank * static_cast<std::uint64_t>(p_.world_size) + 512);
    if (p_.dump && !points_.empty())
      total += 8ull * 8 * static_cast<std::uint64_t>(points_[0].problem.shard_elements()) *
               static_cast<std::uint64_t>(p_.world_size);
    return total;
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  double tolerance(const ring::Problem& prob) const {
    return ring::tolerance_for(prob.dtype, p_.tolerance);
  }
  // What auto follows here (the driver has decided whether the policy applies).
  attn::PolicySource policy_source() const {
    if (p_.kernel != "auto") return {nullptr, "none: kernel " + p_.kernel + " named"};
    return p_.policy ? p_.policy->source : attn::PolicySource{};
  }
  void write_attributes(h5::Group& out, const attn::AttentionBackend& backend,
                        ProgressReporter& progress) const;
  h5::PointsTable make_table(bool host) const;
  std::uint64_t max_ring_size() const;
  PointResult run_point(RunContext& ctx, attn::AttentionBackend& backend, ring::RingComms& comms,
                        std::size_t pi, h5::Group& out) const;
  void warn_spread_rings(RunContext& ctx, const std::vector<int>& node_of) const;
  void time_iterations(MPI_Comm world, ring::ContextParallelAttention& ra, PointResult& r) const;
  // The scheme's object for a point, with the transport it needs (kept in `keep`).
  std::unique_ptr<ring::ContextParallelAttention> make_scheme(
      const RunContext& ctx, const Point& pt, attn::AttentionBackend& backend, MPI_Comm group,
      std::unique_ptr<ring::RingTransport>& ring_tr, std::unique_ptr<ring::GroupTransport>& group_tr) const;
  ring::ParityOptions parity_options() const;
  void check_point(MPI_Comm world, MPI_Comm ring_comm, const ring::RingResult& res,
                   const ring::Problem& prob, PointResult& r) const;
  void write_dump(h5::Group& out, const ring::Problem& prob, int ring_rank, const Shards& in,
                  const ring::RingResult& res) const;

  RingParams p_;
  std::vector<Point> points_;
};

void RingAttentionSweep::write_attributes(h5::Group& out, const attn::AttentionBackend& backend,
                                          ProgressReporter& progress) const {
  const bool host = !backend.on_device();
  out.attr("batch", static_cast<std::int64_t>(p_.batch));
  out.attr("num_heads", static_cast<std::int64_t>(p_.num_heads));
  out.attr("num_kv_heads", static_cast<std::int64_t>(p_.num_kv_heads));
  out.attr("head_dim", static_cast<std::int64_t>(p_.head_dim));
  out.attr("causal", static_cast<std::int64_t>(p_.causal));
  out.attr("seq_lengths", p_.seq_lengths);
  out.attr("ring_sizes", p_.ring_sizes);
  out.attr("segment_lengths", p_.segment_lengths);
  out.attr("dilation_rates", p_.dilation_rates);
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("backward", static_cast<std::int64_t>(p_.backward));
  out.attr("seed", p_.seed);
  out.attr("kernel", p_.kernel);
  out.attr("kernel_tile", p_.kernel_tile);
  out.attr("attention_backend", backend.name());
  out.attr("transport", host ? "mpi" : "nccl");
  out.attr("ring_order", ring::to_string(p_.ring_order));
  out.attr("flop_convention", kFlopConvention);
  if (!host) return;
  const std::string note = "host path: Q/K/V/dO stored as " + cfg::join(p_.dtypes, ", ") +
                           ", converted to fp32 for compute; outputs, log-sum-exp and "
                           "gradient accumulators fp32";
  out.attr("precision_note", note);
  progress.note(note);
}

h5::PointsTable RingAttentionSweep::make_table(bool host) const {
  h5::PointsTable t(points_.size());
  std::vector<std::int64_t> seq, rs, nr;
  std::vector<std::string> layout, dtype, compute, kernel, tile, policy, label, scheme;
  std::vector<std::int64_t> ulysses;
  std::vector<double> tol;
  for (const Point& pt : points_) {
    seq.push_back(pt.problem.seq_len);
    rs.push_back(pt.problem.ring_size);
    nr.push_back(pt.num_rings);
    layout.push_back(ring::to_string(pt.problem.layout));
    scheme.push_back(ring::to_string(pt.scheme));
    ulysses.push_back(pt.ulysses_degree);
    dtype.push_back(ring::to_string(pt.problem.dtype));
    compute.push_back(host ? "fp32" : ring::to_string(pt.problem.dtype));
    kernel.push_back(p_.kernel);
    tile.push_back(p_.kernel_tile);
    policy.push_back(policy_source().description);
    label.push_back(pt.label);
    tol.push_back(tolerance(pt.problem));
  }
  t.key("seq_len", std::move(seq), {"1", "total sequence length S (all ranks of a ring together)"});
  t.key("ring_size", std::move(rs), {"1", "ranks per ring R"});
  t.key("num_rings", std::move(nr), {"1", "concurrent rings (world / R)"});
  t.key("layout", std::move(layout), {"1", "sequence layout over the ring: contiguous, zigzag or striped"});
  t.key("scheme", std::move(scheme),
        {"1", "context-parallel scheme: ring, allgather, ulysses or hybrid (docs/ring-attention.md, schemes)"});
  t.key("ulysses_degree", std::move(ulysses),
        {"1", "ranks that split the heads: hybrid's ulysses_degree, the ring size under ulysses, 1 otherwise"});
  t.key("dtype", std::move(dtype), {"1", "storage dtype of Q, K, V, dO"});
  t.key("compute_dtype", std::move(compute), {"1", "dtype the block kernels compute in (fp32 on the host)"});
  t.key("kernel", std::move(kernel), {"1", "kernel path asked for (kernel: in the config)"});
  t.key("kernel_tile", std::move(tile), {"1", "tile variant asked for (kernel_tile: in the config)"});
  t.key("kernel_policy", std::move(policy),
        {"1", "where kernel: auto's rule came from: built-in, or the tuned policy file and its "
              "sha256, or built-in with why the file was not applied"});
  t.key("label", std::move(label), {"1", "the point's plan line"});
  t.key("tolerance", std::move(tol), {"1", "largest *_max_rel before the point is parity_failed"});
  declare_metrics(t, max_ring_size(), static_cast<std::uint64_t>(p_.iterations));
  declare_block_calls(t, host);
  return t;
}

std::uint64_t RingAttentionSweep::max_ring_size() const {
  std::int64_t R = 1;
  for (const Point& pt : points_) R = std::max<std::int64_t>(R, pt.problem.ring_size);
  return static_cast<std::uint64_t>(R);
}

// Every world rank's node (collective): ring membership is decided from it, the same on every rank.
std::vector<int> nodes_of_world(const RunContext& ctx) {
  std::vector<int> node_of(static_cast<std::size_t>(ctx.layout.world_size));
  int mine = ctx.layout.node_index;
  RB_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, node_of.data(), 1, MPI_INT, ctx.world));
  return node_of;
}

// Once per run (rank 0): the first ring that would fit in one node yet spans several, and how
// many more do.
void RingAttentionSweep::warn_spread_rings(RunContext& ctx, const std::vector<int>& node_of) const {
  if (ctx.layout.rank != 0) return;
  std::string first;
  int more = 0;
  for (const auto R : p_.ring_sizes)
    for (const auto& members : ring::form_rings(node_of, static_cast<int>(R), p_.ring_order)) {
      const std::string w = ring::spread_warning(ring::place_in_ring(members.front(), node_of,
                                                                     static_cast<int>(R), p_.ring_order),
                                                 node_of);
      if (w.empty()) continue;
      if (first.empty()) first = w;
      else ++more;
    }
  if (first.empty()) return;
  ctx.progress.note("warning: " + first +
                    (more > 0 ? " (" + std::to_string(more) + " more rings likewise)" : ""));
}

SweepOutcome RingAttentionSweep::run(RunContext& ctx, h5::Group& out) {
  auto backend =
      ctx.paths.attention_backend({p_.kernel, p_.kernel_tile, policy_source().policy});
  write_attributes(out, *backend, ctx.progress);
  h5::PointsTable table = make_table(!backend->on_device());
  const std::vector<int> node_of = nodes_of_world(ctx);
  warn_spread_rings(ctx, node_of);
  // The ring communicators of this run, one set per ring size, freed when the run ends.
  std::function<NcclComm&()> world_nccl;
  if (ctx.gpu != nullptr) world_nccl = [&ctx]() -> NcclComm& { return ctx.gpu->world_nccl(); };
  ring::RingComms comms(ctx.world, node_of, p_.ring_order, world_nccl);
  out.attr("ring_comm_method", comms.method());
  SweepOutcome outcome;
  for (std::size_t pi = 0; pi < points_.size(); ++pi) {
    const std::string where = "point " + std::to_string(pi) + " (" + points_[pi].label + ")";
    ctx.progress.point_started(pi, points_[pi].label);
    const PointResult r = run_point(ctx, *backend, comms, pi, out);
    record(table, pi, r);
    if (r.status == "oom") ctx.progress.note(where + ": out of memory, skipped");
    if (r.status != "parity_failed") continue;
    ctx.progress.note("PARITY FAILED at " + where + ": " + r.failure);
    if (outcome.ok) {
      outcome.ok = false;
      outcome.failure = where + ": " + r.failure;
    }
  }
  out.attr("ring_comm_creations", static_cast<std::int64_t>(comms.creations()));
  if (ctx.gpu != nullptr && ctx.gpu->has_world_nccl())
    out.attr("world_nccl_create_time_s", ctx.gpu->world_nccl().creation_seconds());
  table.write(out);
  report_results(ctx, table, ring_headlines(),
                 [&](const auto& r) { return ring_table(results_title(*this), r); });
  return outcome;
}

PointResult RingAttentionSweep::run_point(RunContext& ctx, attn::AttentionBackend& backend,
                                          ring::RingComms& comms, std::size_t pi,
                                          h5::Group& out) const {
  const ring::Problem& prob = points_[pi].problem;
  PointResult r;
  const ring::RingComm& ring_comm = comms.get(prob.ring_size, r.comm_created);
  const ring::RingPlacement& place = ring_comm.placement;
  r.ring_id = place.ring_id;
  r.ring_rank = place.ring_rank;
  r.ring_members.assign(place.members.begin(), place.members.end());
  r.ring_nodes = place.nodes_spanned;
  r.crossing_hops = place.crossing_hops;
  r.comm_create_s = r.comm_created ? ring_comm.create_s : 0.0;
  r.kernel_path = backend.name();

  // Construction allocates every buffer: an out-of-memory on any rank skips the point on all.
  backend.reset_peak();
  std::unique_ptr<ring::RingTransport> transport;
  std::unique_ptr<ring::GroupTransport> group_transport;
  std::unique_ptr<ring::ContextParallelAttention> ra;
  const std::uint64_t seed = static_cast<std::uint64_t>(p_.seed);
  const int ring_rank = static_cast<int>(r.ring_rank);
  Shards in;
  try {
    ra = make_scheme(ctx, points_[pi], backend, ring_comm.mpi.get(), transport, group_transport);
    in = make_shards(prob, ring_rank, seed, p_.backward);
  } catch (const attn::OutOfMemory& e) {
    r.oom_message = e.what();
    r.oom_requested = static_cast<std::int64_t>(e.requested());
    r.oom_free = static_cast<std::int64_t>(e.free_bytes());
  } catch (const std::bad_alloc& e) {  // the host input shards (Q, K, V, dO of this rank)
    r.oom_requested = (p_.backward ? 4 : 3) * prob.shard_elements() *
                      static_cast<std::int64_t>(attn::dtype_size(prob.dtype));
    r.oom_free = static_cast<std::int64_t>(oom::meminfo_bytes("MemAvailable"));
    r.oom_message = "host input shards: out of memory allocating " + std::to_string(r.oom_requested) +
                    " B (" + std::to_string(r.oom_free) + " B available; " + e.what() + ")";
  }
  if (on_any_rank(ctx.world, !r.oom_message.empty())) {
    r.status = "oom";
    return r;
  }

  ra->load_inputs(in.q.data(), in.k.data(), in.v.data(), p_.backward ? in.dO.data() : nullptr);
  backend.reset_block_calls();
  time_iterations(ctx.world, *ra, r);
  r.block_calls = per_iteration(backend.block_calls(), p_.warmup + p_.iterations);
  for (const std::string& path : device_paths(!backend.on_device()))  // measured: none ran
    if (r.block_calls.of(path) == 0) r.block_calls.by_path.emplace_back(path, 0);
  r.peak_memory = static_cast<std::int64_t>(backend.peak_bytes());
  r.step_pairs = scheme_step_pairs(points_[pi], ring_rank);
  std::int64_t pairs = 0;
  for (auto x : r.step_pairs) pairs += x;
  r.forward_flop = 4.0 * prob.head_dim * static_cast<double>(pairs);

  // Parity on the last iteration's results.
  const ring::RingResult res = ra->result();
  check_point(ctx.world, ring_comm.mpi.get(), res, prob, r);
  // The first point's tensors, so anyone can re-check the numbers offline.
  if (p_.dump && pi == 0) write_dump(out, prob, ring_rank, in, res);
  return r;
}

void RingAttentionSweep::time_iterations(MPI_Comm world, ring::ContextParallelAttention& ra, PointResult& r) const {
  const std::size_t R = static_cast<std::size_t>(ra.problem().ring_size);
  std::vector<std::vector<double>> fc(R), fw(R), bc(R), bw(R);
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (std::int64_t it = 0; it < p_.warmup + p_.iterations; ++it) {
    if (it == p_.warmup) ra.reset_bytes_sent();
    RB_MPI_CHECK(MPI_Barrier(world));
    const auto t0 = clock::now();
    ra.forward();  // ends synchronised
    const auto t1 = clock::now();
    if (p_.backward) ra.backward();
    const auto t2 = clock::now();
    if (it < p_.warmup) continue;
    r.forward_s.push_back(seconds(t0, t1));
    if (p_.backward) r.backward_s.push_back(seconds(t1, t2));
    r.total_s.push_back(seconds(t0, t2));
    for (std::size_t s = 0; s < R; ++s) {
      fc[s].push_back(ra.forward_steps().compute[s]);
      fw[s].push_back(ra.forward_steps().wait[s]);
      if (!p_.backward) continue;
      bc[s].push_back(ra.backward_steps().compute[s]);
      bw[s].push_back(ra.backward_steps().wait[s]);
    }
  }
  r.step_compute = medians(fc);
  r.step_wait = medians(fw);
  if (p_.backward) {
    r.backward_step_compute = medians(bc);
    r.backward_step_wait = medians(bw);
  }
  r.bytes_sent = static_cast<std::int64_t>(ra.bytes_sent() / static_cast<std::uint64_t>(p_.iterations));
}

std::unique_ptr<ring::ContextParallelAttention> RingAttentionSweep::make_scheme(
    const RunContext& ctx, const Point& pt, attn::AttentionBackend& backend, MPI_Comm group,
    std::unique_ptr<ring::RingTransport>& ring_tr, std::unique_ptr<ring::GroupTransport>& group_tr) const {
  if (pt.scheme == ring::Scheme::Ring) {
    ring_tr = ctx.paths.ring_transport(group, backend);
    return std::make_unique<ring::RingAttention>(pt.problem, backend, *ring_tr, p_.backward);
  }
  if (pt.scheme == ring::Scheme::Hybrid) {
    // Ulysses inside subgroups of U consecutive group ranks, the ring across them; both
    // transports keep a duplicate of their communicator, so the splits are freed here.
    int rank = 0;
    MPI_Comm_rank(group, &rank);
    const int u = pt.ulysses_degree;
    MPI_Comm heads = MPI_COMM_NULL, across = MPI_COMM_NULL;
    RB_MPI_CHECK(MPI_Comm_split(group, rank / u, rank % u, &heads));
    RB_MPI_CHECK(MPI_Comm_split(group, rank % u, rank / u, &across));
    group_tr = ctx.paths.group_transport(heads, backend);
    ring_tr = ctx.paths.ring_transport(across, backend);
    MPI_Comm_free(&heads);
    MPI_Comm_free(&across);
    return std::make_unique<ring::HybridAttention>(pt.problem, u, backend, *ring_tr, *group_tr, p_.backward);
  }
  group_tr = ctx.paths.group_transport(group, backend);
  if (pt.scheme == ring::Scheme::AllGather)
    return std::make_unique<ring::AllGatherAttention>(pt.problem, backend, *group_tr, p_.backward);
  return std::make_unique<ring::UlyssesAttention>(pt.problem, backend, *group_tr, p_.backward);
}

ring::ParityOptions RingAttentionSweep::parity_options() const {
  ring::ParityOptions opt;
  opt.sample_rows = p_.sample_rows;
  opt.mode = p_.parity_mode;
  return opt;
}

void RingAttentionSweep::check_point(MPI_Comm world, MPI_Comm ring_comm, const ring::RingResult& res,
                                     const ring::Problem& prob, PointResult& r) const {
  const ring::ParityOptions opt = parity_options();
  if (opt.mode == ring::ParityMode::Off) {
    r.parity.mode = ring::ParityMode::Off;
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  r.parity = ring::check_parity(prob, static_cast<std::uint64_t>(p_.seed), static_cast<int>(r.ring_rank),
                                ring_comm, res, p_.backward, opt);
  r.parity_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.failure = parity_verdict(world, r.parity, tolerance(prob));
  if (!r.failure.empty()) r.status = "parity_failed";
}

void RingAttentionSweep::write_dump(h5::Group& out, const ring::Problem& prob, int ring_rank,
                                    const Shards& in, const ring::RingResult& res) const {
  h5::Group d = out.group("dump");
  d.attr("point", std::int64_t{0});
  d.attr("layout", "per rank [world, batch, heads, local_rows, head_dim]; row i of a rank holds global position positions[rank, i]");
  const std::vector<std::uint64_t> dims = {static_cast<std::uint64_t>(prob.batch),
                                           static_cast<std::uint64_t>(prob.heads),
                                           static_cast<std::uint64_t>(prob.local_rows()),
                                           static_cast<std::uint64_t>(prob.head_dim)};
  const std::vector<std::uint64_t> rows = {dims[0], dims[1], dims[2]};
  const std::vector<std::uint64_t> kv = {dims[0], static_cast<std::uint64_t>(prob.num_kv_heads()), dims[2], dims[3]};
  d.write_per_rank("positions", ring::local_positions(prob, ring_rank), {dims[2]},
                   {"1", "global sequence position of each local row"});
  d.write_per_rank("q", shard_as_doubles(in.q, prob), dims, {"1", "queries as stored (storage dtype values)"});
  d.write_per_rank("k", shard_as_doubles(in.k, prob), kv, {"1", "keys as stored ([..., num_kv_heads, ...])"});
  d.write_per_rank("v", shard_as_doubles(in.v, prob), kv, {"1", "values as stored ([..., num_kv_heads, ...])"});
  d.write_per_rank("o", as_doubles(res.out), dims, {"1", "ring attention output (fp32)"});
  d.write_per_rank("lse", as_doubles(res.lse), rows, {"1", "log-sum-exp (natural log) of each query row"});
  if (!p_.backward) return;
  d.write_per_rank("do", shard_as_doubles(in.dO, prob), dims, {"1", "output gradient as stored"});
  d.write_per_rank("dq", as_doubles(res.dq), dims, {"1", "query gradient (fp32)"});
  d.write_per_rank("dk", as_doubles(res.dk), kv, {"1", "key gradient (fp32), on the block's owner"});
  d.write_per_rank("dv", as_doubles(res.dv), kv, {"1", "value gradient (fp32), on the block's owner"});
}

// head_dim, or embed_dim / num_heads (a head_dim given as well must agree).
int parse_head_dim(const cfg::Node& n, int num_heads) {
  if (!n.has("embed_dim")) return static_cast<int>(n.get_int("head_dim", 64, 1, 1024));
  const std::int64_t e = n.get_int("embed_dim", 0, 1, 1 << 24);
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

void parse_dilation(const cfg::Node& n, RingParams& p) {
  p.segment_lengths = n.get_int_list("segment_lengths", {}, 1);
  p.dilation_rates = n.get_int_list("dilation_rates", {}, 1);
  if (p.segment_lengths.size() != p.dilation_rates.size())
    n.fail(p.segment_lengths.size() < p.dilation_rates.size() ? "segment_lengths" : "dilation_rates",
           "segment_lengths has " + std::to_string(p.segment_lengths.size()) +
               " entries and dilation_rates " + std::to_string(p.dilation_rates.size()) +
               ": one dilation rate per segment length");
  for (std::size_t i = 0; i < p.segment_lengths.size(); ++i) {
    const std::string w = std::to_string(p.segment_lengths[i]), r = std::to_string(p.dilation_rates[i]);
    const std::string entry = " (entry " + std::to_string(i) + ")";
    if (p.dilation_rates[i] > p.segment_lengths[i])
      n.fail("dilation_rates", "dilation rate " + r + entry + " is larger than its segment length " + w);
    if (p.segment_lengths[i] % p.dilation_rates[i] != 0)
      n.fail("segment_lengths", "segment length " + w + entry + " is not divisible by its dilation rate " +
                                    r + ": " + w + " % " + r + " = " +
                                    std::to_string(p.segment_lengths[i] % p.dilation_rates[i]));
  }
}

// `powers_of_two` lets one file serve a 1-, 2-, 4- or 8-GPU node: the scaling series is
// whatever this world allows, rather than a list that fails on smaller allocations.
std::vector<std::int64_t> parse_ring_sizes(const cfg::Node& n, int world) {
  std::vector<std::int64_t> sizes;
  const bool powers = n.has("ring_sizes") && n.child("ring_sizes").yaml().IsScalar() &&
                      n.child("ring_sizes").yaml().Scalar() == "powers_of_two";
  if (!powers) sizes = n.get_int_list("ring_sizes", {world}, 1, 1 << 20);
  for (std::int64_t R = 1; powers && R <= world && world % R == 0; R *= 2) sizes.push_back(R);
  if (powers && sizes.back() != world) sizes.push_back(world);
  const std::string ws = std::to_string(world);
  for (auto R : sizes)
    if (R > world || world % R != 0)
      n.fail("ring_sizes", "ring size " + std::to_string(R) + " does not divide the world size " + ws +
                               " (" + ws + " % " + std::to_string(R) + " = " + std::to_string(world % R) +
                               "): the world splits into world / ring size concurrent rings");
  return sizes;
}

// `kernel` and `kernel_tile` against the kernel path table, for every dtype of the sweep.
// Where `auto` has one path to choose from (the host), that path's limits are auto's, and a
// block it refuses is blamed on the head dim rather than on a kernel nobody named.
void parse_kernel(const cfg::Node& n, RingParams& p) {
  const attn::Device device = p.backend == Backend::Cuda ? attn::Device::Cuda : attn::Device::Host;
  p.kernel = n.get_string("kernel", "auto");
  p.kernel_tile = n.get_string("kernel_tile", "default");
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

void parse_validate(const cfg::Node& n, RingParams& p) {
  if (!n.has("validate")) return;
  const cfg::Node v = n.child("validate");
  v.require_map();
  v.allow_only({"dump", "reference", "sample_rows", "tolerance"});
  p.dump = v.get_bool("dump", false);
  p.parity_mode = ring::parity_mode_from_string(v.get_choice("reference", "auto", ring::parity_mode_names()));
  if (v.get_string("sample_rows", "auto") != "auto")
    p.sample_rows = static_cast<int>(v.get_int("sample_rows", 32, 2, 1 << 20));
  p.tolerance = v.get_double("tolerance", 0.0, 0.0, 1.0);
}

// num_kv_heads (GQA/MQA): default num_heads; must divide it. The kernels see expanded K/V
// (ring/kv_expansion.hpp), measured on the host path only so far.
void parse_kv_heads(const cfg::Node& n, const ParseContext& ctx, RingParams& p) {
  p.num_kv_heads = static_cast<int>(n.get_int("num_kv_heads", p.num_heads, 1, 1 << 16));
  const std::string kv = std::to_string(p.num_kv_heads), h = std::to_string(p.num_heads);
  if (p.num_kv_heads > p.num_heads || p.num_heads % p.num_kv_heads != 0)
    n.fail("num_kv_heads", "num_kv_heads " + kv + " must divide num_heads " + h +
                               " (each K/V head serves num_heads / num_kv_heads query heads)");
  if (p.num_kv_heads != p.num_heads && ctx.backend == Backend::Cuda)
    n.fail("num_kv_heads", "num_kv_heads " + kv + " < num_heads " + h + " (grouped-query attention) runs on "
                           "the host path only in this build (not yet measured on a GPU); use backend: host");
}

// scheme: ring (default), allgather, ulysses, hybrid, or a list of them (one point each); hybrid
// with ulysses_degree. The other schemes' collectives exist on the host path only
// (ring/group_transport.hpp).
void parse_schemes(const cfg::Node& n, const ParseContext& ctx, RingParams& p) {
  const std::vector<std::string> names = n.get_choice_list("scheme", {"ring"}, ring::scheme_names());
  p.schemes.clear();
  for (const std::string& name : names) {
    const ring::Scheme s = ring::scheme_from_string(name);
    if (s != ring::Scheme::Ring && ctx.backend == Backend::Cuda)
      n.fail("scheme", "scheme " + name + " runs on the host path only in this build: its NCCL "
                       "collectives (all-gather, reduce-scatter, all-to-all) are not written yet; "
                       "use scheme: ring on the cuda backend, or backend: host");
    p.schemes.push_back(s);
  }
  const bool hybrid = std::find(p.schemes.begin(), p.schemes.end(), ring::Scheme::Hybrid) != p.schemes.end();
  if (hybrid && !n.has("ulysses_degree"))
    n.fail("scheme", "scheme hybrid needs ulysses_degree: the ranks of each Ulysses subgroup (e.g. the GPUs of a node)");
  if (!hybrid && n.has("ulysses_degree"))
    n.fail("ulysses_degree", "ulysses_degree is hybrid's (scheme: hybrid, or a list with it)");
  if (hybrid) p.ulysses_degree = static_cast<int>(n.get_int("ulysses_degree", 1, 1, 1 << 20));
}

std::string point_label(const RingParams& p, const ring::Problem& pr, int num_rings, ring::Scheme scheme) {
  // The ring's labels carry no scheme, as before schemes existed (--estimate-from matches labels).
  const std::string by = scheme == ring::Scheme::Ring     ? ""
                         : scheme == ring::Scheme::Hybrid ? "hybrid(U=" + std::to_string(p.ulysses_degree) + ") "
                                                          : std::string(ring::to_string(scheme)) + " ";
  return by + "S=" + std::to_string(pr.seq_len) + " R=" + std::to_string(pr.ring_size) + " (" +
         std::to_string(num_rings) + (num_rings == 1 ? " ring) " : " rings) ") +
         (p.causal ? "causal " : "") + ring::to_string(pr.layout) + " " + ring::to_string(pr.dtype) +
         " b=" + std::to_string(p.batch) + " h=" + std::to_string(p.num_heads) +
         (p.num_kv_heads == p.num_heads ? "" : " kvh=" + std::to_string(p.num_kv_heads)) +
         " d=" + std::to_string(p.head_dim) + (p.segment_lengths.empty() ? "" : " dilated") +
         (p.backward ? " fwd+bwd" : " fwd");
}

Point make_point(const cfg::Node& n, const RingParams& p, std::int64_t S, std::int64_t R,
                 const std::string& layout, const std::string& dtype, ring::Scheme scheme) {
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
    n.fail(seg ? "segment_lengths" : "seq_lengths", "point S=" + std::to_string(S) + ", ring size " +
                                                        std::to_string(R) + ", layout " + layout + ": " + e);
  }
  if (scheme == ring::Scheme::Ulysses) {
    const std::string why = ring::ulysses_problem_error(pr);
    if (!why.empty())
      n.fail("scheme", "ulysses at ring size " + std::to_string(R) + ": " + why);
    pt.ulysses_degree = static_cast<int>(R);
  }
  if (scheme == ring::Scheme::Hybrid) {
    const std::string why = ring::hybrid_problem_error(pr, p.ulysses_degree);
    if (!why.empty())
      n.fail("ulysses_degree", "hybrid at ring size " + std::to_string(R) + ", layout " + layout + ": " + why);
    pt.ulysses_degree = p.ulysses_degree;
  }
  pt.num_rings = static_cast<int>(p.world_size / R);
  pt.label = point_label(p, pr, pt.num_rings, scheme);
  return pt;
}

}  // namespace

std::unique_ptr<Sweep> parse_ring_attention(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "batch", "seq_lengths", "num_heads", "num_kv_heads", "head_dim", "embed_dim",
                "dtype", "causal", "layout", "segment_lengths", "dilation_rates", "ring_sizes",
                "ring_order", "warmup", "iterations", "backward", "seed", "kernel", "kernel_tile",
                "kernel_policy", "validate", "scheme", "ulysses_degree"});
  RingParams p;
  p.world_size = ctx.world_size;
  p.backend = ctx.backend;
  p.batch = static_cast<int>(n.get_int("batch", 1, 1, 1 << 20));
  if (!n.has("seq_lengths")) n.fail("seq_lengths", "required: the total sequence lengths to sweep, e.g. [4096, 16384]");
  p.seq_lengths = n.get_int_list("seq_lengths", {}, 1, std::int64_t{1} << 40);
  p.num_heads = static_cast<int>(n.get_int("num_heads", 8, 1, 1 << 16));
  p.head_dim = parse_head_dim(n, p.num_heads);
  parse_kv_heads(n, ctx, p);
  p.causal = n.get_bool("causal", false);
  p.layouts = n.get_choice_list("layout", {p.causal ? "zigzag" : "contiguous"}, ring::layout_names());
  p.dtypes = n.get_choice_list("dtype", {ctx.backend == Backend::Cuda ? "bf16" : "fp32"}, ring::dtype_names());
  parse_dilation(n, p);
  parse_kernel(n, p);
  parse_policy(n, ctx, p);
  p.ring_sizes = parse_ring_sizes(n, ctx.world_size);
  p.ring_order = ring::parse_ring_order(n.get_choice("ring_order", "node_aware", {"node_aware", "rank"}));
  p.warmup = n.get_int("warmup", p.warmup, 0, 1000000);
  p.iterations = n.get_int("iterations", p.iterations, 1, 1000000);
  p.backward = n.get_bool("backward", true);
  p.seed = n.get_int("seed", p.seed, 0);
  parse_validate(n, p);
  parse_schemes(n, ctx, p);

  std::vector<Point> points;
  for (auto S : p.seq_lengths)
    for (auto R : p.ring_sizes)
      for (const auto& layout : p.layouts)
        for (const auto& dtype : p.dtypes)
          for (ring::Scheme scheme : p.schemes) points.push_back(make_point(n, p, S, R, layout, dtype, scheme));
  return std::make_unique<RingAttentionSweep>(std::move(p), std::move(points));
}

}  // namespace rb
