#include "host/profiling_kernels.hpp"

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>

namespace rb::prof::host {
namespace {

template <class F>
double timed(F&& f) {
  Kokkos::fence();
  Kokkos::Timer timer;
  f();
  Kokkos::fence();
  return timer.seconds();
}

template <class T>
GemmResult gemm_t(int n, int warmup, int iterations) {
  using View = Kokkos::View<T**, Kokkos::LayoutRight>;
  View a("gemm_a", n, n), b("gemm_b", n, n), c("gemm_c", n, n);
  // A(i,k) = (i + k) % 3 - 1, B(k,j) = 1: every C(i,j) is the row sum of A, known exactly.
  Kokkos::parallel_for(
      "gemm_init", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({0, 0}, {n, n}),
      KOKKOS_LAMBDA(int i, int k) {
        a(i, k) = static_cast<T>((i + k) % 3 - 1);
        b(i, k) = static_cast<T>(1);
      });
  // One row of C per work item; k outer, j inner so B and C rows stream through the cache.
  auto call = [&] {
    Kokkos::parallel_for(
        "gemm_rows", Kokkos::RangePolicy<>(0, n), KOKKOS_LAMBDA(int i) {
          for (int j = 0; j < n; ++j) c(i, j) = 0;
          for (int k = 0; k < n; ++k) {
            const T aik = a(i, k);
            for (int j = 0; j < n; ++j) c(i, j) += aik * b(k, j);
          }
        });
  };
  for (int w = 0; w < warmup; ++w) timed(call);
  GemmResult r;
  r.flops = 2.0 * static_cast<double>(n) * n * n;
  for (int it = 0; it < iterations; ++it) r.seconds.push_back(timed(call));
  if (iterations == 0 && warmup == 0) timed(call);
  double err = 0;
  Kokkos::parallel_reduce(
      "gemm_check", Kokkos::RangePolicy<>(0, n),
      KOKKOS_LAMBDA(int i, double& e) {
        double expect = 0;
        for (int k = 0; k < n; ++k) expect += static_cast<double>((i + k) % 3 - 1);
        for (int j = 0; j < n; ++j) {
          const double d = std::fabs(static_cast<double>(c(i, j)) - expect);
          if (d > e) e = d;
        }
      },
      Kokkos::Max<double>(err));
  r.max_abs_error = err;
  return r;
}

}  // namespace

TriadResult triad(std::size_t n, int warmup, int iterations) {
  // Host memory is what this measures, so the triad runs in the default HOST space (OpenMP or
  // Serial) even in a CUDA Kokkos build, where the default space would measure the GPU.
  using Space = Kokkos::DefaultHostExecutionSpace;
  using Policy = Kokkos::RangePolicy<Space>;
  Kokkos::View<double*, Kokkos::HostSpace> a("triad_a", n), b("triad_b", n), c("triad_c", n);
  // First touch inside a parallel kernel, so an OpenMP build places pages near their threads.
  Kokkos::parallel_for("triad_init", Policy(0, n), [=](std::size_t i) {
    a(i) = 0.0;
    b(i) = 1.0;
    c(i) = 2.0;
  });
  const double s = 3.0;
  auto call = [&] {
    Kokkos::parallel_for("triad", Policy(0, n), [=](std::size_t i) { a(i) = b(i) + s * c(i); });
  };
  for (int w = 0; w < warmup; ++w) timed(call);
  TriadResult r;
  r.bytes_per_iteration = 3 * n * sizeof(double);
  for (int it = 0; it < iterations; ++it) r.seconds.push_back(timed(call));
  std::size_t wrong = 0;
  Kokkos::parallel_reduce(
      "triad_check", Policy(0, n),
      [=](std::size_t i, std::size_t& w) { w += (a(i) != 7.0) ? 1 : 0; }, wrong);
  r.wrong = (iterations + warmup) > 0 ? wrong : 0;
  return r;
}

GemmResult gemm(int n, bool fp64, int warmup, int iterations) {
  return fp64 ? gemm_t<double>(n, warmup, iterations) : gemm_t<float>(n, warmup, iterations);
}

}  // namespace rb::prof::host
