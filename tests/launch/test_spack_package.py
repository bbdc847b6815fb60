"""The Spack recipe (launch/spack/spack_repo/ringbench/packages/ringbench/package.py), loaded with
a stand-in for the part of Spack's package API it uses (Spack itself is not needed): its
dependencies and variants, and the CMake options it passes for several specs, checked against
CMakeLists.txt (every option it passes exists there, every RINGBENCH_* option is passed, values
are ones the project accepts); then, where cmake and mpicc are here, the project configures with
those options (configure only: nothing is built)."""
import contextlib
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO = os.path.join(SOURCE, "launch", "spack", "spack_repo", "ringbench")
RECIPE = os.path.join(REPO, "packages", "ringbench", "package.py")


# ---- a stand-in for Spack's package API, recording the directives ----

class Directives:
    def __init__(self):
        self.calls = []  # (directive, args, kwargs, when of the enclosing `with when(...)`)
        self.when = []

    def record(self, name):
        def directive(*args, **kwargs):
            self.calls.append((name, args, kwargs, " ".join(self.when)))
        return directive

    @contextlib.contextmanager
    def within(self, cond):
        self.when.append(cond)
        try:
            yield
        finally:
            self.when.pop()


class Prefix(str):
    """Spack's Prefix: attribute access joins path components."""
    def __getattr__(self, name):
        return Prefix(os.path.join(self, name))


class Variant:
    def __init__(self, value):
        self.value = value


class Spec:
    """Just what the recipe asks of a spec: satisfies('+v' / 'v=x'), variants, spec['dep']."""

    def __init__(self, variants, deps):
        self.variants = {k: Variant(v) for k, v in variants.items()}
        self.deps = deps

    def satisfies(self, cond):
        if cond.startswith("+"):
            return self.variants.get(cond[1:], Variant(False)).value is True
        name, value = cond.split("=")
        v = self.variants.get(name)
        return v is not None and (value in v.value if isinstance(v.value, tuple) else v.value == value)

    def __getitem__(self, name):
        return self.deps[name]


def define(name, value):
    """Spack's define(): bools as BOOL ON/OFF, lists joined with ';', the rest as STRING."""
    if isinstance(value, bool):
        return f"-D{name}:BOOL={'ON' if value else 'OFF'}"
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    return f"-D{name}:STRING={value}"


def load_recipe():
    """Executes package.py against the stand-in modules; returns (module, directives)."""
    d = Directives()

    class PackageBase:
        def __init__(self, spec, run_tests=False):
            self.spec, self.run_tests = spec, run_tests

        def define(self, name, value):
            return define(name, value)

    class CMakePackage(PackageBase):
        pass

    class CudaPackage(PackageBase):
        cuda_arch_values = ("70", "80", "90", "90a", "100")

    api = types.ModuleType("spack.package")
    for name in ("version", "variant", "depends_on", "conflicts", "requires", "maintainers",
                 "license", "patch", "provides", "extends", "resource"):
        setattr(api, name, d.record(name))
    api.when = d.within
    api.which = lambda *a, **k: None
    api.__all__ = [n for n in vars(api) if not n.startswith("_")]
    cmake = types.ModuleType("spack_repo.builtin.build_systems.cmake")
    cmake.CMakePackage = CMakePackage
    cuda = types.ModuleType("spack_repo.builtin.build_systems.cuda")
    cuda.CudaPackage = CudaPackage
    mods = {"spack": types.ModuleType("spack"), "spack.package": api,
            "spack_repo": types.ModuleType("spack_repo"),
            "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
            "spack_repo.builtin.build_systems": types.ModuleType("spack_repo.builtin.build_systems"),
            "spack_repo.builtin.build_systems.cmake": cmake,
            "spack_repo.builtin.build_systems.cuda": cuda}
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        spec = importlib.util.spec_from_file_location("spack_ringbench_recipe", RECIPE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module, d, CMakePackage, CudaPackage


# ---- what CMakeLists.txt offers ----

def cmake_text():
    out = []
    for p in [os.path.join(SOURCE, "CMakeLists.txt")] + sorted(glob.glob(os.path.join(SOURCE, "cmake", "*.cmake"))):
        with open(p) as f:
            out.append(f.read())
    return "\n".join(out)


def cache_options():
    """{name: allowed values or None}: option(NAME ...) and set(NAME ... CACHE ...) of CMakeLists.txt."""
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        text = f.read()
    opts = {m.group(1): ("ON", "OFF") for m in re.finditer(r"^option\((\w+)", text, re.M)}
    for m in re.finditer(r"^set\((\w+) .*?\bCACHE\b", text, re.M):
        opts[m.group(1)] = None
    for m in re.finditer(r"^set_property\(CACHE (\w+) PROPERTY STRINGS ([\w ]+)\)", text, re.M):
        opts[m.group(1)] = tuple(m.group(2).split())
    return opts


def parse(args):
    """['-DNAME:TYPE=VALUE', ...] -> {NAME: VALUE} (each defined once)."""
    out = {}
    for a in args:
        m = re.fullmatch(r"-D(\w+):(BOOL|STRING|PATH|FILEPATH)=(.*)", a)
        assert m, f"not a -DNAME:TYPE=VALUE argument: {a!r}"
        assert m.group(1) not in out, f"{m.group(1)} defined twice"
        out[m.group(1)] = m.group(3)
    return out


def spec_for(cuda, cudnn, arch, mpi_bin="/spack/mpi/bin", cuda_prefix="/spack/cuda", nccl="/spack/nccl"):
    variants = {"cuda": cuda, "kokkos": "openmp", "cuda_arch": tuple(arch)}
    if cuda:
        variants["cudnn"] = cudnn
    mpi = types.SimpleNamespace(mpicc=os.path.join(mpi_bin, "mpicc"), mpicxx=os.path.join(mpi_bin, "mpicxx"),
                                prefix=Prefix("/spack/mpi"))
    deps = {"mpi": mpi, "cuda": types.SimpleNamespace(prefix=Prefix(cuda_prefix)),
            "nccl": types.SimpleNamespace(prefix=Prefix(nccl)),
            "cudnn": types.SimpleNamespace(prefix=Prefix("/spack/cudnn"))}
    return Spec(variants, deps)


SPECS = [  # (name, cuda, cudnn, cuda_arch, run_tests)
    ("host", False, False, ("none",), False),
    ("cuda 90a cudnn", True, True, ("90a",), False),
    ("cuda 80+90 no cudnn, tests", True, False, ("80", "90"), True),
    ("cuda, no arch", True, True, ("none",), False),
]


class Recipe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.module, cls.d, cls.CMakePackage, cls.CudaPackage = load_recipe()
        cls.cls = cls.module.Ringbench

    def deps(self):
        return [(a[0], k.get("when", ""), w, k.get("type")) for n, a, k, w in self.d.calls if n == "depends_on"]

    def test_class_and_source(self):
        self.assertTrue(issubclass(self.cls, self.CMakePackage) and issubclass(self.cls, self.CudaPackage))
        self.assertEqual(self.module._CHECKOUT, SOURCE)  # the recipe finds the checkout it is in
        self.assertEqual(self.cls.git, os.environ.get("RINGBENCH_GIT", "file://" + SOURCE))
        self.assertIn(("main",), [a for n, a, k, w in self.d.calls if n == "version"])
        with open(os.path.join(REPO, "repo.yaml")) as f:
            text = f.read()
        self.assertRegex(text, r"namespace: ringbench\b")
        self.assertRegex(text, r"api: v2\.\d")  # Spack 1.x reads spack_repo/<namespace>/ repos

    def test_dependencies(self):
        names = {}
        for spec, when, outer, dtype in self.deps():
            names.setdefault(re.split(r"[@+~ ]", spec)[0], []).append((spec, when, outer, dtype))
        for required in ("mpi", "hwloc", "hdf5", "yaml-cpp", "fmt", "cli11", "kokkos", "doctest",
                         "nccl", "cudnn", "pkgconfig", "cmake"):
            self.assertIn(required, names)
        self.assertTrue(any("+mpi" in s for s, *_ in names["hdf5"]), "HDF5 must be the parallel build")
        self.assertTrue(any("+hl" in s for s, *_ in names["hdf5"]),
                        "HDF5 with its high-level library (the dimension scales, H5DS)")
        self.assertTrue(all(o == "+cuda" or w.startswith("cuda_arch=") and o == "+cuda"
                            for s, w, o, t in names["nccl"]), names["nccl"])
        self.assertEqual({w for s, w, o, t in names["cudnn"]}, {"+cudnn"})
        self.assertEqual(names["doctest"][0][3], "test")
        # cmake's minimum is CMakeLists.txt's.
        with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
            want = re.search(r"cmake_minimum_required\(VERSION ([0-9.]+)\)", f.read()).group(1)
        self.assertIn(f"cmake@{want}:", [s for s, *_ in names["cmake"]])
        # Kokkos on the host only, and each backend value asks for its Kokkos.
        self.assertTrue(any("~cuda" in s and "~rocm" in s and "@3.7:4" in s for s, w, *_ in names["kokkos"]))
        kokkos_variant = [k for n, a, k, w in self.d.calls if n == "variant" and a[0] == "kokkos"][0]
        for value in kokkos_variant["values"]:
            self.assertTrue(any(w == f"kokkos={value}" and f"+{value}" in s for s, w, *_ in names["kokkos"]), value)
        # nccl follows every cuda_arch value
        arch_whens = {w for s, w, o, t in names["nccl"] if w}
        self.assertEqual(arch_whens, {f"cuda_arch={a}" for a in self.CudaPackage.cuda_arch_values})

    def test_cmake_args_exist_in_cmakelists(self):
        opts = cache_options()
        text = cmake_text()
        self.assertIn("find_package(MPI", text)
        # FindMPI's documented inputs; CMake's own CUDA variables, which the project respects.
        cmake_own = {"MPI_C_COMPILER", "MPI_CXX_COMPILER", "CMAKE_CUDA_COMPILER", "CMAKE_CUDA_ARCHITECTURES"}
        ringbench_opts = {o for o in opts if o.startswith("RINGBENCH_")}
        # Passed as CMAKE_CUDA_ARCHITECTURES instead, which wins (cmake/ringbench_cuda.cmake).
        not_passed = {"RINGBENCH_CUDA_ARCHITECTURES"}
        self.assertIn("if(DEFINED CMAKE_CUDA_ARCHITECTURES)", text)
        for name, cuda, cudnn, arch, tests in SPECS:
            with self.subTest(spec=name):
                args = parse(self.cls(spec_for(cuda, cudnn, arch), run_tests=tests).cmake_args())
                for var, value in args.items():
                    known = var in opts or var in cmake_own or re.search(rf"\$\{{{var}\}}", text)
                    self.assertTrue(known, f"{var} is not an option or variable of CMakeLists.txt")
                    if opts.get(var):
                        self.assertIn(value, opts[var], f"{var}={value}")
                self.assertEqual(ringbench_opts - not_passed - set(args), set(), "RINGBENCH_* options not passed")
                self.assertEqual(args["RINGBENCH_ENABLE_CUDA"], "ON" if cuda else "OFF")
                self.assertEqual(args["RINGBENCH_ENABLE_CUDNN"], "ON" if cuda and cudnn else "OFF")
                self.assertEqual(args["RINGBENCH_BUILD_TESTS"], "ON" if tests else "OFF")
                self.assertEqual(args["MPI_CXX_COMPILER"], "/spack/mpi/bin/mpicxx")
                if cuda:
                    self.assertEqual(args["CMAKE_CUDA_COMPILER"], "/spack/cuda/bin/nvcc")
                    self.assertEqual(args["NCCL_ROOT"], "/spack/nccl")
                else:
                    self.assertFalse({"CMAKE_CUDA_COMPILER", "NCCL_ROOT"} & set(args))
                wanted = [a for a in arch if a != "none"]
                self.assertEqual(args.get("CMAKE_CUDA_ARCHITECTURES"), ";".join(wanted) if wanted else None)

    def test_cudnn_hint(self):
        env = types.SimpleNamespace(values={})
        env.set = lambda k, v: env.values.__setitem__(k, v)
        self.cls(spec_for(True, True, ("90",))).setup_build_environment(env)
        self.assertEqual(env.values, {"CUDNN_ROOT": "/spack/cudnn"})
        self.assertIn("$ENV{CUDNN_ROOT}", cmake_text())
        env.values.clear()
        self.cls(spec_for(True, False, ("90",))).setup_build_environment(env)
        self.assertEqual(env.values, {})

    def configure(self, args):
        work = tempfile.mkdtemp(prefix="rb_spack_cfg_")
        self.addCleanup(shutil.rmtree, work, True)
        r = subprocess.run(["cmake", "-S", SOURCE, "-B", work] + args, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        with open(os.path.join(work, "CMakeCache.txt")) as f:
            return r.stdout, f.read()

    @unittest.skipUnless(shutil.which("cmake") and shutil.which("mpicc"), "needs cmake and mpicc")
    def test_configures_with_the_host_args(self):
        mpi_bin = os.path.dirname(shutil.which("mpicc"))
        args = self.cls(spec_for(False, False, ("none",), mpi_bin=mpi_bin)).cmake_args()
        out, cache = self.configure(args)
        self.assertIn("ringbench: CUDA path OFF", out)
        self.assertNotIn("Manually-specified variables were not used", out)

    @unittest.skipUnless(shutil.which("cmake") and shutil.which("mpicc") and
                         os.path.isfile("/usr/local/cuda/bin/nvcc") and
                         glob.glob("/usr/local/cuda/include/nccl.h"), "needs cmake, mpicc, CUDA and NCCL at /usr/local/cuda")
    def test_configures_with_the_cuda_args(self):
        mpi_bin = os.path.dirname(shutil.which("mpicc"))
        spec = spec_for(True, False, ("90",), mpi_bin=mpi_bin, cuda_prefix="/usr/local/cuda", nccl="/usr/local/cuda")
        out, cache = self.configure(self.cls(spec).cmake_args())
        self.assertIn("ringbench: nvcc /usr/local/cuda/bin/nvcc, CUDA architectures 90 (from CMAKE_CUDA_ARCHITECTURES)", out)
        self.assertIn("ringbench: CUDA path ON, cuDNN path OFF", out)
        self.assertNotIn("Manually-specified variables were not used", out)


if __name__ == "__main__":
    unittest.main()
