// The contention sweep's phases (docs/sweeps/contention.md). One launch runs them all:
//   alone               each measuring rank in turn runs every workload; the others wait in an
//                       MPI_Ibarrier polled with sleeps; cooldown_s between ranks;
//   concurrent_unbound  every rank re-bound to all PUs; per workload a start barrier, the
//                       measuring ranks run it while the feeders feed until all measuring
//                       ranks have entered the point's closing MPI_Ibarrier;
//   concurrent_bound:P  the same under decide_binding(P).
// cooldown_s between phases; the starting binding is restored at the end. The Monitor runs
// from before the first phase to after the restore on every rank.
#include "sweeps/contention/contention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <sstream>
#include <vector>
#include <utility>

#include "config/bytes.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "runtime/monitor.hpp"
#include "runtime/mpi_util.hpp"
#include "sweeps/contention/binding.hpp"
#include "sweeps/contention/monitor.hpp"
#include "sweeps/contention/workloads.hpp"

namespace rb {
namespace {

using namespace contention;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Point {
  std::size_t phase = 0, item = 0;  // item: index into Params::items (the same in every phase)
  std::string label;
};

std::string rank_range(int first, int last) {
  return first == last ? "rank " + std::to_string(first)
                       : "ranks " + std::to_string(first) + "-" + std::to_string(last);
}

std::string number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::vector<Point> make_points(const Params& p) {
  std::vector<Point> pts;
  const int m = p.measuring_ranks();
  const std::string measurers = rank_range(0, m - 1);
  const std::string reps = p.duration_s > 0 ? "iterations for about " + number(p.duration_s) + " s"
                                            : std::to_string(p.iterations) + " iterations";
  const std::string timing = reps + " (+" + std::to_string(p.warmup) + " warmup)";
  for (std::size_t ph = 0; ph < p.phases.size(); ++ph) {
    const Phase& phase = p.phases[ph];
    std::string who = m == 1                           ? measurers
                      : phase.kind == PhaseKind::Alone ? "each of " + measurers + " in turn"
                                                       : measurers + " at once";
    if (phase.kind != PhaseKind::Alone && p.feeders > 0)
      who += ", " + rank_range(p.measuring_ranks(), p.world_size - 1) + " feeding";
    for (std::size_t i = 0; i < p.items.size(); ++i)
      pts.push_back(
          {ph, i, phase.name + ": " + describe_item(p, p.items[i]) + ", " + who + ", " + timing});
  }
  return pts;
}

// What this rank did at one point.
struct PointRecord {
  Measurement m;
  double start_s = kNaN, end_s = kNaN;
  double fed_bytes = kNaN;  // feeders, concurrent points
};

// The run on this rank: binder, workloads and monitor, and what each point recorded.
class Runner {
 public:
  Runner(const Params& p, const std::vector<Point>& points, RunContext& ctx)
      : p_(p),
        points_(points),
        ctx_(ctx),
        rank_(ctx.layout.rank),
        binder_(ctx),
        work_(p, ctx),
        monitor_options_(monitor_options(ctx, p.monitor_interval_s)),
        monitor_(monitor_options_),
        records(points.size()),
        phase_binding(p.phases.size()) {}

  void run_all();
  // Points finished when the run stopped between points (a signal), else every point.
  std::size_t kept() const { return kept_; }
  void write_monitor_table(h5::Group& out) {
    write_monitor(out, monitor_, monitor_options_, stop_s_, ctx_.world);
  }

 private:
  void bind(std::size_t phase);
  // False when the ranks agreed to stop (a signal) before point pi: every rank calls it.
  bool go_on(std::size_t pi) { return ctx_.progress.point_started(pi, points_[pi].label); }
  bool run_alone(std::size_t phase);
  bool run_concurrent(std::size_t phase);
  void measure_point(std::size_t pi);
  void feed_point(std::size_t pi);
  void probe_iterations();
  void note_failure(const std::string& what) {
    if (failure.empty()) failure = "contention: rank " + std::to_string(rank_) + ": " + what;
  }

  const Params& p_;
  const std::vector<Point>& points_;
  RunContext& ctx_;
  int rank_;
  PhaseBinder binder_;
  Workloads work_;
  MonitorOptions monitor_options_;
  Monitor monitor_;
  double stop_s_ = kNaN;
  std::size_t kept_ = 0;

 public:
  std::vector<PointRecord> records;
  std::vector<AppliedBinding> phase_binding;
  std::vector<std::int64_t> iterations;  // per item, the same on every rank
  AppliedBinding start, end;
  std::string failure;  // this rank's first
};

void Runner::run_all() {
  quiet_barrier(ctx_.world);  // the monitors start together: one clock for every rank's stamps
  monitor_.start();
  start = {binder_.start_cpuset(), describe(read_mempolicy()), "at the start of the sweep"};
  probe_iterations();
  kept_ = points_.size();
  for (std::size_t ph = 0; ph < p_.phases.size(); ++ph) {
    if (ph > 0) sleep_s(p_.cooldown_s);
    bind(ph);
    quiet_barrier(ctx_.world);
    const bool more = p_.phases[ph].kind == PhaseKind::Alone ? run_alone(ph) : run_concurrent(ph);
    if (!more) break;
  }
  try {
    end = binder_.restore();
  } catch (const std::exception& e) {
    note_failure(std::string("restoring the starting binding failed: ") + e.what());
  }
  quiet_barrier(ctx_.world);
  monitor_.stop();
  stop_s_ = monitor_.now();
}

void Runner::bind(std::size_t phase) {
  try {
    phase_binding[phase] = binder_.apply(p_.phases[phase]);
  } catch (const std::exception& e) {  // the CPU binding was refused: measured as it stands
    phase_binding[phase].cpuset = binder_.start_cpuset();
    phase_binding[phase].nodeset = describe(read_mempolicy());
    phase_binding[phase].note = std::string("binding failed: ") + e.what();
    note_failure(p_.phases[phase].name + ": " + phase_binding[phase].note);
  }
}

// Each measuring rank in turn runs every item; all ranks agree before each item whether to go
// on (a signal), then sleep in a quiet barrier while it runs. An alone point holds every
// measuring rank's turn, so a stop inside the phase keeps only the phases before.
bool Runner::run_alone(std::size_t phase) {
  const std::size_t first = phase * p_.items.size();
  for (int turn = 0; turn < p_.measuring_ranks(); ++turn) {
    if (turn > 0) sleep_s(p_.cooldown_s);
    for (std::size_t i = 0; i < p_.items.size(); ++i) {
      if (!go_on(first + i)) {
        kept_ = first;
        ctx_.progress.kept_points(first);
        return false;
      }
      if (rank_ == turn) measure_point(first + i);
      quiet_barrier(ctx_.world);  // everyone else sleeps here meanwhile
    }
  }
  return true;
}

bool Runner::run_concurrent(std::size_t phase) {
  for (std::size_t i = 0; i < p_.items.size(); ++i) {
    const std::size_t pi = phase * p_.items.size() + i;
    quiet_barrier(ctx_.world);
    if (!go_on(pi)) {  // feeders too: every rank agrees, so the points before are kept
      kept_ = pi;
      return false;
    }
    RB_MPI_CHECK(MPI_Barrier(ctx_.world));  // a tight start once everyone is (nearly) there
    if (p_.is_feeder(rank_)) {
      feed_point(pi);
    } else {
      measure_point(pi);
      quiet_barrier(ctx_.world);  // the feeders' stop signal: they test this barrier
    }
  }
  return true;
}

void Runner::measure_point(std::size_t pi) {
  const Point& pt = points_[pi];
  PointRecord& r = records[pi];
  r.start_s = monitor_.now();
  r.m = work_.run(p_.items[pt.item], iterations[pt.item]);
  r.end_s = monitor_.now();
  if (!r.m.error.empty()) note_failure(p_.phases[pt.phase].name + ": " + r.m.error);
}

void Runner::feed_point(std::size_t pi) {
  MPI_Request done = MPI_REQUEST_NULL;
  RB_MPI_CHECK(MPI_Ibarrier(ctx_.world, &done));
  PointRecord& r = records[pi];
  r.start_s = monitor_.now();
  try {
    r.fed_bytes = feed_until(p_.feeder, work_.gpu_engine(), [&done] {
      int flag = 0;
      RB_MPI_CHECK(MPI_Test(&done, &flag, MPI_STATUS_IGNORE));
      return flag != 0;
    });
  } catch (const std::exception& e) {
    note_failure(std::string("feeder: ") + e.what());
    wait_quietly(done);
  }
  r.end_s = monitor_.now();
}

// duration_s: each item's iteration count from a short probe (3 iterations on every
// measuring rank at once), the largest over ranks, so its points in every phase have one count.
void Runner::probe_iterations() {
  iterations.assign(p_.items.size(), p_.iterations);
  if (p_.duration_s <= 0) return;
  for (std::size_t w = 0; w < p_.items.size(); ++w) {
    std::int64_t mine = 1, all = 1;
    if (!p_.is_feeder(rank_)) {
      const Measurement m = work_.run(p_.items[w], 3);
      const double median = stats::median(m.seconds);
      if (median > 0)
        mine =
            static_cast<std::int64_t>(std::clamp(std::ceil(p_.duration_s / median), 1.0, 100000.0));
    }
    MPI_Request r = MPI_REQUEST_NULL;
    RB_MPI_CHECK(MPI_Iallreduce(&mine, &all, 1, MPI_INT64_T, MPI_MAX, ctx_.world, &r));
    wait_quietly(r);
    iterations[w] = all;
  }
}

// ------------------------------------------------------------------------------ output

h5::PointsTable make_table(const Params& p, const std::vector<Point>& pts,
                           const std::vector<std::int64_t>& iterations) {
  h5::PointsTable t(pts.size());
  std::vector<std::string> phase, workload, path, binding, label;
  std::vector<std::int64_t> rows, iters;
  for (const Point& pt : pts) {
    const Item& it = p.items[pt.item];
    phase.push_back(p.phases[pt.phase].name);
    binding.push_back(p.phases[pt.phase].binding);
    workload.push_back(it.workload);
    path.push_back(it.path);
    rows.push_back(it.rows);
    iters.push_back(iterations[pt.item]);
    label.push_back(pt.label);
  }
  t.key("phase", phase, {"1", "alone, concurrent_unbound or concurrent_bound:<policy>"});
  t.key("workload", workload, {"1", "the measured workload (docs/sweeps/contention.md)"});
  t.key("path", path,
        {"1",
         "attention blocks: the kernel path as configured (auto or a path name); empty for the "
         "other workloads"});
  t.key("rows", rows,
        {"1", "attention blocks: query rows = key/value rows; 0 for the other workloads"});
  t.key("binding", binding,
        {"1", "launcher (the binding the run started with), unbound, or the policy"});
  t.key("iterations", iters, {"1", "timed iterations of the point on each measuring rank"});
  t.key("label", label, {"1", "the point's plan line"});
  const auto I =
      static_cast<std::uint64_t>(*std::max_element(iterations.begin(), iterations.end()));
  t.metric("time_s", {"s", "each timed iteration; NaN on feeders (they do not measure)"}, {I},
           {"iteration"});
  t.metric("median_s", {"s", "median of time_s"});
  t.metric("cv", {"1", "coefficient of variation of time_s (sample standard deviation / mean)"});
  t.metric("p95_s", {"s", "95th percentile of time_s (linear interpolation)"});
  t.metric("p99_s", {"s", "99th percentile of time_s (linear interpolation)"});
  t.metric("slowdown", {"1",
                        "median_s / the same rank's alone median_s of the same workload, path and "
                        "rows (1 at alone; NaN without alone)"});
  t.metric(
      "rate_Bps",
      {"B/s", "copies and triad: bytes moved per iteration (triad: 3 x triad_bytes) / median_s"});
  t.metric("rate_tflops", {"TFLOP/s", "gemm and attention: FLOP per iteration / median_s"});
  t.text_metric("role", {"1", "measure or feeder"});
  t.text_metric("cpuset",
                {"1", "PUs the rank was bound to in this phase (hwloc, after the change)"});
  t.text_metric("nodeset",
                {"1",
                 "memory policy in effect in this phase (get_mempolicy): default, bind:<nodes>, "
                 "preferred_many:<nodes>, interleave:<nodes>, preferred:<nodes>, local"});
  t.text_metric("binding_note",
                {"1", "why this binding (decide_binding's explanation) and any warning"});
  t.text_metric("error", {"1", "why the workload failed on this rank; empty when it ran"});
  t.metric(
      "phase_start_s",
      {"s", "Monitor::now() when the rank started its work for the point (monitor/t_s clock)"});
  t.metric("phase_end_s", {"s", "Monitor::now() when the rank finished its work for the point"});
  t.metric("fed_bytes", {"B", "feeders: bytes copied (host and H2D) while the point ran"});
  h5::Judging j;
  j.headline = {"time_s"};
  j.iteration_times = "time_s";
  t.judging(std::move(j));
  return t;
}

void fill_times(h5::PointsTable& t, std::size_t pi, const Measurement& m, double alone_median) {
  if (m.seconds.empty()) return;
  const double median = stats::median(m.seconds);
  t.set("time_s", pi, m.seconds);
  t.set("median_s", pi, median);
  t.set("cv", pi, stats::cv(m.seconds));
  t.set("p95_s", pi, stats::percentile(m.seconds, 95));
  t.set("p99_s", pi, stats::percentile(m.seconds, 99));
  t.set("slowdown", pi, median / alone_median);
  if (!std::isnan(m.bytes)) t.set("rate_Bps", pi, m.bytes / median);
  if (!std::isnan(m.flop)) t.set("rate_tflops", pi, m.flop / median / 1e12);
}

void fill_table(h5::PointsTable& t, const Params& p, const std::vector<Point>& pts, const Runner& r,
                int rank) {
  const bool feeder = p.is_feeder(rank);
  const bool alone = !p.phases.empty() && p.phases[0].kind == PhaseKind::Alone;
  for (std::size_t pi = 0; pi < pts.size(); ++pi) {
    const PointRecord& rec = r.records[pi];
    const AppliedBinding& b = r.phase_binding[pts[pi].phase];
    // Alone is phase 0 when present, so the alone point of item i is point i.
    const double alone_median = alone ? stats::median(r.records[pts[pi].item].m.seconds) : kNaN;
    t.set_text("role", pi, feeder ? "feeder" : "measure");
    t.set_text("cpuset", pi, b.cpuset);
    t.set_text("nodeset", pi, b.nodeset);
    t.set_text("binding_note", pi, b.note);
    t.set_text("error", pi, rec.m.error);
    t.set("phase_start_s", pi, rec.start_s);
    t.set("phase_end_s", pi, rec.end_s);
    t.set("fed_bytes", pi, rec.fed_bytes);
    fill_times(t, pi, rec.m, alone_median);
  }
}

void write_attributes(h5::Group& out, const Params& p) {
  std::vector<std::string> phases, described;
  for (const Phase& ph : p.phases) phases.push_back(ph.name);
  for (const auto& w : p.workloads) described.push_back(w + ": " + describe_workload(p, w));
  out.attr("phases", cfg::join(phases, ", "));
  out.attr("workloads", cfg::join(p.workloads, ", "));
  out.attr("workload_descriptions", cfg::join(described, ", "));
  out.attr("feeders", static_cast<std::int64_t>(p.feeders));
  out.attr("measuring_ranks", static_cast<std::int64_t>(p.measuring_ranks()));
  out.attr("iterations", p.iterations);
  out.attr("duration_s", p.duration_s);
  out.attr("warmup", p.warmup);
  out.attr("cooldown_s", p.cooldown_s);
  out.attr("monitor_interval_s", p.monitor_interval_s);
  out.attr("copy_bytes", static_cast<std::int64_t>(p.copy_bytes));
  out.attr("triad_bytes", static_cast<std::int64_t>(p.triad_bytes));
  out.attr("feeder_copy_bytes", static_cast<std::int64_t>(p.feeder.copy_bytes));
  out.attr("feeder_threads", static_cast<std::int64_t>(p.feeder.threads));
  out.attr("clock",
           "phase_start_s, phase_end_s and monitor/t_s are seconds since each rank's "
           "monitor started; the monitors start together right after a barrier");
}

// restore/: the binding at the start and after the restore, per rank.
void write_restore(h5::Group& out, const Runner& r) {
  h5::Group g = out.group("restore");
  auto put = [&](const char* name, const std::string& v, const char* d) {
    g.write_per_rank_string(name, v, {"1", d, "metric"});
  };
  put("start_cpuset", r.start.cpuset, "PUs of the rank when the sweep started");
  put("start_nodeset", r.start.nodeset, "memory policy when the sweep started");
  put("end_cpuset", r.end.cpuset, "PUs of the rank after the sweep restored its starting binding");
  put("end_nodeset", r.end.nodeset, "memory policy after the restore");
}

// ------------------------------------------------------------------------------ tuning mismatch
// Per phase, of the shapes (workload, rows) timed with two or more kernel paths, the fraction
// whose fastest path differs from the first phase's (alone when it runs). A path's time is the
// median over the measuring ranks of their median_s, as in the analysis (contention.py).

using Shape = std::pair<std::string, std::int64_t>;  // workload, rows

// Each point's median over the ranks that timed it (feeders and failed ranks have no times).
std::vector<double> point_medians(const Runner& r, MPI_Comm world) {
  const std::size_t P = r.records.size();
  int size = 1;
  RB_MPI_CHECK(MPI_Comm_size(world, &size));
  std::vector<double> mine(P, kNaN), all(P * static_cast<std::size_t>(size), kNaN);
  for (std::size_t pi = 0; pi < P; ++pi)
    if (!r.records[pi].m.seconds.empty()) mine[pi] = stats::median(r.records[pi].m.seconds);
  MPI_Request req = MPI_REQUEST_NULL;
  RB_MPI_CHECK(MPI_Iallgather(mine.data(), static_cast<int>(P), MPI_DOUBLE, all.data(),
                              static_cast<int>(P), MPI_DOUBLE, world, &req));
  wait_quietly(req);
  std::vector<double> out(P, kNaN);
  for (std::size_t pi = 0; pi < P; ++pi) {
    std::vector<double> finite;
    for (int rank = 0; rank < size; ++rank) {
      const double v = all[static_cast<std::size_t>(rank) * P + pi];
      if (std::isfinite(v)) finite.push_back(v);
    }
    if (!finite.empty()) out[pi] = stats::median(finite);
  }
  return out;
}

// The shapes with a kernel path, in item order.
std::vector<Shape> path_shapes(const Params& p) {
  std::vector<Shape> shapes;
  for (const Item& it : p.items)
    if (!it.path.empty() &&
        std::find(shapes.begin(), shapes.end(), Shape{it.workload, it.rows}) == shapes.end())
      shapes.push_back({it.workload, it.rows});
  return shapes;
}

// The fastest path of `shape` in phase `ph`; "" when fewer than two paths have a time. On a
// tie the first in config order (the analysis's idxmin).
std::string fastest_path(const Params& p, const std::vector<double>& medians, std::size_t ph,
                         const Shape& shape) {
  std::string best;
  double best_s = kNaN;
  int timed = 0;
  for (std::size_t i = 0; i < p.items.size(); ++i) {
    const Item& it = p.items[i];
    const double m = medians[ph * p.items.size() + i];
    if (it.path.empty() || Shape{it.workload, it.rows} != shape || !std::isfinite(m)) continue;
    ++timed;
    if (best.empty() || m < best_s) best = it.path, best_s = m;
  }
  return timed >= 2 ? best : "";
}

void write_tuning_mismatch(h5::Group& out, const Params& p, const Runner& r, MPI_Comm world) {
  const std::vector<double> medians = point_medians(r, world);
  const std::vector<Shape> shapes = path_shapes(p);
  std::vector<std::string> phase, changes;
  std::vector<std::int64_t> counted, mismatched;
  std::vector<double> fraction;
  for (std::size_t ph = 0; ph < p.phases.size(); ++ph) {
    std::int64_t n = 0, diff = 0;
    std::string said;
    for (const Shape& s : shapes) {
      const std::string ref = fastest_path(p, medians, 0, s),
                        best = fastest_path(p, medians, ph, s);
      if (ref.empty() || best.empty()) continue;
      ++n;
      if (best == ref) continue;
      ++diff;
      said += (said.empty() ? "" : "; ") + s.first + ", " + std::to_string(s.second) + ": " + ref +
              " -> " + best;
    }
    phase.push_back(p.phases[ph].name);
    counted.push_back(n);
    mismatched.push_back(diff);
    fraction.push_back(n > 0 ? static_cast<double>(diff) / static_cast<double>(n) : kNaN);
    changes.push_back(said);
  }
  h5::Group g = out.group("tuning_mismatch");
  const std::vector<std::uint64_t> dims{phase.size()};
  g.attr("reference", p.phases.empty() ? std::string() : p.phases[0].name);
  g.write_shared_strings("phase", phase, {"1", "the phase, in run order", "key"});
  g.write_shared("shapes", counted, dims,
                 {"1",
                  "shapes (workload, rows) with a fastest of two or more paths timed here and in "
                  "the reference phase"});
  g.write_shared("mismatched", mismatched, dims,
                 {"1", "of those, shapes whose fastest path differs from the reference phase's"});
  g.write_shared("fraction", fraction, dims,
                 {"1", "mismatched / shapes (the tuning mismatch); NaN when shapes is 0"});
  g.write_shared_strings(
      "changes", changes,
      {"1", "'workload, rows: reference path -> this phase's fastest', joined with '; '"});
}

// One iteration of an item at the assumed rates: attention 4 d per pair forward (half when
// causal), 3.5x with the backward; GEMM 2 n^3; triad 3 arrays at the memory rate; device copies
// at the memory rate, host<->device copies at the link rate (a PCIe or C2C link).
double item_seconds(const Params& p, const Item& it, const CostAssumptions& a) {
  const bool host = it.workload == "host_attention";
  if (host || it.workload == "attention") {
    const AttentionShape& s = host ? p.host_attention : p.attention;
    const double rows = static_cast<double>(it.rows);
    const double flop = 4.0 * s.batch * s.heads * s.head_dim * rows * rows *
                        (s.causal ? 0.5 : 1.0) * (s.backward ? 3.5 : 1.0);
    return flop / (a.device_tflops * 1e12);
  }
  if (it.workload == "gemm")
    return 2.0 * std::pow(static_cast<double>(p.gemm_size), 3) / (a.device_tflops * 1e12);
  if (it.workload == "triad") return 3.0 * static_cast<double>(p.triad_bytes) / a.memory_Bps;
  if (it.workload == "d2d_copy") return static_cast<double>(p.copy_bytes) / a.memory_Bps;
  return static_cast<double>(p.copy_bytes) / a.link_Bps + a.latency_s;
}

// The whole sweep: every item per phase, once per measuring rank in `alone` (they take turns),
// once in each concurrent phase; cooldowns after each alone turn and each phase; the probe of
// duration_s. Assumes no slowdown: under contention a duration_s point runs longer, since its
// count comes from the probe (measured: 241 s against 160 s planned on 4 x H200, where the
// concurrent host-to-device copies ran 2-4x slower).
double contention_seconds(const Params& p, const CostAssumptions& a) {
  double per_phase = 0, probe = 0;
  for (const Item& it : p.items) {
    const double once = item_seconds(p, it, a);
    per_phase += (p.duration_s > 0 ? p.duration_s : static_cast<double>(p.iterations) * once) +
                 static_cast<double>(p.warmup) * once + a.light_point_s;
    probe += 3 * once;
  }
  double total = p.duration_s > 0 ? probe : 0;
  for (const Phase& ph : p.phases) {
    const int turns = ph.kind == PhaseKind::Alone ? p.measuring_ranks() : 1;
    total += turns * (per_phase + p.cooldown_s);
  }
  return total;
}

std::vector<h5::Headline> contention_headlines() {
  using h5::OverInner, h5::OverRanks;
  return {{"median_s", OverInner::None, OverRanks::Max},
          {"slowdown", OverInner::None, OverRanks::Max},
          {"cv", OverInner::None, OverRanks::Max},
          {"p99_s", OverInner::None, OverRanks::Max}};
}

std::string contention_table(const std::string& title, const std::vector<h5::PointRecord>& records,
                             std::size_t width) {
  h5::TextTable t({{"phase", "", true},
                   {"workload", "", true},
                   {"path", "", true},
                   {"rows"},
                   {"binding", "", true},
                   {"median", "(ms)"},
                   {"p99", "(ms)"},
                   {"cv", "(%)"},
                   {"slowdown", "(x alone)"}});
  t.repeat({0, 1, 2, 3, 4});
  for (const auto& r : records)
    t.row({r.text("phase"), r.text("workload"), r.text("path").empty() ? "-" : r.text("path"),
           r.num("rows") > 0 ? h5::fixed(r.num("rows"), 0) : "-", r.text("binding"),
           h5::sig3(r.num("median_s") * 1e3), h5::sig3(r.num("p99_s") * 1e3),
           h5::fixed(r.num("cv") * 100, 1), h5::fixed(r.num("slowdown"), 2)});
  return t.render(
      title + " the same work alone, concurrent unbound and bound",
      {"each column: the measuring rank with the largest value (feeders do not measure)"}, width);
}

class ContentionSweep final : public Sweep {
 public:
  explicit ContentionSweep(Params p) : p_(std::move(p)), points_(make_points(p_)) {}
  std::string type() const override { return "contention"; }
  std::size_t point_count() const override { return points_.size(); }
  std::string iterations_text() const override {
    return p_.duration_s > 0 ? "about " + number(p_.duration_s) + " s each"
                             : rb::iterations_text(p_.iterations, p_.warmup);
  }
  double estimated_seconds(const CostAssumptions& a) const override {
    return contention_seconds(p_, a);
  }
  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (const Point& pt : points_) lines.push_back(pt.label);
    return lines;
  }
  std::uint64_t estimated_output_bytes() const override {
    const auto world = static_cast<std::uint64_t>(p_.world_size);
    const std::uint64_t per_point =
        world * (static_cast<std::uint64_t>(p_.iterations) + 16) * 8 + 1024;
    // Monitor: ~200 numbers per sample and rank (wider with many CPUs), sampled for the whole
    // sweep: with duration_s about its timed seconds x 1.5 (contention stretches them), else ~1000.
    double seconds = 0;
    for (const Phase& ph : p_.phases)
      seconds += (ph.kind == PhaseKind::Alone ? p_.measuring_ranks() : 1) * p_.duration_s *
                 static_cast<double>(p_.items.size());
    const auto samples = p_.duration_s > 0
                             ? static_cast<std::uint64_t>(1.5 * seconds / p_.monitor_interval_s)
                             : 1000u;
    return 8192 + points_.size() * per_point + world * samples * 200 * 8;
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override {
    Runner r(p_, points_, ctx);
    r.run_all();
    write_attributes(out, p_);
    h5::PointsTable t = make_table(p_, points_, r.iterations);
    fill_table(t, p_, points_, r, ctx.layout.rank);
    t.keep_points(r.kept());  // a signal: the points before it (docs/troubleshooting.md)
    t.write(out);
    report_results(ctx, t, contention_headlines(), [&](const auto& recs) {
      return contention_table(results_title(*this), recs, ctx.progress.table_width());
    });
    r.write_monitor_table(out);
    write_restore(out, r);
    write_tuning_mismatch(out, p_, r, ctx.world);
    SweepOutcome o;
    o.ok = r.failure.empty();
    o.failure = r.failure;
    return o;
  }

 private:
  Params p_;
  std::vector<Point> points_;
};

}  // namespace

std::unique_ptr<Sweep> parse_contention(const SweepSpec& spec, const ParseContext& ctx) {
  return std::make_unique<ContentionSweep>(contention::parse_params(spec, ctx));
}

}  // namespace rb
