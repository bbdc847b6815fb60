#pragma once
// The all-to-all of the head-splitting schemes (Ulysses, and the Ulysses stage of hybrid) over
// a group of P members: sequence shards (each member's n rows of every head) <-> head shards
// (heads / P of the heads, over the members' rows together, "joint" rows, in an order the scheme
// chooses: Ulysses the sequence's position order, hybrid its ring layout's local order). A
// tensor of an exchange is a HeadPart; several travel in one all-to-all, one after another in
// each member's chunk. Each part crosses in its wire dtype: the fp32 results (O, dQ, dK, dV)
// in the input dtype, as the stock Ulysses implementations send them, LSE in fp32. The backend
// packs and unpacks each part in one pass (AttentionBackend::copy_head_chunks), converting.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend.hpp"
#include "ring/backend_buffer.hpp"
#include "ring/group_transport.hpp"
#include "ring/problem.hpp"

namespace rb::ring {

// Rows [row, row + count) of a member's shard are joint rows [joint, joint + count).
struct RowRun {
  std::int64_t row = 0, joint = 0, count = 0;
};

// [batch][heads][rows][width] elements of `elem` bytes: a shard has the member's rows of every
// head, a joint tensor heads / P heads of the joint rows.
struct HeadPart {
  char* data;
  int heads;           // over the whole group (num_heads or num_kv_heads)
  std::int64_t width;  // elements per row: head_dim, or 1 for LSE
  attn::DType type;    // as stored here
  attn::DType wire;    // as it crosses (the same on both sides of an exchange)
};

// A scheme's tensors as the parts of one exchange, each where `data` points: the inputs in the
// problem's dtype; O, dQ, dK, dV in fp32, crossing in the problem's dtype; LSE in fp32.
std::vector<HeadPart> qkv_parts(const Problem& p, void* q, void* k, void* v);
std::vector<HeadPart> out_lse_parts(const Problem& p, void* out, void* lse);
std::vector<HeadPart> dout_parts(const Problem& p, void* dout);
std::vector<HeadPart> gradient_parts(const Problem& p, void* dq, void* dk, void* dv);

// One group of each member's heads: Ulysses' head-group pipeline exchanges group `index` of
// `count` (heads / P / count heads of each member) while the previous group computes. A joint
// part of a group exchange is that group's joint tensor ([batch][heads / P / count][joint
// rows][width]); a shard part stays the whole shard, the exchange picks the group's heads.
struct HeadGroup {
  int index = 0, count = 1;
};

class HeadExchange {
 public:
  // runs[m]: where member m's shard rows sit among the joint_rows joint rows.
  HeadExchange(attn::AttentionBackend& backend, GroupTransport& transport, int batch,
               std::int64_t shard_rows, std::int64_t joint_rows,
               std::vector<std::vector<RowRun>> runs);

  // Bytes of one member's chunk of an exchange of these parts.
  std::size_t chunk_bytes(const std::vector<HeadPart>& parts) const;
  // Shards -> this member's heads of the joint rows (send, recv: scratch of P chunks each).
  void to_heads(const std::vector<HeadPart>& shards, const std::vector<HeadPart>& joint, char* send,
                char* recv);
  // This member's heads of the joint rows -> shards.
  void to_shards(const std::vector<HeadPart>& joint, const std::vector<HeadPart>& shards,
                 char* send, char* recv);
  // The overlapped halves of one group's exchange: start packs `from` (joint parts when
  // from_joint) into send and starts the all-to-all in transport slot `slot`; finish waits for
  // it and unpacks recv into `to`. Between them the caller computes; send and recv stay
  // untouched until finish (GroupTransport::start_all_to_all).
  void start(const std::vector<HeadPart>& from, bool from_joint, HeadGroup group, char* send,
             char* recv, int slot);
  void finish(const std::vector<HeadPart>& to, bool to_joint, HeadGroup group, char* recv,
              int slot);
  // Bytes of one member's chunk of one group's exchange.
  std::size_t chunk_bytes(const std::vector<HeadPart>& parts, HeadGroup group) const;
  std::uint64_t bytes_sent() const { return bytes_sent_; }  // to the other members, so far

 private:
  // Bytes of one part in a member's chunk: [batch][heads / P / groups][n][width] of its wire
  // dtype.
  std::size_t part_bytes(const HeadPart& t, HeadGroup group) const;
  // Every part of `tensors` to (to_chunks) or from the chunks of `buffer`, the chunk of `chunk`
  // bytes; joint: the tensors are joint ones (else shards).
  void copy_parts(const std::vector<HeadPart>& tensors, char* buffer, std::size_t chunk, bool joint,
                  bool to_chunks, HeadGroup group) const;
  attn::AttentionBackend& be_;
  GroupTransport& tr_;
  int batch_, members_;
  std::int64_t n_, joint_rows_;
  BackendBuffer joint_row_;  // [members][n]: the joint row of each member's shard row
  std::uint64_t bytes_sent_ = 0;
  std::vector<std::size_t> started_chunk_;  // per transport slot: its chunk bytes (0: idle)
};

}  // namespace rb::ring
