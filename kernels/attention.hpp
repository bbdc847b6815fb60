#pragma once
// Block attention problem description shared by every kernel path (Kokkos host kernels,
// CUDA flash / naive / cuDNN). One call handles one (query block, key/value block) pair of
// the ring and merges its result into running fp32 accumulators by log-sum-exp.
//
// Buffer layout everywhere: [batch][heads][rows][head_dim], row-major, contiguous.
// Q, K, V, dO are stored in `dtype`; O, LSE, delta, dQ, dK, dV accumulators are fp32.
#include <cstddef>
#include <cstdint>

namespace rb::attn {

enum class DType { F32, F16, BF16 };
inline std::size_t dtype_size(DType t) {
  return t == DType::F32 ? 4 : 2;
}

// The names of the storage dtypes in configs, outputs and tuned policies (one table).
struct DTypeName {
  DType dtype;
  const char* name;
};
inline constexpr DTypeName kDTypeNames[] = {
    {DType::F32, "fp32"}, {DType::F16, "fp16"}, {DType::BF16, "bf16"}};

// A run of rows of a local buffer and the global sequence positions they hold:
// row (row0 + i) holds position (first + i * stride), for i in [0, count).
struct Span {
  std::int64_t row0 = 0;
  std::int64_t count = 0;
  std::int64_t first = 0;
  std::int64_t stride = 1;
  std::int64_t position(std::int64_t i) const { return first + i * stride; }
};

// Which (query position p, key position k) pairs attend, for head h:
//   causal:   k <= p
//   dilated branch (segment w > 0, rate r, w % r == 0, LongNet):
//             p / w == k / w   (same segment)
//             p % r == h % r  and  k % r == h % r   (every r-th position, offset by head)
// segment == 0 means no segment restriction and rate must be 1 (exact attention).
// Several branches are several calls merged into the same accumulators: LongNet's
// weighting of branches by their softmax denominators is exactly the log-sum-exp merge.
struct Pattern {
  bool causal = false;
  std::int64_t segment = 0;
  std::int64_t rate = 1;

  bool allows(std::int64_t p, std::int64_t k, int head) const {
    if (causal && k > p) return false;
    if (segment > 0) {
      if (p / segment != k / segment) return false;
      const std::int64_t off = head % rate;
      if (p % rate != off || k % rate != off) return false;
    }
    return true;
  }
};

struct Dims {
  int batch = 1;
  int heads = 1;
  int head_dim = 64;
  std::int64_t q_rows = 0;   // rows in the Q / O / LSE / dQ / dO buffers
  std::int64_t kv_rows = 0;  // rows in the K / V / dK / dV buffers
};

// What a forward and a backward block both say: the shapes, the rows of each side and the
// inputs. Filled once by whoever builds blocks (the ring's steps, the kernel benchmark, tests).
struct BlockInputs {
  Dims dims;
  DType dtype = DType::F32;
  float scale = 1.0f;  // softmax scale, usually 1/sqrt(head_dim)
  Span q, kv;
  Pattern pattern;
  const void* q_data = nullptr;
  const void* k_data = nullptr;
  const void* v_data = nullptr;
};

struct ForwardBlock : BlockInputs {
  float* out = nullptr;  // running, normalised output of the q rows
  float* lse = nullptr;  // running log-sum-exp of the q rows (natural log; -inf = nothing yet)
};

struct BackwardBlock : BlockInputs {
  const void* dout = nullptr;    // dtype, q rows
  const float* lse = nullptr;    // final log-sum-exp of the q rows (after all blocks/branches)
  const float* delta = nullptr;  // rowsum(dO * O) of the q rows
  float* dq = nullptr;           // accumulated (+=) for q rows
  float* dk = nullptr;           // accumulated (+=) for kv rows
  float* dv = nullptr;           // accumulated (+=) for kv rows
};

}  // namespace rb::attn
