#pragma once
// The table of kernel paths: one row per path, saying what it is called, which device it
// runs on, whether this build has it, what it supports, and which tile variants it offers.
// Config parsing (`kernel:` choices and errors), `auto`, `--help`, the kernel benchmark and
// the tests all walk this table; adding a kernel path is one row here plus its backend code.
// Plain C++ (no MPI, Kokkos or CUDA headers): usable by src/ and by a standalone nvcc build.
#include <string>
#include <vector>

#include "attention.hpp"

namespace rb::attn {

enum class Device { Host, Cuda };
const char* to_string(Device d);

// What a path computes natively. A block outside it is refused at parse time, or (for
// `auto` and the documented fallbacks) routed to another path; never silently wrong.
struct KernelSupport {
  bool fp32 = true, fp16 = true, bf16 = true;
  int max_head_dim = 0;       // 0: no limit
  int head_dim_multiple = 1;  // head_dim % this == 0
  bool causal = true;
  bool dilated = true;
};

struct KernelPath {
  const char* name;      // as written in YAML (`kernel: NAME`) and recorded per point
  Device device;
  bool built;            // compiled into this ringbench
  KernelSupport supports;
  const char* summary;   // one line for --help and the docs
  std::vector<const char*> tiles;  // tile variants (`kernel_tile:`); first is the default
};

// What a sweep asks a backend for: a path name from the table (or "auto") and a tile variant
// ("" or "default": the path's default). Recorded per point in the output file.
struct KernelChoice {
  std::string path = "auto";
  std::string tile = "default";
};

// Every path ringbench knows, built or not.
const std::vector<KernelPath>& kernel_paths();
// nullptr when no row has this name on this device ("auto" has no row).
const KernelPath* find_kernel_path(const std::string& name, Device device);
// The YAML choices of `kernel:` for a device: "auto" first, then every path of that device
// in table order (built or not: an unbuilt one is refused with the reason, not as unknown).
std::vector<std::string> kernel_choices(Device device);
// Empty when `choice` can run in this build on `device` for blocks of this dtype, head dim,
// causality and dilation; otherwise one sentence saying why not (for a config error).
std::string kernel_refusal(const KernelChoice& choice, Device device, DType dtype, int head_dim,
                           bool causal, bool dilated);

}  // namespace rb::attn
