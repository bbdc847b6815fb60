#include "app/environment.hpp"

#include <cctype>
#include <climits>
#include <string>

#include <fmt/format.h>

#include "config/environment.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {
namespace {

using cfg::env_int;
using cfg::env_value;

// RINGBENCH_TEST_HANG_POINT and _SIGNAL_POINT=SWEEP:INDEX: the form is_test_point (app/watchdog)
// reads.
void check_test_point(const char* name, const std::string& v) {
  const auto colon = v.rfind(':');
  const std::string index = colon == std::string::npos ? "" : v.substr(colon + 1);
  // 19 digits: every index up to 10^19 - 1 fits the 64 bits is_test_point reads it into.
  if (colon == 0 || index.empty() || index.size() > 19 ||
      index.find_first_not_of("0123456789") != std::string::npos)
    cfg::env_fail(name, v,
                  "SWEEP:INDEX (a sweep name and a point index from 0, e.g. collectives:0)");
}

// The variables ringbench itself reads (grep getenv in src/; RINGBENCH_FAULT_PARITY_PATH is any
// kernel path name, so any text).
void check_ringbench_variables() {
  for (const char* name : {"RINGBENCH_RANKS_PER_NODE", "RINGBENCH_TEST_RANKS_PER_NODE"})
    if (const auto v = env_value(name)) env_int(name, *v, 1, 1 << 20, "ranks per simulated node");
  if (const auto v = env_value("RINGBENCH_PLACEMENT"))
    cfg::env_choice("RINGBENCH_PLACEMENT", *v, {"block", "cyclic"});
  if (const auto v = env_value("RINGBENCH_NCCL_STREAM_PRIORITY"))
    cfg::env_choice("RINGBENCH_NCCL_STREAM_PRIORITY", *v, {"high", "default"});
  if (const auto v = env_value("RINGBENCH_TEST_NCCL_ERROR"))
    env_int("RINGBENCH_TEST_NCCL_ERROR", *v, 0, INT64_MAX, "NCCL checks before the injected error");
  if (const auto v = env_value("RINGBENCH_TEST_AUTO_POINT_FLOOR_S"))
    cfg::env_number("RINGBENCH_TEST_AUTO_POINT_FLOOR_S", *v, 0, "seconds");
  for (const char* name : {"RINGBENCH_TEST_HANG_POINT", "RINGBENCH_TEST_SIGNAL_POINT"})
    if (const auto v = env_value(name)) check_test_point(name, *v);
}

// Kokkos 3.4 (Kokkos::initialize) reads these and throws, uncaught, when one does not start with
// an integer or several contradict each other; "" is not an integer to it. KOKKOS_RAND_DEVICES=1
// with KOKKOS_SKIP_DEVICE leaves it no device: an error for SKIP > 0, an endless loop for 0.
void check_kokkos_variables() {
  struct Integer {
    const char* name;
    std::int64_t min;
    const char* meaning;
  };
  for (const Integer& k :
       {Integer{"KOKKOS_NUM_THREADS", 1, "host threads"}, Integer{"KOKKOS_NUMA", 1, "NUMA regions"},
        Integer{"KOKKOS_DEVICE_ID", 0, "the GPU's index"},
        Integer{"KOKKOS_NUM_DEVICES", 1, "GPUs per node"},
        Integer{"KOKKOS_RAND_DEVICES", 1, "GPUs to pick from at random"},
        Integer{"KOKKOS_SKIP_DEVICE", 0, "a GPU index not to use"}})
    if (const auto v = env_value(k.name, false)) env_int(k.name, *v, k.min, INT_MAX, k.meaning);
  const auto rand_devices = env_value("KOKKOS_RAND_DEVICES", false);
  if (rand_devices && env_value("KOKKOS_NUM_DEVICES", false))
    cfg::env_fail("KOKKOS_RAND_DEVICES", *rand_devices,
                  "it unset while KOKKOS_NUM_DEVICES is set (Kokkos takes one of the two)");
  if (rand_devices && *rand_devices == "1" && env_value("KOKKOS_SKIP_DEVICE", false))
    cfg::env_fail(
        "KOKKOS_RAND_DEVICES", *rand_devices,
        "at least 2 when KOKKOS_SKIP_DEVICE is set (skipping the only device leaves none)");
  for (const char* name : {"KOKKOS_DISABLE_WARNINGS", "KOKKOS_TUNE_INTERNALS"}) {
    const auto v = env_value(name, false);
    if (!v) continue;
    std::string lower = *v;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // Kokkos reads true|on|yes|1-9 as true and anything else as false: a typo would be false.
    if (lower.size() == 1 && std::isdigit(static_cast<unsigned char>(lower[0]))) continue;
    if (lower != "true" && lower != "on" && lower != "yes" && lower != "false" && lower != "off" &&
        lower != "no")
      cfg::env_fail(name, *v, "true, on, yes, 1-9, or false, off, no, 0");
  }
}

}  // namespace

void check_environment() {
  check_ringbench_variables();
  check_kokkos_variables();
}

bool environment_ok(MPI_Comm world) {
  std::string error;
  try {
    check_environment();
  } catch (const cfg::ConfigError& e) {
    error = e.what();
  }
  if (!mpi::any_rank(!error.empty(), world)) return true;
  if (mpi::first_rank_with(!error.empty(), world) == mpi::rank_of(world))
    fmt::print(stderr, "ringbench: {}\n", error);
  return false;
}

}  // namespace rb
