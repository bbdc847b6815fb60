#include "ring/allgather_attention.hpp"

#include <stdexcept>
#include <string>

namespace rb::ring {

AllGatherAttention::AllGatherAttention(const Problem& p, attn::AttentionBackend& backend,
                                       GroupTransport& transport, bool with_backward)
    : KvBlockScheme(p, backend, with_backward, "all-gather attention", transport.group_size(),
                    transport.group_rank()),
      tr_(transport) {
  const std::size_t R = static_cast<std::size_t>(p_.ring_size);
  kv_all_ = BackendBuffer(be_, R * 2 * shards_.kv_shard_bytes);
  if (!with_backward_) return;
  dkdv_all_ = BackendBuffer(be_, R * 2 * shards_.kv_shard_floats * sizeof(float));
}

double AllGatherAttention::collective_seconds(int before, int after, double host_wait) {
  return be_.on_device() ? be_.seconds_between(before, after) : host_wait;
}

void AllGatherAttention::forward() {
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * shards_.kv_shard_bytes;
  reset_steps(fwd_);
  be_.reset_marks();
  be_.init_forward(shards_.out.floats(), shards_.lse.floats(),
                   static_cast<std::int64_t>(shards_.rows), p_.head_dim);
  const int g0 = be_.mark();
  const double host_wait = tr_.all_gather(shards_.kv.ptr, kv_all_.ptr, kv_bytes);
  const int g1 = be_.mark();
  bytes_sent_ += static_cast<std::uint64_t>(R - 1) * kv_bytes;  // a ring all-gather's share
  std::vector<int> marks{g1};
  for (int owner = 0; owner < R; ++owner) {
    compute_forward(kv_all_.bytes() + owner * kv_bytes, owner);
    marks.push_back(be_.mark());
  }
  be_.synchronize();
  fwd_.wait[0] = collective_seconds(g0, g1, host_wait);
  for (std::size_t o = 0; o < static_cast<std::size_t>(R); ++o)
    fwd_.compute[o] = be_.seconds_between(marks[o], marks[o + 1]);
  have_forward_ = true;
}

void AllGatherAttention::backward() {
  check_backward(have_forward_);
  const int R = p_.ring_size;
  const std::size_t kv_bytes = 2 * shards_.kv_shard_bytes,
                    dkdv_floats = 2 * shards_.kv_shard_floats;
  reset_steps(bwd_);
  be_.reset_marks();
  start_backward();
  be_.fill_zero(dkdv_all_.ptr, static_cast<std::size_t>(R) * dkdv_floats * sizeof(float));
  std::vector<int> marks{be_.mark()};
  for (int owner = 0; owner < R; ++owner) {
    compute_backward(kv_all_.bytes() + owner * kv_bytes, owner,
                     dkdv_all_.floats() + owner * dkdv_floats);
    marks.push_back(be_.mark());
  }
  const double host_wait =
      tr_.reduce_scatter_sum(dkdv_all_.floats(), shards_.dkdv.floats(), dkdv_floats);
  const int g1 = be_.mark();
  bytes_sent_ += static_cast<std::uint64_t>(R - 1) * dkdv_floats * sizeof(float);
  be_.synchronize();
  for (std::size_t o = 0; o < static_cast<std::size_t>(R); ++o)
    bwd_.compute[o] = be_.seconds_between(marks[o], marks[o + 1]);
  bwd_.wait[static_cast<std::size_t>(R) - 1] = collective_seconds(marks.back(), g1, host_wait);
}

}  // namespace rb::ring
