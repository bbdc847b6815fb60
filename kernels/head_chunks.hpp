#pragma once
// Where each row of a head-splitting exchange (backend.hpp: HeadChunks, HeadTensor) sits in the
// chunks and in the tensor: one definition for the host loop and the CUDA kernel, so both
// backends move the same rows. Row g counts over [member][batch][local head][shard row].
#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "dtype.hpp"
#include "host_device.hpp"

namespace rb::attn {

RB_HOST_DEVICE inline std::int64_t head_chunk_rows(const HeadChunks& c) {
  return static_cast<std::int64_t>(c.members) * c.batch * c.local_heads * c.shard_rows;
}

// Heads per member in a shard tensor (the chunk may carry a group of them).
RB_HOST_DEVICE inline std::int64_t head_chunk_member_heads(const HeadChunks& c) {
  return c.member_heads > 0 ? c.member_heads : c.local_heads;
}

struct HeadRowPlace {
  char* chunk;               // the row's first wire element
  std::int64_t tensor_elem;  // the row's first element in the tensor
};

RB_HOST_DEVICE inline HeadRowPlace head_row_place(const HeadChunks& c, const HeadTensor& t,
                                                  std::int64_t g) {
  const std::int64_t n = c.shard_rows,
                     per_member = static_cast<std::int64_t>(c.batch) * c.local_heads * n;
  const std::int64_t m = g / per_member,
                     in_member = g % per_member;  // in_member: (b * local + h) * n + r
  const std::int64_t bh = in_member / n, r = in_member % n;
  const std::int64_t b = bh / c.local_heads, h = bh % c.local_heads;
  const std::size_t wire = c.wire == DType::F32 ? 4 : 2;
  char* chunk = c.data + static_cast<std::size_t>(m) * c.chunk_bytes + c.offset +
                static_cast<std::size_t>(in_member * c.width) * wire;
  std::int64_t row;
  if (t.joint_row == nullptr)  // shard: member m's heads of every batch
    row = ((b * c.members + m) * head_chunk_member_heads(c) + c.head0 + h) * n + r;
  else
    row = bh * t.joint_rows + t.joint_row[m * n + r];
  return {chunk, row * c.width};
}

// Elements first, first + step, ... of row g, tensor -> chunk (to_chunks) or back, converting
// between the tensor's type and the wire's: the host loop (step 1) and the CUDA kernel's
// general case (a warp's lanes) move the same elements.
RB_HOST_DEVICE inline void copy_head_row(const HeadChunks& c, const HeadTensor& t, std::int64_t g,
                                         bool to_chunks, std::int64_t first, std::int64_t step) {
  const HeadRowPlace at = head_row_place(c, t, g);
  for (std::int64_t i = first; i < c.width; i += step)
    if (to_chunks)
      store_from_float(at.chunk, c.wire, i, load_as_float(t.data, t.type, at.tensor_elem + i));
    else
      store_from_float(t.data, t.type, at.tensor_elem + i, load_as_float(at.chunk, c.wire, i));
}

}  // namespace rb::attn
