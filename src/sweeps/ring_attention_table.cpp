// The ring_attention sweep's points table (every metric, declared on every rank, with its units
// and description) and the screen's results table; docs/sweeps/ring_attention.md lists them.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernel_paths.hpp"
#include "metrics/stats.hpp"
#include "sweeps/ring_attention_parts.hpp"

namespace rb::ring_sweep {

namespace {

double per_second(double amount, double seconds) {
  return seconds > 0 ? amount / seconds : kNaN;
}

// Every per-rank metric of a point: name, units, description, value type (d number, i integer,
// t text) and inner shape (- scalar, I iterations, R the point's ring steps, 4 tensors), each
// inner shape an axis with its dimension scale. The per-step metrics (R) live in one table per
// ring size (steps/R<R>), sized by that ring; the main table has their sums.
struct MetricColumn {
  const char* name;
  const char* units;
  const char* what;
  char type;
  char shape;
};

const MetricColumn kMetricColumns[] = {
    {"ring_id", "1",
     "which ring this rank belongs to (ring_order: rank gives world rank / ring size)", 'i', '-'},
    {"ring_rank", "1",
     "this rank's position in its ring (ring_order: rank gives world rank % ring size)", 'i', '-'},
    {"ring_nodes", "1", "distinct nodes among this rank's ring members", 'i', '-'},
    {"ring_crossing_hops", "1",
     "hops of this rank's ring (including the last back to the first) whose two ranks are on "
     "different nodes",
     'i', '-'},
    {"comm_created", "1",
     "1: this point created its ring size's MPI (and NCCL) ring communicators; 0: it reused those "
     "of an earlier point of the same ring size",
     'i', '-'},
    {"comm_create_time_s", "s",
     "seconds this rank spent creating the ring communicators at this point (0 when reused)", 'd',
     '-'},
    {"status", "1", "ok | oom | parity_failed (the same on every rank)", 't', '-'},
    {"kernel_path", "1", "the attention backend's name (its headline path; what ran is paths_ran)",
     't', '-'},
    {"paths_ran", "1",
     "the kernel paths that ran this point's blocks: one name, or each with its block calls per "
     "iteration, most first (`cudnn 6 / flash 2`), from block_calls_*",
     't', '-'},
    {"forward_time_s", "s", "wall time of each timed forward pass (after a world barrier)", 'd',
     'I'},
    {"backward_time_s", "s", "wall time of each timed backward pass (NaN without backward)", 'd',
     'I'},
    {"total_time_s", "s", "forward plus backward wall time of each timed iteration", 'd', 'I'},
    {"forward_compute_s", "s",
     "forward: block-kernel time summed over the ring steps (each step's median over iterations)",
     'd', '-'},
    {"forward_wait_s", "s",
     "forward: exposed communication summed over the ring steps (each step's median over "
     "iterations)",
     'd', '-'},
    {"backward_compute_s", "s",
     "backward: kernel time (incl. the dK/dV partial-sum adds) summed over the ring steps", 'd',
     '-'},
    {"backward_wait_s", "s", "backward: exposed communication summed over the ring steps", 'd',
     '-'},
    {"step_compute_s", "s", "forward: median over iterations of each ring step's block-kernel time",
     'd', 'R'},
    {"step_wait_s", "s",
     "forward: median over iterations of each ring step's exposed communication (time blocked "
     "waiting for the next K/V block)",
     'd', 'R'},
    {"backward_step_compute_s", "s",
     "backward: median over iterations of each ring step's kernel time (incl. adding dK/dV partial "
     "sums)",
     'd', 'R'},
    {"backward_step_wait_s", "s",
     "backward: median over iterations of each ring step's exposed communication (the own block is "
     "the last step's: it waits for the own block's dK/dV sums)",
     'd', 'R'},
    {"step_pairs", "1",
     "attending (query, key) pairs computed at each ring step, summed over batch, heads and "
     "branches",
     'i', 'R'},
    {"bytes_sent_bytes", "B",
     "bytes this rank sent to its ring neighbour per iteration (forward + backward)", 'i', '-'},
    {"peak_memory_bytes", "B",
     "high-water mark of the attention backend's allocations during the point", 'i', '-'},
    {"forward_flop", "FLOP",
     "forward FLOPs of this rank per iteration (FlashAttention convention: 4 d per attending pair)",
     'd', '-'},
    {"forward_tflops", "TFLOP/s", "forward_flop / median forward_time_s", 'd', '-'},
    {"backward_tflops", "TFLOP/s", "2.5 x forward_flop / median backward_time_s", 'd', '-'},
    {"total_tflops", "TFLOP/s", "(forward + backward FLOPs) / median total_time_s", 'd', '-'},
    {"lse_max_abs", "1", "max |lse - lse_ref| (natural log) over this rank's checked query rows",
     'd', '-'},
    {"parity_elements", "1", "elements compared with the reference for O, dQ, dK, dV", 'i', '4'},
    {"parity_mode", "1",
     "full | sampled | off: the reference that checked the point (validate.reference, auto "
     "resolved); off: not checked",
     't', '-'},
    {"parity_sampled", "1", "1: sampled heads and rows were checked, 0: every element", 'i', '-'},
    {"parity_reference_bytes", "B",
     "host bytes this rank's parity reference held at its largest (full: O(S), sampled: O(S/R))",
     'i', '-'},
    {"parity_note", "1",
     "which heads and rows were compared, and where the dK/dV normaliser came from", 't', '-'},
    {"parity_time_s", "s",
     "host time of this rank's reference computation and comparison (outside the timed regions)",
     'd', '-'},
    {"transport", "1",
     "what moved this rank's data: the ring's transport (mpi, nccl or copy_engine; on a ring "
     "across nodes that mixes them, the hop into this rank's); allgather and ulysses: their group "
     "transport; hybrid: both",
     't', '-'},
    {"transport_reason", "1",
     "why that transport: asked for, or auto's reason (one node with peer access on every hop, "
     "copy engines inside nodes and NCCL between them, or why not)",
     't', '-'},
    {"overlap_repeats", "1",
     "repeats of the overlap calibration behind the *_alone_s metrics (0: none: not the ring "
     "scheme, a ring of one, or overlap_repeats: 0)",
     'i', '-'},
    {"hop_transfer_alone_s", "s",
     "one forward hop (this rank's K/V block) with nothing else running: post to usable, median of "
     "the repeats",
     'd', '-'},
    {"forward_transfer_alone_s", "s", "the forward's R - 1 hops alone, one after another", 'd',
     '-'},
    {"backward_transfer_alone_s", "s",
     "the backward's hops alone, one after another (K/V, K/V + dK/dV, dK/dV)", 'd', '-'},
    {"step_compute_alone_s", "s",
     "forward: each ring step's block kernels with no transfer in flight, median of the repeats",
     'd', 'R'},
    {"backward_step_compute_alone_s", "s",
     "backward: each ring step's kernels and dK/dV add with no transfer in flight", 'd', 'R'},
    {"overlap_efficiency", "1",
     "forward: 1 - sum(step_wait_s) / forward_transfer_alone_s, the share of the transfers hidden "
     "behind the blocks (1: all, 0: none; below 0: waiting longer than the transfers take, e.g. "
     "for a slower rank)",
     'd', '-'},
    {"backward_overlap_efficiency", "1",
     "backward: 1 - sum(backward_step_wait_s) / backward_transfer_alone_s", 'd', '-'},
    {"kernel_slowdown", "1",
     "forward: sum(step_compute_s) / sum(step_compute_alone_s), what the transfers in flight cost "
     "the block kernels (1: nothing)",
     'd', '-'},
    {"backward_kernel_slowdown", "1",
     "backward: sum(backward_step_compute_s) / sum(backward_step_compute_alone_s)", 'd', '-'},
    {"oom_requested_bytes", "B",
     "allocation that failed on this rank (-1: this rank did not run out)", 'i', '-'},
    {"oom_free_bytes", "B", "memory free when that allocation failed", 'i', '-'},
    {"oom_message", "1", "the allocation failure on this rank (empty if none)", 't', '-'},
};

// A text metric's typical length (the dry-run's estimate): the notes and reasons are sentences.
constexpr std::size_t kTextWidth = 40;

// Declares the columns of one inner shape: `steps` the per-step ones (R: the ring size), else the
// others (I: iterations).
void declare_columns(h5::PointsTable& t, bool steps, std::uint64_t R, std::uint64_t I) {
  for (const MetricColumn& c : kMetricColumns) {
    if ((c.shape == 'R') != steps) continue;
    std::vector<std::uint64_t> inner;
    std::vector<std::string> axis;
    if (c.shape == 'I') inner = {I}, axis = {"iteration"};
    if (c.shape == 'R') inner = {R}, axis = {"step"};
    if (c.shape == '4') inner = {4}, axis = {"tensor"};  // O, dQ, dK, dV
    const h5::Meta meta{c.units, c.what};
    if (c.type == 'd') t.metric(c.name, meta, inner, axis);
    if (c.type == 'i') t.int_metric(c.name, meta, inner, axis);
    if (c.type == 't') t.text_metric(c.name, meta, kTextWidth);
  }
}

}  // namespace

void declare_step_metrics(h5::PointsTable& t, std::uint64_t R) {
  declare_columns(t, true, R, 0);
}

void declare_metrics(h5::PointsTable& t, std::uint64_t I) {
  declare_columns(t, false, 0, I);
  for (const char* tensor : {"out", "dq", "dk", "dv"}) {
    const std::string n = tensor;
    t.metric(n + "_max_abs",
             {"1", "max |" + n + " - reference| over this rank's checked elements"});
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

namespace {

// What ran, for the screen, the JSON and the report: "flash", or "cudnn 6 / flash 2" (calls per
// iteration, most first) when several paths shared the blocks; "-" when no block ran.
std::string paths_ran(const attn::BlockCalls& calls) {
  std::vector<std::pair<std::string, std::int64_t>> ran;
  for (const auto& entry : calls.by_path)
    if (entry.second > 0) ran.push_back(entry);
  if (ran.empty()) return "-";
  if (ran.size() == 1) return ran[0].first;
  std::stable_sort(ran.begin(), ran.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [name, n] : ran)
    out += (out.empty() ? "" : " / ") + name + " " + std::to_string(n);
  return out;
}

}  // namespace

// Every iteration runs the same blocks: the counts of one.
attn::BlockCalls per_iteration(attn::BlockCalls calls, std::int64_t iterations) {
  for (auto& entry : calls.by_path) entry.second /= iterations;
  calls.from_policy /= iterations;
  return calls;
}

namespace {

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
  t.set_int("parity_elements", pi,
            {par.out.compared, par.dq.compared, par.dk.compared, par.dv.compared});
  t.set_int("parity_sampled", pi, par.sampled ? 1 : 0);
  t.set_int("parity_reference_bytes", pi, par.reference_bytes);
  t.set_text("parity_note", pi,
             par.note.empty() ? std::string("every element of every head checked") : par.note);
  t.set("parity_time_s", pi, r.parity_s);
}

double sum(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return total;
}

// The calibration beside the timed iterations: what the overlap hid and what it cost.
void record_overlap(h5::PointsTable& t, std::size_t pi, const PointResult& r) {
  t.set_int("overlap_repeats", pi, r.overlap ? r.overlap->repeats : 0);
  if (!r.overlap) return;
  const ring::OverlapCalibration& c = *r.overlap;
  t.set("hop_transfer_alone_s", pi, c.hop_transfer_alone_s);
  t.set("forward_transfer_alone_s", pi, c.forward_transfer_alone_s);
  t.set("overlap_efficiency", pi, 1.0 - sum(r.step_wait) / c.forward_transfer_alone_s);
  t.set("kernel_slowdown", pi, sum(r.step_compute) / sum(c.step_compute_alone));
  if (c.backward_step_compute_alone.empty()) return;
  t.set("backward_transfer_alone_s", pi, c.backward_transfer_alone_s);
  t.set("backward_overlap_efficiency", pi,
        1.0 - sum(r.backward_step_wait) / c.backward_transfer_alone_s);
  t.set("backward_kernel_slowdown", pi,
        sum(r.backward_step_compute) / sum(c.backward_step_compute_alone));
}

// This rank's place in the point's order of ranks (larger is slower): its median time, or at an
// out-of-memory point the allocation it failed (the ranks that ran out lead the sample).
double order_of(const PointResult& r) {
  if (r.status == "oom") return r.oom_requested >= 0 ? static_cast<double>(r.oom_requested) : kNaN;
  return stats::median(r.total_s);
}

}  // namespace

void record_steps(h5::PointsTable& t, std::size_t qi, const PointResult& r) {
  t.order(qi, order_of(r));
  if (r.status == "oom") return;
  t.set("step_compute_s", qi, r.step_compute);
  t.set("step_wait_s", qi, r.step_wait);
  t.set("backward_step_compute_s", qi, r.backward_step_compute);
  t.set("backward_step_wait_s", qi, r.backward_step_wait);
  t.set_int("step_pairs", qi, r.step_pairs);
  if (!r.overlap) return;
  t.set("step_compute_alone_s", qi, r.overlap->step_compute_alone);
  if (!r.overlap->backward_step_compute_alone.empty())
    t.set("backward_step_compute_alone_s", qi, r.overlap->backward_step_compute_alone);
}

void record(h5::PointsTable& t, std::size_t pi, const PointResult& r) {
  t.order(pi, order_of(r));
  t.set_int("ring_id", pi, r.ring_id);
  t.set_int("ring_rank", pi, r.ring_rank);
  t.set_int("ring_nodes", pi, r.ring_nodes);
  t.set_int("ring_crossing_hops", pi, r.crossing_hops);
  t.set_int("comm_created", pi, r.comm_created ? 1 : 0);
  t.set("comm_create_time_s", pi, r.comm_create_s);
  t.set_text("status", pi, r.status);
  t.set_text("kernel_path", pi, r.kernel_path);
  t.set_text("transport", pi, r.transport);
  t.set_text("transport_reason", pi, r.transport_reason);
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
  t.set("forward_compute_s", pi, sum(r.step_compute));
  t.set("forward_wait_s", pi, sum(r.step_wait));
  if (!r.backward_s.empty()) {
    t.set("backward_compute_s", pi, sum(r.backward_step_compute));
    t.set("backward_wait_s", pi, sum(r.backward_step_wait));
  }
  t.set_int("bytes_sent_bytes", pi, r.bytes_sent);
  t.set_int("peak_memory_bytes", pi, r.peak_memory);
  const double fwd = r.forward_flop, bwd = r.backward_s.empty() ? 0.0 : kBackwardFlops * fwd;
  t.set("forward_flop", pi, fwd);
  t.set("forward_tflops", pi, per_second(fwd, stats::median(r.forward_s)) / 1e12);
  if (!r.backward_s.empty())
    t.set("backward_tflops", pi, per_second(bwd, stats::median(r.backward_s)) / 1e12);
  t.set("total_tflops", pi, per_second(fwd + bwd, stats::median(r.total_s)) / 1e12);
  record_parity(t, pi, r);
  record_overlap(t, pi, r);
}

// The screen's per-point figures are the report's (results._ring_extra, model._step_numbers),
// made from these: TFLOP/s per GPU = mean FLOPs per rank / the slowest rank's median time;
// exposed wait = every rank's summed step waits / (their step compute + waits).
std::vector<h5::Headline> ring_headlines() {
  using h5::OverInner, h5::OverRanks;
  std::vector<h5::Headline> h = {{"forward_time_s", OverInner::Median, OverRanks::Max},
                                 {"backward_time_s", OverInner::Median, OverRanks::Max},
                                 {"total_time_s", OverInner::Median, OverRanks::Max},
                                 {"forward_flop", OverInner::None, OverRanks::Mean},
                                 {"forward_wait_s", OverInner::None, OverRanks::Sum},
                                 {"forward_compute_s", OverInner::None, OverRanks::Sum},
                                 {"status", OverInner::None, OverRanks::Rank0},
                                 {"parity_mode", OverInner::None, OverRanks::Rank0},
                                 {"kernel_path", OverInner::None, OverRanks::Rank0},
                                 {"paths_ran", OverInner::None, OverRanks::Rank0},
                                 {"transport", OverInner::None, OverRanks::Rank0},
                                 {"overlap_efficiency", OverInner::None, OverRanks::Min},
                                 {"backward_overlap_efficiency", OverInner::None, OverRanks::Min},
                                 {"kernel_slowdown", OverInner::None, OverRanks::Max},
                                 {"backward_kernel_slowdown", OverInner::None, OverRanks::Max}};
  for (const char* tensor : {"out", "dq", "dk", "dv"})
    h.push_back({std::string(tensor) + "_max_rel", OverInner::None, OverRanks::Max});
  h.push_back({"total_time_s", OverInner::Cv, OverRanks::Slowest});  // the run summary's noise flag
  return h;
}

namespace {

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

// The share of the ranks' step time spent waiting (NaN without steps).
double exposed_share(const h5::PointRecord& r) {
  const double wait = r.num("forward_wait_s"), compute = r.num("forward_compute_s");
  return wait + compute > 0 ? wait / (wait + compute) : NAN;
}

// "97/95": a forward and a backward figure; "-" for what was not measured.
std::string pair_cell(double fwd, double bwd, int decimals) {
  const auto one = [&](double x) {
    return std::isnan(x) ? std::string("-") : h5::fixed(x, decimals);
  };
  if (std::isnan(fwd) && std::isnan(bwd)) return "-";
  return std::isnan(bwd) ? one(fwd) : one(fwd) + "/" + one(bwd);
}

// The scheme as the point's label names it: Ulysses in head groups and hybrid with their
// numbers, else rows of one sweep that differ only there read alike.
std::string scheme_cell(const h5::PointRecord& r) {
  std::string name = r.text("scheme");
  const double groups = r.num("ulysses_head_groups"), degree = r.num("ulysses_degree");
  if (name == "hybrid" && degree > 0) name += "(U=" + h5::fixed(degree, 0) + ")";
  if (name == "ulysses" && groups > 1) name += "(G=" + h5::fixed(groups, 0) + ")";
  return (r.text("scheme_asked") == "auto" ? "auto:" : "") + name;
}

}  // namespace

std::string ring_table(const std::string& title, const std::vector<h5::PointRecord>& records,
                       std::size_t width) {
  // A scheme column only where a sweep compares or chooses schemes: a ring sweep reads as before.
  bool schemes = false;
  for (const auto& r : records)
    schemes = schemes || (!r.text("scheme").empty() && r.text("scheme") != "ring") ||
              r.text("scheme_asked") == "auto";
  // A transport column where a sweep compares transports; overlap columns where a ring travelled.
  bool transports = false, overlap = false;
  for (const auto& r : records) {
    transports = transports || r.text("transport") != records.front().text("transport");
    overlap = overlap || !std::isnan(r.num("overlap_efficiency"));
  }
  std::vector<h5::TextTable::Column> cols = {{"S"}, {"R"}, {"rings"}};
  if (schemes) cols.emplace_back("scheme", "", true);
  if (transports) cols.emplace_back("transport", "", true);
  cols.emplace_back("layout", "", true);
  cols.emplace_back("dtype", "", true);
  // S to dtype say which point a row is; a split table begins every part with them (the
  // kernel column, often wide, stays in the first part).
  const std::size_t key_columns = cols.size();
  for (auto c : std::vector<h5::TextTable::Column>{{"kernel", "", true},
                                                   {"fwd", "(ms)"},
                                                   {"bwd", "(ms)"},
                                                   {"fwd", "(TFLOP/s/GPU)"},
                                                   {"fwd+bwd", "(TFLOP/s/GPU)"},
                                                   {"exposed", "(% step)"}})
    cols.push_back(c);
  if (overlap) {
    cols.emplace_back("hidden", "(% fwd/bwd)");
    cols.emplace_back("kernel", "(x alone)");
  }
  cols.emplace_back("parity", "", true);
  cols.emplace_back("max rel err");
  h5::TextTable t(std::move(cols));
  std::vector<std::size_t> keys(key_columns);
  for (std::size_t c = 0; c < key_columns; ++c) keys[c] = c;
  t.repeat(keys);
  for (const auto& r : records) {
    // The mask is the sweep's, not a key: the point's label says it.
    const std::string label = r.text("label");
    std::string layout = r.text("layout");
    if (label.find(" causal ") != std::string::npos) layout += " causal";
    if (label.find(" dilated") != std::string::npos) layout += " dilated";
    const double fwd_ms = r.num("forward_time_s") * 1e3, flop = r.num("forward_flop");
    const double bwd_s = r.num("backward_time_s");
    const double all_flop = std::isnan(bwd_s) ? flop : (1 + kBackwardFlops) * flop;
    std::vector<std::string> row = {h5::fixed(r.num("seq_len"), 0),
                                    h5::fixed(r.num("ring_size"), 0),
                                    h5::fixed(r.num("num_rings"), 0)};
    if (schemes) row.push_back(scheme_cell(r));
    if (transports) row.push_back(r.text("transport"));
    // What ran, never the backend's headline name (rank 0's blocks; every rank runs the same
    // calls).
    const std::string ran =
        r.text("paths_ran").empty() ? r.text("kernel_path") : r.text("paths_ran");
    for (auto cell :
         {layout, r.text("dtype"), ran, h5::sig3(fwd_ms), h5::sig3(r.num("backward_time_s") * 1e3),
          // TFLOP/s per GPU: the mean FLOPs per rank over the slowest rank's median time.
          h5::sig3(per_second(flop, r.num("forward_time_s")) / 1e12),
          h5::sig3(per_second(all_flop, r.num("total_time_s")) / 1e12),
          h5::fixed(100.0 * exposed_share(r), 1)})
      row.push_back(cell);
    if (overlap) {
      row.push_back(pair_cell(100.0 * r.num("overlap_efficiency"),
                              100.0 * r.num("backward_overlap_efficiency"), 0));
      row.push_back(pair_cell(r.num("kernel_slowdown"), r.num("backward_kernel_slowdown"), 2));
    }
    row.push_back(parity_cell(r));
    row.push_back(h5::sig3(worst_rel_error(r)));
    t.row(std::move(row));
  }
  return t.render(
      title + " ring attention, forward and backward",
      {"ms: median over iterations, slowest rank; TFLOP/s/GPU: mean FLOPs per rank / the "
       "slowest rank's median time (FlashAttention convention; as rb-analysis report); "
       "exposed: forward communication not hidden (allgather, ulysses: their collectives), "
       "summed over ring steps and ranks, as % of their step time (compute + wait), as the "
       "report's exposed wait; "
       "hidden: share of the transfers alone hidden behind the blocks (overlap "
       "efficiency, lowest rank), kernel: block kernels with transfers in flight / alone "
       "(highest rank), forward/backward; "
       "parity: rank 0's verdict (sampled: sampled heads and rows against the streamed "
       "reference; off: not checked, validate.reference: off), max rel err: largest over "
       "ranks and O, dQ, dK, dV"},
      width);
}

const char* const kFlopConvention =
    "FlashAttention: forward 4*d per attending (query, key) pair actually computed "
    "(summed over batch, heads and dilation branches; masked pairs not counted); "
    "backward 2.5x forward";

}  // namespace rb::ring_sweep
