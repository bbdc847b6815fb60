#include "app/estimate.hpp"

#include <exception>

#include <fmt/format.h>

#include "config/bytes.hpp"
#include "metrics/h5.hpp"

namespace rb {

CostAssumptions cost_assumptions(Backend backend) {
  CostAssumptions a;
  if (backend == Backend::Cuda) {
    a.device_tflops = 300;     // H100 bf16 attention/GEMM, about a third of the dense peak
    a.memory_Bps = 2.5e12;     // HBM3
    a.link_Bps = 100e9;        // NVLink per GPU and direction, NCCL bus bandwidth
    a.latency_s = 20e-6;       // one NCCL call or message
    a.point_overhead_s = 0.5;  // communicators, allocation, host parity reference per point
    a.light_point_s = 0.005;
  } else {
    a.device_tflops = 0.02;    // Kokkos fp32 on a few cores per rank
    a.memory_Bps = 5e9;        // a rank's share of DRAM bandwidth
    a.link_Bps = 2e9;          // MPI through shared memory
    a.latency_s = 2e-6;        // one MPI message
    a.point_overhead_s = 0.002; // barriers, communicator splits, parity checks
    a.light_point_s = 0.001;
  }
  return a;
}

std::string assumptions_text(const CostAssumptions& a) {
  return fmt::format("assumed per rank: compute {} TFLOP/s, memory {}/s, link {}/s, latency {:.0f} us "
                     "per call, {:.0f} ms per point (set-up, checks; {:.0f} ms for collectives, "
                     "p2p and ping-pong points)",
                     a.device_tflops, format_bytes(a.memory_Bps), format_bytes(a.link_Bps),
                     a.latency_s * 1e6, a.point_overhead_s * 1e3, a.light_point_s * 1e3);
}

std::vector<double> model_estimates(const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                    const CostAssumptions& a) {
  std::vector<double> out;
  for (const auto& s : sweeps) out.push_back(s->estimated_seconds(a));
  return out;
}

namespace {

Measured measured_one(const std::string& file, const Sweep& s, int world_size) {
  const std::string g = "/sweeps/" + s.name();
  Measured m;
  try {
    if (h5::read_string_attr(file, g, "type") != s.type()) {
      m.why_not = "a sweep of another type in the file";
      return m;
    }
    if (h5::read_string_attr(file, g, "status") != "complete") {
      m.why_not = "not complete in the file";
      return m;
    }
    const auto points = h5::read_int_attr(file, g, "points");
    if (points.empty() || static_cast<std::size_t>(points[0]) != s.point_count()) {
      m.why_not = "another number of points in the file";
      return m;
    }
    std::vector<std::string> labels;
    try {
      labels = h5::read_strings(file, g + "/points/label");
    } catch (const std::exception&) {
    }
    // Labels, where the sweep keeps them, start its plan lines (which add the iterations);
    // without labels the points depend on the world size, so the file's must be the plan's.
    const std::vector<std::string> lines = s.plan();
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (lines[i].rfind(labels[i], 0) != 0) {
        m.why_not = "other points in the file";
        return m;
      }
    const auto ranks = h5::read_int_attr(file, "/run", "world_size");
    if (labels.empty() && (ranks.empty() || ranks[0] != world_size)) {
      m.why_not = "a run of " + std::to_string(ranks.empty() ? 0 : ranks[0]) + " ranks in the file";
      return m;
    }
    m.seconds = h5::read_double_attr(file, g, "wall_time_s").at(0);
    m.found = true;
  } catch (const std::exception&) {
    m.why_not = "not in the file";
  }
  return m;
}

}  // namespace

std::vector<Measured> measured_times(const std::string& file,
                                     const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                     int world_size) {
  std::vector<Measured> out;
  for (const auto& s : sweeps) out.push_back(measured_one(file, *s, world_size));
  return out;
}

}  // namespace rb
