#include "ring/ulysses_attention.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace rb::ring {

std::string ulysses_problem_error(const Problem& p) {
  const std::string P = std::to_string(p.ring_size), H = std::to_string(p.heads);
  if (p.heads % p.ring_size != 0)
    return "num_heads " + H + " is not divisible by the group size " + P +
           " (Ulysses gives each rank heads / group of the heads)";
  if (p.num_kv_heads() % p.ring_size != 0)
    return "num_kv_heads " + std::to_string(p.num_kv_heads()) +
           " is not divisible by the group size " + P +
           " (Ulysses gives each rank num_kv_heads / group of the K/V heads, those of its query "
           "heads; "
           "fewer or unevenly split K/V heads would need them replicated, which this build does "
           "not do)";
  const int local = p.heads / p.ring_size;
  for (const Branch& b : p.branches)
    if (b.rate > 1 && local % b.rate != 0)
      return "dilation rate " + std::to_string(b.rate) + " does not divide the " +
             std::to_string(local) + " heads per rank (num_heads " + H + " / group " + P +
             "): a dilated branch picks rows by head % rate, which must be the same on every "
             "rank's heads";
  return "";
}

std::vector<RowRun> position_runs(const Problem& p, int rank) {
  std::vector<RowRun> runs;
  for (const attn::Span& s : local_spans(p, rank)) {
    if (s.stride == 1 || s.count == 1) {
      runs.push_back({s.row0, s.first, s.count});
      continue;
    }
    for (std::int64_t i = 0; i < s.count; ++i) runs.push_back({s.row0 + i, s.position(i), 1});
  }
  return runs;
}

UlyssesAttention::UlyssesAttention(const Problem& p, attn::AttentionBackend& backend,
                                   GroupTransport& transport, bool with_backward)
    : ShardedScheme(p, backend, with_backward, "Ulysses attention") {
  const std::string why = ulysses_problem_error(p_);
  if (!why.empty()) throw std::invalid_argument("Ulysses attention: " + why);
  check_group(transport.group_size(), p_.ring_size);
  group_ = p_.ring_size;
  S_ = p_.seq_len;
  std::vector<std::vector<RowRun>> runs;
  for (int r = 0; r < group_; ++r) runs.push_back(position_runs(p_, r));  // joint rows: positions
  heads_ = std::make_unique<HeadExchange>(be_, transport, p_.batch, p_.local_rows(), S_,
                                          std::move(runs));
  const attn::Span whole{0, S_, 0, 1};  // the sequence in position order
  calls_ = block_calls({whole}, {whole}, p_.patterns());
  gqa_ = KvExpansion(be_, p_.batch, p_.heads / group_, p_.num_kv_heads() / group_, S_, p_.head_dim,
                     p_.dtype, with_backward_);
  const Shards& s = shards_;
  const std::size_t f32 = sizeof(float);
  qf_ = BackendBuffer(be_, s.shard_bytes);
  kvf_ = BackendBuffer(be_, 2 * s.kv_shard_bytes);
  outf_ = BackendBuffer(be_, s.shard_floats * f32);
  lsef_ = BackendBuffer(be_, s.rows * f32);
  // O, dQ, dK, dV cross in the input dtype (head_exchange.hpp), LSE in fp32.
  std::size_t exchange =
      std::max(s.shard_bytes + 2 * s.kv_shard_bytes, s.shard_bytes + s.rows * f32);
  if (with_backward_) {
    doutf_ = BackendBuffer(be_, s.shard_bytes);
    deltaf_ = BackendBuffer(be_, s.rows * f32);
    dqf_ = BackendBuffer(be_, s.shard_floats * f32);
    dkvf_ = BackendBuffer(be_, 2 * s.kv_shard_floats * f32);
  }
  send_ = BackendBuffer(be_, exchange);
  recv_ = BackendBuffer(be_, exchange);
}

void UlyssesAttention::forward() {
  const int H = p_.heads;
  const Shards& s = shards_;
  reset_steps(fwd_);
  be_.reset_marks();
  const int m0 = be_.mark();
  heads_->to_heads(qkv_parts(p_, s.q.bytes(), s.k(), s.v()),
                   qkv_parts(p_, qf_.bytes(), kvf_.bytes(), kvf_.bytes() + s.kv_shard_bytes),
                   send_.bytes(), recv_.bytes());
  const int m1 = be_.mark();
  const std::int64_t rows = static_cast<std::int64_t>(p_.batch) * (H / group_) * S_;
  be_.init_forward(outf_.floats(), lsef_.floats(), rows, p_.head_dim);
  kernels().forward(calls_, gqa_.expand(kvf_.bytes()), outf_.floats(), lsef_.floats());
  const int m2 = be_.mark();
  // O (head_dim per row) and LSE (one per row) back to the position owners in one all-to-all.
  heads_->to_shards(out_lse_parts(p_, outf_.bytes(), lsef_.bytes()),
                    out_lse_parts(p_, s.out.bytes(), s.lse.bytes()), send_.bytes(), recv_.bytes());
  const int m3 = be_.mark();
  be_.synchronize();
  fwd_.compute[0] = be_.seconds_between(m1, m2);
  fwd_.wait[0] = be_.seconds_between(m0, m1) + be_.seconds_between(m2, m3);
  have_forward_ = true;
}

void UlyssesAttention::backward() {
  check_backward(have_forward_);
  const attn::DType t = p_.dtype;
  const std::size_t f32 = sizeof(float);
  const int H = p_.heads;
  const std::int64_t d = p_.head_dim;
  const Shards& s = shards_;
  reset_steps(bwd_);
  be_.reset_marks();
  const int m0 = be_.mark();
  heads_->to_heads({{s.dout.bytes(), H, d, t, t}}, {{doutf_.bytes(), H, d, t, t}}, send_.bytes(),
                   recv_.bytes());
  const int m1 = be_.mark();
  const std::int64_t rows = static_cast<std::int64_t>(p_.batch) * (H / group_) * S_;
  be_.backward_prepare(doutf_.ptr, outf_.floats(), deltaf_.floats(), rows, p_.head_dim, p_.dtype);
  be_.fill_zero(dqf_.ptr, s.shard_floats * f32);
  be_.fill_zero(dkvf_.ptr, 2 * s.kv_shard_floats * f32);
  float* grads = gqa_.grads(dkvf_.floats());
  kernels().backward(calls_, gqa_.expand(kvf_.bytes()), doutf_.ptr, lsef_.floats(),
                     deltaf_.floats(), dqf_.floats(), grads);
  gqa_.fold(dkvf_.floats());
  const int m2 = be_.mark();
  heads_->to_shards(
      gradient_parts(p_, dqf_.bytes(), dkvf_.bytes(), dkvf_.bytes() + s.kv_shard_floats * f32),
      gradient_parts(p_, s.dq.bytes(), s.dk(), s.dv()), send_.bytes(), recv_.bytes());
  const int m3 = be_.mark();
  be_.synchronize();
  bwd_.compute[0] = be_.seconds_between(m1, m2);
  bwd_.wait[0] = be_.seconds_between(m0, m1) + be_.seconds_between(m2, m3);
}

StepKernels UlyssesAttention::kernels() const {
  return {be_,      attn::Dims{p_.batch, p_.heads / group_, p_.head_dim, S_, S_},
          p_.dtype, p_.scale(),
          qf_.ptr,  gqa_.kernel_shard_bytes()};
}

}  // namespace rb::ring
