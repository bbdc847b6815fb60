#include "sweeps/point_phases.hpp"

namespace rb {

const std::array<PhaseName, kPhaseCount>& phase_names() {
  static const std::array<PhaseName, kPhaseCount> names = {{
      {"phase_setup_s", "setup",
       "set-up of the point on this rank: communicators (when created here), the scheme's "
       "buffers, the input shards"},
      {"phase_warmup_s", "warmup", "the untimed warm-up iterations"},
      {"phase_timed_s", "timed", "the timed iterations, barriers included"},
      {"phase_check_s", "check",
       "the check of the results: ring_attention's parity against the reference and its "
       "verdict, collectives' data check (0: none ran)"},
      {"phase_calibration_s", "calibration", "the overlap calibration (0: none ran)"},
      {"phase_write_s", "write", "recording the point, and the dump (dump: true, first point)"},
  }};
  return names;
}

void PhaseClock::lap(Phase p) {
  const clock::time_point now = clock::now();
  seconds_[static_cast<std::size_t>(p)] += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

double PhaseClock::wall_s() const {
  return std::chrono::duration<double>(last_ - start_).count();
}

void declare_phase_columns(h5::PointsTable& t) {
  t.metric(kWallColumn,
           {"s", "wall time of the point on this rank, start to end: the sum of its phase_*_s"});
  for (const PhaseName& n : phase_names()) t.metric(n.column, {"s", n.what});
}

void record_phases(h5::PointsTable& t, std::size_t pi, const PhaseClock& c) {
  t.set(kWallColumn, pi, c.wall_s());
  for (std::size_t i = 0; i < kPhaseCount; ++i)
    t.set(phase_names()[i].column, pi, c.seconds(static_cast<Phase>(i)));
}

}  // namespace rb
