#pragma once
// What `kernel: auto` runs a block on: a tuned policy's choice where it has one, else the
// built-in rule of the kernel path table (auto_kernel_path). A policy holds measured choices
// of a kernel_tuning sweep, one rule per tuned shape (dtype, head dim, causal, LongNet segment
// and rate) with ranges of block rows; it is made by `rb-analysis tune` and read by
// src/config/policy_file.cpp (the file format is in docs/analysis.md).
//
// A block is matched on what its kernel computes (KernelShape: rows and keys of each
// sub-block, sub-blocks per call, calls per block), not on its config's names: every range of
// every rule with the block's dtype, head dim, causality and dilated-or-not is a box in that
// space (log2 of each), and the nearest box decides if the block lies within kPolicyReach of
// the span of that box's rule (between a rule's ranges, always). So a LongNet branch
// the sweep did not tune (another segment or rate), another head count or a block between grid
// points follows the measured shape it resembles; a block far from every measurement follows
// the built-in rule. Plain C++, like the table: both backends pick through KernelPicker.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attention.hpp"
#include "kernel_paths.hpp"
#include "kernel_shape.hpp"

namespace rb::attn {

// The tuned shape of a rule; segment 0 and rate 0 mean exact attention (no dilation).
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

struct PolicyRange {
  std::int64_t rows_min = 0, rows_max = 0;  // inclusive, in block rows of the tuning sweep
  const KernelPath* row = nullptr;          // nullptr: no path passed parity there (built-in)
};

struct PolicyRule {
  PolicyShape shape;
  std::vector<PolicyRange> ranges;  // ascending, non-overlapping
};

// How far (the sum over the four axes of log2 steps outside a box) a block may lie beyond
// the measured span of a rule and still follow it: two steps, e.g. a block twice as long
// (rows and keys), or a dilated branch with twice the rows per sub-block, or with half the
// heads per call and twice the calls.
constexpr double kPolicyReach = 2.0;

struct KernelPolicy {
  Device device = Device::Cuda;
  std::string file;    // as given in the config
  std::string sha256;  // of the file's bytes, so a run names exactly the rules it followed
  // The tuning sweep's batch and heads: with a rule's shape and a range's rows they give the
  // kernel shapes the range measured.
  int grid_batch = 1, grid_heads = 1;
  std::vector<PolicyRule> rules;

  // The row this policy picks for a block, or nullptr (the nearest range's rule is out of
  // reach, or that range had no passing path): the built-in rule decides. Equal distances take
  // the range that comes first in the file.
  const KernelPath* pick(DType dtype, const Dims& dims, const Pattern& pattern) const;
  // The kernel shapes a range measured: at its smallest and its largest block rows.
  std::pair<KernelShape, KernelShape> measured(const PolicyRule& rule,
                                               const PolicyRange& range) const;
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
