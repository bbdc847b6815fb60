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

std::size_t HeadExchange::part_bytes(const HeadPart& t, HeadGroup group) const {
  return static_cast<std::size_t>(batch_) *
         static_cast<std::size_t>(t.heads / members_ / group.count) * static_cast<std::size_t>(n_) *
         static_cast<std::size_t>(t.width) * attn::dtype_size(t.wire);
}

std::size_t HeadExchange::chunk_bytes(const std::vector<HeadPart>& parts, HeadGroup group) const {
  std::size_t sum = 0;
  for (const HeadPart& t : parts) sum += part_bytes(t, group);
  return sum;
}

std::size_t HeadExchange::chunk_bytes(const std::vector<HeadPart>& parts) const {
  return chunk_bytes(parts, HeadGroup{});
}

void HeadExchange::start(const std::vector<HeadPart>& from, bool from_joint, HeadGroup group,
                         char* send, char* recv, int slot) {
  if (started_chunk_.empty()) started_chunk_.assign(GroupTransport::kAsyncSlots, 0);
  const std::size_t chunk = chunk_bytes(from, group);
  std::size_t& started = started_chunk_.at(static_cast<std::size_t>(slot));
  if (started != 0) throw std::logic_error("HeadExchange: slot started twice");
  started = chunk;
  copy_parts(from, send, chunk, from_joint, true, group);
  bytes_sent_ += static_cast<std::uint64_t>(members_ - 1) * chunk;
  // One group has nothing to overlap: its exchange stays on the compute stream.
  if (group.count == 1)
    tr_.all_to_all(send, recv, chunk);
  else
    tr_.start_all_to_all(slot, send, recv, chunk);
}

void HeadExchange::finish(const std::vector<HeadPart>& to, bool to_joint, HeadGroup group,
                          char* recv, int slot) {
  std::size_t& started = started_chunk_.at(static_cast<std::size_t>(slot));
  if (started == 0 || chunk_bytes(to, group) != started)
    throw std::logic_error("HeadExchange: a finish that does not match its start (other parts)");
  if (group.count > 1) tr_.finish_all_to_all(slot);
  copy_parts(to, recv, started, to_joint, false, group);
  started = 0;
}

void HeadExchange::to_heads(const std::vector<HeadPart>& shards, const std::vector<HeadPart>& joint,
                            char* send, char* recv) {
  start(shards, false, HeadGroup{}, send, recv, 0);
  finish(joint, true, HeadGroup{}, recv, 0);
}

void HeadExchange::to_shards(const std::vector<HeadPart>& joint,
                             const std::vector<HeadPart>& shards, char* send, char* recv) {
  start(joint, true, HeadGroup{}, send, recv, 0);
  finish(shards, false, HeadGroup{}, recv, 0);
}

// A member's chunk: the parts one after another, each [batch][heads / P][n][width] on the wire.
void HeadExchange::copy_parts(const std::vector<HeadPart>& tensors, char* buffer, std::size_t chunk,
                              bool joint, bool to_chunks, HeadGroup group) const {
  std::size_t offset = 0;
  for (const HeadPart& t : tensors) {
    attn::HeadChunks c;
    c.data = buffer;
    c.chunk_bytes = chunk;
    c.offset = offset;
    c.wire = t.wire;
    c.members = members_;
    c.batch = batch_;
    c.member_heads = t.heads / members_;
    c.local_heads = c.member_heads / group.count;
    c.head0 = group.index * c.local_heads;
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
    offset += part_bytes(t, group);
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

std::vector<HeadPart> dout_parts(const Problem& p, void* dout) {
  return {{bytes(dout), p.heads, p.head_dim, p.dtype, p.dtype}};
}

std::vector<HeadPart> gradient_parts(const Problem& p, void* dq, void* dk, void* dv) {
  const attn::DType t = p.dtype, F32 = attn::DType::F32;
  const int H = p.heads, Hkv = p.num_kv_heads();
  const std::int64_t d = p.head_dim;
  return {{bytes(dq), H, d, F32, t}, {bytes(dk), Hkv, d, F32, t}, {bytes(dv), Hkv, d, F32, t}};
}

}  // namespace rb::ring
