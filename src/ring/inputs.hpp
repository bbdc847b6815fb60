#pragma once
// Deterministic inputs: every element of Q, K, V and dO is a counter-based hash of
// (seed, tensor, batch, head, global position, dim), so each rank generates its own shard
// and the reference regenerates any global row, with no communication.
#include <cstdint>
#include <vector>

#include "ring/problem.hpp"

namespace rb::ring {

enum class Tensor : std::uint64_t { Q = 1, K = 2, V = 3, dO = 4 };

// Uniform in [-1, 1), rounded to the problem's storage dtype (what the kernels read).
float input_value(std::uint64_t seed, Tensor t, attn::DType dtype, int b, int h,
                  std::int64_t position, int dim);

// input_value of one row: out[c] for c = 0..d-1 (the hash of the row's prefix computed once).
void input_row(std::uint64_t seed, Tensor t, attn::DType dtype, int b, int h, std::int64_t position,
               int d, float* out);

// This ring rank's shard in storage bytes, [batch][heads][local_rows][head_dim] (K and V:
// [batch][num_kv_heads][local_rows][head_dim]; K/V head j is input head j of those tensors).
std::vector<unsigned char> make_shard(const Problem& p, int ring_rank, std::uint64_t seed,
                                      Tensor t);

}  // namespace rb::ring
