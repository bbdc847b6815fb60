// Applies a real binding on this machine: local rank 0's `core` share, then reads it back.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "runtime/binding.hpp"

using namespace rb;

TEST_CASE("apply a core binding on this machine and read it back") {
  Topology topo = Topology::load_this_machine();
  const std::string before = topo.current_cpuset();
  const std::string machine = topo.machine_cpuset();
  MESSAGE("machine PUs " << machine << ", bound before: " << before);
  REQUIRE(!machine.empty());
  const MachineModel m = topo.model();
  REQUIRE(!m.numa.empty());

  const BindingDecision d = decide_binding(m, BindingPolicy::Core, 0, 1, -1);
  REQUIRE(!d.pus.empty());
  BindingDecision first_core = decide_binding(m, BindingPolicy::Core, 0, 1000000, -1);  // one core
  REQUIRE(!first_core.pus.empty());
  std::string after, warning;
  try {
    after = topo.apply(first_core, &warning);
  } catch (const std::runtime_error& e) {
    MESSAGE("binding not permitted here, skipped: " << e.what());
    return;
  }
  if (!warning.empty()) MESSAGE("memory binding: " << warning);
  CHECK(after == format_cpu_list(first_core.pus));
  CHECK(topo.current_cpuset() == format_cpu_list(first_core.pus));
  if (first_core.numa_os_index >= 0) CHECK(topo.current_numa_node() == first_core.numa_os_index);
  // Something else was chosen than the unbound state: the warning helper sees no launcher binding.
  CHECK(launcher_binding_warning(machine, machine, first_core).empty());
  // ... and would warn if that core set had come from the launcher and differed.
  if (format_cpu_list(first_core.pus) != machine)
    CHECK(!launcher_binding_warning(format_cpu_list(first_core.pus), machine, d).empty());

  // Back to the whole share, so later tests in this process are not squeezed onto one core.
  CHECK(topo.apply(d) == format_cpu_list(d.pus));
}
