#pragma once
// The data the collective sweep sends and the data each rank must then hold, as functions
// callable on the host (MPI path and the host-side check) and on the device (fill and check
// kernels of the NCCL path), so both paths verify against the same definition.
// Header-only and free of CUDA includes: it compiles in plain C++ builds too.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define RB_HD __host__ __device__
#else
#define RB_HD
#endif

namespace rb::prof {

enum class DType { F32, F64, F16, BF16, I32 };

RB_HD inline std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: return 8;
    case DType::F16:
    case DType::BF16: return 2;
    default: return 4;
  }
}

// Largest integer magnitude up to which every integer is exact in the type: sums of the
// small non-negative integers below stay exact up to here, whatever the reduction order.
RB_HD inline double exact_integer_limit(DType t) {
  switch (t) {
    case DType::F16: return 2048.0;
    case DType::BF16: return 256.0;
    case DType::F32: return 16777216.0;
    default: return 9007199254740992.0;
  }
}
RB_HD inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::F16: return 1.0 / 2048.0;
    case DType::BF16: return 1.0 / 256.0;
    case DType::F32: return 1.0 / 16777216.0;
    case DType::F64: return 1.0 / 9007199254740992.0;
    default: return 0.0;
  }
}

// IEEE binary16 and bfloat16 conversions with round-to-nearest-even, in software so that
// host code needs no CUDA headers.
RB_HD inline std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t fexp = (x >> 23) & 0xffu;
  std::uint32_t mant = x & 0x7fffffu;
  if (fexp == 0xffu) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int exp = static_cast<int>(fexp) - 127 + 15;
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
  return static_cast<std::uint16_t>(h);
}

RB_HD inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  std::uint32_t x;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15u + 127u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

RB_HD inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

RB_HD inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t x = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

RB_HD inline double load(const void* p, std::size_t i, DType t) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::F16: return half_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case DType::I32: return static_cast<const std::int32_t*>(p)[i];
  }
  return 0;
}

RB_HD inline void store(void* p, std::size_t i, DType t, double v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::F64: static_cast<double*>(p)[i] = v; break;
    case DType::F16: static_cast<std::uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); break;
    case DType::BF16: static_cast<std::uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::I32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
  }
}

// Element i of rank r's input: a small integer in 0..16 that differs between neighbouring
// ranks and positions, so data from the wrong peer or the wrong offset is caught.
RB_HD inline double input_value(int rank, std::size_t i) {
  return static_cast<double>((static_cast<std::size_t>(rank) * 7u + (i % 17u) * 3u) % 17u);
}

// Operation codes as in rb::coll::Op (busbw.hpp), repeated here to keep this header standalone.
enum class CollCode { AllReduce = 0, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };

struct Expectation {
  CollCode op = CollCode::AllReduce;
  int rank = 0;           // this rank in its group
  int nranks = 1;         // group size
  int root = 0;
  std::size_t count = 0;  // the collective's count argument (per-rank / per-peer for ag, rs, a2a)
};

// The value output element j of this rank must hold after the operation.
RB_HD inline double expected_value(const Expectation& e, std::size_t j) {
  switch (e.op) {
    case CollCode::AllReduce:
    case CollCode::Reduce: {
      double s = 0;
      for (int r = 0; r < e.nranks; ++r) s += input_value(r, j);
      return s;
    }
    case CollCode::AllGather:
      return input_value(static_cast<int>(j / e.count), j % e.count);
    case CollCode::ReduceScatter: {
      double s = 0;
      const std::size_t i = static_cast<std::size_t>(e.rank) * e.count + j;
      for (int r = 0; r < e.nranks; ++r) s += input_value(r, i);
      return s;
    }
    case CollCode::AllToAll: {
      const int peer = static_cast<int>(j / e.count);
      return input_value(peer, static_cast<std::size_t>(e.rank) * e.count + j % e.count);
    }
    case CollCode::Broadcast: return input_value(e.root, j);
    case CollCode::SendRecv: return input_value((e.rank - 1 + e.nranks) % e.nranks, j);
  }
  return 0;
}

// Accepted |got - expected|: zero while integer sums are exact in the type, otherwise the
// rounding of n additions.
RB_HD inline double tolerance(DType t, double expected, int nranks) {
  const double a = expected < 0 ? -expected : expected;
  if (a <= exact_integer_limit(t)) return 0.0;
  return a * unit_roundoff(t) * static_cast<double>(nranks);
}

RB_HD inline bool matches(DType t, double got, double expected, int nranks) {
  const double d = got - expected;
  return (d < 0 ? -d : d) <= tolerance(t, expected, nranks);
}

}  // namespace rb::prof
