#include "app/plan.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include <fmt/format.h>

#include "app/estimate.hpp"
#include "app/progress.hpp"
#include "config/bytes.hpp"
#include "metrics/h5.hpp"
#include "metrics/table.hpp"
#include "ringbench/version.hpp"

namespace rb {

std::string slurm_time(double estimated_s) {
  const auto minutes = static_cast<long long>(std::ceil((estimated_s * 1.5 + 300.0) / 60.0));
  return fmt::format("{:02}:{:02}:00", minutes / 60, minutes % 60);
}

namespace {

// Each sweep's seconds and where they came from: the earlier file's measured time where its
// points match, else the cost model.
struct Estimates {
  std::vector<double> seconds;
  std::vector<std::string> source;
  std::size_t measured = 0;
  std::vector<Measured> from_file;  // --estimate-from's findings, one per sweep (else empty)
};

// What every file holds besides its sweeps: /run's attributes (the config's text, the
// environment) and /ranks, a row per rank (its hostname, binding, GPU and the sentences saying
// why), as measured on small runs.
std::uint64_t run_and_ranks_bytes(int world_size) {
  return (std::uint64_t{64} << 10) + 512 * static_cast<std::uint64_t>(world_size);
}

// A missing or unreadable file is an error of the command line, said once before the plan.
bool readable_h5(const std::string& path) {
  try {
    (void)h5::read_string_attr(path, "/run", "ringbench_version");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

Estimates estimates(const PlanView& plan, const CommandLine& cli) {
  Estimates e;
  e.seconds = model_estimates(plan.sweeps, cost_assumptions(plan.backend));
  e.source.assign(e.seconds.size(), "model");
  if (cli.estimate_from.empty()) return e;
  const std::vector<Measured> m =
      measured_times(cli.estimate_from, plan.sweeps, plan.world_size, e.seconds);
  e.from_file = m;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i].found) {
      e.seconds[i] = m[i].seconds;
      e.source[i] = m[i].matched_points == m[i].points
                        ? "measured"
                        : fmt::format("measured {} of {} points, model the rest",
                                      m[i].matched_points, m[i].points);
      ++e.measured;
    } else {
      e.source[i] = "model (" + m[i].why_not + ")";
    }
  }
  return e;
}

// The measured sweeps' estimates split by phase (seconds, so launch/estimate_error.py can read
// them): each phase over the matched points, the sweep outside its points, the model's share.
void print_phases(const PlanView& plan, const Estimates& e, const CommandLine& cli) {
  std::vector<h5::TextTable::Column> cols = {{"sweep", "", true}};
  for (const PhaseName& n : phase_names()) cols.emplace_back(n.word, "(s)");
  cols.emplace_back("outside", "(s)");
  cols.emplace_back("model", "(s)");
  h5::TextTable t(std::move(cols));
  bool any = false;
  for (std::size_t i = 0; i < e.from_file.size(); ++i) {
    const Measured& m = e.from_file[i];
    if (!m.found || !m.phased) continue;
    std::vector<std::string> row = {plan.sweeps[i]->name()};
    for (double x : m.phase_s) row.push_back(fmt::format("{:.3f}", x));
    row.push_back(fmt::format("{:.3f}", m.outside_s));
    row.push_back(fmt::format("{:.3f}", m.model_s));
    t.row(row);
    any = true;
  }
  if (!any) return;
  fmt::print(
      "by phase (the slowest rank's at each matched point; outside: the sweep outside its\n"
      "  points; model: the points the file lacks):\n");
  fmt::print("{}", t.render("", {}, cli.wide ? 0 : h5::kTerminalWidth));
}

void print_points(const PlanView& plan) {
  for (const auto& s : plan.sweeps) {
    fmt::print("\nsweep {} ({}):\n", s->name(), s->type());
    for (const auto& line : s->plan()) fmt::print("  {}\n", line);
  }
}

// What the hang guard will allow a point (run.point_timeout_s) and the whole run.
void print_hang_guard(const RunSection& run, const std::vector<double>& model_s) {
  std::string point =
      "off (run.point_timeout_s: off): a point that deadlocks waits for the run's limit";
  if (run.point_timeout_auto && !model_s.empty()) {
    double lo = auto_point_timeout_s(model_s[0]), hi = lo;
    for (double m : model_s) {
      lo = std::min(lo, auto_point_timeout_s(m));
      hi = std::max(hi, auto_point_timeout_s(m));
    }
    point = fmt::format(
        "{}{}{} per point (run.point_timeout_s: auto, {:g} x its sweep's estimate, at "
        "least {})",
        duration_text(lo), hi > lo ? " to " : "", hi > lo ? duration_text(hi) : "",
        kAutoPointFactor, duration_text(kAutoPointFloorS));
  } else if (run.point_timeout_s > 0) {
    point = fmt::format("{} per point (run.point_timeout_s)", duration_text(run.point_timeout_s));
  }
  fmt::print("hang guard: {}{}\n", point,
             run.timeout_s > 0
                 ? fmt::format("; {} for the run (run.timeout_s)", duration_text(run.timeout_s))
                 : "");
}

}  // namespace

int print_plan(const PlanView& plan, const CommandLine& cli) {
  if (!cli.estimate_from.empty() && !readable_h5(cli.estimate_from)) {
    fmt::print(stderr, "ringbench: --estimate-from {}: not a readable ringbench output file\n",
               cli.estimate_from);
    return 2;
  }
  fmt::print("ringbench {}: {} is valid\n", kVersion, cli.config_path);
  fmt::print("{}, backend {}, binding {}\n", plan.layout, to_string(plan.backend), plan.binding);
  if (!plan.note.empty()) fmt::print("note: {}\n", plan.note);
  const Estimates e = estimates(plan, cli);
  h5::TextTable t({{"sweep", "", true},
                   {"type", "", true},
                   {"points"},
                   {"iterations", "", true},
                   {"output"},
                   {"estimate"},
                   {"from", "", true}});
  std::uint64_t bytes = run_and_ranks_bytes(plan.world_size);
  std::size_t points = 0;
  double seconds = 0;
  for (std::size_t i = 0; i < plan.sweeps.size(); ++i) {
    const Sweep& s = *plan.sweeps[i];
    const std::size_t n = s.point_count();
    t.row({s.name(), s.type(), std::to_string(n), s.iterations_text(),
           format_bytes(static_cast<double>(s.estimated_output_bytes())),
           duration_text(e.seconds[i]), e.source[i]});
    bytes += s.estimated_output_bytes();
    points += n;
    seconds += e.seconds[i];
  }
  fmt::print("{}", t.render("", {}, cli.wide ? 0 : h5::kTerminalWidth));
  fmt::print("total: {} sweep{}, {} points, about {} of output; estimated run time {}\n",
             plan.sweeps.size(), plan.sweeps.size() == 1 ? "" : "s", points,
             format_bytes(static_cast<double>(bytes)), duration_text(seconds));
  if (e.measured < plan.sweeps.size())
    fmt::print("  cost model ({}): {}\n", to_string(plan.backend),
               assumptions_text(cost_assumptions(plan.backend)));
  if (!cli.estimate_from.empty())
    fmt::print("  {} of {} sweeps from the measured times in {}\n", e.measured, plan.sweeps.size(),
               cli.estimate_from);
  print_phases(plan, e, cli);
  fmt::print("suggested: #SBATCH --time={} (the estimate x 1.5 + 5 min for start-up)\n",
             slurm_time(seconds));
  if (plan.run != nullptr)
    print_hang_guard(*plan.run, model_estimates(plan.sweeps, cost_assumptions(plan.backend)));
  if (cli.verbose) print_points(plan);
  fmt::print("nothing was run{}\n", cli.verbose ? "" : "; --verbose lists every point");
  return 0;
}

}  // namespace rb
