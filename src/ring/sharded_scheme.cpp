#include "ring/sharded_scheme.hpp"

#include <stdexcept>
#include <string>

namespace rb::ring {

Shards::Shards(attn::AttentionBackend& be, const Problem& p, bool backward)
    : shard_floats(static_cast<std::size_t>(p.shard_elements())),
      kv_shard_floats(static_cast<std::size_t>(p.kv_shard_elements())),
      rows(static_cast<std::size_t>(p.batch) * p.heads * static_cast<std::size_t>(p.local_rows())) {
  const std::size_t w = attn::dtype_size(p.dtype), f32 = sizeof(float);
  shard_bytes = shard_floats * w;
  kv_shard_bytes = kv_shard_floats * w;
  q = BackendBuffer(be, shard_bytes);
  kv = BackendBuffer(be, 2 * kv_shard_bytes);
  out = BackendBuffer(be, shard_floats * f32);
  lse = BackendBuffer(be, rows * f32);
  if (!backward) return;
  dout = BackendBuffer(be, shard_bytes);
  dq = BackendBuffer(be, shard_floats * f32);
  dkdv = BackendBuffer(be, 2 * kv_shard_floats * f32);
}

ShardedScheme::ShardedScheme(const Problem& p, attn::AttentionBackend& backend, bool with_backward,
                             const char* name)
    : p_(p), be_(backend), with_backward_(with_backward), name_(name) {
  check_problem(p_);
  shards_ = Shards(be_, p_, with_backward_);
}

void ShardedScheme::check_group(int transport_size, int expected) const {
  if (transport_size != expected)
    throw std::invalid_argument(std::string(name_) + ": transport group has " +
                                std::to_string(transport_size) + " ranks, problem group size " +
                                std::to_string(expected));
}

void ShardedScheme::reset_steps(StepTimes& t) const {
  t.compute.assign(static_cast<std::size_t>(p_.ring_size), 0.0);
  t.wait.assign(static_cast<std::size_t>(p_.ring_size), 0.0);
}

void ShardedScheme::check_backward(bool have_forward) const {
  if (!with_backward_)
    throw std::logic_error(std::string(name_) + ": constructed without backward");
  if (!have_forward) throw std::logic_error(std::string(name_) + ": backward() before forward()");
}

void ShardedScheme::load_inputs(const void* q, const void* k, const void* v, const void* dout) {
  const Shards& s = shards_;
  be_.copy_to_device(s.q.ptr, q, s.shard_bytes);
  be_.copy_to_device(s.k(), k, s.kv_shard_bytes);
  be_.copy_to_device(s.v(), v, s.kv_shard_bytes);
  if (with_backward_) {
    if (dout == nullptr) throw std::invalid_argument(std::string(name_) + ": backward needs dO");
    be_.copy_to_device(s.dout.ptr, dout, s.shard_bytes);
  }
  be_.synchronize();
}

RingResult ShardedScheme::result() const {
  const Shards& s = shards_;
  const std::size_t f32 = sizeof(float);
  RingResult r;
  r.out.resize(s.shard_floats);
  r.lse.resize(s.rows);
  be_.copy_to_host(r.out.data(), s.out.ptr, s.shard_floats * f32);
  be_.copy_to_host(r.lse.data(), s.lse.ptr, s.rows * f32);
  if (!with_backward_) return r;
  r.dq.resize(s.shard_floats);
  r.dk.resize(s.kv_shard_floats);
  r.dv.resize(s.kv_shard_floats);
  be_.copy_to_host(r.dq.data(), s.dq.ptr, s.shard_floats * f32);
  be_.copy_to_host(r.dk.data(), s.dk(), s.kv_shard_floats * f32);
  be_.copy_to_host(r.dv.data(), s.dv(), s.kv_shard_floats * f32);
  return r;
}

}  // namespace rb::ring
