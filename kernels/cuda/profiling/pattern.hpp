#pragma once
// The data the collective sweep sends and the data each rank must then hold, as functions
// callable on the host (MPI path and the host-side check) and on the device (fill and check
// kernels of the NCCL path), so both paths verify against the same definition.
// Header-only and free of CUDA includes: it compiles in plain C++ builds too.
#include <cstddef>
#include <cstdint>

#include "dtype.hpp"
#include "host_device.hpp"

namespace rb::prof {

enum class DType { F32, F64, F16, BF16, I32 };

RB_HOST_DEVICE inline std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
      return 8;
    case DType::F16:
    case DType::BF16:
      return 2;
    default:
      return 4;
  }
}

// Largest integer magnitude up to which every integer is exact in the type: sums of the
// small non-negative integers below stay exact up to here, whatever the reduction order.
RB_HOST_DEVICE inline double exact_integer_limit(DType t) {
  switch (t) {
    case DType::F16:
      return 2048.0;
    case DType::BF16:
      return 256.0;
    case DType::F32:
      return 16777216.0;
    default:
      return 9007199254740992.0;
  }
}
RB_HOST_DEVICE inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::F16:
      return 1.0 / 2048.0;
    case DType::BF16:
      return 1.0 / 256.0;
    case DType::F32:
      return 1.0 / 16777216.0;
    case DType::F64:
      return 1.0 / 9007199254740992.0;
    default:
      return 0.0;
  }
}

RB_HOST_DEVICE inline double load(const void* p, std::size_t i, DType t) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::F64:
      return static_cast<const double*>(p)[i];
    case DType::F16:
      return attn::half_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case DType::BF16:
      return attn::bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case DType::I32:
      return static_cast<const std::int32_t*>(p)[i];
  }
  return 0;
}

RB_HOST_DEVICE inline void store(void* p, std::size_t i, DType t, double v) {
  switch (t) {
    case DType::F32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::F64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::F16:
      static_cast<std::uint16_t*>(p)[i] = attn::float_to_half(static_cast<float>(v));
      break;
    case DType::BF16:
      static_cast<std::uint16_t*>(p)[i] = attn::float_to_bf16(static_cast<float>(v));
      break;
    case DType::I32:
      static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v);
      break;
  }
}

// Element i of rank r's input: a small integer in 0..16 that differs between neighbouring
// ranks and positions, so data from the wrong peer or the wrong offset is caught.
RB_HOST_DEVICE inline double input_value(int rank, std::size_t i) {
  return static_cast<double>((static_cast<std::size_t>(rank) * 7u + (i % 17u) * 3u) % 17u);
}

// What the output of a collective holds, in terms of the ranks' inputs. Each row of the
// collective table (src/profiling/collective_table.cpp) names its pattern.
enum class Pattern {
  SumOfInputs,        // element j = sum over ranks of input(r, j)         (all_reduce, reduce)
  GatheredInputs,     // block r = input of rank r                          (all_gather)
  SumOfOwnBlock,      // element j = sum over ranks of input(r, rank * count + j) (reduce_scatter)
  TransposedBlocks,   // block p = rank p's block number `rank`             (all_to_all)
  RootInput,          // input of the root                                  (broadcast)
  PreviousRankInput,  // input of rank - 1                                  (ring send/recv)
};

struct Expectation {
  Pattern pattern = Pattern::SumOfInputs;
  int rank = 0;    // this rank in its group
  int nranks = 1;  // group size
  int root = 0;
  std::size_t count = 0;  // the collective's count argument (per-rank / per-peer for ag, rs, a2a)
};

// The value output element j of this rank must hold after the operation.
RB_HOST_DEVICE inline double expected_value(const Expectation& e, std::size_t j) {
  switch (e.pattern) {
    case Pattern::SumOfInputs: {
      double s = 0;
      for (int r = 0; r < e.nranks; ++r) s += input_value(r, j);
      return s;
    }
    case Pattern::GatheredInputs:
      return input_value(static_cast<int>(j / e.count), j % e.count);
    case Pattern::SumOfOwnBlock: {
      double s = 0;
      const std::size_t i = static_cast<std::size_t>(e.rank) * e.count + j;
      for (int r = 0; r < e.nranks; ++r) s += input_value(r, i);
      return s;
    }
    case Pattern::TransposedBlocks: {
      const int peer = static_cast<int>(j / e.count);
      return input_value(peer, static_cast<std::size_t>(e.rank) * e.count + j % e.count);
    }
    case Pattern::RootInput:
      return input_value(e.root, j);
    case Pattern::PreviousRankInput:
      return input_value((e.rank - 1 + e.nranks) % e.nranks, j);
  }
  return 0;
}

// Accepted |got - expected|: zero while integer sums are exact in the type, otherwise the
// rounding of n additions.
RB_HOST_DEVICE inline double tolerance(DType t, double expected, int nranks) {
  const double a = expected < 0 ? -expected : expected;
  if (a <= exact_integer_limit(t)) return 0.0;
  return a * unit_roundoff(t) * static_cast<double>(nranks);
}

RB_HOST_DEVICE inline bool matches(DType t, double got, double expected, int nranks) {
  const double d = got - expected;
  return (d < 0 ? -d : d) <= tolerance(t, expected, nranks);
}

}  // namespace rb::prof
