#pragma once
// What the ranks of the contention sweep run: the measured workloads (through the existing
// kernels: prof::ComputeEngine for GEMM and copies, the host STREAM triad, the attention
// backends of the kernel path table) and the feeder that loads the shared CPUs, memory and
// PCIe while the measuring ranks run. Plus the waits that do not spin.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "profiling/engine.hpp"
#include "sweeps/contention/params.hpp"
#include "sweeps/sweep.hpp"

namespace rb::contention {

// Every workload name, the GPU ones first; those needs_gpu() says need the cuda backend.
const std::vector<std::string>& workload_names();
bool needs_gpu(const std::string& workload);
// One line per workload (its attention blocks' kernel paths and rows listed), for the sweep's
// attributes; and one per item (one block), for the plan.
std::string describe_workload(const Params& p, const std::string& workload);
std::string describe_item(const Params& p, const Item& item);

// One workload's timed iterations on this rank.
struct Measurement {
  std::vector<double> seconds;                              // each timed iteration
  double bytes = std::numeric_limits<double>::quiet_NaN();  // moved per iteration (copies, triad)
  double flop = std::numeric_limits<double>::quiet_NaN();   // per iteration (gemm, attention)
  std::string error;  // non-empty: the workload failed here (why); seconds may be empty
};

class Workloads {
 public:
  Workloads(const Params& p, const RunContext& ctx);
  ~Workloads();
  // Runs `item` with the sweep's warmup and `iterations` timed repetitions; never throws
  // (a failure is Measurement::error, so the rank still joins the collective waits).
  Measurement run(const Item& item, std::int64_t iterations);
  // The GPU compute engine (cuda backend), for the feeder's H2D copies; null on the host.
  prof::ComputeEngine* gpu_engine() { return gpu_ ? engine_.get() : nullptr; }

 private:
  Measurement measure(const Item& item, int warmup, int iterations);
  const Params& p_;
  const PathFactories& paths_;
  bool gpu_;
  std::unique_ptr<prof::ComputeEngine> engine_;
};

// The feeder loop: `threads` threads copy pageable host buffers and chew on the copies (CPU
// work), and on the cuda backend the calling thread also copies pageable host memory to the
// device, until `stop()` (asked by the calling thread between units) says the measuring ranks
// are done. Returns the bytes copied (host and H2D).
double feed_until(const FeederParams& f, prof::ComputeEngine* gpu,
                  const std::function<bool()>& stop);

// Waits for `request` with MPI_Test and short sleeps: a rank that waits must not take a CPU
// from the ones that run (MPI_Wait polls at full speed in most MPI libraries).
void wait_quietly(MPI_Request& request);
void quiet_barrier(MPI_Comm comm);
void sleep_s(double seconds);

}  // namespace rb::contention
