#include "ring/kv_block_scheme.hpp"

namespace rb::ring {

KvBlockScheme::KvBlockScheme(const Problem& p, attn::AttentionBackend& backend, bool with_backward,
                             const char* name, int group_size, int group_rank)
    : ShardedScheme(p, backend, with_backward, name) {
  check_group(group_size, p_.ring_size);
  rank_ = group_rank;
  calls_ = calls_per_owner(p_, rank_);
  gqa_ = KvExpansion(be_, p_.batch, p_.heads, p_.num_kv_heads(), p_.local_rows(), p_.head_dim,
                     p_.dtype, with_backward_);
  if (with_backward_) delta_ = BackendBuffer(be_, shards_.rows * sizeof(float));
}

void KvBlockScheme::compute_forward(const char* kv, int owner) {
  kernels().forward(calls_[static_cast<std::size_t>(owner)], gqa_.expand(kv), shards_.out.floats(),
                    shards_.lse.floats());
}

void KvBlockScheme::start_backward() {
  be_.backward_prepare(shards_.dout.ptr, shards_.out.floats(), delta_.floats(),
                       static_cast<std::int64_t>(shards_.rows), p_.head_dim, p_.dtype);
  be_.fill_zero(shards_.dq.ptr, shards_.shard_floats * sizeof(float));
}

void KvBlockScheme::compute_backward(const char* kv, int owner, float* dkdv) {
  float* grads = gqa_.grads(dkdv);
  kernels().backward(calls_[static_cast<std::size_t>(owner)], gqa_.expand(kv), shards_.dout.ptr,
                     shards_.lse.floats(), delta_.floats(), shards_.dq.floats(), grads);
  gqa_.fold(dkdv);
}

StepKernels KvBlockScheme::kernels() const {
  return {
      be_,           attn::Dims{p_.batch, p_.heads, p_.head_dim, p_.local_rows(), p_.local_rows()},
      p_.dtype,      p_.scale(),
      shards_.q.ptr, gqa_.kernel_shard_bytes()};
}

}  // namespace rb::ring
