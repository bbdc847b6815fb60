#pragma once
// Grouped-query attention (num_kv_heads < num_heads) on kernels that take one K/V head per query
// head: a K/V block of kv heads is expanded before a step's calls (each K/V head copied to the
// query heads of its group) and the expanded dK/dV folded back after (each group's sum). What
// travels between ranks stays the compact K/V; only the kernels see the copies. Without
// grouping it passes the buffers through untouched.
#include <cstddef>
#include <cstdint>

#include "attention.hpp"
#include "backend.hpp"
#include "ring/backend_buffer.hpp"

namespace rb::ring {

class KvExpansion {
 public:
  KvExpansion() = default;
  // Blocks of `rows` rows: K then V of kv_heads heads in dtype; dK then dV in fp32. Allocates
  // the expanded buffers when kv_heads < heads (throws attn::OutOfMemory).
  KvExpansion(attn::AttentionBackend& be, int batch, int heads, int kv_heads, std::int64_t rows,
              int head_dim, attn::DType dtype, bool backward);

  bool active() const { return group_ > 1; }
  // K then V for the kernels: `kv` itself, or its expansion (V at kernel_shard_bytes()).
  const char* expand(const char* kv);
  // Bytes of one K or V block as the kernels see it (the offset of V in what expand returns).
  std::size_t kernel_shard_bytes() const {
    return (active() ? expanded_elems_ : compact_elems_) * elem_;
  }
  // Where the kernels accumulate dK then dV: `compact` itself, or a zeroed expanded buffer that
  // fold() then adds into `compact`.
  float* grads(float* compact);
  void fold(float* compact);

 private:
  attn::AttentionBackend* be_ = nullptr;
  int batch_ = 1, heads_ = 1, kv_heads_ = 1, group_ = 1;
  std::size_t head_elems_ = 0, compact_elems_ = 0, expanded_elems_ = 0, elem_ = 4;
  BackendBuffer kv_, dkdv_;
};

}  // namespace rb::ring
