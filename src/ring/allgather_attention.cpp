#include "ring/allgather_attention.hpp"

#include <stdexcept>
#include <string>

namespace rb::ring {

AllGatherAttention::AllGatherAttention(const Problem& p, attn::AttentionBackend& backend,
                                       GroupTransport& transport, bool with_backward)
    : p_(p), be_(backend), tr_(transport), with_backward_(with_backward) {
  check_problem(p_);
  if (tr_.group_size() != p_.ring_size)
    throw std::invalid_argument("all-gather attention: transport group has " + std::to_string(tr_.group_size()) +
                                " ranks, problem group size " + std::to_string(p_.ring_size));
  rank_ = tr_.group_rank();
  const std::vector<attn::Span> mine = local_spans(p_, rank_);
  for (int owner = 0; owner < p_.ring_size; ++owner)
    calls_.push_back(block_calls(mine, local_spans(p_, owner), p_.patterns()));
  shard_floats_ = static_cast<std::size_t>(p_.shard_elements());
  shard_bytes_ = shard_floats_ * attn::dtype_size(p_.dtype);
  rows_ = static_cast<std::size_t>(p_.batch) * p_.heads * static_cast<std::size_t>(p_.local_rows());
  kv_shard_floats_ = static_cast<std::size_t>(p_.kv_shard_elements());
  kv_shard_bytes_ = kv_shard_floats_ * attn::dtype_size(p_.dtype);
  gqa_ = KvExpansion(be_, p_.batch, p_.heads, p_.num_kv_heads(), p_.local_rows(), p_.head_dim, p_.dtype,
                     with_backward_);
  const std::size_t R = static_cast<std::size_t>(p_.ring_size);
  q_ = BackendBuffer(be_, shard_bytes_);
  home_kv_ = BackendBuffer(be_, 2 * kv_shard_bytes_);
  kv_all_ = BackendBuffer(be_, R * 2 * kv_shard_bytes_);
  out_ = BackendBuffer(be_, shard_floats_ * sizeof(float));
  lse_ = BackendBuffer(be_, rows_ * sizeof(float));
  if (!with_backward_) return;
  dout_ = BackendBuffer(be_, shard_bytes_);
  delta_ = BackendBuffer(be_, rows_ * sizeof(float));
  dq_ = BackendBuffer(be_, shard_floats_ * sizeof(float));
  dkdv_all_ = BackendBuffer(be_, R * 2 * kv_shard_floats_ * sizeof(float));
  home_dkdv_ = BackendBuffer(be_, 2 * kv_shard_floats_ * sizeof(float));
}

void AllGatherAttention::load_inputs(const void* q, const void* k, const void* v, const void* dout) {
  be_.copy_to_device(q_.ptr, q, shard_bytes_);
  be_.copy_to_device(home_kv_.bytes(), k, kv_shard_bytes_);
  be_.copy_to_device(home_kv_.bytes() + kv_shard_bytes_, v, kv_shard_bytes_);
  if (with_backward_) {
    if (dout == nullptr) throw std::invalid_argument("all-gather attention: backward needs dO");
    be_.copy_to_device(dout_.ptr, dout, shard_bytes_);
  }
  be_.synchronize();
}

StepKernels AllGatherAttention::kernels() const {
  return {be_, attn::Dims{p_.batch, p_.heads, p_.head_dim, p_.local_rows(), p_.local_rows()},
          p_.dtype, p_.scale(), q_.ptr, gqa_.kernel_shard_bytes()};
}

double AllGatherAttention::collective_seconds(int before, int after, double host_wait) {
  return be_.on_device() ? be_.seconds_between(before, after) : host_wait;
}

void AllGatherAttention::forward() {
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * kv_shard_bytes_;
  fwd_.compute.assign(static_cast<std::size_t>(R), 0.0);
  fwd_.wait.assign(static_cast<std::size_t>(R), 0.0);
  be_.reset_marks();
  be_.init_forward(out_.floats(), lse_.floats(), static_cast<std::int64_t>(rows_), p_.head_dim);
  const int g0 = be_.mark();
  const double host_wait = tr_.all_gather(home_kv_.ptr, kv_all_.ptr, kv_bytes);
  const int g1 = be_.mark();
  bytes_sent_ += static_cast<std::uint64_t>(R - 1) * kv_bytes;  // a ring all-gather's share
  std::vector<int> marks{g1};
  for (int owner = 0; owner < R; ++owner) {
    kernels().forward(calls_[static_cast<std::size_t>(owner)], gqa_.expand(kv_all_.bytes() + owner * kv_bytes),
                      out_.floats(), lse_.floats());
    marks.push_back(be_.mark());
  }
  be_.synchronize();
  fwd_.wait[0] = collective_seconds(g0, g1, host_wait);
  for (std::size_t o = 0; o < static_cast<std::size_t>(R); ++o)
    fwd_.compute[o] = be_.seconds_between(marks[o], marks[o + 1]);
  have_forward_ = true;
}

void AllGatherAttention::backward() {
  if (!with_backward_) throw std::logic_error("all-gather attention: constructed without backward");
  if (!have_forward_) throw std::logic_error("all-gather attention: backward() before forward()");
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * kv_shard_bytes_, dkdv_floats = 2 * kv_shard_floats_;
  bwd_.compute.assign(static_cast<std::size_t>(R), 0.0);
  bwd_.wait.assign(static_cast<std::size_t>(R), 0.0);
  be_.reset_marks();
  be_.backward_prepare(dout_.ptr, out_.floats(), delta_.floats(), static_cast<std::int64_t>(rows_),
                       p_.head_dim, p_.dtype);
  be_.fill_zero(dq_.ptr, shard_floats_ * sizeof(float));
  be_.fill_zero(dkdv_all_.ptr, static_cast<std::size_t>(R) * dkdv_floats * sizeof(float));
  std::vector<int> marks{be_.mark()};
  for (int owner = 0; owner < R; ++owner) {
    float* dkdv = dkdv_all_.floats() + owner * dkdv_floats;
    float* grads = gqa_.grads(dkdv);
    kernels().backward(calls_[static_cast<std::size_t>(owner)], gqa_.expand(kv_all_.bytes() + owner * kv_bytes),
                       dout_.ptr, lse_.floats(), delta_.floats(), dq_.floats(), grads);
    gqa_.fold(dkdv);
    marks.push_back(be_.mark());
  }
  const double host_wait = tr_.reduce_scatter_sum(dkdv_all_.floats(), home_dkdv_.floats(), dkdv_floats);
  const int g1 = be_.mark();
  bytes_sent_ += static_cast<std::uint64_t>(R - 1) * dkdv_floats * sizeof(float);
  be_.synchronize();
  for (std::size_t o = 0; o < static_cast<std::size_t>(R); ++o)
    bwd_.compute[o] = be_.seconds_between(marks[o], marks[o + 1]);
  bwd_.wait[static_cast<std::size_t>(R) - 1] = collective_seconds(marks.back(), g1, host_wait);
}

RingResult AllGatherAttention::result() const {
  RingResult r;
  r.out.resize(shard_floats_);
  r.lse.resize(rows_);
  be_.copy_to_host(r.out.data(), out_.ptr, shard_floats_ * sizeof(float));
  be_.copy_to_host(r.lse.data(), lse_.ptr, rows_ * sizeof(float));
  if (!with_backward_) return r;
  r.dq.resize(shard_floats_);
  r.dk.resize(kv_shard_floats_);
  r.dv.resize(kv_shard_floats_);
  be_.copy_to_host(r.dq.data(), dq_.ptr, shard_floats_ * sizeof(float));
  be_.copy_to_host(r.dk.data(), home_dkdv_.ptr, kv_shard_floats_ * sizeof(float));
  be_.copy_to_host(r.dv.data(), home_dkdv_.bytes() + kv_shard_floats_ * sizeof(float),
                   kv_shard_floats_ * sizeof(float));
  return r;
}

}  // namespace rb::ring
