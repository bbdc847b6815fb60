#include "ring/hybrid_attention.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace rb::ring {

Problem hybrid_inner_problem(const Problem& p, int u) {
  Problem inner = p;
  inner.heads = p.heads / u;
  inner.kv_heads = p.num_kv_heads() / u;
  inner.ring_size = p.ring_size / u;
  return inner;
}

namespace {

// Where member m of subgroup a keeps each of its rows among the inner ring rank a's rows.
std::vector<RowRun> member_runs(const Problem& p, const Problem& inner, int u, int a, int m) {
  std::unordered_map<std::int64_t, std::int64_t> joint;
  const std::vector<std::int64_t> mine = local_positions(inner, a);
  for (std::size_t i = 0; i < mine.size(); ++i) joint.emplace(mine[i], static_cast<std::int64_t>(i));
  std::vector<RowRun> runs;
  const std::vector<std::int64_t> pos = local_positions(p, a * u + m);
  for (std::size_t i = 0; i < pos.size(); ++i) {
    const auto at = joint.find(pos[i]);
    if (at == joint.end()) return {};  // not the inner rank's row: the layout does not survive
    const std::int64_t row = static_cast<std::int64_t>(i);
    if (!runs.empty() && runs.back().row + runs.back().count == row &&
        runs.back().joint + runs.back().count == at->second)
      ++runs.back().count;
    else
      runs.push_back({row, at->second, 1});
  }
  return runs;
}

}  // namespace

std::string hybrid_problem_error(const Problem& p, int u) {
  const std::string U = std::to_string(u), R = std::to_string(p.ring_size);
  if (u < 1 || p.ring_size % u != 0) return "ulysses_degree " + U + " does not divide the ring size " + R;
  if (p.heads % u != 0) return "num_heads " + std::to_string(p.heads) + " is not divisible by ulysses_degree " + U;
  if (p.num_kv_heads() % u != 0)
    return "num_kv_heads " + std::to_string(p.num_kv_heads()) + " is not divisible by ulysses_degree " + U;
  for (const Branch& b : p.branches)
    if (b.rate > 1 && (p.heads / u) % b.rate != 0)
      return "dilation rate " + std::to_string(b.rate) + " does not divide the " + std::to_string(p.heads / u) +
             " heads per Ulysses member (num_heads / ulysses_degree)";
  const Problem inner = hybrid_inner_problem(p, u);
  const std::string e = problem_error(inner);
  if (!e.empty()) return "the inner ring (ring size " + std::to_string(inner.ring_size) + "): " + e;
  for (int a = 0; a < inner.ring_size; ++a)
    for (int m = 0; m < u; ++m)
      if (member_runs(p, inner, u, a, m).empty())
        return std::string("the ") + to_string(p.layout) + " layout of " + R + " ranks does not split into " +
               std::to_string(inner.ring_size) + " subgroups of " + U +
               " consecutive ranks holding one inner-ring rank's rows each (contiguous and zigzag do)";
  return "";
}

HybridAttention::HybridAttention(const Problem& p, int ulysses_degree, attn::AttentionBackend& backend,
                                 RingTransport& ring, GroupTransport& heads, bool with_backward)
    : p_(p), u_(ulysses_degree), be_(backend), with_backward_(with_backward) {
  check_problem(p_);
  const std::string why = hybrid_problem_error(p_, u_);
  if (!why.empty()) throw std::invalid_argument("hybrid attention: " + why);
  if (heads.group_size() != u_ || ring.ring_size() != p_.ring_size / u_)
    throw std::invalid_argument("hybrid attention: transports of " + std::to_string(heads.group_size()) + " and " +
                                std::to_string(ring.ring_size()) + " ranks for ulysses_degree " + std::to_string(u_) +
                                " and ring size " + std::to_string(p_.ring_size));
  inner_ = hybrid_inner_problem(p_, u_);
  const int a = ring.ring_rank();
  std::vector<std::vector<RowRun>> runs;
  for (int m = 0; m < u_; ++m) runs.push_back(member_runs(p_, inner_, u_, a, m));
  heads_ = std::make_unique<HeadExchange>(be_, heads, p_.batch, p_.local_rows(), inner_.local_rows(), std::move(runs));
  ring_ = std::make_unique<RingAttention>(inner_, be_, ring, with_backward_);
  shard_floats_ = static_cast<std::size_t>(p_.shard_elements());
  shard_bytes_ = shard_floats_ * attn::dtype_size(p_.dtype);
  kv_shard_floats_ = static_cast<std::size_t>(p_.kv_shard_elements());
  kv_shard_bytes_ = kv_shard_floats_ * attn::dtype_size(p_.dtype);
  rows_ = static_cast<std::size_t>(p_.batch) * p_.heads * static_cast<std::size_t>(p_.local_rows());
  const std::size_t f32 = sizeof(float);
  q_ = BackendBuffer(be_, shard_bytes_);
  k_ = BackendBuffer(be_, kv_shard_bytes_);
  v_ = BackendBuffer(be_, kv_shard_bytes_);
  out_ = BackendBuffer(be_, shard_floats_ * f32);
  lse_ = BackendBuffer(be_, rows_ * f32);
  std::size_t exchange = std::max(shard_bytes_ + 2 * kv_shard_bytes_, (shard_floats_ + rows_) * f32);
  if (with_backward_) {
    dout_ = BackendBuffer(be_, shard_bytes_);
    dq_ = BackendBuffer(be_, shard_floats_ * f32);
    dk_ = BackendBuffer(be_, kv_shard_floats_ * f32);
    dv_ = BackendBuffer(be_, kv_shard_floats_ * f32);
    exchange = std::max(exchange, (shard_floats_ + 2 * kv_shard_floats_) * f32);
  }
  send_ = BackendBuffer(be_, exchange);
  recv_ = BackendBuffer(be_, exchange);
}

void HybridAttention::load_inputs(const void* q, const void* k, const void* v, const void* dout) {
  be_.copy_to_device(q_.ptr, q, shard_bytes_);
  be_.copy_to_device(k_.ptr, k, kv_shard_bytes_);
  be_.copy_to_device(v_.ptr, v, kv_shard_bytes_);
  if (with_backward_) {
    if (dout == nullptr) throw std::invalid_argument("hybrid attention: backward needs dO");
    be_.copy_to_device(dout_.ptr, dout, shard_bytes_);
  }
  be_.synchronize();
}

void HybridAttention::steps_from_ring(const StepTimes& inner, double exchange_s, StepTimes& out) const {
  out.compute.assign(static_cast<std::size_t>(p_.ring_size), 0.0);
  out.wait.assign(static_cast<std::size_t>(p_.ring_size), 0.0);
  std::copy(inner.compute.begin(), inner.compute.end(), out.compute.begin());
  std::copy(inner.wait.begin(), inner.wait.end(), out.wait.begin());
  out.wait[0] += exchange_s;
}

void HybridAttention::forward() {
  const std::size_t w = attn::dtype_size(p_.dtype), f32 = sizeof(float);
  const int H = p_.heads, Hkv = p_.num_kv_heads();
  const std::int64_t d = p_.head_dim;
  const RingAttention::DeviceTensors in = ring_->device_tensors();
  be_.reset_marks();
  const int m0 = be_.mark();
  heads_->to_heads({{q_.bytes(), H, d, w}, {k_.bytes(), Hkv, d, w}, {v_.bytes(), Hkv, d, w}},
                   {{in.q, H, d, w}, {in.k, Hkv, d, w}, {in.v, Hkv, d, w}}, send_.bytes(), recv_.bytes());
  const int m1 = be_.mark();
  be_.synchronize();
  const double to_heads = be_.seconds_between(m0, m1);
  ring_->forward();  // resets the backend's marks
  be_.reset_marks();
  const int m2 = be_.mark();
  heads_->to_shards({{reinterpret_cast<char*>(in.out), H, d, f32}, {reinterpret_cast<char*>(in.lse), H, 1, f32}},
                    {{out_.bytes(), H, d, f32}, {lse_.bytes(), H, 1, f32}}, send_.bytes(), recv_.bytes());
  const int m3 = be_.mark();
  be_.synchronize();
  steps_from_ring(ring_->forward_steps(), to_heads + be_.seconds_between(m2, m3), fwd_);
}

void HybridAttention::backward() {
  if (!with_backward_) throw std::logic_error("hybrid attention: constructed without backward");
  const std::size_t w = attn::dtype_size(p_.dtype), f32 = sizeof(float);
  const int H = p_.heads, Hkv = p_.num_kv_heads();
  const std::int64_t d = p_.head_dim;
  const RingAttention::DeviceTensors in = ring_->device_tensors();
  be_.reset_marks();
  const int m0 = be_.mark();
  heads_->to_heads({{dout_.bytes(), H, d, w}}, {{in.dout, H, d, w}}, send_.bytes(), recv_.bytes());
  const int m1 = be_.mark();
  be_.synchronize();
  const double to_heads = be_.seconds_between(m0, m1);
  ring_->backward();
  be_.reset_marks();
  const int m2 = be_.mark();
  heads_->to_shards({{reinterpret_cast<char*>(in.dq), H, d, f32}, {reinterpret_cast<char*>(in.dk), Hkv, d, f32},
                     {reinterpret_cast<char*>(in.dv), Hkv, d, f32}},
                    {{dq_.bytes(), H, d, f32}, {dk_.bytes(), Hkv, d, f32}, {dv_.bytes(), Hkv, d, f32}},
                    send_.bytes(), recv_.bytes());
  const int m3 = be_.mark();
  be_.synchronize();
  steps_from_ring(ring_->backward_steps(), to_heads + be_.seconds_between(m2, m3), bwd_);
}

std::uint64_t HybridAttention::bytes_sent() const {
  return ring_->bytes_sent() + heads_->bytes_sent() - bytes_at_reset_;
}

void HybridAttention::reset_bytes_sent() {
  ring_->reset_bytes_sent();
  bytes_at_reset_ = heads_->bytes_sent();
}

RingResult HybridAttention::result() const {
  RingResult r;
  r.out.resize(shard_floats_);
  r.lse.resize(rows_);
  be_.copy_to_host(r.out.data(), out_.ptr, shard_floats_ * sizeof(float));
  be_.copy_to_host(r.lse.data(), lse_.ptr, rows_ * sizeof(float));
  if (!with_backward_) return r;
  const std::pair<std::vector<float>*, const BackendBuffer*> grads[] = {{&r.dq, &dq_}, {&r.dk, &dk_}, {&r.dv, &dv_}};
  for (auto [dst, src] : grads) {
    dst->resize(src == &dq_ ? shard_floats_ : kv_shard_floats_);
    be_.copy_to_host(dst->data(), src->ptr, dst->size() * sizeof(float));
  }
  return r;
}

}  // namespace rb::ring
