#include "ring/ring_attention.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace rb::ring {

RingAttention::RingAttention(const Problem& p, AttentionBackend& backend, RingTransport& transport,
                             bool with_backward)
    : p_(p), be_(backend), tr_(transport), with_backward_(with_backward) {
  check_problem(p_);
  if (tr_.ring_size() != p_.ring_size)
    throw std::invalid_argument("ring attention: transport ring has " +
                                std::to_string(tr_.ring_size()) + " ranks, problem ring size " +
                                std::to_string(p_.ring_size));
  rank_ = tr_.ring_rank();
  const std::vector<attn::Span> mine = local_spans(p_, rank_);
  for (int owner = 0; owner < p_.ring_size; ++owner)
    calls_.push_back(block_calls(mine, local_spans(p_, owner), p_.patterns()));
  shard_floats_ = static_cast<std::size_t>(p_.shard_elements());
  shard_bytes_ = shard_floats_ * attn::dtype_size(p_.dtype);
  rows_ = static_cast<std::size_t>(p_.batch) * p_.heads * static_cast<std::size_t>(p_.local_rows());
  kv_shard_floats_ = static_cast<std::size_t>(p_.kv_shard_elements());
  kv_shard_bytes_ = kv_shard_floats_ * attn::dtype_size(p_.dtype);
  const std::size_t kv_bytes = 2 * kv_shard_bytes_, dkdv_bytes = 2 * kv_shard_floats_ * sizeof(float);
  gqa_ = KvExpansion(be_, p_.batch, p_.heads, p_.num_kv_heads(), p_.local_rows(), p_.head_dim, p_.dtype,
                     with_backward_);

  q_ = Buffer(be_, shard_bytes_);
  home_kv_ = Buffer(be_, kv_bytes);
  out_ = Buffer(be_, shard_floats_ * sizeof(float));
  lse_ = Buffer(be_, rows_ * sizeof(float));
  const std::size_t packet = with_backward_ ? kv_bytes + dkdv_bytes : kv_bytes;
  if (p_.ring_size > 1) {
    pkt_[0] = Buffer(be_, packet);
    pkt_[1] = Buffer(be_, packet);
  }
  if (with_backward_) {
    dout_ = Buffer(be_, shard_bytes_);
    delta_ = Buffer(be_, rows_ * sizeof(float));
    dq_ = Buffer(be_, shard_floats_ * sizeof(float));
    home_dkdv_ = Buffer(be_, dkdv_bytes);
    if (p_.ring_size > 1) contrib_ = Buffer(be_, dkdv_bytes);
  }
}

RingAttention::~RingAttention() = default;

void RingAttention::load_inputs(const void* q, const void* k, const void* v, const void* dout) {
  be_.copy_to_device(q_.ptr, q, shard_bytes_);
  be_.copy_to_device(home_kv_.bytes(), k, kv_shard_bytes_);
  be_.copy_to_device(home_kv_.bytes() + kv_shard_bytes_, v, kv_shard_bytes_);
  if (with_backward_) {
    if (dout == nullptr) throw std::invalid_argument("ring attention: backward needs dO");
    be_.copy_to_device(dout_.ptr, dout, shard_bytes_);
  }
  be_.synchronize();
}

void RingAttention::post(const void* send, void* recv, std::size_t bytes) {
  tr_.post(send, recv, bytes);
  bytes_sent_ += bytes;
}

void RingAttention::compute_forward(const char* kv, int owner) {
  kernels().forward(calls_[static_cast<std::size_t>(owner)], gqa_.expand(kv), out_.floats(), lse_.floats());
}

void RingAttention::compute_backward(const char* kv, int owner, float* dkdv) {
  float* grads = gqa_.grads(dkdv);
  kernels().backward(calls_[static_cast<std::size_t>(owner)], gqa_.expand(kv), dout_.ptr, lse_.floats(),
                     delta_.floats(), dq_.floats(), grads);
  gqa_.fold(dkdv);
}

StepKernels RingAttention::kernels() const {
  return {be_, attn::Dims{p_.batch, p_.heads, p_.head_dim, p_.local_rows(), p_.local_rows()},
          p_.dtype, p_.scale(), q_.ptr, gqa_.kernel_shard_bytes()};
}

void RingAttention::forward() {
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * kv_shard_bytes_;
  fwd_.compute.assign(static_cast<std::size_t>(R), 0.0);
  fwd_.wait.assign(static_cast<std::size_t>(R), 0.0);
  std::vector<int> marks(3 * static_cast<std::size_t>(R));
  std::vector<double> host_wait(static_cast<std::size_t>(R), 0.0);
  be_.reset_marks();
  be_.init_forward(out_.floats(), lse_.floats(), static_cast<std::int64_t>(rows_), p_.head_dim);
  for (int s = 0; s < R; ++s) {
    const char* kv = s == 0 ? home_kv_.bytes() : pkt_[(s - 1) % 2].bytes();
    // The next block is in flight while this one is computed.
    if (s < R - 1) post(kv, pkt_[s % 2].ptr, kv_bytes);
    const std::size_t m = 3 * static_cast<std::size_t>(s);
    marks[m] = be_.mark();
    compute_forward(kv, kv_owner(rank_, s, R));
    marks[m + 1] = be_.mark();
    if (s < R - 1) host_wait[static_cast<std::size_t>(s)] = tr_.wait();
    marks[m + 2] = be_.mark();
  }
  be_.synchronize();
  for (int s = 0; s < R; ++s) {
    const std::size_t m = 3 * static_cast<std::size_t>(s), i = static_cast<std::size_t>(s);
    fwd_.compute[i] = be_.seconds_between(marks[m], marks[m + 1]);
    fwd_.wait[i] = be_.on_device() ? be_.seconds_between(marks[m + 1], marks[m + 2]) : host_wait[i];
  }
  have_forward_ = true;
}

void RingAttention::backward() {
  if (!with_backward_) throw std::logic_error("ring attention: constructed without backward");
  if (!have_forward_) throw std::logic_error("ring attention: backward() before forward()");
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * kv_shard_bytes_, dkdv_floats = 2 * kv_shard_floats_,
                    dkdv_bytes = dkdv_floats * sizeof(float);
  bwd_.compute.assign(static_cast<std::size_t>(R), 0.0);
  bwd_.wait.assign(static_cast<std::size_t>(R), 0.0);
  std::vector<int> marks(6 * static_cast<std::size_t>(R));
  std::vector<double> host_wait(static_cast<std::size_t>(R), 0.0);
  be_.reset_marks();
  be_.backward_prepare(dout_.ptr, out_.floats(), delta_.floats(), static_cast<std::int64_t>(rows_),
                       p_.head_dim, p_.dtype);
  be_.fill_zero(dq_.ptr, shard_floats_ * sizeof(float));
  if (R == 1) {
    be_.fill_zero(home_dkdv_.ptr, dkdv_bytes);
    marks[0] = be_.mark();
    compute_backward(home_kv_.bytes(), rank_, home_dkdv_.floats());
    marks[1] = be_.mark();
    be_.synchronize();
    bwd_.compute[0] = be_.seconds_between(marks[0], marks[1]);
    return;
  }
  // Packet = [K | V | dK | dV]. At step s this rank computes on the K/V of owner o_s = r - s
  // and sends [K/V of o_s | complete-so-far dK/dV of o_{s-1}]; it receives [K/V of o_{s+1} |
  // partial dK/dV of o_s from the ranks before it], to which it adds its own contribution.
  for (int s = 0; s < R; ++s) {
    const char* kv = s == 0 ? home_kv_.bytes() : pkt_[(s - 1) % 2].bytes();
    char* recv = pkt_[s % 2].bytes();
    if (s == 0)
      post(home_kv_.ptr, recv, kv_bytes);  // nothing to pass on yet
    else if (s < R - 1)
      post(pkt_[(s - 1) % 2].ptr, recv, kv_bytes + dkdv_bytes);
    else
      post(pkt_[(s - 1) % 2].bytes() + kv_bytes, recv + kv_bytes, dkdv_bytes);  // no K/V needed
    const std::size_t m = 6 * static_cast<std::size_t>(s);
    be_.fill_zero(contrib_.ptr, dkdv_bytes);
    marks[m] = be_.mark();
    compute_backward(kv, kv_owner(rank_, s, R), contrib_.floats());
    marks[m + 1] = be_.mark();
    host_wait[static_cast<std::size_t>(s)] = tr_.wait();
    marks[m + 2] = be_.mark();
    float* partial = reinterpret_cast<float*>(recv + kv_bytes);
    if (s == 0)
      be_.copy(partial, contrib_.ptr, dkdv_bytes);  // this rank is the block's first visitor
    else
      be_.accumulate(partial, contrib_.floats(), dkdv_floats);
    marks[m + 3] = be_.mark();
  }
  // Final hop: the block of rank r + 1 has now been visited by every rank; send it home and
  // receive this rank's own complete dK/dV.
  const std::size_t m = 6 * static_cast<std::size_t>(R - 1);
  post(pkt_[(R - 1) % 2].bytes() + kv_bytes, home_dkdv_.ptr, dkdv_bytes);
  host_wait[static_cast<std::size_t>(R - 1)] += tr_.wait();
  marks[m + 4] = be_.mark();
  be_.synchronize();
  for (int s = 0; s < R; ++s) {
    const std::size_t k = 6 * static_cast<std::size_t>(s), i = static_cast<std::size_t>(s);
    bwd_.compute[i] = be_.seconds_between(marks[k], marks[k + 1]) +
                      be_.seconds_between(marks[k + 2], marks[k + 3]);
    bwd_.wait[i] = be_.on_device() ? be_.seconds_between(marks[k + 1], marks[k + 2]) : host_wait[i];
  }
  if (be_.on_device())
    bwd_.wait[static_cast<std::size_t>(R - 1)] += be_.seconds_between(marks[m + 3], marks[m + 4]);
}

void RingAttention::read_output(float* out, float* lse) const {
  be_.copy_to_host(out, out_.ptr, shard_floats_ * sizeof(float));
  be_.copy_to_host(lse, lse_.ptr, rows_ * sizeof(float));
}

void RingAttention::read_gradients(float* dq, float* dk, float* dv) const {
  if (!with_backward_) throw std::logic_error("ring attention: constructed without backward");
  be_.copy_to_host(dq, dq_.ptr, shard_floats_ * sizeof(float));
  be_.copy_to_host(dk, home_dkdv_.ptr, kv_shard_floats_ * sizeof(float));
  be_.copy_to_host(dv, home_dkdv_.bytes() + kv_shard_floats_ * sizeof(float), kv_shard_floats_ * sizeof(float));
}

RingAttention::DeviceTensors RingAttention::device_tensors() const {
  DeviceTensors t{q_.bytes(), home_kv_.bytes(), home_kv_.bytes() + kv_shard_bytes_, dout_.bytes(),
                  out_.floats(), lse_.floats(), dq_.floats(), home_dkdv_.floats(), nullptr};
  if (t.dk != nullptr) t.dv = t.dk + kv_shard_floats_;
  return t;
}

RingResult RingAttention::result() const {
  RingResult r;
  r.out.resize(shard_floats_);
  r.lse.resize(rows_);
  read_output(r.out.data(), r.lse.data());
  if (!with_backward_) return r;
  r.dq.resize(shard_floats_);
  r.dk.resize(kv_shard_floats_);
  r.dv.resize(kv_shard_floats_);
  read_gradients(r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

}  // namespace rb::ring
