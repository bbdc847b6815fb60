#pragma once
// The table of kernel paths: one row per path, saying what it is called, which device it
// runs on, whether this build has it, what it supports, what it runs at full speed (what
// `auto` goes by), and which tile variants it offers. Config parsing (`kernel:` choices and
// errors), `auto`, `--help`, the kernel benchmark and the tests all walk this table; adding a
// kernel path is one row here plus its backend code (docs/gpu-kernels.md).
//
// Plain C++ (no MPI, Kokkos or CUDA headers): usable by src/ and by a standalone nvcc build.
// The entry points of a row live in the library that builds it (kernels/cuda for the CUDA
// rows, bound by row name in cuda_backend.cpp, which checks every built row is bound): this
// table cannot name functions of libraries that a host-only target does not link.
#include <memory>
#include <string>
#include <vector>

#include "attention.hpp"
#include "flash_tile.hpp"
#include "kernel_shape.hpp"

namespace rb::attn {

enum class Device { Host, Cuda };
const char* to_string(Device d);

// A range of blocks by dtype, head dim, causality and dilation.
struct KernelSupport {
  bool fp32 = true, fp16 = true, bf16 = true;
  int max_head_dim = 0;        // 0: no limit
  int head_dim_multiple = 1;   // head_dim % this == 0
  std::vector<int> head_dims;  // non-empty: only these head dims
  bool causal = true;
  bool dilated = true;
  // Full-speed ranges only: the least work per library call at which the path is the
  // fastest (each call has a fixed cost). Exact blocks: query-key pairs x head dim per call;
  // dilated blocks: query-key pairs per call (KernelShape). 0: no floor.
  double min_exact_pair_dims = 0;
  double min_dilated_pairs = 0;

  bool takes(DType dtype, int head_dim, bool is_causal, bool is_dilated) const;
  // Whether a block of this shape carries enough work per call (see the floors above).
  bool worth_a_call(const KernelShape& shape, int head_dim) const;
};

// A named tile shape of a path's kernels (`kernel_tile:`), recorded per point. It changes
// how the work is cut, never the result.
struct TileVariant {
  const char* name;
  const char* summary;    // one line for --help and the docs
  KernelSupport applies;  // blocks it changes; others run the default shape (refused at parse)
  FlashTile flash{};      // the flash row's variants: the kernel shape it runs
};

struct KernelPath {
  const char* name;  // as written in YAML (`kernel: NAME`) and recorded per point
  Device device;
  bool built;                      // compiled into this ringbench
  const char* missing;             // when not built: how to get it (for the config error)
  KernelSupport supports;          // blocks it computes (some through a documented fallback)
  KernelSupport full_speed;        // blocks it runs natively at its best: what `auto` goes by
  bool auto_candidate;             // `auto` may pick it
  const char* summary;             // one line for --help and the docs
  std::vector<TileVariant> tiles;  // first is "default"
};

struct KernelPolicy;  // kernel_policy.hpp

// What a sweep asks a backend for: a path name from the table (or "auto") and a tile variant
// ("" or "default": the path's default). Recorded per point in the output file. `policy`:
// auto follows this tuned policy where it has a rule (null: the built-in rule only).
struct KernelChoice {
  std::string path = "auto";
  std::string tile = "default";
  std::shared_ptr<const KernelPolicy> policy = nullptr;
};

// Every path ringbench knows, built or not. On a device, rows are in `auto`'s order of
// preference.
const std::vector<KernelPath>& kernel_paths();
// nullptr when no row has this name on this device ("auto" has no row).
const KernelPath* find_kernel_path(const std::string& name, Device device);
// The row of `path` named `tile` ("" means "default"); nullptr when it has none.
const TileVariant* find_tile(const KernelPath& path, const std::string& tile);
// The YAML choices of `kernel:` for a device: "auto" first, then every path of that device
// in table order (built or not: an unbuilt one is refused with the reason, not as unknown).
std::vector<std::string> kernel_choices(Device device);
// The row `auto` runs a block on without a policy (the built-in rule): the first built
// candidate of the device whose full-speed range takes the block with enough work per call
// (worth_a_call); else the first whose full-speed range takes it at all (a
// slow call beats a path without native support); else the last built candidate (the path
// that takes anything). nullptr only when the device has no built path.
const KernelPath* auto_kernel_path(Device device, DType dtype, int head_dim, bool causal,
                                   const KernelShape& shape);
// The path `auto` is named after in listings and backend names: its first built candidate.
const KernelPath* auto_headline_path(Device device);
// Empty when `choice` can run in this build on `device` for blocks of this dtype, head dim,
// causality and dilation; otherwise one sentence saying why not (for a config error).
std::string kernel_refusal(const KernelChoice& choice, Device device, DType dtype, int head_dim,
                           bool causal, bool dilated);

}  // namespace rb::attn
