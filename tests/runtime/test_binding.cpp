// Binding decisions on real machines' hwloc exports, synthetic topologies and hand-built models.
// Decisions are pure, so every expectation below is derived from the machine description.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "runtime/binding.hpp"

using namespace rb;

namespace {

const std::string kTopologies = std::string(RINGBENCH_TEST_DATA) + "/topologies/";

std::vector<int> all_pus(const NumaDomain& d) {
  std::vector<int> pus;
  for (const auto& c : d.cores) pus.insert(pus.end(), c.begin(), c.end());
  return pus;
}

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Position in the model of the domain with this os index.
int domain_of(const MachineModel& m, int numa_os_index) {
  for (std::size_t i = 0; i < m.numa.size(); ++i)
    if (m.numa[i].os_index == numa_os_index) return static_cast<int>(i);
  return -1;
}

// 2 sockets x 2 NUMA x 4 cores x 2 PUs, 4 GPUs: GPU 0,1 -> NUMA 0, GPU 2 -> NUMA 1, GPU 3 ->
// NUMA 3.
MachineModel hand_built() {
  MachineModel m;
  int pu = 0;
  for (int d = 0; d < 4; ++d) {
    NumaDomain dom;
    dom.os_index = d;
    for (int c = 0; c < 4; ++c) {
      dom.cores.push_back({pu, pu + 1});
      pu += 2;
    }
    m.numa.push_back(dom);
  }
  m.gpu_numa = {0, 0, 1, 3};
  m.gpu_names = {"cuda0", "cuda1", "cuda2", "cuda3"};
  m.gpu_pci_bus_ids = {"0000:18:00.0", "0000:3b:00.0", "0000:86:00.0", "0000:af:00.0"};
  return m;
}

}  // namespace

TEST_CASE("format_cpu_list collapses runs and sorts") {
  CHECK(format_cpu_list({}) == "");
  CHECK(format_cpu_list({5}) == "5");
  CHECK(format_cpu_list({0, 1, 2, 3, 8, 9, 10, 11}) == "0-3,8-11");
  CHECK(format_cpu_list({11, 3, 2, 0, 1, 9, 8, 10}) == "0-3,8-11");
  CHECK(format_cpu_list({0, 2, 4}) == "0,2,4");
  CHECK(format_cpu_list({7, 7, 6}) == "6-7");
}

TEST_CASE("DGX-2 export: 16 GPUs, 0-7 next to package 0's NUMA node, 8-15 next to package 1's") {
  Topology topo = Topology::load_xml(kTopologies + "dgx2-2socket-16gpu.xml");
  const MachineModel m = topo.model();
  REQUIRE(m.numa.size() == 2);
  CHECK(m.numa[0].os_index == 0);
  CHECK(m.numa[1].os_index == 1);
  // The export keeps two PUs per package (README): PUs 0,1 and 24,25 from the cpusets.
  CHECK(format_cpu_list(all_pus(m.numa[0])) == "0-1");
  CHECK(format_cpu_list(all_pus(m.numa[1])) == "24-25");
  REQUIRE(m.gpu_numa.size() == 16);
  REQUIRE(m.gpu_names.size() == 16);
  for (int g = 0; g < 16; ++g) {
    CAPTURE(g);
    CHECK(m.gpu_names[g] == "nvml" + std::to_string(g));
    CHECK(m.gpu_numa[g] == domain_of(m, g < 8 ? 0 : 1));
    CHECK(m.gpu_pci_bus_ids[g].size() == 12);  // "dddd:bb:dd.f"
  }
  // All bus ids distinct: each NVML device was matched to its own PCI function.
  CHECK(std::set<std::string>(m.gpu_pci_bus_ids.begin(), m.gpu_pci_bus_ids.end()).size() == 16);

  SUBCASE("gpu-near: 16 local ranks, rank i drives GPU i") {
    for (int r = 0; r < 16; ++r) {
      CAPTURE(r);
      const BindingDecision d = decide_binding(m, BindingPolicy::GpuNear, r, 16, r);
      const int want = r < 8 ? 0 : 1;
      CHECK(d.policy == BindingPolicy::GpuNear);
      CHECK(d.numa_os_index == want);
      CHECK(sorted(d.pus) == sorted(all_pus(m.numa[domain_of(m, want)])));
      CHECK(d.explanation.find("gpu-near -> NUMA " + std::to_string(want)) != std::string::npos);
      CHECK(d.explanation.find(m.gpu_pci_bus_ids[r]) != std::string::npos);
      CHECK(d.explanation.find("fell back") == std::string::npos);
    }
  }
  SUBCASE("numa: 16 ranks spread evenly, 8 per domain") {
    int per_domain[2] = {0, 0};
    for (int r = 0; r < 16; ++r) {
      const BindingDecision d = decide_binding(m, BindingPolicy::Numa, r, 16, -1);
      REQUIRE((d.numa_os_index == 0 || d.numa_os_index == 1));
      ++per_domain[d.numa_os_index];
      CHECK(d.numa_os_index == (r < 8 ? 0 : 1));  // contiguous ranks share a domain
    }
    CHECK(per_domain[0] == 8);
    CHECK(per_domain[1] == 8);
  }
  SUBCASE("model_for_gpus maps bus ids (CUDA's 8-digit domain form too) to NUMA") {
    const std::string g3 = m.gpu_pci_bus_ids[3], g12 = m.gpu_pci_bus_ids[12];
    const MachineModel f = topo.model_for_gpus({g12, "0000" + g3, "0000:ff:1f.7"});
    REQUIRE(f.gpu_numa.size() == 3);
    CHECK(f.gpu_numa[0] == domain_of(f, 1));
    CHECK(f.gpu_numa[1] == domain_of(f, 0));
    CHECK(f.gpu_numa[2] == -1);
    const BindingDecision d = decide_binding(f, BindingPolicy::GpuNear, 0, 1, 0);
    CHECK(d.numa_os_index == 1);
    CHECK(d.explanation.find("next to GPU " + g12) != std::string::npos);
  }
}

TEST_CASE("2-socket server with one CUDA GPU under package 1") {
  Topology topo = Topology::load_xml(kTopologies + "2socket-1cuda-gpu.xml");
  const MachineModel m = topo.model();
  REQUIRE(m.numa.size() == 2);
  // NUMA 0's cpuset is 0x00ff00ff: PUs 0-7 and 16-23; 8 cores with 2 threads each.
  CHECK(format_cpu_list(all_pus(m.numa[0])) == "0-7,16-23");
  CHECK(format_cpu_list(all_pus(m.numa[1])) == "8-15,24-31");
  CHECK(m.numa[0].cores.size() == 8);
  for (const auto& core : m.numa[0].cores) CHECK(core.size() == 2);
  REQUIRE(m.gpu_numa.size() == 1);
  CHECK(m.gpu_names[0] == "cuda0");
  CHECK(m.gpu_numa[0] == domain_of(m, 1));

  // Two local ranks sharing the only GPU both go next to it (the whole domain each).
  for (int r = 0; r < 2; ++r) {
    const BindingDecision d = decide_binding(m, BindingPolicy::GpuNear, r, 2, 0);
    CHECK(d.numa_os_index == 1);
    CHECK(format_cpu_list(d.pus) == "8-15,24-31");
  }
  // core: 4 ranks split the 16 cores into 4 contiguous NUMA-ordered blocks of 4 cores.
  std::set<int> seen;
  for (int r = 0; r < 4; ++r) {
    const BindingDecision d = decide_binding(m, BindingPolicy::Core, r, 4, -1);
    CHECK(d.pus.size() == 8);
    for (int pu : d.pus) CHECK(seen.insert(pu).second);
    CHECK(d.numa_os_index == (r < 2 ? 0 : 1));
  }
  CHECK(seen.size() == 32);
}

TEST_CASE("synthetic pack:2 numa:2 core:4 pu:2") {
  Topology topo = Topology::load_synthetic("pack:2 numa:2 core:4 pu:2");
  const MachineModel m = topo.model();
  REQUIRE(m.numa.size() == 4);
  CHECK(m.gpu_numa.empty());
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(m.numa[d].cores.size() == 4);
    CHECK(format_cpu_list(all_pus(m.numa[d])) ==
          std::to_string(8 * d) + "-" + std::to_string(8 * d + 7));
  }

  SUBCASE("core: disjoint contiguous shares covering every core, any rank count") {
    for (int ranks : {1, 2, 3, 5, 16}) {
      CAPTURE(ranks);
      std::vector<int> covered;
      for (int r = 0; r < ranks; ++r) {
        const BindingDecision d = decide_binding(m, BindingPolicy::Core, r, ranks, -1);
        CHECK(!d.pus.empty());
        CHECK(d.pus.size() % 2 == 0);  // whole cores
        const std::string list = format_cpu_list(d.pus);
        CHECK(list.find(',') == std::string::npos);  // contiguous
        covered.insert(covered.end(), d.pus.begin(), d.pus.end());
      }
      CHECK(sorted(covered).size() == 32);
      std::vector<int> u = sorted(covered);
      CHECK(std::unique(u.begin(), u.end()) == u.end());  // disjoint
    }
  }
  SUBCASE("numa: 8 ranks, 2 per domain; 2 ranks spread to domains 0 and 2") {
    for (int r = 0; r < 8; ++r)
      CHECK(decide_binding(m, BindingPolicy::Numa, r, 8, -1).numa_os_index == r / 2);
    CHECK(decide_binding(m, BindingPolicy::Numa, 0, 2, -1).numa_os_index == 0);
    CHECK(decide_binding(m, BindingPolicy::Numa, 1, 2, -1).numa_os_index == 2);
    const BindingDecision d = decide_binding(m, BindingPolicy::Numa, 1, 2, -1);
    CHECK(format_cpu_list(d.pus) == "16-23");
  }
  SUBCASE("more ranks than cores: round-robin, said so") {
    const BindingDecision a = decide_binding(m, BindingPolicy::Core, 3, 40, -1);
    const BindingDecision b = decide_binding(m, BindingPolicy::Core, 35, 40, -1);
    CHECK(a.pus.size() == 2);
    CHECK(a.pus == b.pus);  // ranks 3 and 35 share core 3
    CHECK(format_cpu_list(a.pus) == "6-7");
    CHECK(a.explanation.find("round-robin") != std::string::npos);
  }
}

TEST_CASE("synthetic machine without cores or NUMA levels is still usable") {
  Topology topo = Topology::load_synthetic("pack:2 pu:3");
  const MachineModel m = topo.model();
  REQUIRE(!m.numa.empty());
  std::size_t cores = 0;
  for (const auto& d : m.numa) cores += d.cores.size();
  CHECK(cores == 6);  // each PU counts as a core
  const BindingDecision d = decide_binding(m, BindingPolicy::Core, 1, 2, -1);
  CHECK(format_cpu_list(d.pus) == "3-5");
}

TEST_CASE("hand-built 2 sockets x 2 NUMA x 4 GPUs: gpu-near") {
  const MachineModel m = hand_built();
  const int want[4] = {0, 0, 1, 3};
  for (int g = 0; g < 4; ++g) {
    CAPTURE(g);
    const BindingDecision d = decide_binding(m, BindingPolicy::GpuNear, g, 4, g);
    CHECK(d.numa_os_index == want[g]);
    CHECK(sorted(d.pus) == all_pus(m.numa[want[g]]));
    CHECK(d.explanation == "local rank " + std::to_string(g) + ": gpu-near -> NUMA " +
                               std::to_string(want[g]) + " (PUs " +
                               format_cpu_list(all_pus(m.numa[want[g]])) + ") next to GPU " +
                               std::to_string(g) + " (" + m.gpu_pci_bus_ids[g] + ")");
  }
  // 8 local ranks over 4 GPUs: ranks 4..7 drive GPUs 0..3 again and land in the same domains.
  for (int r = 4; r < 8; ++r)
    CHECK(decide_binding(m, BindingPolicy::GpuNear, r, 8, r % 4).numa_os_index == want[r % 4]);
}

TEST_CASE("gpu-near falls back to numa, with the reason") {
  MachineModel m = hand_built();
  m.gpu_numa[2] = -1;
  SUBCASE("unknown locality") {
    const BindingDecision d = decide_binding(m, BindingPolicy::GpuNear, 3, 4, 2);
    CHECK(d.policy == BindingPolicy::GpuNear);
    CHECK(d.numa_os_index == 3);  // what numa gives local rank 3 of 4
    CHECK(d.pus == decide_binding(m, BindingPolicy::Numa, 3, 4, -1).pus);
    CHECK(d.explanation.find("fell back to numa") != std::string::npos);
    CHECK(d.explanation.find("unknown") != std::string::npos);
  }
  SUBCASE("no GPU for this rank") {
    const BindingDecision d = decide_binding(m, BindingPolicy::GpuNear, 1, 4, -1);
    CHECK(d.numa_os_index == 1);
    CHECK(d.explanation.find("drives no GPU") != std::string::npos);
  }
  SUBCASE("GPU index beyond the model") {
    const BindingDecision d = decide_binding(m, BindingPolicy::GpuNear, 0, 4, 9);
    CHECK(d.numa_os_index == 0);
    CHECK(d.explanation.find("not in the topology") != std::string::npos);
  }
}

TEST_CASE("none leaves the binding alone; bad local ranks are rejected") {
  const MachineModel m = hand_built();
  const BindingDecision d = decide_binding(m, BindingPolicy::None, 0, 4, 0);
  CHECK(d.pus.empty());
  CHECK(d.numa_os_index == -1);
  CHECK(!d.explanation.empty());
  CHECK_THROWS_AS(decide_binding(m, BindingPolicy::Core, 4, 4, -1), std::invalid_argument);
  CHECK_THROWS_AS(decide_binding(m, BindingPolicy::Numa, 0, 0, -1), std::invalid_argument);
}

TEST_CASE("launcher_binding_warning") {
  BindingDecision chosen;
  chosen.policy = BindingPolicy::GpuNear;
  chosen.pus = {8, 9, 10, 11};
  // Not bound by the launcher: nothing to say.
  CHECK(launcher_binding_warning("0-31", "0-31", chosen).empty());
  // Bound by the launcher to what ringbench chose anyway.
  CHECK(launcher_binding_warning("8-11", "0-31", chosen).empty());
  // ringbench leaves binding alone: the launcher's stands, no conflict.
  CHECK(launcher_binding_warning("0-7", "0-31", BindingDecision{}).empty());
  // Bound elsewhere: warn, naming both sets and the fix.
  const std::string w = launcher_binding_warning("0-7", "0-31", chosen);
  REQUIRE(!w.empty());
  CHECK(w.find("0-7") != std::string::npos);
  CHECK(w.find("8-11") != std::string::npos);
  CHECK(w.find("gpu-near") != std::string::npos);
  CHECK(w.find("--bind-to none") != std::string::npos);
}
