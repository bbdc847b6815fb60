#include "sweeps/contention/binding.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace rb::contention {
namespace {

// <numaif.h> values (the kernel's uapi), so no libnuma is needed for two system calls.
constexpr int kMpolDefault = 0, kMpolPreferred = 1, kMpolBind = 2, kMpolInterleave = 3,
              kMpolLocal = 4, kMpolPreferredMany = 5, kMpolWeightedInterleave = 6;
constexpr int kMpolFlags = (1 << 15) | (1 << 14) | (1 << 13);  // static, relative, balancing
constexpr std::size_t kMaskWords = 16;                         // 1024 NUMA nodes

// The kernel counts one bit less than maxnode (libnuma passes size + 1 too).
unsigned long maxnode_of(const std::vector<unsigned long>& nodes) {
  return static_cast<unsigned long>(nodes.size() * 8 * sizeof(unsigned long) + 1);
}

std::vector<int> mask_bits(const std::vector<unsigned long>& nodes) {
  std::vector<int> bits;
  const std::size_t width = 8 * sizeof(unsigned long);
  for (std::size_t w = 0; w < nodes.size(); ++w)
    for (std::size_t b = 0; b < width; ++b)
      if (nodes[w] & (1ul << b)) bits.push_back(static_cast<int>(w * width + b));
  return bits;
}

// "" or why the kernel refused (containers often forbid it without CAP_SYS_NICE).
std::string write_mempolicy(const MemPolicy& m) {
  const int base = m.mode & ~kMpolFlags;
  const bool mask = base != kMpolDefault && base != kMpolLocal;
  const long rc = mask ? syscall(SYS_set_mempolicy, m.mode, m.nodes.data(), maxnode_of(m.nodes))
                       : syscall(SYS_set_mempolicy, m.mode, nullptr, 0ul);
  if (rc == 0) return "";
  return "set_mempolicy(" + describe(m) + ") failed: " + std::strerror(errno);
}

MemPolicy default_memory() {
  MemPolicy m;
  m.mode = kMpolDefault;
  return m;
}

}  // namespace

MemPolicy read_mempolicy() {
  MemPolicy m;
  m.nodes.assign(kMaskWords, 0ul);
  int mode = 0;
  if (syscall(SYS_get_mempolicy, &mode, m.nodes.data(), maxnode_of(m.nodes), nullptr, 0ul) != 0) {
    m.error = std::string("get_mempolicy: ") + std::strerror(errno);
    return m;
  }
  m.mode = mode;
  return m;
}

std::string describe(const MemPolicy& m) {
  if (m.mode < 0) return "unknown (" + m.error + ")";
  const std::string nodes = format_cpu_list(mask_bits(m.nodes));
  switch (m.mode & ~kMpolFlags) {
    case kMpolDefault:
      return "default";
    case kMpolLocal:
      return "local";
    case kMpolBind:
      return "bind:" + nodes;
    case kMpolInterleave:
      return "interleave:" + nodes;
    case kMpolPreferred:
      return nodes.empty() ? "local" : "preferred:" + nodes;
    // What recent hwloc sets for HWLOC_MEMBIND_BIND without STRICT (Linux 5.15+).
    case kMpolPreferredMany:
      return "preferred_many:" + nodes;
    case kMpolWeightedInterleave:
      return "weighted_interleave:" + nodes;
    default:
      return "mode " + std::to_string(m.mode) + ":" + nodes;
  }
}

std::vector<int> parse_cpu_list(const std::string& list) {
  std::vector<int> pus;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto dash = item.find('-');
    std::size_t used = 0;
    try {
      const int first = std::stoi(item, &used);
      const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
      if (dash == std::string::npos ? used != item.size() : used != dash) throw std::exception();
      for (int pu = first; pu <= last; ++pu) pus.push_back(pu);
    } catch (const std::exception&) {
      throw std::invalid_argument("not a PU list: '" + list + "'");
    }
  }
  return pus;
}

PhaseBinder::PhaseBinder(const RunContext& ctx)
    : topo_(Topology::load_this_machine()),
      local_rank_(ctx.layout.local_rank),
      local_size_(ctx.layout.local_size) {
  const std::string bus = ctx.gpu != nullptr ? ctx.gpu->gpu.pci_bus_id : "";
  has_gpu_ = !bus.empty();
  machine_ = has_gpu_ ? topo_.model_for_gpus({bus}) : topo_.model();
  start_cpuset_ = topo_.current_cpuset();
  start_memory_ = read_mempolicy();
}

AppliedBinding PhaseBinder::bind(const BindingDecision& d, const MemPolicy* memory) {
  AppliedBinding b;
  b.note = d.explanation;
  auto warn = [&b](const std::string& w) {
    if (!w.empty()) b.note += (b.note.empty() ? "" : "; ") + std::string("warning: ") + w;
  };
  // Memory first: apply() binds memory only when the decision names a NUMA domain, and the
  // previous phase's policy must not leak into this one.
  if (memory != nullptr) warn(write_mempolicy(*memory));
  std::string membind_warning;
  topo_.apply(d, &membind_warning);  // throws when the CPU binding fails
  warn(membind_warning);
  b.cpuset = topo_.current_cpuset();
  b.nodeset = describe(read_mempolicy());
  return b;
}

AppliedBinding PhaseBinder::apply(const Phase& phase) {
  if (phase.kind == PhaseKind::Alone) return restore();
  const MemPolicy memory = default_memory();
  if (phase.kind == PhaseKind::Unbound) {
    BindingDecision d;
    d.pus = parse_cpu_list(topo_.machine_cpuset());
    d.explanation = "unbound: every PU this process may use (" + format_cpu_list(d.pus) +
                    "), memory policy default";
    return bind(d, &memory);
  }
  const BindingDecision d =
      decide_binding(machine_, phase.policy, local_rank_, local_size_, has_gpu_ ? 0 : -1);
  return bind(d, &memory);
}

AppliedBinding PhaseBinder::restore() {
  BindingDecision d;
  d.pus = parse_cpu_list(start_cpuset_);
  d.explanation = "the binding the run started with (PUs " + start_cpuset_ + ", memory " +
                  describe(start_memory_) + ")";
  // An unreadable starting memory policy cannot be put back; the CPUs still are.
  return bind(d, start_memory_.mode >= 0 ? &start_memory_ : nullptr);
}

}  // namespace rb::contention
