#!/usr/bin/env bash
# Packs a built ringbench with the shared libraries a GPU node may lack (parallel HDF5,
# yaml-cpp, Kokkos and what they pull in, but not MPI, CUDA or the C/C++ runtime, which must
# come from the node) into one folder, with RPATH=$ORIGIN/lib, for running a binary built on a
# workstation on a node without those packages:  launch/device_bundle.sh [BUILD_DIR] [DEST]
# RB_BUNDLE_TESTS=0 leaves the test binaries out (a measurement needs only the two programs,
# and each test binary carries the same CUDA kernels: 18 MiB apiece); a list of names carries
# only those.
set -euo pipefail
build="${1:-build}"
dest="${2:-.device-bundle}"
rm -rf "$dest"; mkdir -p "$dest/lib"
for exe in ringbench kernels/cuda/ringbench_kernel_bench; do
  [ -x "$build/$exe" ] && cp "$build/$exe" "$dest/"
done
# RB_BUNDLE_TESTS="test_a test_b" carries only those test binaries.
case "${RB_BUNDLE_TESTS:-1}" in
  0) ;;
  1) for t in "$build"/tests/test_* "$build"/tests/ringbench_test_*; do
       [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$dest/" || true
     done ;;
  *) for t in $RB_BUNDLE_TESTS; do cp "$build/tests/$t" "$dest/" || { echo "device_bundle: no test binary $t" >&2; exit 1; }; done ;;
esac
skip='linux-vdso|ld-linux|libc\.so|libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|libcuda\.so|libcudart|libcublas|libcudnn|libnccl|libmpi|libopen-pal|libopen-rte|libhwloc|libevent|libpmix|libucx|libuc[pst]|libnvidia|libudev|libz\.so'
for f in "$dest"/*; do
  [ -f "$f" ] || continue
  ldd "$f" 2>/dev/null | awk '/=> \//{print $3}' | { grep -Ev "$skip" || true; } | while read -r lib; do
    cp -nL "$lib" "$dest/lib/" 2>/dev/null || true
  done
done
# Without the RPATH the bundle cannot find its libraries on the node: refuse, do not ship it.
command -v patchelf >/dev/null || { echo "device_bundle: patchelf is needed (apt-get install patchelf)" >&2; exit 1; }
for f in "$dest"/*; do if [ -f "$f" ]; then patchelf --set-rpath '$ORIGIN/lib' "$f"; fi; done
for f in "$dest"/lib/*; do patchelf --set-rpath '$ORIGIN' "$f"; done
du -sh "$dest"
# A tarball too, for copying to machines with a size limit on what travels (fatbins compress
# about 6x): extract with  tar -xJf bundle.tar.xz
if [ -n "${RB_BUNDLE_TARBALL:-}" ]; then
  mkdir -p "$(dirname "$RB_BUNDLE_TARBALL")"
  tar -C "$(dirname "$dest")" -cJf "$RB_BUNDLE_TARBALL" "$(basename "$dest")"
  ls -la "$RB_BUNDLE_TARBALL"
fi
