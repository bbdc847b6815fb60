#include "ring/ring_attention.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace rb::ring {

RingAttention::RingAttention(const Problem& p, AttentionBackend& backend, RingTransport& transport,
                             bool with_backward)
    : KvBlockScheme(p, backend, with_backward, "ring attention", transport.ring_size(),
                    transport.ring_rank()),
      tr_(transport) {
  const std::size_t kv_bytes = 2 * shards_.kv_shard_bytes,
                    dkdv_bytes = 2 * shards_.kv_shard_floats * sizeof(float);
  const std::size_t packet = with_backward_ ? kv_bytes + dkdv_bytes : kv_bytes;
  if (p_.ring_size > 1) {
    pkt_[0] = Buffer(be_, packet);
    pkt_[1] = Buffer(be_, packet);
  }
  if (with_backward_) {
    if (p_.ring_size > 1) contrib_ = Buffer(be_, dkdv_bytes);
    if (p_.ring_size > 1) kv_prev_ = Buffer(be_, kv_bytes);
  }
}

int RingAttention::backward_owner(int s) const {
  const int R = p_.ring_size;
  return s == R - 1 ? rank_ : ((rank_ - 1 - s) % R + R) % R;
}

// Step 0 passes block r - 1's K/V on (needed from step 1 when a step 1 on another block
// exists); the middle steps pass K/V with the partial dK/dV one block behind; the last two pass
// partial dK/dV only (the own block needs no K/V); step R - 1's reaches the block's owner.
std::size_t RingAttention::backward_hop_bytes(int s) const {
  const int R = p_.ring_size;
  const std::size_t kv = 2 * shards_.kv_shard_bytes,
                    dkdv = 2 * shards_.kv_shard_floats * sizeof(float);
  if (R == 1) return 0;
  if (s == 0) return R >= 3 ? kv : 0;
  if (s <= R - 3) return kv + dkdv;
  return dkdv;
}

RingAttention::~RingAttention() = default;

void RingAttention::post(const void* send, void* recv, std::size_t bytes) {
  tr_.post(send, recv, bytes);
  bytes_sent_ += bytes;
}

void RingAttention::forward() {
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * shards_.kv_shard_bytes;
  reset_steps(fwd_);
  std::vector<int> marks(3 * static_cast<std::size_t>(R));
  std::vector<double> host_wait(static_cast<std::size_t>(R), 0.0);
  be_.reset_marks();
  be_.init_forward(shards_.out.floats(), shards_.lse.floats(),
                   static_cast<std::int64_t>(shards_.rows), p_.head_dim);
  // With backward, the first block received (rank r - 1's) lands in kv_prev_ and stays there
  // for the backward's first step; the others alternate between the two packets.
  char* first = with_backward_ ? kv_prev_.bytes() : pkt_[0].bytes();
  for (int s = 0; s < R; ++s) {
    const char* kv = s == 0 ? shards_.kv.bytes() : s == 1 ? first : pkt_[(s - 1) % 2].bytes();
    // The next block is in flight while this one is computed.
    if (s < R - 1) post(kv, s == 0 ? first : pkt_[s % 2].bytes(), kv_bytes);
    const std::size_t m = 3 * static_cast<std::size_t>(s);
    marks[m] = be_.mark();
    compute_forward(kv, kv_owner(rank_, s, R));
    marks[m + 1] = be_.mark();
    if (s < R - 1) host_wait[static_cast<std::size_t>(s)] = tr_.wait();
    marks[m + 2] = be_.mark();
  }
  tr_.finish();  // the neighbours' reads of this rank's buffers end inside the pass
  be_.synchronize();
  for (int s = 0; s < R; ++s) {
    const std::size_t m = 3 * static_cast<std::size_t>(s), i = static_cast<std::size_t>(s);
    fwd_.compute[i] = be_.seconds_between(marks[m], marks[m + 1]);
    fwd_.wait[i] = be_.on_device() ? be_.seconds_between(marks[m + 1], marks[m + 2]) : host_wait[i];
  }
  have_forward_ = true;
}

void RingAttention::backward() {
  check_backward(have_forward_);
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * shards_.kv_shard_bytes,
                    dkdv_floats = 2 * shards_.kv_shard_floats,
                    dkdv_bytes = dkdv_floats * sizeof(float);
  reset_steps(bwd_);
  std::vector<int> marks(4 * static_cast<std::size_t>(R));
  std::vector<double> host_wait(static_cast<std::size_t>(R), 0.0);
  be_.reset_marks();
  start_backward();
  if (R == 1) {
    be_.fill_zero(shards_.dkdv.ptr, dkdv_bytes);
    marks[0] = be_.mark();
    compute_backward(shards_.kv.bytes(), rank_, shards_.dkdv.floats());
    marks[1] = be_.mark();
    be_.synchronize();
    bwd_.compute[0] = be_.seconds_between(marks[0], marks[1]);
    return;
  }
  // Packet = [K | V | dK | dV]. At step s this rank computes on the K/V of o_s = backward_owner(s)
  // and sends [K/V of o_s | complete-so-far dK/dV of o_{s-1}]; it receives [K/V of o_{s+1} |
  // partial dK/dV of o_s from the ranks before it], to which it adds its own contribution. The
  // last step computes on its own K/V and receives its own block's partial sum.
  for (int s = 0; s < R; ++s) {
    const bool own = s == R - 1;
    const char* kv = s == 0 ? kv_prev_.bytes()
                     : own  ? shards_.kv.bytes()
                            : pkt_[(s - 1) % 2].bytes();
    char* recv = own ? nullptr : pkt_[s % 2].bytes();
    const std::size_t bytes = backward_hop_bytes(s);
    if (s == 0) {
      if (bytes > 0)
        post(kv_prev_.ptr, recv, bytes);  // nothing to pass on yet: o_0's first visitor
    } else if (own) {
      post(pkt_[(s - 1) % 2].bytes() + kv_bytes, shards_.dkdv.ptr, bytes);  // o_{R-2}'s sum, home
    } else if (s <= R - 3) {
      post(pkt_[(s - 1) % 2].ptr, recv, bytes);
    } else {
      post(pkt_[(s - 1) % 2].bytes() + kv_bytes, recv + kv_bytes,
           bytes);  // the next block is the own one
    }
    const std::size_t m = 4 * static_cast<std::size_t>(s);
    be_.fill_zero(contrib_.ptr, dkdv_bytes);
    marks[m] = be_.mark();
    compute_backward(kv, backward_owner(s), contrib_.floats());
    marks[m + 1] = be_.mark();
    if (bytes > 0) host_wait[static_cast<std::size_t>(s)] = tr_.wait();
    marks[m + 2] = be_.mark();
    float* partial = own ? shards_.dkdv.floats() : reinterpret_cast<float*>(recv + kv_bytes);
    if (s == 0)
      be_.copy(partial, contrib_.ptr, dkdv_bytes);  // this rank is the block's first visitor
    else
      be_.accumulate(partial, contrib_.floats(), dkdv_floats);
    marks[m + 3] = be_.mark();
  }
  tr_.finish();
  be_.synchronize();
  for (int s = 0; s < R; ++s) {
    const std::size_t k = 4 * static_cast<std::size_t>(s), i = static_cast<std::size_t>(s);
    bwd_.compute[i] = be_.seconds_between(marks[k], marks[k + 1]) +
                      be_.seconds_between(marks[k + 2], marks[k + 3]);
    bwd_.wait[i] = be_.on_device() ? be_.seconds_between(marks[k + 1], marks[k + 2]) : host_wait[i];
  }
}

RingAttention::DeviceTensors RingAttention::device_tensors() const {
  const Shards& s = shards_;
  return {s.q.bytes(),
          s.k(),
          s.v(),
          s.dout.bytes(),
          s.out.floats(),
          s.lse.floats(),
          s.dq.floats(),
          s.dkdv.ptr ? s.dk() : nullptr,
          s.dkdv.ptr ? s.dv() : nullptr};
}

}  // namespace rb::ring
