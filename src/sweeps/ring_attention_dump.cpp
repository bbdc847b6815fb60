// The ring_attention sweep's inputs as stored and its `dump: true` group: the first point's
// shards and results on every rank, for checking a run by hand against another implementation.
#include <cstdint>
#include <cstring>
#include <vector>

#include "dtype.hpp"
#include "ring/inputs.hpp"
#include "sweeps/ring_attention_parts.hpp"

namespace rb::ring_sweep {

namespace {

std::vector<double> as_doubles(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

std::vector<double> shard_as_doubles(const std::vector<unsigned char>& bytes,
                                     const ring::Problem& p) {
  std::vector<double> out(bytes.size() / attn::dtype_size(p.dtype));  // Q/dO or (GQA) smaller K/V
  for (std::size_t i = 0; i < out.size(); ++i) {
    float f = 0;
    if (p.dtype == attn::DType::F32) {
      std::memcpy(&f, bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h = 0;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      f = p.dtype == attn::DType::BF16 ? attn::bf16_to_float(h) : attn::half_to_float(h);
    }
    out[i] = f;
  }
  return out;
}

}  // namespace

Shards make_shards(const ring::Problem& p, int ring_rank, std::uint64_t seed, bool backward) {
  using ring::Tensor;
  Shards s;
  s.q = ring::make_shard(p, ring_rank, seed, Tensor::Q);
  s.k = ring::make_shard(p, ring_rank, seed, Tensor::K);
  s.v = ring::make_shard(p, ring_rank, seed, Tensor::V);
  if (backward) s.dO = ring::make_shard(p, ring_rank, seed, Tensor::dO);
  return s;
}

void write_dump(h5::Group& out, const ring::Problem& prob, int ring_rank, const Shards& in,
                const ring::RingResult& res, bool backward) {
  h5::Group d = out.group("dump");
  d.attr("point", std::int64_t{0});
  d.attr("layout",
         "per rank [world, batch, heads, local_rows, head_dim]; row i of a rank holds global "
         "position positions[rank, i]");
  const std::vector<std::uint64_t> dims = {
      static_cast<std::uint64_t>(prob.batch), static_cast<std::uint64_t>(prob.heads),
      static_cast<std::uint64_t>(prob.local_rows()), static_cast<std::uint64_t>(prob.head_dim)};
  const std::vector<std::uint64_t> rows = {dims[0], dims[1], dims[2]};
  const std::vector<std::uint64_t> kv = {dims[0], static_cast<std::uint64_t>(prob.num_kv_heads()),
                                         dims[2], dims[3]};
  d.write_per_rank("positions", ring::local_positions(prob, ring_rank), {dims[2]},
                   {"1", "global sequence position of each local row"});
  d.write_per_rank("q", shard_as_doubles(in.q, prob), dims,
                   {"1", "queries as stored (storage dtype values)"});
  d.write_per_rank("k", shard_as_doubles(in.k, prob), kv,
                   {"1", "keys as stored ([..., num_kv_heads, ...])"});
  d.write_per_rank("v", shard_as_doubles(in.v, prob), kv,
                   {"1", "values as stored ([..., num_kv_heads, ...])"});
  d.write_per_rank("o", as_doubles(res.out), dims, {"1", "ring attention output (fp32)"});
  d.write_per_rank("lse", as_doubles(res.lse), rows,
                   {"1", "log-sum-exp (natural log) of each query row"});
  if (!backward) return;
  d.write_per_rank("do", shard_as_doubles(in.dO, prob), dims, {"1", "output gradient as stored"});
  d.write_per_rank("dq", as_doubles(res.dq), dims, {"1", "query gradient (fp32)"});
  d.write_per_rank("dk", as_doubles(res.dk), kv,
                   {"1", "key gradient (fp32), on the block's owner"});
  d.write_per_rank("dv", as_doubles(res.dv), kv,
                   {"1", "value gradient (fp32), on the block's owner"});
}

}  // namespace rb::ring_sweep
