# Shared by the launch scripts: install what is missing (Debian/Ubuntu, as root or with sudo),
# configure and build incrementally. Source it; it defines rb_setup.
RB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RB_BUILD="${RINGBENCH_BUILD_DIR:-$RB_ROOT/build}"
RB_DEBIAN_PACKAGES=(cmake ninja-build g++ pkg-config git libopenmpi-dev openmpi-bin libhwloc-dev hwloc
  libhdf5-openmpi-dev hdf5-tools libyaml-cpp-dev doctest-dev libtrilinos-kokkos-dev
  libcli11-dev libfmt-dev python3 python3-h5py python3-numpy python3-matplotlib python3-pandas
  python3-venv python3-pip python3-yaml python3-plotly python3-jinja2 python3-jsonschema
  python3-prometheus-client pylint clang-format python3-xarray python3-h5netcdf)

rb_install_missing() {
  command -v dpkg-query >/dev/null 2>&1 || { echo "ringbench setup: not a Debian/Ubuntu system; install the packages listed in README.md by hand" >&2; return 0; }
  local missing=()
  for p in "${RB_DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "ringbench setup: installing ${missing[*]}"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

rb_build() {
  local jobs="${RINGBENCH_JOBS:-$(nproc)}"
  if [ ! -f "$RB_BUILD/build.ninja" ]; then
    cmake -S "$RB_ROOT" -B "$RB_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ${RINGBENCH_CMAKE_ARGS:-} || return 1
  fi
  cmake --build "$RB_BUILD" -j "$jobs"
}

rb_mpi_env() {
  # Open MPI refuses to run as root unless told; containers and CI run as root.
  if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

rb_setup() {
  rb_install_missing && rb_build && rb_mpi_env
}

# Prints the command, then runs it (launch scripts always show the exact mpirun line).
rb_run() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  "$@"
}
