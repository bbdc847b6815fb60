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

std::string ulysses_head_groups_error(const Problem& p, int groups) {
  const int local = p.heads / p.ring_size, local_kv = p.num_kv_heads() / p.ring_size;
  const std::string G = std::to_string(groups);
  if (groups < 1 || groups > GroupTransport::kAsyncSlots / 2)
    return "ulysses_head_groups " + G + " is outside 1 .. " +
           std::to_string(GroupTransport::kAsyncSlots / 2);
  if (local % groups != 0 || local_kv % groups != 0)
    return "ulysses_head_groups " + G + " does not divide the " + std::to_string(local) +
           " heads and " + std::to_string(local_kv) +
           " K/V heads per rank (num_heads and num_kv_heads / group size " +
           std::to_string(p.ring_size) + ")";
  for (const Branch& b : p.branches)
    if (b.rate > 1 && (local / groups) % b.rate != 0)
      return "dilation rate " + std::to_string(b.rate) + " does not divide the " +
             std::to_string(local / groups) + " heads of a head group (" + std::to_string(local) +
             " heads per rank / ulysses_head_groups " + G +
             "): a dilated branch picks rows by head % rate";
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
                                   GroupTransport& transport, bool with_backward, int head_groups)
    : ShardedScheme(p, backend, with_backward, "Ulysses attention"), groups_(head_groups) {
  std::string why = ulysses_problem_error(p_);
  if (why.empty()) why = ulysses_head_groups_error(p_, groups_);
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
  const int per_group = p_.heads / group_ / groups_;
  gqa_ = KvExpansion(be_, p_.batch, per_group, p_.num_kv_heads() / group_ / groups_, S_,
                     p_.head_dim, p_.dtype, with_backward_);
  const Shards& s = shards_;
  const std::size_t f32 = sizeof(float);
  qf_ = BackendBuffer(be_, s.shard_bytes);
  kvf_ = BackendBuffer(be_, 2 * s.kv_shard_bytes);
  outf_ = BackendBuffer(be_, s.shard_floats * f32);
  lsef_ = BackendBuffer(be_, s.rows * f32);
  if (with_backward_) {
    doutf_ = BackendBuffer(be_, s.shard_bytes);
    deltaf_ = BackendBuffer(be_, s.rows * f32);
    dqf_ = BackendBuffer(be_, s.shard_floats * f32);
    dkvf_ = BackendBuffer(be_, 2 * s.kv_shard_floats * f32);
  }
  // One group's exchange moves P chunks; regions rounded to 256 bytes keep the packing
  // kernels' 16-byte accesses aligned. O, dQ, dK, dV cross in the input dtype
  // (head_exchange.hpp), LSE in fp32.
  const auto region = [&](const std::vector<HeadPart>& parts) {
    const std::size_t bytes =
        static_cast<std::size_t>(group_) * heads_->chunk_bytes(parts, head_group(0));
    return (bytes + 255) / 256 * 256;
  };
  inputs_region_ = region(qkv_parts(p_, nullptr, nullptr, nullptr));
  outputs_region_ = region(out_lse_parts(p_, nullptr, nullptr));
  if (with_backward_) {
    inputs_region_ = std::max(inputs_region_, region(dout_parts(p_, nullptr)));
    outputs_region_ =
        std::max(outputs_region_, region(gradient_parts(p_, nullptr, nullptr, nullptr)));
  }
  const std::size_t exchange = groups_ == 1 ? std::max(inputs_region_, outputs_region_)
                                            : groups_ * (inputs_region_ + outputs_region_);
  send_ = BackendBuffer(be_, exchange);
  recv_ = BackendBuffer(be_, exchange);
}

UlyssesAttention::GroupTensors UlyssesAttention::group_tensors(int g) const {
  const Shards& s = shards_;
  const std::size_t G = static_cast<std::size_t>(groups_), i = static_cast<std::size_t>(g);
  const std::size_t bytes = s.shard_bytes / G, kv_bytes = 2 * s.kv_shard_bytes / G,
                    floats = s.shard_floats / G, rows = s.rows / G,
                    kv_floats = 2 * s.kv_shard_floats / G;
  const auto at = [](const BackendBuffer& b, std::size_t offset) {
    return b.ptr == nullptr ? nullptr : b.bytes() + offset;
  };
  const auto at_f = [](const BackendBuffer& b, std::size_t offset) {
    return b.ptr == nullptr ? nullptr : b.floats() + offset;
  };
  return {at(qf_, i * bytes),      at(kvf_, i * kv_bytes),    at(doutf_, i * bytes),
          at_f(outf_, i * floats), at_f(lsef_, i * rows),     at_f(deltaf_, i * rows),
          at_f(dqf_, i * floats),  at_f(dkvf_, i * kv_floats)};
}

char* UlyssesAttention::exchange_region(const BackendBuffer& buf, bool outputs, int g) const {
  if (groups_ == 1) return buf.bytes();
  const std::size_t per_group = inputs_region_ + outputs_region_;
  return buf.bytes() + static_cast<std::size_t>(g) * per_group + (outputs ? inputs_region_ : 0);
}

void UlyssesAttention::record_pass(StepTimes& t, int first, int last,
                                   const std::vector<std::pair<int, int>>& spans) {
  double compute = 0.0;
  for (const auto& [from, to] : spans) compute += be_.seconds_between(from, to);
  t.compute[0] = compute;
  t.wait[0] = std::max(0.0, be_.seconds_between(first, last) - compute);
}

void UlyssesAttention::forward() {
  const Shards& s = shards_;
  reset_steps(fwd_);
  be_.reset_marks();
  const int first = be_.mark();
  be_.init_forward(outf_.floats(), lsef_.floats(), static_cast<std::int64_t>(s.rows), p_.head_dim);
  const std::vector<HeadPart> inputs = qkv_parts(p_, s.q.bytes(), s.k(), s.v());
  for (int g = 0; g < groups_; ++g)  // every group's inputs in flight, in order
    heads_->start(inputs, false, head_group(g), exchange_region(send_, false, g),
                  exchange_region(recv_, false, g), g);
  const std::size_t v_at = s.kv_shard_bytes / static_cast<std::size_t>(groups_);
  std::vector<std::pair<int, int>> spans;
  for (int g = 0; g < groups_; ++g) {
    const GroupTensors t = group_tensors(g);
    heads_->finish(qkv_parts(p_, t.q, t.kv, t.kv + v_at), true, head_group(g),
                   exchange_region(recv_, false, g), g);
    const int from = be_.mark();
    kernels(g).forward(calls_, gqa_.expand(t.kv), t.out, t.lse);
    spans.emplace_back(from, be_.mark());
    heads_->start(out_lse_parts(p_, t.out, t.lse), true, head_group(g),
                  exchange_region(send_, true, g), exchange_region(recv_, true, g), groups_ + g);
  }
  // O (head_dim per row) and LSE (one per row) back to the position owners.
  const std::vector<HeadPart> outputs = out_lse_parts(p_, s.out.bytes(), s.lse.bytes());
  for (int g = 0; g < groups_; ++g)
    heads_->finish(outputs, false, head_group(g), exchange_region(recv_, true, g), groups_ + g);
  const int last = be_.mark();
  be_.synchronize();
  record_pass(fwd_, first, last, spans);
  have_forward_ = true;
}

void UlyssesAttention::backward() {
  check_backward(have_forward_);
  const attn::DType t = p_.dtype;
  const std::int64_t d = p_.head_dim;
  const Shards& s = shards_;
  const std::size_t G = static_cast<std::size_t>(groups_), f32 = sizeof(float);
  const std::int64_t rows = static_cast<std::int64_t>(s.rows / G);
  const std::size_t dv_at = s.kv_shard_floats / G;
  reset_steps(bwd_);
  be_.reset_marks();
  const int first = be_.mark();
  for (int g = 0; g < groups_; ++g)
    heads_->start(dout_parts(p_, s.dout.bytes()), false, head_group(g),
                  exchange_region(send_, false, g), exchange_region(recv_, false, g), g);
  std::vector<std::pair<int, int>> spans;
  for (int g = 0; g < groups_; ++g) {
    const GroupTensors gt = group_tensors(g);
    heads_->finish(dout_parts(p_, gt.dout), true, head_group(g), exchange_region(recv_, false, g),
                   g);
    const int from = be_.mark();
    be_.backward_prepare(gt.dout, gt.out, gt.delta, rows, p_.head_dim, t);
    be_.fill_zero(gt.dq, static_cast<std::size_t>(rows) * static_cast<std::size_t>(d) * f32);
    be_.fill_zero(gt.dkv, 2 * dv_at * f32);
    float* grads = gqa_.grads(gt.dkv);
    kernels(g).backward(calls_, gqa_.expand(gt.kv), gt.dout, gt.lse, gt.delta, gt.dq, grads);
    gqa_.fold(gt.dkv);
    spans.emplace_back(from, be_.mark());
    heads_->start(gradient_parts(p_, gt.dq, gt.dkv, gt.dkv + dv_at), true, head_group(g),
                  exchange_region(send_, true, g), exchange_region(recv_, true, g), groups_ + g);
  }
  const std::vector<HeadPart> grads = gradient_parts(p_, s.dq.bytes(), s.dk(), s.dv());
  for (int g = 0; g < groups_; ++g)
    heads_->finish(grads, false, head_group(g), exchange_region(recv_, true, g), groups_ + g);
  const int last = be_.mark();
  be_.synchronize();
  record_pass(bwd_, first, last, spans);
}

StepKernels UlyssesAttention::kernels(int g) const {
  return {be_,
          attn::Dims{p_.batch, p_.heads / group_ / groups_, p_.head_dim, S_, S_},
          p_.dtype,
          p_.scale(),
          group_tensors(g).q,
          gqa_.kernel_shard_bytes()};
}

}  // namespace rb::ring
