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
  for (std::size_t i = 0; i < mine.size(); ++i)
    joint.emplace(mine[i], static_cast<std::int64_t>(i));
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

// Seconds of one exchange on the backend, between two marks (the backend's marks reset).
template <class Exchange>
double timed(attn::AttentionBackend& be, Exchange&& exchange) {
  be.reset_marks();
  const int m0 = be.mark();
  exchange();
  const int m1 = be.mark();
  be.synchronize();
  return be.seconds_between(m0, m1);
}

}  // namespace

std::string hybrid_problem_error(const Problem& p, int u) {
  const std::string U = std::to_string(u), R = std::to_string(p.ring_size);
  if (u < 1 || p.ring_size % u != 0)
    return "ulysses_degree " + U + " does not divide the ring size " + R;
  if (p.heads % u != 0)
    return "num_heads " + std::to_string(p.heads) + " is not divisible by ulysses_degree " + U;
  if (p.num_kv_heads() % u != 0)
    return "num_kv_heads " + std::to_string(p.num_kv_heads()) +
           " is not divisible by ulysses_degree " + U;
  for (const Branch& b : p.branches)
    if (b.rate > 1 && (p.heads / u) % b.rate != 0)
      return "dilation rate " + std::to_string(b.rate) + " does not divide the " +
             std::to_string(p.heads / u) + " heads per Ulysses member (num_heads / ulysses_degree)";
  const Problem inner = hybrid_inner_problem(p, u);
  const std::string e = problem_error(inner);
  if (!e.empty()) return "the inner ring (ring size " + std::to_string(inner.ring_size) + "): " + e;
  for (int a = 0; a < inner.ring_size; ++a)
    for (int m = 0; m < u; ++m)
      if (member_runs(p, inner, u, a, m).empty())
        return std::string("the ") + to_string(p.layout) + " layout of " + R +
               " ranks does not split into " + std::to_string(inner.ring_size) + " subgroups of " +
               U +
               " consecutive ranks holding one inner-ring rank's rows each (contiguous and zigzag "
               "do)";
  return "";
}

HybridAttention::HybridAttention(const Problem& p, int ulysses_degree,
                                 attn::AttentionBackend& backend, RingTransport& ring,
                                 GroupTransport& heads, bool with_backward)
    : ShardedScheme(p, backend, with_backward, "hybrid attention"), u_(ulysses_degree) {
  const std::string why = hybrid_problem_error(p_, u_);
  if (!why.empty()) throw std::invalid_argument("hybrid attention: " + why);
  check_group(heads.group_size(), u_);
  check_group(ring.ring_size(), p_.ring_size / u_);
  inner_ = hybrid_inner_problem(p_, u_);
  const int a = ring.ring_rank();
  std::vector<std::vector<RowRun>> runs;
  for (int m = 0; m < u_; ++m) runs.push_back(member_runs(p_, inner_, u_, a, m));
  heads_ = std::make_unique<HeadExchange>(be_, heads, p_.batch, p_.local_rows(),
                                          inner_.local_rows(), std::move(runs));
  ring_ = std::make_unique<RingAttention>(inner_, be_, ring, with_backward_);
  const Shards& s = shards_;
  const std::size_t f32 = sizeof(float);
  // O, dQ, dK, dV cross in the input dtype (head_exchange.hpp), LSE in fp32: the forward's
  // exchanges are the largest (the backward's dO out, dQ dK dV back are at most Q K V's bytes).
  const std::size_t exchange =
      std::max(s.shard_bytes + 2 * s.kv_shard_bytes, s.shard_bytes + s.rows * f32);
  send_ = BackendBuffer(be_, exchange);
  recv_ = BackendBuffer(be_, exchange);
}

void HybridAttention::steps_from_ring(const StepTimes& inner, double exchange_s,
                                      StepTimes& out) const {
  reset_steps(out);
  std::copy(inner.compute.begin(), inner.compute.end(), out.compute.begin());
  std::copy(inner.wait.begin(), inner.wait.end(), out.wait.begin());
  out.wait[0] += exchange_s;
}

void HybridAttention::forward() {
  const RingAttention::DeviceTensors in = ring_->device_tensors();
  const Shards& s = shards_;
  const double to_heads = timed(be_, [&] {
    heads_->to_heads(qkv_parts(p_, s.q.bytes(), s.k(), s.v()), qkv_parts(p_, in.q, in.k, in.v),
                     send_.bytes(), recv_.bytes());
  });
  ring_->forward();  // resets the backend's marks
  const double to_shards = timed(be_, [&] {
    heads_->to_shards(out_lse_parts(p_, in.out, in.lse),
                      out_lse_parts(p_, s.out.bytes(), s.lse.bytes()), send_.bytes(),
                      recv_.bytes());
  });
  steps_from_ring(ring_->forward_steps(), to_heads + to_shards, fwd_);
}

void HybridAttention::backward() {
  if (!with_backward_) throw std::logic_error("hybrid attention: constructed without backward");
  const RingAttention::DeviceTensors in = ring_->device_tensors();
  const Shards& s = shards_;
  const double to_heads = timed(be_, [&] {
    heads_->to_heads(dout_parts(p_, s.dout.bytes()), dout_parts(p_, in.dout), send_.bytes(),
                     recv_.bytes());
  });
  ring_->backward();
  const double to_shards = timed(be_, [&] {
    heads_->to_shards(gradient_parts(p_, in.dq, in.dk, in.dv),
                      gradient_parts(p_, s.dq.bytes(), s.dk(), s.dv()), send_.bytes(),
                      recv_.bytes());
  });
  steps_from_ring(ring_->backward_steps(), to_heads + to_shards, bwd_);
}

std::uint64_t HybridAttention::bytes_sent() const {
  return ring_->bytes_sent() + heads_->bytes_sent() - bytes_at_reset_;
}

void HybridAttention::reset_bytes_sent() {
  ring_->reset_bytes_sent();
  bytes_at_reset_ = heads_->bytes_sent();
}

}  // namespace rb::ring
