// A point's phase clock (sweeps/point_phases.hpp: the phases cover the point's wall time, no
// gaps) and --estimate-from's re-planning of a file point's phases at other iteration counts
// (app/estimate_phases.hpp). The file side, a real run read back: e2e_estimate_phases_*.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "app/estimate_phases.hpp"
#include "sweeps/point_phases.hpp"

namespace {

rb::PhaseSeconds measured() {
  rb::PhaseSeconds p{};
  p[static_cast<std::size_t>(rb::Phase::Setup)] = 0.3;
  p[static_cast<std::size_t>(rb::Phase::Warmup)] = 0.4;
  p[static_cast<std::size_t>(rb::Phase::Timed)] = 1.0;
  p[static_cast<std::size_t>(rb::Phase::Check)] = 2.0;
  return p;
}

double at(const rb::PhaseSeconds& p, rb::Phase phase) {
  return p[static_cast<std::size_t>(phase)];
}

}  // namespace

TEST_CASE("the phases of a point add up to its wall time; a phase lapped twice adds") {
  rb::PhaseClock c;
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  c.lap(rb::Phase::Setup);
  c.lap(rb::Phase::Timed);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  c.lap(rb::Phase::Write);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  c.lap(rb::Phase::Write);
  double sum = 0;
  for (std::size_t i = 0; i < rb::kPhaseCount; ++i) sum += c.seconds(static_cast<rb::Phase>(i));
  CHECK(sum == doctest::Approx(c.wall_s()).epsilon(1e-9));
  CHECK(c.seconds(rb::Phase::Setup) >= 0.002);
  CHECK(c.seconds(rb::Phase::Write) >= 0.003);
  CHECK(c.seconds(rb::Phase::Check) == 0.0);  // never lapped: did not run
  CHECK(rb::phase_names().size() == rb::kPhaseCount);
}

TEST_CASE("a file point's timed and warm-up phases re-planned at the plan line's counts") {
  rb::FilePhases f;
  f.iterations = 5;
  f.warmup = 2;
  const auto p = rb::replanned(measured(), f, "S=256 R=2 causal, 10 iterations (+4 warmup)");
  CHECK(at(p, rb::Phase::Timed) == doctest::Approx(2.0));
  CHECK(at(p, rb::Phase::Warmup) == doctest::Approx(0.8));
  CHECK(at(p, rb::Phase::Check) == doctest::Approx(2.0));  // per point, not per iteration
  CHECK(at(p, rb::Phase::Setup) == doctest::Approx(0.3));
  CHECK(rb::sum(p) == doctest::Approx(0.3 + 0.8 + 2.0 + 2.0));

  SUBCASE("no warm-up in the file: the timed phase's per-iteration time") {
    f.warmup = 0;
    const auto q = rb::replanned(measured(), f, "x, 5 iterations (+3 warmup)");
    CHECK(at(q, rb::Phase::Warmup) == doctest::Approx(0.6));
  }
  SUBCASE("a line without counts, or a file without them: as measured") {
    CHECK(rb::replanned(measured(), f, "x, 10 warmup + 20 iterations") == measured());
    f.iterations = -1;
    CHECK(rb::replanned(measured(), f, "x, 10 iterations (+4 warmup)") == measured());
  }
}
