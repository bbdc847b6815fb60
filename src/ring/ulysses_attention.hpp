#pragma once
// The Ulysses scheme (DeepSpeed-Ulysses): one all-to-all turns this rank's sequence shard of
// every head into every rank's rows of heads / group of the heads; each rank then runs one local
// attention over the whole sequence for its heads (rows put in position order, so one call with
// the problem's own mask), and one all-to-all of O and LSE brings the sequence shards back. The
// backward sends dO the same way, computes dQ, dK, dV locally for its heads over the whole
// sequence, and sends them back. Needs heads divisible by the group size (and, with dilated
// branches, heads / group divisible by every rate, so a head's branch offset is the same
// locally); the sweep refuses other problems at startup.
#include <cstdint>
#include <memory>
#include <string>
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

// Rows of a rank's shard as runs of consecutive rows at consecutive positions (joint = the
// position: a zigzag chunk is one run; a striped rank's rows are runs of one).
std::vector<RowRun> position_runs(const Problem& p, int rank);

class UlyssesAttention final : public ShardedScheme {
 public:
  // Allocates every buffer up front (throws attn::OutOfMemory); throws std::invalid_argument
  // with ulysses_problem_error when p cannot run under Ulysses.
  UlyssesAttention(const Problem& p, attn::AttentionBackend& backend, GroupTransport& transport,
                   bool with_backward);

  void forward() override;
  void backward() override;
  std::uint64_t bytes_sent() const override { return heads_->bytes_sent() - bytes_at_reset_; }
  void reset_bytes_sent() override { bytes_at_reset_ = heads_->bytes_sent(); }
  Scheme scheme() const override { return Scheme::Ulysses; }

 private:
  StepKernels kernels() const;  // this rank's heads over the whole sequence

  int group_ = 1;
  std::int64_t S_ = 0;
  std::unique_ptr<HeadExchange> heads_;  // the all-to-alls (joint rows: positions)
  std::vector<BlockCall> calls_;         // the local attention over the whole sequence
  KvExpansion gqa_;                      // this rank's K/V heads -> its query heads (GQA)
  // The whole sequence for this rank's heads (as many elements as a shard of each tensor).
  BackendBuffer qf_, kvf_, doutf_, outf_, lsef_, deltaf_, dqf_, dkvf_;
  BackendBuffer send_, recv_;
  std::uint64_t bytes_at_reset_ = 0;
  bool have_forward_ = false;
};

}  // namespace rb::ring
