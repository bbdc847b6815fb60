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
  const int local = p.heads / p.ring_size;
  for (const Branch& b : p.branches)
    if (b.rate > 1 && local % b.rate != 0)
      return "dilation rate " + std::to_string(b.rate) + " does not divide the " + std::to_string(local) +
             " heads per rank (num_heads " + H + " / group " + P +
             "): a dilated branch picks rows by head % rate, which must be the same on every rank's heads";
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
    : p_(p), be_(backend), tr_(transport), with_backward_(with_backward) {
  check_problem(p_);
  const std::string why = ulysses_problem_error(p_);
  if (!why.empty()) throw std::invalid_argument("Ulysses attention: " + why);
  if (tr_.group_size() != p_.ring_size)
    throw std::invalid_argument("Ulysses attention: transport group has " + std::to_string(tr_.group_size()) +
                                " ranks, problem group size " + std::to_string(p_.ring_size));
  rank_ = tr_.group_rank();
  group_ = p_.ring_size;
  local_heads_ = p_.heads / group_;
  n_ = p_.local_rows();
  S_ = p_.seq_len;
  for (int r = 0; r < group_; ++r) runs_.push_back(position_runs(p_, r));
  const attn::Span whole{0, S_, 0, 1};  // the sequence in position order
  calls_ = block_calls({whole}, {whole}, p_.patterns());
  shard_floats_ = static_cast<std::size_t>(p_.shard_elements());
  shard_bytes_ = shard_floats_ * attn::dtype_size(p_.dtype);
  const std::size_t rows = static_cast<std::size_t>(p_.batch) * p_.heads * static_cast<std::size_t>(n_);
  const std::size_t f32 = sizeof(float);
  for (BackendBuffer* b : {&q_, &k_, &v_}) *b = BackendBuffer(be_, shard_bytes_);
  out_ = BackendBuffer(be_, shard_floats_ * f32);
  lse_ = BackendBuffer(be_, rows * f32);
  // The full sequence for this rank's heads has as many elements as one shard.
  qf_ = BackendBuffer(be_, shard_bytes_);
  kvf_ = BackendBuffer(be_, 2 * shard_bytes_);
  outf_ = BackendBuffer(be_, shard_floats_ * f32);
  lsef_ = BackendBuffer(be_, rows * f32);
  std::size_t exchange = std::max(3 * shard_bytes_, (shard_floats_ + rows) * f32);
  if (with_backward_) {
    for (BackendBuffer* b : {&dq_, &dk_, &dv_}) *b = BackendBuffer(be_, shard_floats_ * f32);
    dout_ = BackendBuffer(be_, shard_bytes_);
    doutf_ = BackendBuffer(be_, shard_bytes_);
    deltaf_ = BackendBuffer(be_, rows * f32);
    dqf_ = BackendBuffer(be_, shard_floats_ * f32);
    dkvf_ = BackendBuffer(be_, 2 * shard_floats_ * f32);
    exchange = std::max(exchange, 3 * shard_floats_ * f32);
  }
  send_ = BackendBuffer(be_, exchange);
  recv_ = BackendBuffer(be_, exchange);
}

void UlyssesAttention::load_inputs(const void* q, const void* k, const void* v, const void* dout) {
  be_.copy_to_device(q_.ptr, q, shard_bytes_);
  be_.copy_to_device(k_.ptr, k, shard_bytes_);
  be_.copy_to_device(v_.ptr, v, shard_bytes_);
  if (with_backward_) {
    if (dout == nullptr) throw std::invalid_argument("Ulysses attention: backward needs dO");
    be_.copy_to_device(dout_.ptr, dout, shard_bytes_);
  }
  be_.synchronize();
}

std::size_t UlyssesAttention::offset(const Shape& s, int b, std::int64_t h, std::int64_t row) const {
  return static_cast<std::size_t>((b * s.heads + h) * s.rows + row) * static_cast<std::size_t>(p_.head_dim) * s.elem;
}

void UlyssesAttention::pack_heads(const char* const* shards, int count, std::size_t elem, char* send) const {
  const Shape shard{p_.heads, n_, elem};
  const std::size_t slice = static_cast<std::size_t>(local_heads_ * n_ * p_.head_dim) * elem;
  for (int j = 0; j < group_; ++j)
    for (int t = 0; t < count; ++t)
      for (int b = 0; b < p_.batch; ++b)
        be_.copy(send + ((static_cast<std::size_t>(j) * count + t) * p_.batch + b) * slice,
                 shards[t] + offset(shard, b, j * local_heads_, 0), slice);
}

void UlyssesAttention::unpack_sequence(const char* recv, int count, std::size_t elem, char* const* full) const {
  const Shape chunk{local_heads_, n_, elem}, seq{local_heads_, S_, elem};
  const std::size_t slice = static_cast<std::size_t>(local_heads_ * n_ * p_.head_dim) * elem;
  const std::size_t row = static_cast<std::size_t>(p_.head_dim) * elem;
  for (int i = 0; i < group_; ++i)
    for (int t = 0; t < count; ++t)
      for (int b = 0; b < p_.batch; ++b) {
        const char* from = recv + ((static_cast<std::size_t>(i) * count + t) * p_.batch) * slice;
        for (std::int64_t h = 0; h < local_heads_; ++h)
          for (const RowRun& run : runs_[static_cast<std::size_t>(i)])
            be_.copy(full[t] + offset(seq, b, h, run.position), from + offset(chunk, b, h, run.row),
                     static_cast<std::size_t>(run.count) * row);
      }
}

void UlyssesAttention::pack_rows(const char* const* full, int count, std::size_t elem, std::int64_t width,
                                 char* send) const {
  // width: elements per row (head_dim for O and gradients, 1 for LSE); offsets scale with it.
  const std::size_t row = static_cast<std::size_t>(width) * elem;
  const std::size_t slice = static_cast<std::size_t>(local_heads_ * n_) * row;
  for (int i = 0; i < group_; ++i)
    for (int t = 0; t < count; ++t)
      for (int b = 0; b < p_.batch; ++b)
        for (std::int64_t h = 0; h < local_heads_; ++h)
          for (const RowRun& run : runs_[static_cast<std::size_t>(i)]) {
            const std::size_t dst = ((static_cast<std::size_t>(i) * count + t) * p_.batch + b) * slice +
                                    static_cast<std::size_t>(h * n_ + run.row) * row;
            const std::size_t src = static_cast<std::size_t>((b * local_heads_ + h) * S_ + run.position) * row;
            be_.copy(send + dst, full[t] + src, static_cast<std::size_t>(run.count) * row);
          }
}

void UlyssesAttention::unpack_heads(const char* recv, int count, std::size_t elem, std::int64_t width,
                                    char* const* shards) const {
  const std::size_t row = static_cast<std::size_t>(width) * elem;
  const std::size_t slice = static_cast<std::size_t>(local_heads_ * n_) * row;
  for (int j = 0; j < group_; ++j)
    for (int t = 0; t < count; ++t)
      for (int b = 0; b < p_.batch; ++b)
        be_.copy(shards[t] + static_cast<std::size_t>((b * p_.heads + j * local_heads_) * n_) * row,
                 recv + ((static_cast<std::size_t>(j) * count + t) * p_.batch + b) * slice, slice);
}

double UlyssesAttention::exchange(const void* send, void* recv, std::size_t chunk_bytes) {
  bytes_sent_ += static_cast<std::uint64_t>(group_ - 1) * chunk_bytes;
  return tr_.all_to_all(send, recv, chunk_bytes);
}

void UlyssesAttention::forward() {
  const std::size_t w = attn::dtype_size(p_.dtype), f32 = sizeof(float);
  const std::size_t per_rank = shard_bytes_ / static_cast<std::size_t>(group_);  // one tensor's chunk
  fwd_.compute.assign(static_cast<std::size_t>(group_), 0.0);
  fwd_.wait.assign(static_cast<std::size_t>(group_), 0.0);
  be_.reset_marks();
  const int m0 = be_.mark();
  const char* shards[] = {q_.bytes(), k_.bytes(), v_.bytes()};
  pack_heads(shards, 3, w, send_.bytes());
  exchange(send_.ptr, recv_.ptr, 3 * per_rank);
  char* full[] = {qf_.bytes(), kvf_.bytes(), kvf_.bytes() + shard_bytes_};
  unpack_sequence(recv_.bytes(), 3, w, full);
  const int m1 = be_.mark();
  const std::int64_t rows = static_cast<std::int64_t>(p_.batch) * local_heads_ * S_;
  be_.init_forward(outf_.floats(), lsef_.floats(), rows, p_.head_dim);
  kernels().forward(calls_, kvf_.bytes(), outf_.floats(), lsef_.floats());
  const int m2 = be_.mark();
  // O (head_dim wide) and LSE (one wide) travel in one all-to-all: O's chunks, then LSE's.
  const std::size_t o_part = shard_floats_ * f32, lse_part = static_cast<std::size_t>(rows) * f32;
  const char* o_full[] = {outf_.bytes()};
  const char* l_full[] = {lsef_.bytes()};
  pack_rows(o_full, 1, f32, p_.head_dim, send_.bytes());
  pack_rows(l_full, 1, f32, 1, send_.bytes() + o_part);
  // Each rank's chunk: its O rows then its LSE rows; the two packed halves are laid out
  // rank-major within themselves, so they travel as two all-to-alls.
  exchange(send_.ptr, recv_.ptr, o_part / static_cast<std::size_t>(group_));
  char* o_shard[] = {out_.bytes()};
  unpack_heads(recv_.bytes(), 1, f32, p_.head_dim, o_shard);
  exchange(send_.bytes() + o_part, recv_.bytes() + o_part, lse_part / static_cast<std::size_t>(group_));
  char* l_shard[] = {lse_.bytes()};
  unpack_heads(recv_.bytes() + o_part, 1, f32, 1, l_shard);
  const int m3 = be_.mark();
  be_.synchronize();
  fwd_.compute[0] = be_.seconds_between(m1, m2);
  fwd_.wait[0] = be_.seconds_between(m0, m1) + be_.seconds_between(m2, m3);
  have_forward_ = true;
}

void UlyssesAttention::backward() {
  if (!with_backward_) throw std::logic_error("Ulysses attention: constructed without backward");
  if (!have_forward_) throw std::logic_error("Ulysses attention: backward() before forward()");
  const std::size_t w = attn::dtype_size(p_.dtype), f32 = sizeof(float);
  bwd_.compute.assign(static_cast<std::size_t>(group_), 0.0);
  bwd_.wait.assign(static_cast<std::size_t>(group_), 0.0);
  be_.reset_marks();
  const int m0 = be_.mark();
  const char* shard[] = {dout_.bytes()};
  pack_heads(shard, 1, w, send_.bytes());
  exchange(send_.ptr, recv_.ptr, shard_bytes_ / static_cast<std::size_t>(group_));
  char* full[] = {doutf_.bytes()};
  unpack_sequence(recv_.bytes(), 1, w, full);
  const int m1 = be_.mark();
  const std::int64_t rows = static_cast<std::int64_t>(p_.batch) * local_heads_ * S_;
  be_.backward_prepare(doutf_.ptr, outf_.floats(), deltaf_.floats(), rows, p_.head_dim, p_.dtype);
  be_.fill_zero(dqf_.ptr, shard_floats_ * f32);
  be_.fill_zero(dkvf_.ptr, 2 * shard_floats_ * f32);
  kernels().backward(calls_, kvf_.bytes(), doutf_.ptr, lsef_.floats(), deltaf_.floats(), dqf_.floats(),
                     dkvf_.floats());
  const int m2 = be_.mark();
  const char* grads[] = {dqf_.bytes(), dkvf_.bytes(), dkvf_.bytes() + shard_floats_ * f32};
  pack_rows(grads, 3, f32, p_.head_dim, send_.bytes());
  exchange(send_.ptr, recv_.ptr, 3 * shard_floats_ * f32 / static_cast<std::size_t>(group_));
  char* shards[] = {dq_.bytes(), dk_.bytes(), dv_.bytes()};
  unpack_heads(recv_.bytes(), 3, f32, p_.head_dim, shards);
  const int m3 = be_.mark();
  be_.synchronize();
  bwd_.compute[0] = be_.seconds_between(m1, m2);
  bwd_.wait[0] = be_.seconds_between(m0, m1) + be_.seconds_between(m2, m3);
}

StepKernels UlyssesAttention::kernels() const {
  return {be_, attn::Dims{p_.batch, static_cast<int>(local_heads_), p_.head_dim, S_, S_}, p_.dtype,
          p_.scale(), qf_.ptr, shard_bytes_};
}

RingResult UlyssesAttention::result() const {
  RingResult r;
  const std::size_t rows = static_cast<std::size_t>(p_.batch) * p_.heads * static_cast<std::size_t>(n_);
  r.out.resize(shard_floats_);
  r.lse.resize(rows);
  be_.copy_to_host(r.out.data(), out_.ptr, shard_floats_ * sizeof(float));
  be_.copy_to_host(r.lse.data(), lse_.ptr, rows * sizeof(float));
  if (!with_backward_) return r;
  for (auto [dst, src] : {std::pair{&r.dq, &dq_}, std::pair{&r.dk, &dk_}, std::pair{&r.dv, &dv_}}) {
    dst->resize(shard_floats_);
    be_.copy_to_host(dst->data(), src->ptr, shard_floats_ * sizeof(float));
  }
  return r;
}

}  // namespace rb::ring
