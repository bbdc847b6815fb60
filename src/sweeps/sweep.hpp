#pragma once
// The common driver's contract with each sweep. A sweep is one file pair
// (src/sweeps/<type>.hpp/.cpp) plus one row in the table in registry.cpp:
//   parse:  validate the sweep's YAML map into typed parameters (throws cfg::ConfigError),
//           knowing the world size, so impossible points are rejected before any collective work;
//   plan:   one line per point, for --dry-run and progress;
//   run:    collective over ctx.world; writes its datasets under `out` (= /sweeps/<name>).
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "config/config.hpp"
#include "metrics/h5.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"

namespace rb {

struct ParseContext {
  int world_size = 1;
  int node_count = 1;
  Backend backend = Backend::Host;  // resolved: Host or Cuda
};

// Rank-0-only progress lines with elapsed time and ETA; silent elsewhere.
class Progress {
 public:
  Progress(int rank, std::string sweep, std::size_t total_points, double min_interval_s = 2.0,
           std::FILE* out = stdout);
  // Prints the first and last point and any point at least min_interval_s after the last line.
  void point_started(std::size_t index, const std::string& label);
  void note(const std::string& line);                               // rank 0 only
 private:
  int rank_;
  std::string sweep_;
  std::size_t total_;
  std::chrono::steady_clock::time_point start_;
  double min_interval_s_;
  std::FILE* out_;
  double last_printed_ = -1e300;
};

// Resources of the GPU path, created once per run by the driver (null on the host path).
struct GpuContext {
  GpuInfo gpu;
  NcclComm world;  // NCCL communicator over all ranks
};

struct RunContext {
  const Config& config;
  MPI_Comm world;
  const RankLayout& layout;
  Backend backend;          // resolved: Host or Cuda
  GpuContext* gpu;          // nullptr on the host path
};

struct SweepOutcome {
  bool ok = true;            // false marks the run failed (e.g. a parity check above tolerance)
  std::string failure;       // which point and why; same text on every rank is not required
};

class Sweep {
 public:
  virtual ~Sweep() = default;
  virtual std::string type() const = 0;
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  virtual std::vector<std::string> plan() const = 0;          // one line per point
  virtual std::uint64_t estimated_output_bytes() const = 0;   // for --dry-run
  virtual SweepOutcome run(RunContext& ctx, h5::Group& out) = 0;

 private:
  std::string name_;
};

using SweepParser = std::unique_ptr<Sweep> (*)(const SweepSpec& spec, const ParseContext& ctx);

struct SweepKind {
  const char* type;
  SweepParser parse;
  const char* summary;  // one line for --help
};

// The table of every sweep type (registry.cpp).
const std::vector<SweepKind>& sweep_kinds();

// Looks up spec.type (unknown type: ConfigError with did-you-mean) and parses it.
std::unique_ptr<Sweep> parse_sweep(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
