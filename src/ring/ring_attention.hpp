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

#include "ring/block_calls.hpp"
#include "ring/transport.hpp"
#include "ring/problem.hpp"

namespace rb::ring {

// Per ring step (R entries), seconds.
struct StepTimes {
  std::vector<double> compute;  // block kernels of the step (plus the dK/dV add in backward)
  std::vector<double> wait;     // exposed communication: time blocked in RingTransport::wait
};

// This rank's ring results as host arrays: out, dq, dk, dv [batch][heads][local_rows][head_dim],
// lse [batch][heads][local_rows]; the gradients stay empty without backward.
struct RingResult {
  std::vector<float> out, lse, dq, dk, dv;
};

class RingAttention {
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
  void load_inputs(const void* q, const void* k, const void* v, const void* dout);
  void forward();
  void backward();  // after forward()

  // Host copies of this rank's results: out [shard] and lse [batch*heads*local_rows].
  void read_output(float* out, float* lse) const;
  void read_gradients(float* dq, float* dk, float* dv) const;
  // Both of the above into fresh arrays (the gradients when constructed with backward).
  RingResult result() const;

  const StepTimes& forward_steps() const { return fwd_; }
  const StepTimes& backward_steps() const { return bwd_; }  // final dK/dV hop in the last wait
  std::uint64_t bytes_sent() const { return bytes_sent_; }  // since construction / reset
  void reset_bytes_sent() { bytes_sent_ = 0; }
  const Problem& problem() const { return p_; }

 private:
  struct Buffer {
    AttentionBackend* owner = nullptr;
    void* ptr = nullptr;
    Buffer() = default;
    Buffer(AttentionBackend& b, std::size_t bytes) : owner(&b), ptr(b.allocate(bytes)) {}
    ~Buffer() {
      if (ptr) owner->release(ptr);
    }
    Buffer(Buffer&& o) noexcept : owner(o.owner), ptr(o.ptr) { o.ptr = nullptr; }
    Buffer& operator=(Buffer&& o) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    char* bytes() const { return static_cast<char*>(ptr); }
    float* floats() const { return static_cast<float*>(ptr); }
  };

  void post(const void* send, void* recv, std::size_t bytes);
  // Runs `launch` on every kernel call of this rank's queries against the K/V of `owner` at
  // `kv` (block_calls.hpp: fully masked span pairs skipped, dense ones merged), with `block`'s
  // shared fields set.
  template <class Block, class Launch>
  void for_each_block(Block& block, const char* kv, int owner, Launch launch);
  void compute_forward(const char* kv, int owner);
  void compute_backward(const char* kv, int owner, float* dkdv);

  Problem p_;
  AttentionBackend& be_;
  RingTransport& tr_;
  bool with_backward_;
  int rank_ = 0;
  std::vector<std::vector<BlockCall>> calls_;  // per owner ring rank: this rank's calls on its K/V
  std::size_t shard_bytes_ = 0;   // one of Q/K/V/dO in dtype
  std::size_t shard_floats_ = 0;  // elements of one shard
  std::size_t rows_ = 0;          // batch * heads * local_rows
  Buffer q_, dout_, home_kv_, out_, lse_, delta_, dq_, home_dkdv_, contrib_;
  Buffer pkt_[2];
  StepTimes fwd_, bwd_;
  std::uint64_t bytes_sent_ = 0;
  bool have_forward_ = false;
};

}  // namespace rb::ring
