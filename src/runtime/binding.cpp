#include "runtime/binding.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>

namespace rb {

// ---------------------------------------------------------------- pure helpers

std::string hwloc_library_version() {
  // hwloc_get_api_version: 0x00020900 for 2.9.0 (major << 16 | minor << 8 | release).
  const unsigned v = hwloc_get_api_version();
  return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

std::string format_cpu_list(const std::vector<int>& pus_in) {
  std::vector<int> pus = pus_in;
  std::sort(pus.begin(), pus.end());
  pus.erase(std::unique(pus.begin(), pus.end()), pus.end());
  std::string out;
  for (std::size_t i = 0; i < pus.size();) {
    std::size_t j = i;
    while (j + 1 < pus.size() && pus[j + 1] == pus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(pus[i]);
    if (j > i) out += '-' + std::to_string(pus[j]);
    i = j + 1;
  }
  return out;
}

namespace {

std::vector<int> domain_pus(const NumaDomain& d) {
  std::vector<int> pus;
  for (const auto& core : d.cores) pus.insert(pus.end(), core.begin(), core.end());
  return pus;
}

std::string numa_label(const MachineModel& m, int pos) {
  const int os = m.numa[static_cast<std::size_t>(pos)].os_index;
  return os >= 0 ? "NUMA " + std::to_string(os) : "the whole machine (no NUMA information)";
}

std::string gpu_label(const MachineModel& m, int gpu) {
  const auto g = static_cast<std::size_t>(gpu);
  const std::string name = g < m.gpu_names.size() ? m.gpu_names[g] : "";
  const std::string bus = g < m.gpu_pci_bus_ids.size() ? m.gpu_pci_bus_ids[g] : "";
  // model_for_gpus names GPUs by bus id, and its index is a slot, not a CUDA ordinal.
  if (!bus.empty() && name == bus) return "GPU " + bus;
  std::string s = "GPU " + std::to_string(gpu);
  if (!bus.empty())
    s += " (" + bus + ")";
  else if (!name.empty())
    s += " (" + name + ")";
  return s;
}

BindingDecision decide_numa(const MachineModel& m, int local_rank, int local_size,
                            const std::string& prefix, BindingPolicy policy,
                            const std::string& suffix) {
  BindingDecision d;
  d.policy = policy;
  const int nd = static_cast<int>(m.numa.size());
  const int pos = static_cast<int>(static_cast<long long>(local_rank) * nd / local_size);
  const NumaDomain& dom = m.numa[static_cast<std::size_t>(pos)];
  d.pus = domain_pus(dom);
  d.numa_os_index = dom.os_index;
  d.explanation =
      prefix + "numa -> " + numa_label(m, pos) + " (PUs " + format_cpu_list(d.pus) + ")";
  if (local_size > nd)
    d.explanation += ", shared by " + std::to_string(local_size) + " local ranks over " +
                     std::to_string(nd) + " domain(s)";
  d.explanation += suffix;
  return d;
}

}  // namespace

BindingDecision decide_binding(const MachineModel& machine, BindingPolicy policy, int local_rank,
                               int local_size, int gpu_index) {
  const std::string prefix = "local rank " + std::to_string(local_rank) + ": ";
  BindingDecision d;
  d.policy = policy;
  if (policy == BindingPolicy::None) {
    d.explanation = prefix + "none -> binding left as launched";
    return d;
  }
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
    throw std::invalid_argument("decide_binding: local rank " + std::to_string(local_rank) +
                                " is outside a node of " + std::to_string(local_size) + " ranks");
  std::size_t total_cores = 0;
  for (const auto& dom : machine.numa) total_cores += dom.cores.size();
  if (total_cores == 0) {
    d.explanation = prefix + to_string(policy) + " -> left unbound: the topology lists no cores";
    return d;
  }

  if (policy == BindingPolicy::Core) {
    // Cores in NUMA order, so a contiguous share stays inside one domain whenever it can.
    std::vector<std::pair<int, const std::vector<int>*>> cores;  // (domain position, PUs)
    for (std::size_t p = 0; p < machine.numa.size(); ++p)
      for (const auto& c : machine.numa[p].cores) cores.emplace_back(static_cast<int>(p), &c);
    const long long n = static_cast<long long>(cores.size());
    long long first = 0, last = 0;  // [first, last)
    std::string note;
    if (local_size <= n) {
      first = local_rank * n / local_size;
      last = (local_rank + 1) * n / local_size;
    } else {
      first = local_rank % n;
      last = first + 1;
      note = " (" + std::to_string(local_size) + " local ranks share " + std::to_string(n) +
             " cores round-robin)";
    }
    int domain = cores[static_cast<std::size_t>(first)].first;
    for (long long i = first; i < last; ++i) {
      const auto& pus = *cores[static_cast<std::size_t>(i)].second;
      d.pus.insert(d.pus.end(), pus.begin(), pus.end());
      if (cores[static_cast<std::size_t>(i)].first != domain) domain = -1;
    }
    // Memory follows the cores only when they all sit in one domain.
    d.numa_os_index = domain >= 0 ? machine.numa[static_cast<std::size_t>(domain)].os_index : -1;
    d.explanation =
        prefix + "core -> " + std::to_string(last - first) + " core(s), PUs " +
        format_cpu_list(d.pus) +
        (domain >= 0 ? " in " + numa_label(machine, domain) : std::string(" across NUMA domains")) +
        note;
    return d;
  }

  if (policy == BindingPolicy::Numa)
    return decide_numa(machine, local_rank, local_size, prefix, policy, "");

  // gpu-near
  std::string reason;
  if (gpu_index < 0) {
    reason = "this rank drives no GPU";
  } else if (static_cast<std::size_t>(gpu_index) >= machine.gpu_numa.size()) {
    reason = "GPU " + std::to_string(gpu_index) + " is not in the topology";
  } else {
    const int pos = machine.gpu_numa[static_cast<std::size_t>(gpu_index)];
    if (pos < 0 || static_cast<std::size_t>(pos) >= machine.numa.size()) {
      reason = "the NUMA domain of " + gpu_label(machine, gpu_index) + " is unknown";
    } else {
      const NumaDomain& dom = machine.numa[static_cast<std::size_t>(pos)];
      d.pus = domain_pus(dom);
      d.numa_os_index = dom.os_index;
      d.explanation = prefix + "gpu-near -> " + numa_label(machine, pos) + " (PUs " +
                      format_cpu_list(d.pus) + ") next to " + gpu_label(machine, gpu_index);
      return d;
    }
  }
  return decide_numa(machine, local_rank, local_size, prefix, BindingPolicy::GpuNear,
                     " (gpu-near fell back to numa: " + reason + ")");
}

std::string launcher_binding_warning(const std::string& cpuset_before,
                                     const std::string& machine_cpuset,
                                     const BindingDecision& decision) {
  if (cpuset_before.empty() || cpuset_before == machine_cpuset) return "";  // launcher did not bind
  if (decision.pus.empty()) return "";  // ringbench keeps the launcher's binding
  const std::string chosen = format_cpu_list(decision.pus);
  if (chosen == cpuset_before) return "";
  return "the launcher bound this rank to PUs " + cpuset_before + " (machine: " + machine_cpuset +
         "); ringbench's " + to_string(decision.policy) + " binding replaced it with PUs " +
         chosen +
         ". Launch with `mpirun --bind-to none` (or `--bind-to numa` with binding: numa or "
         "gpu-near) "
         "so the two do not disagree";
}

// ---------------------------------------------------------------- Topology

namespace {

struct Bitmap {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  Bitmap() {
    if (b == nullptr) throw std::bad_alloc();
  }
  ~Bitmap() { hwloc_bitmap_free(b); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
};

std::vector<int> bitmap_indices(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (hwloc_bitmap_weight(set) < 0) return out;  // infinite set: not a real binding
  unsigned i = 0;
  hwloc_bitmap_foreach_begin(i, set) {
    out.push_back(static_cast<int>(i));
  }
  hwloc_bitmap_foreach_end();
  return out;
}

std::string pci_bus_id(hwloc_obj_t obj) {
  while (obj != nullptr && obj->type != HWLOC_OBJ_PCI_DEVICE) obj = obj->parent;
  if (obj == nullptr) return "";
  char s[32];
  std::snprintf(s, sizeof s, "%04x:%02x:%02x.%01x", obj->attr->pcidev.domain, obj->attr->pcidev.bus,
                obj->attr->pcidev.dev, obj->attr->pcidev.func);
  return s;
}

// "cuda12" -> 12 for prefix "cuda"; -1 if the name has another form.
int numbered(const char* name, const char* prefix) {
  if (name == nullptr) return -1;
  const std::size_t n = std::strlen(prefix);
  if (std::strncmp(name, prefix, n) != 0 || name[n] == '\0') return -1;
  char* end = nullptr;
  const long v = std::strtol(name + n, &end, 10);
  return (*end == '\0' && v >= 0) ? static_cast<int>(v) : -1;
}

}  // namespace

struct Topology::Impl {
  hwloc_topology_t topo = nullptr;
  std::string source;  // for error messages
  ~Impl() {
    if (topo != nullptr) hwloc_topology_destroy(topo);
  }

  // NUMA domains with PUs, in topology order; each PU belongs to the first domain containing it
  // (memory-only nodes such as HBM or CXL twins of a DDR node would otherwise duplicate cores).
  // numa_objs receives the hwloc object of each domain kept (nullptr for the whole-machine one).
  MachineModel numa_model(std::vector<hwloc_obj_t>* numa_objs) const {
    MachineModel m;
    Bitmap claimed;
    const int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    auto add_domain = [&](hwloc_const_cpuset_t cpuset, int os_index, hwloc_obj_t obj) {
      NumaDomain d;
      d.os_index = os_index;
      hwloc_obj_t last_core = nullptr;
      for (hwloc_obj_t pu =
               hwloc_get_next_obj_inside_cpuset_by_type(topo, cpuset, HWLOC_OBJ_PU, nullptr);
           pu != nullptr;
           pu = hwloc_get_next_obj_inside_cpuset_by_type(topo, cpuset, HWLOC_OBJ_PU, pu)) {
        if (hwloc_bitmap_isset(claimed.b, pu->os_index)) continue;
        hwloc_bitmap_set(claimed.b, pu->os_index);
        // A PU without a Core ancestor (synthetic "pu" levels directly under a package) is its own
        // core.
        hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
        if (core == nullptr || core != last_core || d.cores.empty()) d.cores.emplace_back();
        last_core = core;
        d.cores.back().push_back(static_cast<int>(pu->os_index));
      }
      if (d.cores.empty()) return;
      m.numa.push_back(std::move(d));
      if (numa_objs) numa_objs->push_back(obj);
    };
    for (int i = 0; i < nn; ++i) {
      hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
      if (node->cpuset != nullptr) add_domain(node->cpuset, static_cast<int>(node->os_index), node);
    }
    if (m.numa.empty()) {
      // No NUMA object (or none with PUs): the whole machine is one domain, with no memory target.
      add_domain(hwloc_topology_get_topology_cpuset(topo), -1, nullptr);
    }
    return m;
  }

  // Position in `numa_objs` of the NUMA domain local to an I/O object; -1 when unknown or when
  // the device is attached above every domain (the locality says nothing then).
  int gpu_domain(hwloc_obj_t io, const std::vector<hwloc_obj_t>& numa_objs) const {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io);
    if (anc == nullptr || anc->nodeset == nullptr) return -1;
    int first = -1, count = 0;
    for (std::size_t p = 0; p < numa_objs.size(); ++p) {
      if (numa_objs[p] == nullptr) return -1;
      if (hwloc_bitmap_isset(anc->nodeset, numa_objs[p]->os_index)) {
        if (first < 0) first = static_cast<int>(p);
        ++count;
      }
    }
    if (count == 0) return -1;
    if (count == static_cast<int>(numa_objs.size()) && count > 1) return -1;
    return first;  // several but not all (sub-NUMA clustering): the first of them
  }
};

Topology::Topology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

namespace {

std::runtime_error hwloc_error(const std::string& what, const std::string& source) {
  return std::runtime_error("hwloc: " + what + " failed for " + source + ": " +
                            std::strerror(errno));
}

}  // namespace

Topology Topology::load_this_machine() {
  auto impl = std::make_unique<Impl>();
  impl->source = "this machine";
  if (hwloc_topology_init(&impl->topo) != 0) throw hwloc_error("hwloc_topology_init", impl->source);
  // Important I/O objects only: GPUs and their PCI bridges, not every PCI function.
  hwloc_topology_set_io_types_filter(impl->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(impl->topo) != 0) throw hwloc_error("hwloc_topology_load", impl->source);
  return Topology(std::move(impl));
}

Topology Topology::load_xml(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->source = "XML " + path;
  if (hwloc_topology_init(&impl->topo) != 0) throw hwloc_error("hwloc_topology_init", impl->source);
  if (hwloc_topology_set_xml(impl->topo, path.c_str()) != 0)
    throw hwloc_error("hwloc_topology_set_xml", impl->source);
  hwloc_topology_set_io_types_filter(impl->topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(impl->topo) != 0) throw hwloc_error("hwloc_topology_load", impl->source);
  return Topology(std::move(impl));
}

Topology Topology::load_synthetic(const std::string& description) {
  auto impl = std::make_unique<Impl>();
  impl->source = "synthetic topology '" + description + "'";
  if (hwloc_topology_init(&impl->topo) != 0) throw hwloc_error("hwloc_topology_init", impl->source);
  if (hwloc_topology_set_synthetic(impl->topo, description.c_str()) != 0)
    throw std::runtime_error("hwloc: invalid " + impl->source);
  if (hwloc_topology_load(impl->topo) != 0) throw hwloc_error("hwloc_topology_load", impl->source);
  return Topology(std::move(impl));
}

MachineModel Topology::model() const {
  hwloc_topology_t t = impl_->topo;
  std::vector<hwloc_obj_t> numa_objs;
  MachineModel m = impl_->numa_model(&numa_objs);

  // GPUs: CUDA OS devices carry the CUDA ordinal in their name; NVML ones the NVML index
  // (nvidia-smi's); bare PCI devices are a last resort in PCI order.
  std::map<int, hwloc_obj_t> cuda, nvml;
  for (hwloc_obj_t os = hwloc_get_next_osdev(t, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(t, os)) {
    const auto type = os->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_GPU && type != HWLOC_OBJ_OSDEV_COPROC) continue;
    int n = numbered(os->name, "cuda");
    if (n >= 0) cuda[n] = os;
    n = numbered(os->name, "nvml");
    if (n >= 0) nvml[n] = os;
  }
  std::vector<hwloc_obj_t> gpus;
  const auto& named = !cuda.empty() ? cuda : nvml;
  for (const auto& kv : named) gpus.push_back(kv.second);
  if (gpus.empty()) {
    std::vector<std::pair<std::string, hwloc_obj_t>> pci;
    for (hwloc_obj_t p = hwloc_get_next_pcidev(t, nullptr); p != nullptr;
         p = hwloc_get_next_pcidev(t, p)) {
      const unsigned cls = p->attr->pcidev.class_id;
      if (p->attr->pcidev.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302))
        pci.emplace_back(pci_bus_id(p), p);
    }
    std::sort(pci.begin(), pci.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& kv : pci) gpus.push_back(kv.second);
  }
  for (hwloc_obj_t g : gpus) {
    m.gpu_numa.push_back(impl_->gpu_domain(g, numa_objs));
    m.gpu_names.push_back(g->type == HWLOC_OBJ_OS_DEVICE && g->name ? g->name : pci_bus_id(g));
    m.gpu_pci_bus_ids.push_back(pci_bus_id(g));
  }
  return m;
}

MachineModel Topology::model_for_gpus(const std::vector<std::string>& pci_bus_ids) const {
  std::vector<hwloc_obj_t> numa_objs;
  MachineModel m = impl_->numa_model(&numa_objs);
  for (const auto& id : pci_bus_ids) {
    hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(impl_->topo, id.c_str());
    m.gpu_numa.push_back(dev != nullptr ? impl_->gpu_domain(dev, numa_objs) : -1);
    m.gpu_names.push_back(id);
    m.gpu_pci_bus_ids.push_back(id);
  }
  return m;
}

std::string Topology::current_cpuset() const {
  Bitmap set;
  if (hwloc_get_cpubind(impl_->topo, set.b, HWLOC_CPUBIND_PROCESS) != 0 &&
      hwloc_get_cpubind(impl_->topo, set.b, HWLOC_CPUBIND_THREAD) != 0)
    throw hwloc_error("hwloc_get_cpubind", impl_->source);
  return format_cpu_list(bitmap_indices(set.b));
}

std::string Topology::machine_cpuset() const {
  return format_cpu_list(bitmap_indices(hwloc_topology_get_allowed_cpuset(impl_->topo)));
}

int Topology::current_numa_node() const {
  Bitmap set;
  if (hwloc_get_cpubind(impl_->topo, set.b, HWLOC_CPUBIND_PROCESS) != 0 &&
      hwloc_get_cpubind(impl_->topo, set.b, HWLOC_CPUBIND_THREAD) != 0)
    return -1;
  const int nn = hwloc_get_nbobjs_by_type(impl_->topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nn; ++i) {
    hwloc_obj_t node =
        hwloc_get_obj_by_type(impl_->topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (node->cpuset != nullptr && !hwloc_bitmap_iszero(node->cpuset) &&
        hwloc_bitmap_isincluded(set.b, node->cpuset))
      return static_cast<int>(node->os_index);
  }
  return -1;
}

std::string Topology::apply(const BindingDecision& decision, std::string* warning) const {
  if (warning) warning->clear();
  if (decision.pus.empty()) return current_cpuset();
  Bitmap cpus;
  for (int pu : decision.pus) hwloc_bitmap_set(cpus.b, static_cast<unsigned>(pu));
  if (hwloc_set_cpubind(impl_->topo, cpus.b, HWLOC_CPUBIND_PROCESS) != 0)
    throw std::runtime_error("hwloc_set_cpubind(PUs " + format_cpu_list(decision.pus) +
                             ", process) failed on " + impl_->source + ": " + std::strerror(errno));
  if (decision.numa_os_index >= 0) {
    Bitmap nodes;
    hwloc_bitmap_set(nodes.b, static_cast<unsigned>(decision.numa_os_index));
    // Neither PROCESS nor THREAD: hwloc binds whichever the OS supports (Linux: this thread's
    // policy, which threads created later inherit). Memory binding is an optimisation; a
    // container that forbids it must not stop the benchmark.
    if (hwloc_set_membind(impl_->topo, nodes.b, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) != 0) {
      const std::string msg = "memory binding to NUMA " + std::to_string(decision.numa_os_index) +
                              " failed (" + std::strerror(errno) +
                              "); CPU binding kept, memory follows first touch";
      if (warning)
        *warning = msg;
      else
        std::fprintf(stderr, "ringbench: warning: %s\n", msg.c_str());
    }
  }
  return current_cpuset();
}

}  // namespace rb
