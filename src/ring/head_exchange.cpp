#include "ring/head_exchange.hpp"

#include <stdexcept>
#include <utility>

namespace rb::ring {

HeadExchange::HeadExchange(attn::AttentionBackend& backend, GroupTransport& transport, int batch,
                           std::int64_t shard_rows, std::int64_t joint_rows,
                           std::vector<std::vector<RowRun>> runs)
    : be_(backend),
      tr_(transport),
      batch_(batch),
      members_(transport.group_size()),
      n_(shard_rows),
      joint_rows_(joint_rows) {
  // The runs become one joint row per shard row, in backend memory once: the packing kernels
  // look rows up instead of the host issuing a copy per member, head and run.
  std::vector<std::int64_t> joint_row(static_cast<std::size_t>(members_ * n_), -1);
  for (std::size_t m = 0; m < runs.size(); ++m)
    for (const RowRun& run : runs[m])
      for (std::int64_t i = 0; i < run.count; ++i)
        joint_row[m * static_cast<std::size_t>(n_) + static_cast<std::size_t>(run.row + i)] =
            run.joint + i;
  for (std::int64_t j : joint_row)
    if (j < 0 || j >= joint_rows_)
      throw std::logic_error("HeadExchange: the runs leave a shard row without a joint row");
  joint_row_ = BackendBuffer(be_, joint_row.size() * sizeof(std::int64_t));
  be_.copy_to_device(joint_row_.ptr, joint_row.data(), joint_row.size() * sizeof(std::int64_t));
}

std::size_t HeadExchange::part_bytes(const HeadPart& t) const {
  return static_cast<std::size_t>(batch_) * static_cast<std::size_t>(t.heads / members_) *
         static_cast<std::size_t>(n_) * static_cast<std::size_t>(t.width) *
         attn::dtype_size(t.wire);
}

std::size_t HeadExchange::chunk_bytes(const std::vector<HeadPart>& parts) const {
  std::size_t sum = 0;
  for (const HeadPart& t : parts) sum += part_bytes(t);
  return sum;
}

void HeadExchange::to_heads(const std::vector<HeadPart>& shards, const std::vector<HeadPart>& joint,
                            char* send, char* recv) {
  cross(shards, joint, false, send, recv,
        "HeadExchange: shards and joint parts differ on the wire");
}

void HeadExchange::to_shards(const std::vector<HeadPart>& joint,
                             const std::vector<HeadPart>& shards, char* send, char* recv) {
  cross(joint, shards, true, send, recv, "HeadExchange: joint and shard parts differ on the wire");
}

void HeadExchange::cross(const std::vector<HeadPart>& from, const std::vector<HeadPart>& to,
                         bool from_joint, char* send, char* recv, const char* mismatch) {
  const std::size_t chunk = chunk_bytes(from);
  if (chunk_bytes(to) != chunk) throw std::logic_error(mismatch);
  copy_parts(from, send, chunk, from_joint, true);
  exchange(chunk, send, recv);
  copy_parts(to, recv, chunk, !from_joint, false);
}

void HeadExchange::exchange(std::size_t chunk, const char* send, char* recv) {
  bytes_sent_ += static_cast<std::uint64_t>(members_ - 1) * chunk;
  tr_.all_to_all(send, recv, chunk);
}

// A member's chunk: the parts one after another, each [batch][heads / P][n][width] on the wire.
void HeadExchange::copy_parts(const std::vector<HeadPart>& tensors, char* buffer, std::size_t chunk,
                              bool joint, bool to_chunks) const {
  std::size_t offset = 0;
  for (const HeadPart& t : tensors) {
    attn::HeadChunks c;
    c.data = buffer;
    c.chunk_bytes = chunk;
    c.offset = offset;
    c.wire = t.wire;
    c.members = members_;
    c.batch = batch_;
    c.local_heads = t.heads / members_;
    c.shard_rows = n_;
    c.width = t.width;
    attn::HeadTensor tensor;
    tensor.data = t.data;
    tensor.type = t.type;
    if (joint) {
      tensor.joint_row = static_cast<const std::int64_t*>(joint_row_.ptr);
      tensor.joint_rows = joint_rows_;
    }
    be_.copy_head_chunks(c, tensor, to_chunks);
    offset += part_bytes(t);
  }
}

namespace {

char* bytes(void* p) {
  return static_cast<char*>(p);
}

}  // namespace

std::vector<HeadPart> qkv_parts(const Problem& p, void* q, void* k, void* v) {
  const attn::DType t = p.dtype;
  const int H = p.heads, Hkv = p.num_kv_heads();
  const std::int64_t d = p.head_dim;
  return {{bytes(q), H, d, t, t}, {bytes(k), Hkv, d, t, t}, {bytes(v), Hkv, d, t, t}};
}

std::vector<HeadPart> out_lse_parts(const Problem& p, void* out, void* lse) {
  const attn::DType t = p.dtype, F32 = attn::DType::F32;
  return {{bytes(out), p.heads, p.head_dim, F32, t}, {bytes(lse), p.heads, 1, F32, F32}};
}

std::vector<HeadPart> gradient_parts(const Problem& p, void* dq, void* dk, void* dv) {
  const attn::DType t = p.dtype, F32 = attn::DType::F32;
  const int H = p.heads, Hkv = p.num_kv_heads();
  const std::int64_t d = p.head_dim;
  return {{bytes(dq), H, d, F32, t}, {bytes(dk), Hkv, d, F32, t}, {bytes(dv), Hkv, d, F32, t}};
}

}  // namespace rb::ring
