#include "ring/kv_expansion.hpp"

namespace rb::ring {

KvExpansion::KvExpansion(attn::AttentionBackend& be, int batch, int heads, int kv_heads,
                         std::int64_t rows, int head_dim, attn::DType dtype, bool backward)
    : be_(&be),
      batch_(batch),
      heads_(heads),
      kv_heads_(kv_heads),
      group_(heads / kv_heads),
      head_elems_(static_cast<std::size_t>(rows) * static_cast<std::size_t>(head_dim)),
      elem_(attn::dtype_size(dtype)) {
  compact_elems_ =
      static_cast<std::size_t>(batch) * static_cast<std::size_t>(kv_heads) * head_elems_;
  expanded_elems_ = static_cast<std::size_t>(batch) * static_cast<std::size_t>(heads) * head_elems_;
  if (!active()) return;
  kv_ = BackendBuffer(be, 2 * expanded_elems_ * elem_);
  if (backward) dkdv_ = BackendBuffer(be, 2 * expanded_elems_ * sizeof(float));
}

const char* KvExpansion::expand(const char* kv) {
  if (!active()) return kv;
  const std::size_t head_bytes = head_elems_ * elem_;
  for (int t = 0; t < 2; ++t)  // K, then V
    for (int b = 0; b < batch_; ++b)
      for (int h = 0; h < heads_; ++h) {
        const std::size_t from =
            t * compact_elems_ * elem_ +
            (static_cast<std::size_t>(b) * kv_heads_ + static_cast<std::size_t>(h / group_)) *
                head_bytes;
        const std::size_t to =
            t * expanded_elems_ * elem_ +
            (static_cast<std::size_t>(b) * heads_ + static_cast<std::size_t>(h)) * head_bytes;
        be_->copy(kv_.bytes() + to, kv + from, head_bytes);
      }
  return kv_.bytes();
}

float* KvExpansion::grads(float* compact) {
  if (!active()) return compact;
  be_->fill_zero(dkdv_.ptr, 2 * expanded_elems_ * sizeof(float));
  return dkdv_.floats();
}

void KvExpansion::fold(float* compact) {
  if (!active()) return;
  for (int t = 0; t < 2; ++t)  // dK, then dV
    for (int b = 0; b < batch_; ++b)
      for (int h = 0; h < heads_; ++h)
        be_->accumulate(
            compact + t * compact_elems_ +
                (static_cast<std::size_t>(b) * kv_heads_ + static_cast<std::size_t>(h / group_)) *
                    head_elems_,
            dkdv_.floats() + t * expanded_elems_ +
                (static_cast<std::size_t>(b) * heads_ + static_cast<std::size_t>(h)) * head_elems_,
            head_elems_);
}

}  // namespace rb::ring
