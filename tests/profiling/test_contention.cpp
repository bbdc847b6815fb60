// The contention sweep on the host path: its parser (the phase grid, and every refusal naming
// its key), and 2-rank runs into a real file read back: the triad slows down when both ranks
// run it at once, each phase's recorded cpuset is what the policy decides, the binding is
// restored, the monitor series lie inside the sweep, and feeders are recorded as feeders.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "metrics/h5.hpp"
#include "ring/host_sweep.hpp"
#include "runtime/binding.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"
#include "sweeps/contention/contention.hpp"
#include "sweeps/contention/binding.hpp"
#include "test_support.hpp"

namespace {

rb::ParseContext host_context(int world) {
  rb::ParseContext c;
  c.world_size = world;
  c.backend = rb::Backend::Host;
  return c;
}

std::string refusal(const std::string& yaml, const std::string& key, int world = 2) {
  const auto spec = rbtest::sweep_spec("contention", "contention", "type: contention\n" + yaml);
  return rbtest::rejection(rb::parse_contention, spec, host_context(world), key);
}

// Element [rank][point] of a [world, P] dataset read flat.
template <class T>
const T& at(const std::vector<T>& v, std::size_t points, int rank, std::size_t point) {
  return v.at(static_cast<std::size_t>(rank) * points + point);
}

}  // namespace

TEST_CASE("contention parser: phases run in one order, concurrent_bound once per policy") {
  const auto spec =
      rbtest::sweep_spec("contention", "c",
                         "type: contention\nphases: [concurrent_bound, alone]\n"
                         "policies: [numa, core]\nworkloads: [host_attention, triad]\n");
  const rb::contention::Params p = rb::contention::parse_params(spec, host_context(2));
  std::vector<std::string> names;
  for (const auto& ph : p.phases) names.push_back(ph.name);
  CHECK(names ==
        std::vector<std::string>{"alone", "concurrent_bound:numa", "concurrent_bound:core"});
  CHECK(p.phases[0].binding == "launcher");
  CHECK(p.phases[1].binding == "numa");
  CHECK(p.workloads == std::vector<std::string>{"host_attention", "triad"});
  const auto sweep = rb::parse_contention(spec, host_context(2));
  const auto plan = sweep->plan();
  REQUIRE(plan.size() == 6);  // phase-major: 3 phases x 2 workloads
  CHECK(plan[0].rfind("alone: attention block on the host", 0) == 0);
  CHECK(plan[5].rfind("concurrent_bound:core: host STREAM triad", 0) == 0);
  // Defaults on the host: every phase, core and numa, the triad.
  const auto d = rb::contention::parse_params(
      rbtest::sweep_spec("contention", "c", "type: contention\n"), host_context(2));
  CHECK(d.phases.size() == 4);
  CHECK(d.workloads == std::vector<std::string>{"triad"});
}

TEST_CASE("contention parser: bad configs name the key") {
  CHECK(refusal("workloads: [triad, trid]\n", "workloads[1]").find("did you mean 'triad'") !=
        std::string::npos);
  CHECK(refusal("phases: [alone, concurent_unbound]\n", "phases[1]")
            .find("did you mean 'concurrent_unbound'") != std::string::npos);
  CHECK(refusal("policies: [cores]\n", "policies[0]").find("did you mean 'core'") !=
        std::string::npos);
  CHECK(refusal("workloads: [triad, gemm]\n", "workloads[1]").find("needs the cuda backend") !=
        std::string::npos);
  CHECK(refusal("workloads: attention\n", "workloads").find("needs the cuda backend") !=
        std::string::npos);
  CHECK(refusal("policies: [core, gpu-near]\n", "policies[1]").find("needs the cuda backend") !=
        std::string::npos);
  CHECK(refusal("feeders: 2\n", "feeders").find("leaves no rank to measure") != std::string::npos);
  CHECK(refusal("feeders: 4\n", "feeders", 4).find("at most 3") != std::string::npos);
  CHECK(refusal("iterations: 0\n", "iterations") != "");
  CHECK(refusal("iterations: 5\nduration_s: 2\n", "duration_s").find("not both") !=
        std::string::npos);
  CHECK(refusal("phases: [alone]\npolicies: [core]\n", "policies").find("concurrent_bound") !=
        std::string::npos);
  CHECK(refusal("workloads: [triad, triad]\n", "workloads[1]").find("twice") != std::string::npos);
  CHECK(refusal("feeder: {thread: 2}\n", "feeder.thread").find("did you mean 'threads'") !=
        std::string::npos);
  CHECK(refusal("host_attention: {dtype: fp8}\n", "host_attention.dtype") != "");
  CHECK(refusal("triad_byte: 1MiB\n", "triad_byte").find("did you mean 'triad_bytes'") !=
        std::string::npos);
}

TEST_CASE("contention parser: the cpu list format of hwloc round-trips") {
  CHECK(rb::contention::parse_cpu_list("0-3,8,10-11") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(rb::contention::parse_cpu_list("") == std::vector<int>{});
  CHECK(rb::test::error_of([] { rb::contention::parse_cpu_list("0-x"); }) != "");
  CHECK(rb::format_cpu_list(rb::contention::parse_cpu_list("0-3,8")) == "0-3,8");
}

namespace {

const char* const kPhasesYaml =
    "sweeps:\n  - type: contention\n    name: contention\n"
    "    phases: [alone, concurrent_unbound, concurrent_bound]\n    policies: [core, numa]\n"
    "    workloads: [triad]\n    triad_bytes: 64MiB\n    iterations: 8\n    warmup: 2\n"
    "    cooldown_s: 0.1\n    monitor_interval_ms: 20\n";

// What this rank's binding would be under `policy` (the sweep's decision, made here again).
std::string expected_cpuset(rb::BindingPolicy policy) {
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  const rb::Topology topo = rb::Topology::load_this_machine();
  if (policy == rb::BindingPolicy::None) return topo.machine_cpuset();
  return rb::format_cpu_list(
      rb::decide_binding(topo.model(), policy, layout.local_rank, layout.local_size, -1).pus);
}

struct ContentionFile {
  std::string path, g;
  std::size_t P = 0;
  std::vector<std::string> phase, cpuset, role;
  std::vector<double> median, slowdown, start, end;
};

ContentionFile read_back(const std::string& path);

// Runs a contention sweep of these keys (one warm-up, no cooldown) on the host path and checks
// that it succeeded: rank 0 gets the file read back, the other ranks nothing.
std::optional<ContentionFile> run_contention(const std::string& keys, const std::string& stem) {
  const auto run = rbtest::run_host_sweep(
      "sweeps:\n  - type: contention\n    name: contention\n    warmup: 1\n    cooldown_s: 0\n" +
          keys,
      rb::parse_contention, stem);
  CAPTURE(run.outcome.failure);
  CHECK(run.outcome.ok);
  if (rb::test::rank() != 0) return std::nullopt;
  return read_back(run.path);
}

ContentionFile read_back(const std::string& path) {
  ContentionFile f;
  f.path = path;
  f.g = "/sweeps/contention/";
  f.phase = rb::h5::read_strings(path, f.g + "points/phase");
  f.P = f.phase.size();
  f.cpuset = rb::h5::read_strings(path, f.g + "cpuset");
  f.role = rb::h5::read_strings(path, f.g + "role");
  f.median = rb::h5::read_doubles(path, f.g + "median_s");
  f.slowdown = rb::h5::read_doubles(path, f.g + "slowdown");
  f.start = rb::h5::read_doubles(path, f.g + "phase_start_s");
  f.end = rb::h5::read_doubles(path, f.g + "phase_end_s");
  return f;
}

// Monitor samples: t_s increasing on every rank, inside [0, the rank's stop_s], and every point
// of the rank inside that span too.
void check_monitor(const ContentionFile& f) {
  std::vector<std::uint64_t> dims;
  const auto t = rb::h5::read_doubles(f.path, f.g + "monitor/t_s", &dims);
  const auto stop = rb::h5::read_doubles(f.path, f.g + "monitor/stop_s");
  const auto samples = rb::h5::read_ints(f.path, f.g + "monitor/samples");
  const double interval = rb::h5::read_double_attr(f.path, f.g + "monitor", "interval_s").at(0);
  REQUIRE(dims.size() == 2);
  for (std::size_t r = 0; r < dims[0]; ++r) {
    CAPTURE(r);
    // One sample per interval from t ~ 0 (half of them, on a loaded CI machine).
    CHECK(samples[r] >= 1);
    CHECK(static_cast<double>(samples[r]) >= 0.5 * stop[r] / interval);
    double last = -1;
    for (std::int64_t i = 0; i < samples[r]; ++i) {
      const double x = t[r * dims[1] + static_cast<std::size_t>(i)];
      CHECK(x > last);
      CHECK(x <= stop[r]);
      last = x;
    }
    for (std::size_t p = 0; p < f.P; ++p)
      if (!std::isnan(at(f.end, f.P, static_cast<int>(r), p))) {
        CHECK(at(f.start, f.P, static_cast<int>(r), p) >= 0);
        CHECK(at(f.end, f.P, static_cast<int>(r), p) <= stop[r]);
      }
  }
}

}  // namespace

TEST_CASE("contention sweep, 2 ranks: slowdown, bindings per phase, restore, monitor") {
  if (rb::test::world() != 2) return;  // registered at 2 ranks (CI: 2 cores)
  const auto run = rbtest::run_host_sweep(kPhasesYaml, rb::parse_contention, "contention_phases");
  CAPTURE(run.outcome.failure);
  CHECK(run.outcome.ok);
  // Every rank's expected cpusets, in rank order, for rank 0 to compare with the file.
  std::vector<std::vector<std::string>> want;
  for (auto pol : {rb::BindingPolicy::None, rb::BindingPolicy::Core, rb::BindingPolicy::Numa})
    want.push_back(rb::mpi::gather_strings(expected_cpuset(pol), MPI_COMM_WORLD));
  // After the sweep: the binding it started with, if it restored it (alone ran under it).
  const auto starts =
      rb::mpi::gather_strings(rb::Topology::load_this_machine().current_cpuset(), MPI_COMM_WORLD);
  if (rb::test::rank() != 0) return;
  const ContentionFile f = read_back(run.path);
  REQUIRE(f.phase == std::vector<std::string>{"alone", "concurrent_unbound",
                                              "concurrent_bound:core", "concurrent_bound:numa"});
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(at(f.cpuset, f.P, r, 0) == starts[static_cast<std::size_t>(r)]);
    CHECK(at(f.cpuset, f.P, r, 1) == want[0][static_cast<std::size_t>(r)]);
    CHECK(at(f.cpuset, f.P, r, 2) == want[1][static_cast<std::size_t>(r)]);
    CHECK(at(f.cpuset, f.P, r, 3) == want[2][static_cast<std::size_t>(r)]);
    CHECK(at(f.slowdown, f.P, r, 0) == 1.0);
    for (std::size_t p = 0; p < f.P; ++p) {
      CHECK(at(f.role, f.P, r, p) == "measure");
      CHECK(at(f.start, f.P, r, p) < at(f.end, f.P, r, p));
    }
  }
  // core: disjoint PU sets (two ranks on a machine of at least two cores).
  const auto a = rb::contention::parse_cpu_list(at(f.cpuset, f.P, 0, 2));
  const auto b = rb::contention::parse_cpu_list(at(f.cpuset, f.P, 1, 2));
  std::set<int> both(a.begin(), a.end());
  for (int pu : b) CHECK(both.count(pu) == 0);
  // The triad (3 x 64 MiB per rank, memory-bound) slows down when both ranks run it at once.
  double worst = 0;
  for (std::size_t i = 0; i < f.slowdown.size(); ++i)
    if (i % f.P != 0 && !std::isnan(f.slowdown[i])) worst = std::max(worst, f.slowdown[i]);
  MESSAGE("largest concurrent triad slowdown: " << worst);
  CHECK(worst > 1.0);
  const auto end_cpuset = rb::h5::read_strings(run.path, f.g + "restore/end_cpuset");
  CHECK(end_cpuset == starts);
  check_monitor(f);
}

TEST_CASE("contention sweep, 2 ranks: the feeder rank feeds and measures nothing") {
  if (rb::test::world() != 2) return;
  const auto read = run_contention(
      "    phases: [alone, concurrent_unbound]\n    workloads: [triad, host_attention]\n"
      "    triad_bytes: 8MiB\n    feeders: 1\n    iterations: 4\n    monitor_interval_ms: 10\n"
      "    feeder: {copy_bytes: 1MiB, threads: 2}\n"
      "    host_attention: {rows: 64, heads: 2, head_dim: 16}\n",
      "contention_feeder");
  if (!read) return;
  const ContentionFile& f = *read;
  REQUIRE(f.P == 4);
  const auto time = rb::h5::read_doubles(f.path, f.g + "time_s");
  const auto fed = rb::h5::read_doubles(f.path, f.g + "fed_bytes");
  const auto tflops = rb::h5::read_doubles(f.path, f.g + "rate_tflops");
  for (std::size_t p = 0; p < f.P; ++p) {
    CAPTURE(p);
    CHECK(at(f.role, f.P, 0, p) == "measure");
    CHECK(at(f.role, f.P, 1, p) == "feeder");
    CHECK(std::isnan(at(f.median, f.P, 1, p)));
    CHECK(std::isfinite(at(f.median, f.P, 0, p)));
    for (std::size_t i = 0; i < 4; ++i) CHECK(std::isnan(time[(f.P + p) * 4 + i]));
    const bool concurrent = p >= 2;
    CHECK(std::isnan(at(fed, f.P, 1, p)) == !concurrent);
    if (concurrent) {
      CHECK(at(fed, f.P, 1, p) > 0);
      CHECK(at(f.start, f.P, 1, p) < at(f.end, f.P, 1, p));
    }
  }
  CHECK(at(tflops, f.P, 0, 1) > 0);  // host_attention, alone
  check_monitor(f);
}

TEST_CASE("contention parser: kernel paths and rows are lists, checked against the path table") {
  CHECK(refusal("workloads: [host_attention]\nhost_attention: {kernel: [kokkos, kokos]}\n",
                "host_attention.kernel[1]")
            .find("did you mean 'kokkos'") != std::string::npos);
  CHECK(refusal("workloads: [host_attention]\nhost_attention: {kernel: [kokkos, kokkos]}\n",
                "host_attention.kernel[1]")
            .find("twice") != std::string::npos);
  CHECK(refusal("workloads: [host_attention]\nhost_attention: {rows: [64, 64]}\n",
                "host_attention.rows[1]")
            .find("twice") != std::string::npos);
  CHECK(refusal("workloads: [host_attention]\nhost_attention: {rows: [64, 0]}\n",
                "host_attention.rows[1]") != "");
  // A GPU path on the host backend is refused by the table (a cuda path, not a host one).
  CHECK(refusal("workloads: [host_attention]\nhost_attention: {kernel: flash}\n",
                "host_attention.kernel") != "");
  const auto spec =
      rbtest::sweep_spec("contention", "c",
                         "type: contention\nworkloads: [triad, host_attention]\n"
                         "host_attention: {kernel: [kokkos, materialized], rows: [32, 64]}\n");
  const rb::contention::Params p = rb::contention::parse_params(spec, host_context(2));
  REQUIRE(p.items.size() == 5);  // triad, then 2 paths x 2 rows
  CHECK(p.items[0].path == "");
  CHECK(p.items[0].rows == 0);
  CHECK(p.items[2].path == "kokkos");
  CHECK(p.items[2].rows == 64);
  CHECK(p.items[3].path == "materialized");
  CHECK(p.items[3].rows == 32);
}

namespace {

// The tuning mismatch recomputed from the stored median_s: per phase, of the (workload, rows)
// timed with two or more paths here and in phase 0, the fraction whose fastest path differs.
std::vector<double> recomputed_mismatch(const std::string& path, const std::string& g,
                                        std::size_t P, const std::vector<std::string>& phase) {
  const auto workload = rb::h5::read_strings(path, g + "points/workload");
  const auto kernel = rb::h5::read_strings(path, g + "points/path");
  const auto rows = rb::h5::read_ints(path, g + "points/rows");
  const auto median = rb::h5::read_doubles(path, g + "median_s");
  const auto role = rb::h5::read_strings(path, g + "role");
  const std::size_t world = median.size() / P;
  std::vector<std::string> phases;
  for (const auto& ph : phase)
    if (std::find(phases.begin(), phases.end(), ph) == phases.end()) phases.push_back(ph);
  // fastest[(phase, workload, rows)] over the points with a path and a median over ranks
  std::map<std::tuple<std::string, std::string, std::int64_t>, std::pair<std::string, double>>
      fastest;
  std::map<std::tuple<std::string, std::string, std::int64_t>, int> timed;
  for (std::size_t p = 0; p < P; ++p) {
    std::vector<double> ranks;
    for (std::size_t r = 0; r < world; ++r)
      if (role[r * P + p] == "measure" && std::isfinite(median[r * P + p]))
        ranks.push_back(median[r * P + p]);
    if (kernel[p].empty() || ranks.empty()) continue;
    std::sort(ranks.begin(), ranks.end());
    const std::size_t n = ranks.size();
    const double m = n % 2 ? ranks[n / 2] : 0.5 * (ranks[n / 2 - 1] + ranks[n / 2]);
    const auto key = std::make_tuple(phase[p], workload[p], rows[p]);
    ++timed[key];
    if (!fastest.count(key) || m < fastest[key].second) fastest[key] = {kernel[p], m};
  }
  std::vector<double> out;
  for (const auto& ph : phases) {
    int shapes = 0, differ = 0;
    for (const auto& [key, best] : fastest) {
      if (std::get<0>(key) != ph || timed[key] < 2) continue;
      const auto ref = std::make_tuple(phases[0], std::get<1>(key), std::get<2>(key));
      if (timed[ref] < 2) continue;
      ++shapes;
      differ += best.first != fastest[ref].first;
    }
    out.push_back(shapes ? static_cast<double>(differ) / shapes : std::nan(""));
  }
  return out;
}

}  // namespace

TEST_CASE("contention sweep, 2 ranks: two host paths over two rows, and the tuning mismatch") {
  if (rb::test::world() != 2) return;
  const auto read = run_contention(
      "    phases: [alone, concurrent_unbound, concurrent_bound]\n    policies: [core]\n"
      "    workloads: [triad, host_attention]\n    triad_bytes: 1MiB\n    iterations: 5\n"
      "    monitor_interval_ms: 20\n"
      "    host_attention: {kernel: [kokkos, materialized], rows: [32, 96], heads: 2, head_dim: "
      "16}\n",
      "contention_paths");
  if (!read) return;
  const ContentionFile& f = *read;
  REQUIRE(f.P == 15);  // 3 phases x (triad + 2 paths x 2 rows), phase-major
  const auto kernel = rb::h5::read_strings(f.path, f.g + "points/path");
  const auto rows = rb::h5::read_ints(f.path, f.g + "points/rows");
  const std::vector<std::string> want_path = {"", "kokkos", "kokkos", "materialized",
                                              "materialized"};
  const std::vector<std::int64_t> want_rows = {0, 32, 96, 32, 96};
  for (std::size_t p = 0; p < f.P; ++p) {
    CAPTURE(p);
    CHECK(kernel[p] == want_path[p % 5]);
    CHECK(rows[p] == want_rows[p % 5]);
    CHECK(f.phase[p] ==
          std::vector<std::string>{"alone", "concurrent_unbound", "concurrent_bound:core"}[p / 5]);
    for (int r = 0; r < 2; ++r) CHECK(std::isfinite(at(f.median, f.P, r, p)));
  }
  const std::string m = f.g + "tuning_mismatch/";
  CHECK(rb::h5::read_strings(f.path, m + "phase") ==
        std::vector<std::string>{"alone", "concurrent_unbound", "concurrent_bound:core"});
  CHECK(rb::h5::read_ints(f.path, m + "shapes") == std::vector<std::int64_t>{2, 2, 2});
  const auto fraction = rb::h5::read_doubles(f.path, m + "fraction");
  const auto want = recomputed_mismatch(f.path, f.g, f.P, f.phase);
  REQUIRE(fraction.size() == 3);
  CHECK(fraction[0] == 0.0);  // the reference phase agrees with itself
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(fraction[i] >= 0.0);
    CHECK(fraction[i] <= 1.0);
    CHECK(fraction[i] == doctest::Approx(want[i]));
  }
  MESSAGE("tuning mismatch per phase: " << fraction[0] << " " << fraction[1] << " " << fraction[2]);
}

TEST_CASE("contention plan: the estimate counts alone turns, phases, cooldowns and duration_s") {
  rb::CostAssumptions a;
  a.device_tflops = 100;
  a.memory_Bps = 1e10;
  a.link_Bps = 1e10;
  a.latency_s = 0;
  a.light_point_s = 0;
  // 3 measuring ranks + 1 feeder; 2 workloads; alone (3 turns) + unbound + core = 5 runs of
  // the phase's points, each followed by a 1 s cooldown.
  const auto spec = rbtest::sweep_spec(
      "contention", "c",
      "type: contention\nphases: [alone, concurrent_unbound, concurrent_bound]\npolicies: [core]\n"
      "workloads: [triad, host_attention]\nfeeders: 1\ncooldown_s: 1\n"
      "duration_s: 2\nwarmup: 0\ntriad_bytes: 1MiB\n");
  const auto timed = rb::parse_contention(spec, host_context(4));
  CHECK(timed->iterations_text() == "about 2 s each");
  // 5 x (2 items x 2 s + 1 s) = 25 s, plus a probe of 3 iterations per item (microseconds here)
  CHECK(timed->estimated_seconds(a) == doctest::Approx(25.0).epsilon(0.001));
  // With iterations: 10 triads of 3 x 1 MiB at 1e10 B/s, then 10 host attention blocks at the
  // default shape (heads 4, head_dim 64, rows 256, forward + backward: 3.5 x 4 d per pair).
  const auto counted = rb::parse_contention(
      rbtest::sweep_spec("contention", "c",
                         "type: contention\nphases: [alone, concurrent_unbound]\nworkloads: "
                         "[triad, host_attention]\n"
                         "cooldown_s: 0\niterations: 10\nwarmup: 0\ntriad_bytes: 1MiB\n"),
      host_context(2));
  const double triad = 3.0 * (1 << 20) / 1e10;
  const double block = 3.5 * 4.0 * 4 * 64 * 256.0 * 256.0 / 100e12;
  CHECK(counted->estimated_seconds(a) ==
        doctest::Approx(3 * 10 * (triad + block)));  // 2 alone turns + unbound
}
