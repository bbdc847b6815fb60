#include "app/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <map>

#include <fmt/format.h>

#include "config/bytes.hpp"
#include "metrics/h5.hpp"

namespace rb {

CostAssumptions cost_assumptions(Backend backend) {
  CostAssumptions a;
  if (backend == Backend::Cuda) {
    // An H100/H200 SXM node (NVLink, PCIe 5), fitted to the phase times of 2 x H200 runs of
    // inputs/large.yaml, ring_overlap.yaml and cp_schemes.yaml (docs/performance.md): cuDNN
    // fwd+bwd reaches 500-600 TFLOP/s there, the own flash kernels about half; NCCL's bus
    // bandwidth 300-330 GB/s at 64 MiB-1 GiB; a ring point's set-up (inputs generated on the
    // host, copied over) 0.3 s and 5.7 ns per value; the parity check its own model
    // (parity.cpp, fitted on a host: 0.98x here) plus 2.6 ns per output value copied back.
    a.device_tflops = 450;
    a.flash_share = 0.5;
    a.memory_Bps = 2.5e12;     // HBM3
    a.host_memory_Bps = 12e9;  // triad per rank with the node's other ranks at it too
    a.pinned_Bps = 40e9;       // PCIe 5 x16 (about 55 GB/s measured on H200, 25 on PCIe 4)
    a.pageable_Bps = 8e9;
    a.host_buffer_Bps = 2e9;   // malloc + first touch, or cudaHostRegister
    a.link_Bps = 300e9;        // NVLink per GPU and direction, NCCL bus bandwidth
    a.inter_node_Bps = 25e9;   // one 200 Gb/s NIC per GPU
    a.latency_s = 20e-6;       // one NCCL call or message
    a.point_overhead_s = 0.3;  // communicators, allocation, kernel plans (cuDNN graphs)
    a.setup_per_value_s = 5.7e-9;
    a.check_per_value_s = 2.6e-9;
    a.light_point_s = 0.001;
    a.kernel_point_s = 0.03;
    // 4 ranks of a 4 x H200 node took 1.2-1.65x the set-up and check of 2 ranks of a 2 x H200
    // node (same cores per rank) at the same shapes per rank (run K, docs/performance.md);
    // nodes of more GPUs were not measured.
    a.host_contention_exponent = 0.5;
    a.host_contention_ranks = 4;
  } else {
    a.device_tflops = 0.02;  // Kokkos fp32 on a few cores per rank
    a.memory_Bps = 5e9;      // a rank's share of DRAM bandwidth
    a.host_memory_Bps = a.pinned_Bps = a.pageable_Bps = a.memory_Bps;
    a.host_buffer_Bps = 0;       // 0: not counted (the fit of this model had none)
    a.link_Bps = 2e9;            // MPI through shared memory
    a.inter_node_Bps = 2e9;      // stated: the node's own link as a floor
    a.latency_s = 2e-6;          // one MPI message
    a.point_overhead_s = 0.002;  // barriers, communicator splits, parity checks
    a.light_point_s = 0.001;
    a.kernel_point_s = a.point_overhead_s;
  }
  return a;
}

std::string assumptions_text(const CostAssumptions& a) {
  const std::string host =
      a.host_contention_exponent > 0
          ? fmt::format(
                "; host work x (ranks per node / 2)^{} above 2 ranks per node (held from {})",
                a.host_contention_exponent, a.host_contention_ranks)
          : "";
  return fmt::format(
      "assumed per rank: compute {} TFLOP/s (flash kernels x{}), memory {}/s (host {}/s, "
      "pinned copies {}/s), link {}/s in a node and {}/s between nodes, latency {:.0f} us per "
      "call, {:.0f} ms per point (set-up; {:.1f} ns per input value; {:.0f} ms for "
      "collectives, p2p and ping-pong points), parity checks by their own model{}",
      a.device_tflops, a.flash_share, format_bytes(a.memory_Bps), format_bytes(a.host_memory_Bps),
      format_bytes(a.pinned_Bps), format_bytes(a.link_Bps), format_bytes(a.inter_node_Bps),
      a.latency_s * 1e6, a.point_overhead_s * 1e3, a.setup_per_value_s * 1e9, a.light_point_s * 1e3,
      host);
}

std::vector<double> model_estimates(const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                    const CostAssumptions& a) {
  std::vector<double> out;
  for (const auto& s : sweeps) out.push_back(s->estimated_seconds(a));
  return out;
}

double auto_point_timeout_s(double sweep_estimate_s) {
  double floor_s = kAutoPointFloorS;
  if (const char* env = std::getenv("RINGBENCH_TEST_AUTO_POINT_FLOOR_S")) floor_s = std::atof(env);
  const double scaled = std::isfinite(sweep_estimate_s) ? kAutoPointFactor * sweep_estimate_s : 0;
  return std::max(floor_s, scaled);
}

namespace {

// Each point's share of the sweep's wall time: in proportion to its timed iterations
// (total_time_s, slowest rank) where the sweep records them, else an equal share.
std::vector<double> point_shares(const std::string& file, const std::string& g, std::size_t n,
                                 double wall_s) {
  std::vector<double> cost(n, 1.0);
  try {
    std::vector<std::uint64_t> dims;
    const std::vector<double> t = h5::read_doubles(file, g + "/total_time_s", &dims);
    const std::size_t per = dims.size() == 3 ? dims[2] : 1;
    std::fill(cost.begin(), cost.end(), 0.0);
    for (std::size_t r = 0; dims.size() == 3 && r < dims[0]; ++r)
      for (std::size_t p = 0; p < n; ++p) {
        double sum = 0;
        for (std::size_t i = 0; i < per; ++i) {
          const double x = t[(r * n + p) * per + i];
          sum += std::isnan(x) ? 0.0 : x;
        }
        cost[p] = std::max(cost[p], sum);
      }
  } catch (const std::exception&) {
  }
  double total = 0;
  for (double c : cost) total += c;
  if (!(total > 0)) {
    cost.assign(n, 1.0);
    total = static_cast<double>(n);
  }
  for (double& c : cost) c *= wall_s / total;
  return cost;
}

// The file's share for a plan line: the point whose label the line starts with.
const double* share_of(const std::string& line, const std::map<std::string, double>& by_label) {
  std::size_t cut = line.size();
  for (;;) {
    const auto it = by_label.find(line.substr(0, cut));
    if (it != by_label.end()) return &it->second;
    if (cut == 0) return nullptr;
    cut = line.rfind(", ", cut - 1);
    if (cut == std::string::npos) return nullptr;
  }
}

// Labelled sweeps with phases: per matched point its phases re-planned at the line's iteration
// counts, the sweep's time outside its points once, the model elsewhere.
void measure_phases(const FilePhases& f, const Sweep& s, const std::vector<std::string>& labels,
                    double model_s, Measured& m) {
  std::map<std::string, double> by_label;  // the file's point index, as a double for share_of
  for (std::size_t i = 0; i < labels.size(); ++i)
    by_label.emplace(labels[i], static_cast<double>(i));
  const std::vector<std::string> lines = s.plan();
  const double model_per_point = lines.empty() ? 0 : model_s / static_cast<double>(lines.size());
  m.phased = true;
  for (const auto& line : lines) {
    const double* at = share_of(line, by_label);
    if (at == nullptr) {
      m.model_s += model_per_point;
      continue;
    }
    const PhaseSeconds p = replanned(f.points[static_cast<std::size_t>(*at)], f, line);
    for (std::size_t i = 0; i < kPhaseCount; ++i) m.phase_s[i] += p[i];
    ++m.matched_points;
  }
  if (m.matched_points > 0) m.outside_s = f.outside_s;
  m.seconds = sum(m.phase_s) + m.outside_s + m.model_s;
}

// Labelled sweeps: per point, the file's phases or share where the label matches, the model
// elsewhere.
void measure_by_label(const std::string& file, const std::string& g, const Sweep& s,
                      const std::vector<std::string>& labels, double wall_s, double model_s,
                      Measured& m) {
  const std::vector<std::string> lines = s.plan();
  const FilePhases f = read_phases(file, g, labels.size(), wall_s);
  if (!f.points.empty()) {
    measure_phases(f, s, labels, model_s, m);
  } else {
    const std::vector<double> shares = point_shares(file, g, labels.size(), wall_s);
    std::map<std::string, double> by_label;
    for (std::size_t i = 0; i < labels.size(); ++i) by_label.emplace(labels[i], shares[i]);
    const double model_per_point = lines.empty() ? 0 : model_s / static_cast<double>(lines.size());
    for (const auto& line : lines) {
      const double* share = share_of(line, by_label);
      m.seconds += share ? *share : model_per_point;
      m.matched_points += share ? 1 : 0;
    }
  }
  m.points = lines.size();
  m.found = m.matched_points > 0;
  if (!m.found) m.why_not = "no point of the file matches";
}

// A sweep matched whole: its phases summed over the points, where the file has them (the same
// points at the same size, so nothing to re-plan).
void whole_phases(const FilePhases& f, Measured& m) {
  if (f.points.empty()) return;
  m.phased = true;
  for (const PhaseSeconds& p : f.points)
    for (std::size_t i = 0; i < kPhaseCount; ++i) m.phase_s[i] += p[i];
  m.outside_s = f.outside_s;
}

Measured measured_one(const std::string& file, const Sweep& s, int world_size, double model_s) {
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
    const double wall = h5::read_double_attr(file, g, "wall_time_s").at(0);
    std::vector<std::string> labels;
    try {
      labels = h5::read_strings(file, g + "/points/label");
    } catch (const std::exception&) {
    }
    if (!labels.empty()) {
      measure_by_label(file, g, s, labels, wall, model_s, m);
      return m;
    }
    // Without labels the points depend on the world size: the whole sweep, at the same size.
    const auto points = h5::read_int_attr(file, g, "points");
    const auto ranks = h5::read_int_attr(file, "/run", "world_size");
    if (ranks.empty() || ranks[0] != world_size || points.empty() ||
        static_cast<std::size_t>(points[0]) != s.point_count()) {
      m.why_not = "a run of " + std::to_string(ranks.empty() ? 0 : ranks[0]) + " ranks in the file";
      return m;
    }
    m.seconds = wall;
    m.points = m.matched_points = s.point_count();
    m.found = true;
    whole_phases(read_phases(file, g, s.point_count(), wall), m);
  } catch (const std::exception&) {
    m.why_not = "not in the file";
  }
  return m;
}

}  // namespace

std::vector<Measured> measured_times(const std::string& file,
                                     const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                     int world_size, const std::vector<double>& model_s) {
  std::vector<Measured> out;
  for (std::size_t i = 0; i < sweeps.size(); ++i)
    out.push_back(measured_one(file, *sweeps[i], world_size, model_s[i]));
  return out;
}

}  // namespace rb
