#pragma once
// What `kernel: auto` runs a block on: a tuned policy's choice where it has one, else the
// built-in rule of the kernel path table (auto_kernel_path). A policy maps a block's shape
// (dtype, head dim, causal, LongNet segment and rate) and its rows (the per-rank block, S/R)
// to a row of the table; it is made by `rb-analysis tune` from a kernel_tuning sweep and read
// by src/config/kernel_policy.cpp (the file format is in docs/tuning.md). Plain C++, like the
// table: both backends pick through KernelPicker, so host and GPU follow one rule.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attention.hpp"
#include "kernel_paths.hpp"

namespace rb::attn {

// One shape group of a policy; segment 0 and rate 0 mean exact attention (no dilation).
struct PolicyShape {
  DType dtype = DType::BF16;
  int head_dim = 0;
  bool causal = false;
  std::int64_t segment = 0;
  std::int64_t rate = 0;
  bool operator==(const PolicyShape& o) const {
    return dtype == o.dtype && head_dim == o.head_dim && causal == o.causal &&
           segment == o.segment && rate == o.rate;
  }
};

// The shape key of a block: a pattern without segment is exact attention (0, 0).
PolicyShape shape_of(DType dtype, int head_dim, const Pattern& pattern);

struct PolicyRange {
  std::int64_t rows_min = 0, rows_max = 0;  // inclusive, in block rows
  const KernelPath* row = nullptr;          // nullptr: no path passed parity there (built-in)
};

struct PolicyRule {
  PolicyShape shape;
  std::vector<PolicyRange> ranges;  // ascending, non-overlapping
};

struct KernelPolicy {
  Device device = Device::Cuda;
  std::string file;    // as given in the config
  std::string sha256;  // of the file's bytes, so a run names exactly the rules it followed
  std::vector<PolicyRule> rules;

  // The row this policy picks for a block of `rows` block rows, or nullptr (no rule for the
  // shape, rows outside the tuned ranges, or no passing path there): the built-in rule
  // decides. Rows between two ranges take the range whose bound is nearer by ratio (the grid is
  // geometric); a tie takes the smaller rows' range.
  const KernelPath* pick(const PolicyShape& shape, std::int64_t rows) const;
  // True when some range of the policy runs on `path`.
  bool names(const std::string& path) const;
};

// Where auto's rule comes from, recorded with every ring point: "built-in", or
// "FILE (sha256 HEX)", or "built-in (FILE not applied: why)".
struct PolicySource {
  std::shared_ptr<const KernelPolicy> policy;  // null: built-in rule
  std::string description = "built-in";
};

// The row each block runs on for a KernelChoice: the named row, or auto's pick.
class KernelPicker {
 public:
  struct Pick {
    const KernelPath* row = nullptr;
    bool from_policy = false;
  };
  KernelPicker() = default;
  // `fixed` null: auto (policy first, then the built-in rule).
  KernelPicker(Device device, const KernelPath* fixed, std::shared_ptr<const KernelPolicy> policy)
      : device_(device), fixed_(fixed), policy_(std::move(policy)) {}
  Pick pick(DType dtype, const Dims& dims, const Pattern& pattern) const;
  const KernelPolicy* policy() const { return policy_.get(); }
  bool is_auto() const { return fixed_ == nullptr; }

 private:
  Device device_ = Device::Host;
  const KernelPath* fixed_ = nullptr;
  std::shared_ptr<const KernelPolicy> policy_;
};

}  // namespace rb::attn
