#include "ring/head_exchange.hpp"

#include <utility>

namespace rb::ring {

HeadExchange::HeadExchange(attn::AttentionBackend& backend, GroupTransport& transport, int batch,
                           std::int64_t shard_rows, std::int64_t joint_rows, std::vector<std::vector<RowRun>> runs)
    : be_(backend), tr_(transport), batch_(batch), members_(transport.group_size()), n_(shard_rows),
      joint_rows_(joint_rows), runs_(std::move(runs)) {}

std::size_t HeadExchange::chunk_bytes(const std::vector<HeadPart>& parts) const {
  std::size_t sum = 0;
  for (const HeadPart& t : parts)
    sum += static_cast<std::size_t>(batch_) * static_cast<std::size_t>(t.heads / members_) *
           static_cast<std::size_t>(n_) * row_bytes(t);
  return sum;
}

void HeadExchange::to_heads(const std::vector<HeadPart>& shards, const std::vector<HeadPart>& joint,
                            char* send, char* recv) {
  pack_heads(shards, send);
  exchange(shards, send, recv);
  unpack_joint(recv, joint);
}

void HeadExchange::to_shards(const std::vector<HeadPart>& joint, const std::vector<HeadPart>& shards,
                             char* send, char* recv) {
  pack_joint(joint, send);
  exchange(joint, send, recv);
  unpack_heads(recv, shards);
}

void HeadExchange::exchange(const std::vector<HeadPart>& parts, const char* send, char* recv) {
  const std::size_t chunk = chunk_bytes(parts);
  bytes_sent_ += static_cast<std::uint64_t>(members_ - 1) * chunk;
  tr_.all_to_all(send, recv, chunk);
}

// A member's chunk: for each part, for each batch, heads / P heads of n rows.
void HeadExchange::pack_heads(const std::vector<HeadPart>& shards, char* send) const {
  char* to = send;
  for (int j = 0; j < members_; ++j)
    for (const HeadPart& t : shards) {
      const std::int64_t local = t.heads / members_;
      const std::size_t heads_bytes = static_cast<std::size_t>(local * n_) * row_bytes(t);
      for (int b = 0; b < batch_; ++b, to += heads_bytes)
        be_.copy(to, t.data + static_cast<std::size_t>((b * t.heads + j * local) * n_) * row_bytes(t), heads_bytes);
    }
}

void HeadExchange::unpack_joint(const char* recv, const std::vector<HeadPart>& joint) const {
  const char* from = recv;
  for (int i = 0; i < members_; ++i)
    for (const HeadPart& t : joint) {
      const std::int64_t local = t.heads / members_;
      const std::size_t row = row_bytes(t);
      for (int b = 0; b < batch_; ++b)
        for (std::int64_t h = 0; h < local; ++h, from += static_cast<std::size_t>(n_) * row)
          for (const RowRun& run : runs_[static_cast<std::size_t>(i)])
            be_.copy(t.data + static_cast<std::size_t>((b * local + h) * joint_rows_ + run.joint) * row,
                     from + static_cast<std::size_t>(run.row) * row, static_cast<std::size_t>(run.count) * row);
    }
}

void HeadExchange::pack_joint(const std::vector<HeadPart>& joint, char* send) const {
  char* to = send;
  for (int i = 0; i < members_; ++i)
    for (const HeadPart& t : joint) {
      const std::int64_t local = t.heads / members_;
      const std::size_t row = row_bytes(t);
      for (int b = 0; b < batch_; ++b)
        for (std::int64_t h = 0; h < local; ++h, to += static_cast<std::size_t>(n_) * row)
          for (const RowRun& run : runs_[static_cast<std::size_t>(i)])
            be_.copy(to + static_cast<std::size_t>(run.row) * row,
                     t.data + static_cast<std::size_t>((b * local + h) * joint_rows_ + run.joint) * row,
                     static_cast<std::size_t>(run.count) * row);
    }
}

void HeadExchange::unpack_heads(const char* recv, const std::vector<HeadPart>& shards) const {
  const char* from = recv;
  for (int j = 0; j < members_; ++j)
    for (const HeadPart& t : shards) {
      const std::int64_t local = t.heads / members_;
      const std::size_t heads_bytes = static_cast<std::size_t>(local * n_) * row_bytes(t);
      for (int b = 0; b < batch_; ++b, from += heads_bytes)
        be_.copy(t.data + static_cast<std::size_t>((b * t.heads + j * local) * n_) * row_bytes(t), from, heads_bytes);
    }
}

}  // namespace rb::ring
