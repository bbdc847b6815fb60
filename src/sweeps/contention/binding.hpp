#pragma once
// Re-binding the rank between the phases of the contention sweep: the binding the run started
// with (alone, and restored at the end), the whole machine (concurrent_unbound) and a policy's
// decision (concurrent_bound:<policy>, decide_binding + Topology::apply as the driver does).
// What is recorded is what is in effect afterwards: the process cpuset from hwloc and the
// calling thread's memory policy from the kernel (get_mempolicy), not what was asked for.
#include <string>
#include <vector>

#include "runtime/binding.hpp"
#include "sweeps/contention/params.hpp"
#include "sweeps/sweep.hpp"

namespace rb::contention {

// A thread's memory policy (Linux set_mempolicy/get_mempolicy); mode -1: unreadable (error).
struct MemPolicy {
  int mode = -1;
  std::vector<unsigned long> nodes;  // node mask
  std::string error;
};
MemPolicy read_mempolicy();
// "default", "bind:0", "interleave:0-1", "preferred:1", "local", or "unknown (why)".
std::string describe(const MemPolicy& m);

// "0-3,8" -> {0, 1, 2, 3, 8}; throws std::invalid_argument on anything else.
std::vector<int> parse_cpu_list(const std::string& list);

struct AppliedBinding {
  std::string cpuset;   // PU list in effect after the change
  std::string nodeset;  // describe(read_mempolicy()) after the change
  std::string note;     // the policy's explanation, and any warning (memory binding refused)
};

class PhaseBinder {
 public:
  // Loads the topology and records the binding in effect now (the run's start).
  PhaseBinder(const RunContext& ctx);
  AppliedBinding apply(const Phase& phase);
  AppliedBinding restore();  // back to the binding recorded at construction
  const std::string& start_cpuset() const { return start_cpuset_; }
  std::string machine_cpuset() const { return topo_.machine_cpuset(); }

 private:
  AppliedBinding bind(const BindingDecision& d, const MemPolicy* memory);
  Topology topo_;
  MachineModel machine_;  // this rank's GPU, if any, at slot 0 (as the driver decides)
  bool has_gpu_ = false;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string start_cpuset_;
  MemPolicy start_memory_;
};

}  // namespace rb::contention
