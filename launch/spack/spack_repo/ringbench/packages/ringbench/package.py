# Spack recipe for ringbench (README.md, Install):
#   spack repo add launch/spack/spack_repo/ringbench
#   spack install ringbench +cuda cuda_arch=90a          # or ~cuda for the host path only
# Its CMake options are CMakeLists.txt's; tests/launch/test_spack_package.py loads this file with a
# stand-in for Spack's package API and checks that every option it passes exists there (and that
# every RINGBENCH_* option is passed), then configures the project with those options.
import os

from spack.package import *  # noqa: F401,F403

try:  # Spack 1.0 and later: the build systems live in the builtin package repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
except ImportError:  # Spack 0.2x exported them from spack.package (imported above)
    pass

# The checkout this recipe sits in: launch/spack/spack_repo/ringbench/packages/ringbench/.
_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 6))


class Ringbench(CMakePackage, CudaPackage):
    """Ring attention and cluster benchmark: an MPI program that runs YAML-described sweeps
    (ring attention, collectives, p2p, compute, memory, kernel tuning) over NCCL or MPI and
    writes every rank's metrics into one parallel HDF5 file; rb-analysis turns it into reports."""

    # The checkout's own git repository (what is committed, as the nightly job's commit check
    # wants); RINGBENCH_GIT names a clone elsewhere. `spack develop ringbench@main` builds the
    # working tree instead.
    git = os.environ.get("RINGBENCH_GIT", "file://" + _CHECKOUT)

    version("main", branch="main")

    # CudaPackage brings the variants cuda (the CUDA/NCCL path) and cuda_arch.
    variant(
        "cudnn",
        default=True,
        when="+cuda",
        description="cuDNN's fused attention as a kernel path (kernel: cudnn; auto's first choice)",
    )
    # CMakeLists.txt requires Kokkos (the host path's kernels run in its default execution space),
    # so this variant picks that space's backend rather than switching Kokkos off.
    variant(
        "kokkos",
        default="openmp",
        values=("openmp", "threads", "serial"),
        multi=False,
        description="Kokkos host backend of the host path's kernels",
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.24:", type="build")  # CMakeLists.txt's cmake_minimum_required
    depends_on("pkgconfig", type="build")  # hwloc is found through pkg-config

    depends_on("mpi")
    depends_on("hwloc@2:")
    # One file written by every rank: the parallel (MPI-IO) build; hl: its dimension scales (H5DS).
    depends_on("hdf5+mpi+hl")
    depends_on("yaml-cpp")
    depends_on("fmt")
    depends_on("cli11")
    depends_on("doctest", type="test")  # RINGBENCH_BUILD_TESTS follows spack install --test
    # Host backends only: with a device backend Kokkos' default execution space is the GPU,
    # where the host kernels' buffers do not live. Kokkos 5 needs C++20; ringbench is C++17.
    depends_on("kokkos@3.7:4 ~cuda ~rocm")
    depends_on("kokkos+openmp", when="kokkos=openmp")
    depends_on("kokkos+threads~openmp", when="kokkos=threads")
    depends_on("kokkos+serial~openmp~threads", when="kokkos=serial")

    with when("+cuda"):
        depends_on("nccl")
        for _arch in CudaPackage.cuda_arch_values:
            depends_on(f"nccl+cuda cuda_arch={_arch}", when=f"cuda_arch={_arch}")
    depends_on("cudnn", when="+cudnn")

    def cmake_args(self):
        spec = self.spec
        on = {True: "ON", False: "OFF"}
        # ON/OFF, never AUTO: a spec with +cuda that finds no nvcc or NCCL must fail, not
        # quietly build the host path.
        args = [
            self.define("RINGBENCH_ENABLE_CUDA", on[spec.satisfies("+cuda")]),
            self.define("RINGBENCH_ENABLE_CUDNN", on[spec.satisfies("+cudnn")]),
            self.define("RINGBENCH_BUILD_TESTS", self.run_tests),
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
        ]
        if spec.satisfies("+cuda"):
            # The spec's toolkit, not whichever nvcc is first on PATH.
            args.append(self.define("CMAKE_CUDA_COMPILER", spec["cuda"].prefix.bin.nvcc))
            args.append(self.define("NCCL_ROOT", spec["nccl"].prefix))
            archs = [a for a in spec.variants["cuda_arch"].value if a != "none"]
            if archs:  # none: the project's default, RINGBENCH_CUDA_ARCHITECTURES (90a;80)
                args.append(self.define("CMAKE_CUDA_ARCHITECTURES", archs))
        return args

    def setup_build_environment(self, env):
        if self.spec.satisfies("+cudnn"):
            env.set("CUDNN_ROOT", self.spec["cudnn"].prefix)  # CMakeLists.txt's cuDNN hint

    def test_version(self):
        """ringbench --version runs and names the program"""
        ringbench = which(self.prefix.bin.ringbench)
        out = ringbench("--version", output=str, error=str)
        assert out.startswith("ringbench "), out
