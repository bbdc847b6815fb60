#pragma once
// The ring attention algorithm, written once against AttentionBackend and RingTransport.
//
// Forward: R steps. At step s ring rank r computes its queries against the K/V block of rank
// (r - s) mod R while the block for step s+1 is already in flight (receive posted before the
// compute; K and V packed in one message; two persistent receive buffers used alternately).
// Partial outputs merge by log-sum-exp into fp32 accumulators.
//
// Backward: dQ stays local. K/V travel the ring again, and dK/dV follow their K/V block one
// step behind: each step's contribution is computed into a scratch buffer while the partial
// sums of the visited ranks arrive, then added (fp32). After R steps a final hop brings each
// block's complete dK/dV home to its owner.
#include <cstdint>
#include <vector>

#include "ring/backend_buffer.hpp"
#include "ring/block_calls.hpp"
#include "ring/cp_attention.hpp"
#include "ring/kv_expansion.hpp"
#include "ring/step_kernels.hpp"
#include "ring/transport.hpp"
#include "ring/problem.hpp"

namespace rb::ring {

class RingAttention final : public ContextParallelAttention {
 public:
  // Allocates every persistent buffer up front (throws OutOfMemory). The transport's ring
  // size must equal p.ring_size.
  RingAttention(const Problem& p, AttentionBackend& backend, RingTransport& transport,
                bool with_backward);
  ~RingAttention();
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  // Host arrays in p.dtype, [batch][heads][local_rows][head_dim]; dout may be null without
  // backward.
  void load_inputs(const void* q, const void* k, const void* v, const void* dout) override;
  void forward() override;
  void backward() override;  // after forward()

  // Host copies of this rank's results: out [shard] and lse [batch*heads*local_rows]; dq
  // [shard], dk and dv [batch][num_kv_heads][local_rows][head_dim].
  void read_output(float* out, float* lse) const;
  void read_gradients(float* dq, float* dk, float* dv) const;
  // Both of the above into fresh arrays (the gradients when constructed with backward).
  RingResult result() const override;

  const StepTimes& forward_steps() const override { return fwd_; }
  const StepTimes& backward_steps() const override { return bwd_; }  // final dK/dV hop in the last wait
  std::uint64_t bytes_sent() const override { return bytes_sent_; }  // since construction / reset
  void reset_bytes_sent() override { bytes_sent_ = 0; }
  const Problem& problem() const override { return p_; }
  Scheme scheme() const override { return Scheme::Ring; }

  // The ring's own buffers on the backend, for a scheme that fills and reads them there (hybrid):
  // inputs as load_inputs() takes them, results as result() returns them.
  struct DeviceTensors {
    char *q, *k, *v, *dout;
    float *out, *lse, *dq, *dk, *dv;
  };
  DeviceTensors device_tensors() const;

 private:
  using Buffer = BackendBuffer;

  void post(const void* send, void* recv, std::size_t bytes);
  void compute_forward(const char* kv, int owner);
  void compute_backward(const char* kv, int owner, float* dkdv);
  // This rank's queries on the kernels, against one K/V block (step_kernels.hpp).
  StepKernels kernels() const;

  Problem p_;
  AttentionBackend& be_;
  RingTransport& tr_;
  bool with_backward_;
  int rank_ = 0;
  std::vector<std::vector<BlockCall>> calls_;  // per owner ring rank: this rank's calls on its K/V
  std::size_t shard_bytes_ = 0;   // one of Q/K/V/dO in dtype
  std::size_t shard_floats_ = 0;  // elements of one shard
  std::size_t rows_ = 0;          // batch * heads * local_rows
  std::size_t kv_shard_bytes_ = 0, kv_shard_floats_ = 0;  // one of K/V (num_kv_heads heads)
  KvExpansion gqa_;               // K/V heads -> query heads for the kernels (GQA)
  Buffer q_, dout_, home_kv_, out_, lse_, delta_, dq_, home_dkdv_, contrib_;
  Buffer pkt_[2];
  StepTimes fwd_, bwd_;
  std::uint64_t bytes_sent_ = 0;
  bool have_forward_ = false;
};

}  // namespace rb::ring
