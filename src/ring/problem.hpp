#pragma once
// One ring attention problem: shapes, masking and how the sequence is sharded over the
// ring (layouts), plus the exact per-step work each ring rank does.
#include <cstdint>
#include <string>
#include <vector>

#include "attention.hpp"

namespace rb::ring {

// How the S positions are split over R ring ranks (see docs/ring-attention.md):
//   contiguous: rank r holds [r*S/R, (r+1)*S/R)
//   zigzag:     2R chunks of S/(2R); rank r holds chunks r and 2R-1-r
//   striped:    rank r holds positions r, r+R, r+2R, ...
enum class Layout { Contiguous, Zigzag, Striped };
const char* to_string(Layout l);
Layout layout_from_string(const std::string& s);  // throws std::invalid_argument

attn::DType dtype_from_string(const std::string& s);  // "fp32" | "fp16" | "bf16"
const char* to_string(attn::DType t);
// Every name the two functions above accept, in declaration order (the config's choices).
std::vector<std::string> layout_names();
std::vector<std::string> dtype_names();

// One LongNet branch: segment length w and dilation rate r (w == 0: exact attention, r == 1).
struct Branch {
  std::int64_t segment = 0;
  std::int64_t rate = 1;
};

struct Problem {
  int batch = 1;
  int heads = 1;
  int kv_heads = 0;  // K/V heads (grouped-query attention); 0: one per query head
  int head_dim = 64;
  std::int64_t seq_len = 0;  // S, total over the ring
  int ring_size = 1;         // R
  Layout layout = Layout::Contiguous;
  bool causal = false;
  std::vector<Branch> branches;  // empty: one exact branch
  attn::DType dtype = attn::DType::F32;

  std::int64_t local_rows() const { return seq_len / ring_size; }
  float scale() const;
  // One Pattern per branch (at least one).
  std::vector<attn::Pattern> patterns() const;
  // Elements of one [batch][heads][local_rows][head_dim] shard.
  std::int64_t shard_elements() const {
    return static_cast<std::int64_t>(batch) * heads * local_rows() * head_dim;
  }
  // GQA/MQA: num_kv_heads() K/V heads, each shared by group() query heads (h -> h / group()).
  int num_kv_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int group() const { return heads / num_kv_heads(); }
  // Elements of one [batch][kv heads][local_rows][head_dim] K or V shard.
  std::int64_t kv_shard_elements() const {
    return static_cast<std::int64_t>(batch) * num_kv_heads() * local_rows() * head_dim;
  }
};

// Empty when the problem can run; otherwise why not, with the numbers.
std::string problem_error(const Problem& p);
// Throws std::invalid_argument(problem_error(p)) when not empty.
void check_problem(const Problem& p);

// The global positions ring rank `ring_rank` holds, as spans over its local rows (in order).
std::vector<attn::Span> local_spans(const Problem& p, int ring_rank);
// Global position of each local row of `ring_rank`.
std::vector<std::int64_t> local_positions(const Problem& p, int ring_rank);

// Which ring rank's K/V block ring rank r computes with at step s (0 <= s < R).
inline int kv_owner(int ring_rank, int step, int ring_size) {
  return ((ring_rank - step) % ring_size + ring_size) % ring_size;
}

// Attending (query, key) pairs between two shards, summed over batch, heads and branches:
// exactly the pairs the kernels compute (masked pairs are not counted). O(rows) per branch.
std::int64_t pair_count(const Problem& p, int q_rank, int kv_rank);
// pair_count(p, r, kv_owner(r, s, R)) for s = 0..R-1.
std::vector<std::int64_t> step_pairs(const Problem& p, int ring_rank);

}  // namespace rb::ring
