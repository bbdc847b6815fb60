#pragma once
// Shared helpers of the profiling sweeps: host buffers, clocks, the dtype names and one
// MPI reduction of a double.
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <mpi.h>

#include "cuda/profiling/pattern.hpp"

namespace rb::prof {

// Page-aligned host memory, zeroed (so the pages are touched before any timing).
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t bytes) : bytes_(bytes) {
    const std::size_t rounded = ((bytes ? bytes : 1) + 4095) / 4096 * 4096;
    p_ = std::aligned_alloc(4096, rounded);
    if (!p_)
      throw std::runtime_error("cannot allocate " + std::to_string(bytes) +
                               " bytes of host memory");
    std::memset(p_, 0, rounded);
  }
  ~HostBuffer() { std::free(p_); }
  HostBuffer(HostBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = o.p_;
      bytes_ = o.bytes_;
      o.p_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* get() const { return p_; }
  char* bytes_ptr() const { return static_cast<char*>(p_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Names as written in the YAML and the HDF5 file.
inline const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = {"float32", "float64", "float16", "bfloat16",
                                                 "int32"};
  return names;
}
inline const char* dtype_name(DType t) {
  return dtype_names()[static_cast<std::size_t>(t)].c_str();
}
inline DType dtype_from_name(const std::string& s) {
  const auto& names = dtype_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<DType>(i);
  throw std::invalid_argument("unknown dtype '" + s + "'");
}

// One key column of a points table: f(point) for every point, in order.
template <class T, class Point, class F>
std::vector<T> column(const std::vector<Point>& points, F f) {
  std::vector<T> out;
  out.reserve(points.size());
  for (const auto& p : points) out.push_back(static_cast<T>(f(p)));
  return out;
}

// Max / min / sum of one double over a communicator.
inline double allreduce_double(double v, MPI_Op op, MPI_Comm comm) {
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, comm);
  return out;
}

}  // namespace rb::prof
