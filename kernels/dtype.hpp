#pragma once
// The one family of fp16 / bf16 conversions (round to nearest even), for the host kernels
// (Q, K, V, dO stored as fp16 or bf16, computed in fp32), the profiling sweeps' collective
// data (kernels/cuda/profiling/pattern.hpp, host and device) and MPI's 16-bit sums. Bit
// manipulation only, so it compiles for any Kokkos backend and under nvcc.
#include <cstdint>
#include <cstring>

#include "attention.hpp"
#include "host_device.hpp"

namespace rb::attn {

RB_HOST_DEVICE inline float bits_to_float(std::uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
RB_HOST_DEVICE inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

RB_HOST_DEVICE inline float bf16_to_float(std::uint16_t h) {
  return bits_to_float(static_cast<std::uint32_t>(h) << 16);
}

RB_HOST_DEVICE inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_to_float(sign);
    // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return bits_to_float(sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | (mant << 13));
  }
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  return bits_to_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// Round to nearest even (NaN kept quiet).
RB_HOST_DEVICE inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

// Round to nearest even, overflow to infinity, gradual underflow.
RB_HOST_DEVICE inline std::uint16_t float_to_half(float f) {
  const std::uint32_t u = float_to_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (a < 0x38800000u) {               // below the smallest normal half (2^-14): subnormal or zero
    if (a < 0x33000000u) return sign;  // < 2^-25 rounds to zero
    const std::uint32_t e = a >> 23;
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14 + (113 - e) - ... places the value in 10 bits
    std::uint32_t v = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1u))) ++v;
    return static_cast<std::uint16_t>(sign | v);
  }
  std::uint32_t v = ((a >> 13) - ((127 - 15) << 10));
  const std::uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1u))) ++v;
  return static_cast<std::uint16_t>(sign | v);
}

// Element `index` of a buffer stored in `t`, as fp32.
RB_HOST_DEVICE inline float load_as_float(const void* p, DType t, std::int64_t index) {
  if (t == DType::F32) return static_cast<const float*>(p)[index];
  const std::uint16_t h = static_cast<const std::uint16_t*>(p)[index];
  return t == DType::BF16 ? bf16_to_float(h) : half_to_float(h);
}

// fp32 -> storage -> fp32: what a value becomes once stored in `t`.
RB_HOST_DEVICE inline float round_to_storage(float f, DType t) {
  if (t == DType::BF16) return bf16_to_float(float_to_bf16(f));
  if (t == DType::F16) return half_to_float(float_to_half(f));
  return f;
}

// Writes f into element `index` of a buffer stored in `t`.
RB_HOST_DEVICE inline void store_from_float(void* p, DType t, std::int64_t index, float f) {
  if (t == DType::F32)
    static_cast<float*>(p)[index] = f;
  else if (t == DType::BF16)
    static_cast<std::uint16_t*>(p)[index] = float_to_bf16(f);
  else
    static_cast<std::uint16_t*>(p)[index] = float_to_half(f);
}

}  // namespace rb::attn
