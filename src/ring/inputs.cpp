#include "ring/inputs.hpp"

#include "dtype.hpp"

namespace rb::ring {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t row_prefix(std::uint64_t seed, Tensor t, int b, int h, std::int64_t position) {
  std::uint64_t x = mix(seed);
  x = mix(x ^ static_cast<std::uint64_t>(t));
  x = mix(x ^ static_cast<std::uint64_t>(b));
  x = mix(x ^ static_cast<std::uint64_t>(h));
  return mix(x ^ static_cast<std::uint64_t>(position));
}

float element(std::uint64_t prefix, int dim, attn::DType dtype) {
  const std::uint64_t x = mix(prefix ^ static_cast<std::uint64_t>(dim));
  const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  return attn::round_to_storage(2.0f * u - 1.0f, dtype);
}

}  // namespace

float input_value(std::uint64_t seed, Tensor t, attn::DType dtype, int b, int h,
                  std::int64_t position, int dim) {
  return element(row_prefix(seed, t, b, h, position), dim, dtype);
}

void input_row(std::uint64_t seed, Tensor t, attn::DType dtype, int b, int h, std::int64_t position,
               int d, float* out) {
  const std::uint64_t prefix = row_prefix(seed, t, b, h, position);
  for (int c = 0; c < d; ++c) out[c] = element(prefix, c, dtype);
}

std::vector<unsigned char> make_shard(const Problem& p, int ring_rank, std::uint64_t seed,
                                      Tensor t) {
  const std::vector<std::int64_t> pos = local_positions(p, ring_rank);
  const std::int64_t n = p.local_rows(), d = p.head_dim;
  const bool kv = t == Tensor::K || t == Tensor::V;  // K/V heads: num_kv_heads (GQA)
  const int heads = kv ? p.num_kv_heads() : p.heads;
  std::vector<unsigned char> out(
      static_cast<std::size_t>(kv ? p.kv_shard_elements() : p.shard_elements()) *
      attn::dtype_size(p.dtype));
  std::vector<float> row(static_cast<std::size_t>(d));
  std::int64_t idx = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < n; ++i) {
        input_row(seed, t, p.dtype, b, h, pos[static_cast<std::size_t>(i)], static_cast<int>(d),
                  row.data());
        for (int c = 0; c < d; ++c, ++idx)
          attn::store_from_float(out.data(), p.dtype, idx, row[static_cast<std::size_t>(c)]);
      }
  return out;
}

}  // namespace rb::ring
