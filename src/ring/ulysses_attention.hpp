#pragma once
// The Ulysses scheme (DeepSpeed-Ulysses): one all-to-all turns this rank's sequence shard of
// every head into every rank's rows of heads / group of the heads; each rank then runs one local
// attention over the whole sequence for its heads (rows put in position order, so one call with
// the problem's own mask), and one all-to-all of O and LSE brings the sequence shards back. The
// backward sends dO the same way, computes dQ, dK, dV locally for its heads over the whole
// sequence, and sends them back. Needs heads divisible by the group size (and, with dilated
// branches, heads / group divisible by every rate, so a head's branch offset is the same
// locally); the sweep refuses other problems at startup.
//
// Head groups (ulysses_head_groups, G): each rank's heads in G groups, each group its own
// all-to-all each way. Group g + 1 crosses while group g computes and group g's O goes back
// while g + 1 computes, so only the first group's inputs and the last one's outputs are
// exposed. The joint buffers are group-major ([G][batch][heads / P / G][S][...], K and V of a
// group together) so a group is one kernel call over contiguous tensors. G = 1 keeps every
// exchange on the compute stream (nothing to overlap, no event hop).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ring/backend_buffer.hpp"
#include "ring/block_calls.hpp"
#include "ring/cp_attention.hpp"
#include "ring/group_transport.hpp"
#include "ring/head_exchange.hpp"
#include "ring/kv_expansion.hpp"
#include "ring/sharded_scheme.hpp"
#include "ring/step_kernels.hpp"

namespace rb::ring {

// Empty when the Ulysses scheme can run p; otherwise why not.
std::string ulysses_problem_error(const Problem& p);
// Empty when p's heads split into `groups` head groups on every rank; otherwise why not.
std::string ulysses_head_groups_error(const Problem& p, int groups);

// Rows of a rank's shard as runs of consecutive rows at consecutive positions (joint = the
// position: a zigzag chunk is one run; a striped rank's rows are runs of one).
std::vector<RowRun> position_runs(const Problem& p, int rank);

class UlyssesAttention final : public ShardedScheme {
 public:
  // Allocates every buffer up front (throws attn::OutOfMemory); throws std::invalid_argument
  // with ulysses_problem_error when p cannot run under Ulysses.
  UlyssesAttention(const Problem& p, attn::AttentionBackend& backend, GroupTransport& transport,
                   bool with_backward, int head_groups = 1);

  void forward() override;
  void backward() override;
  std::uint64_t bytes_sent() const override { return heads_->bytes_sent() - bytes_at_reset_; }
  void reset_bytes_sent() override { bytes_at_reset_ = heads_->bytes_sent(); }
  Scheme scheme() const override { return Scheme::Ulysses; }

 private:
  // Where group g's part of each joint tensor starts (group-major buffers).
  struct GroupTensors {
    char* q;
    char* kv;  // K then V of the group's K/V heads
    char* dout;
    float* out;
    float* lse;
    float* delta;
    float* dq;
    float* dkv;  // dK then dV
  };
  GroupTensors group_tensors(int g) const;
  StepKernels kernels(int g) const;  // group g of this rank's heads over the whole sequence
  // Where group g's all-to-all of the inputs (qkv, dO) or of the outputs (O|LSE, dQ|dK|dV)
  // sends from and receives into: a region of its own per group and direction when groups
  // overlap, one shared region when G = 1.
  char* exchange_region(const BackendBuffer& buf, bool outputs, int g) const;
  HeadGroup head_group(int g) const { return {g, groups_}; }
  // A pass's one step: compute, the groups' kernel spans; wait, the rest of first .. last (the
  // exchanges and their packing, less what hid behind the kernels).
  void record_pass(StepTimes& t, int first, int last,
                   const std::vector<std::pair<int, int>>& spans);

  int group_ = 1, groups_ = 1;
  std::int64_t S_ = 0;
  std::unique_ptr<HeadExchange> heads_;  // the all-to-alls (joint rows: positions)
  std::vector<BlockCall> calls_;         // the local attention over the whole sequence
  KvExpansion gqa_;                      // this rank's K/V heads -> its query heads (GQA)
  // The whole sequence for this rank's heads (as many elements as a shard of each tensor).
  BackendBuffer qf_, kvf_, doutf_, outf_, lsef_, deltaf_, dqf_, dkvf_;
  BackendBuffer send_, recv_;
  std::size_t inputs_region_ = 0, outputs_region_ = 0;  // bytes per group and direction
  std::uint64_t bytes_at_reset_ = 0;
  bool have_forward_ = false;
};

}  // namespace rb::ring
