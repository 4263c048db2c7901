"""Whose kernel was it? The names a worker's compilers recorded (gauntlet.child.provenance) against the profiler's
(gauntlet.judge.process.kernels): on the CPU, the image readers, the name matching, the hooks (with stand-ins for
CuPy and the CuTe DSL, the real Triton) and the verdict; on a GPU, a CuPy file that reaches a library of its own
through ctypes, one that loads a prebuilt cubin, and the same kernel compiled through CuPy (the control)."""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from gauntlet.child import provenance
from gauntlet.judge.process import kernels

ROOT = Path(__file__).resolve().parents[1]


def _elf(symbols: list[tuple[str, int]]) -> bytes:
    """A minimal 64-bit little-endian ELF holding a symbol table: (name, STT_* type) each."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n, _ in symbols)
    syms, pos = [b"\0" * 24], 1
    for name, kind in symbols:
        syms.append(struct.pack("<IBBHQQ", pos, kind, 0x10, 1, 0, 0))
        pos += len(name) + 1
    symtab = b"".join(syms)
    body_at = 64
    str_at, sym_at = body_at, body_at + len(strtab)
    sh_at = sym_at + len(symtab)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, sh_at)
    struct.pack_into("<HH", header, 0x3A, 64, 3)
    sections = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, str_at, len(strtab), 0, 0, 1, 0),
                struct.pack("<IIQQQQIIQQ", 0, 2, 0, 0, sym_at, len(symtab), 1, 1, 8, 24)]
    return bytes(header) + strtab + symtab + b"".join(sections)


@pytest.fixture(autouse=True)
def _fresh_record(monkeypatch):
    monkeypatch.setattr(provenance, "_NAMES", {})


def test_a_cubins_function_symbols_and_ptx_entries_are_recorded_and_nothing_else():
    provenance.record_image(_elf([("ladder7_warptile_a", 2), ("_Z4gemmILi128EEvPKfPfi", 2), ("smem_tile", 1)]))
    provenance.record_image(".version 8.0\n.target sm_90\n.visible .entry wmma_gemm_u(\n.param .u64 a)\n{ ret; }")
    assert provenance.names() == ["ladder7_warptile_a", "_Z4gemmILi128EEvPKfPfi", "wmma_gemm_u"]
    for junk in (b"\x7fELF\x01\x01" + b"\0" * 80, b"\x7fELF\x02\x01" + b"\xff" * 70, b"", 1234, None):
        provenance.record_image(junk)                  # 32-bit, truncated, empty, not an image: nothing, no error
    assert len(provenance.names()) == 3


@pytest.mark.parametrize(("name", "base"), [
    ("ladder7_warptile_a", "ladder7_warptile_a"),
    ("void gemm<128>(float const*, float*, int)", "gemm"),
    ("void ns::inner::gemm<128, true>(float const*)", "gemm"),
    ("void (anonymous namespace)::tile_kernel<float>(float*)", "tile_kernel"),
    ("_Z4gemmILi128EEvPKfPfi", "gemm"),
    ("_ZN2ns5inner4gemmILi128ELb1EEEvPKf", "gemm"),
    ("_ZN12_GLOBAL__N_111tile_kernelIfEEvPf", "tile_kernel"),
    ("_Z11plain_entryPfS_i", "plain_entry"),
])
def test_base_name_reads_demangled_and_mangled_forms_alike(name, base):
    assert kernels.base_name(name) == base


def _gpu_call(*names, compiled=()):
    return {"kernels": [["gauntlet_hold", 1000.0]] + [[n, 100.0] for n in names], "ops": [], "launches": [],
            "marked": True, "compiled": list(compiled)}


def test_only_a_kernel_the_workers_compilers_made_is_the_candidates_own():
    ok = _gpu_call("void gemm<128>(float const*, float*, int)", compiled=["_Z4gemmILi128EEvPKfPfi"])
    assert kernels.call_problems(ok, "cuda", frozenset(), timed=True) == []
    # an unlisted library's kernel (through ctypes) or a prebuilt cubin's: not compiled in the worker
    found = kernels.call_problems(_gpu_call("unlisted_mm_kernel", "own_scale", compiled=["own_scale"]), "cuda",
                                  frozenset(), timed=False)
    assert len(found) == 1 and "no backend compiled" in found[0] and "unlisted_mm_kernel" in found[0]
    # a call whose profile carries no record (an old or forged reply): nothing is the candidate's own
    bare = _gpu_call("ladder7_warptile_a")
    del bare["compiled"]
    assert any("no backend compiled" in f for f in kernels.call_problems(bare, "cuda", frozenset(), timed=False))
    # compiling a library's name does not make the library's kernel the candidate's
    lib = _gpu_call("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", compiled=["nvjet_sm90_tst_256x128_64x4"])
    found = kernels.call_problems(lib, "cuda", frozenset(), timed=False)
    assert any("neither the candidate's own" in f for f in found)


def test_a_cute_kernel_named_after_the_candidates_own_class_is_its_own_even_when_it_looks_like_a_library():
    # The CuTe DSL names a kernel after the Python class it compiled: `class WsGemm` gives `..._WsGemm_object_at_...`,
    # which cuBLAS's sgemm_ pattern matches (this refused an honest kernel on an H100 before the rule).
    name = "kernel_cutlass_kernel_gauntlet_candidate_WsGemm_object_at__CopyAtom_ThrID10_TVLayoutSrc1819201_0"
    assert kernels.LIBRARY_KERNEL.search(name)
    assert kernels.call_problems(_gpu_call(name, compiled=[name]), "cuda", frozenset(), timed=True) == []
    # still only if the worker's CuTe compiler made it, and never with a vendor symbol in it
    assert any("neither the candidate's own" in f
               for f in kernels.call_problems(_gpu_call(name), "cuda", frozenset(), timed=False))
    vendor = "kernel_cutlass_kernel_gauntlet_candidate_nvjet_sm90_tst_256x128_0"
    assert any("neither the candidate's own" in f
               for f in kernels.call_problems(_gpu_call(vendor, compiled=[vendor]), "cuda", frozenset(), timed=False))
    # another module's CuTe kernel with a library-looking name is not excused by the rule
    other = "kernel_cutlass_kernel_cutlass_utils_WsGemm_object_at__0"
    assert any("neither the candidate's own" in f
               for f in kernels.call_problems(_gpu_call(other, compiled=[other]), "cuda", frozenset(), timed=False))


def test_the_cupy_hook_records_every_module_its_compiler_loads(monkeypatch):
    loaded = []

    class Module:                                      # stands in for cupy.cuda.function.Module (a cdef class)
        def load(self, cubin):
            loaded.append(cubin)

    real = types.SimpleNamespace(Module=Module, LinkState="the real LinkState")
    compiler = types.SimpleNamespace(function=real)
    provenance._hook_cupy(compiler)
    provenance._hook_cupy(compiler)                    # idempotent
    image = _elf([("rawkernel_entry", 2)])
    compiler.function.Module().load(image)
    assert loaded == [image] and provenance.names() == ["rawkernel_entry"]
    assert compiler.function.LinkState == "the real LinkState" and isinstance(compiler.function.Module(), Module)
    Module().load(_elf([("loaded_from_a_file", 2)]))   # the class itself, not through the compiler: not recorded
    assert provenance.names() == ["rawkernel_entry"]


def test_the_cute_hook_records_the_cubins_its_executor_loads():
    helpers = types.SimpleNamespace(load_library_data=lambda data: ("library", len(data)))
    provenance._hook_cute(helpers)
    assert helpers.load_library_data(_elf([("kernel_cutlass_gemm_0", 2)]))[0] == "library"
    assert provenance.names() == ["kernel_cutlass_gemm_0"]


def test_the_cute_hook_records_every_function_its_compiler_makes():
    class JitCompiledFunction:                        # stands in for cutlass.base_dsl.jit_executor's
        def __init__(self, kernel_info, artifacts=None):
            self.kernel_info, self.artifacts = kernel_info, artifacts

    class CudaDialectJitCompiledFunction(JitCompiledFunction):
        def __init__(self, *args):
            super().__init__(*args)

    executor = types.SimpleNamespace(JitCompiledFunction=JitCompiledFunction)
    provenance._hook_cute_compiled(executor)
    provenance._hook_cute_compiled(executor)          # idempotent
    CudaDialectJitCompiledFunction({"kernel_cutlass_kernel_gauntlet_candidate_Gemm_0": {}},
                                   types.SimpleNamespace(CUBIN=_elf([("kernel_cutlass_kernel_helper_1", 2)])))
    assert provenance.names() == ["kernel_cutlass_kernel_gauntlet_candidate_Gemm_0", "kernel_cutlass_kernel_helper_1"]


def test_the_record_growing_during_a_call_is_not_tampering_but_other_harness_data_is(monkeypatch):
    from gauntlet.child import state
    snap = state.Snapshot()
    provenance.record_image(_elf([("compiled_in_solve", 2)]))
    assert not [c for c in snap.changes(restore=False) if "harness data" in c]
    monkeypatch.setattr(provenance, "MAX_NAMES", 7)
    assert "harness data gauntlet.child.provenance.MAX_NAMES" in snap.changes(restore=False)


def test_the_hooks_go_in_when_a_compiler_is_first_imported(tmp_path, monkeypatch):
    (tmp_path / "fake_compiler_pkg.py").write_text("def compile(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    monkeypatch.setitem(provenance.HOOKS, "fake_compiler_pkg", seen.append)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    provenance.install()
    provenance.install()                               # once
    assert sum(isinstance(f, provenance._Finder) for f in sys.meta_path) == 1
    import fake_compiler_pkg
    assert seen == [fake_compiler_pkg]
    sys.modules.pop("fake_compiler_pkg", None)


def test_the_triton_hook_records_what_compile_returns():
    cubin = _elf([("matmul_kernel", 2)])
    pkg = types.SimpleNamespace(compile=lambda src, **kw: types.SimpleNamespace(name="matmul_kernel",
                                                                                asm={"cubin": cubin}))
    provenance._hook_triton(pkg)
    provenance._hook_triton(pkg)                       # idempotent
    assert pkg.compile("src", target=None).name == "matmul_kernel"
    assert provenance.names() == ["matmul_kernel"]


def test_tritons_real_compile_is_hooked_where_its_jit_takes_it():
    """The real Triton, imported after install in a fresh interpreter: the `compile` JITFunction binds to
    (`from ..compiler import compile`, jit.py) and the one in triton.compiler.compiler both record."""
    pytest.importorskip("triton")
    code = textwrap.dedent("""
        from gauntlet.child import provenance
        provenance.install()
        import triton.compiler.compiler
        from triton.compiler import compile
        assert compile._gauntlet_recording and triton.compiler.compiler.compile._gauntlet_recording
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# --- on a GPU: the three ways a CuPy file can run a kernel ------------------------------------------------------

_KERNEL = r"""
extern "C" __global__ void unlisted_mm_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m || col >= n) return;
    float acc = 0.f;
    for (int i = 0; i < k; ++i) acc = fmaf(a[(long)row * k + i], b[(long)i * n + col], acc);
    c[(long)row * n + col] = acc;
}
"""
_LAUNCHER = _KERNEL + r"""
extern "C" int unlisted_mm(const float* a, const float* b, float* c, int m, int n, int k, void* stream) {
    dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
    unlisted_mm_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(a, b, c, m, n, k);
    return (int)cudaGetLastError();
}
"""

_CANDIDATE = '''"""Provenance test candidate ({how}): C = A @ B in fp32 by a naive kernel."""
import ctypes
import cupy
import torch

BACKEND = "cupy"
DTYPES = ("float32",)
HOW = {how!r}
_mod = {{}}


def _stream():
    return cupy.cuda.Stream.from_external(_Handle(torch.cuda.current_stream().cuda_stream))


class _Handle:
    def __init__(self, ptr):
        self.ptr = ptr

    def __cuda_stream__(self):
        return (0, self.ptr)


def _kernel():
    if "k" not in _mod:
        if HOW == "compiled":
            _mod["k"] = cupy.RawModule(code={kernel!r}).get_function("unlisted_mm_kernel")
        else:
            _mod["k"] = cupy.RawModule(path={cubin!r}).get_function("unlisted_mm_kernel")
    return _mod["k"]


def solve(a, b):
    m, k = a.shape
    n = b.shape[1]
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty((m, n), device=a.device, dtype=torch.float32)
    if m == 0 or n == 0:
        return c
    if HOW == "library":
        lib = ctypes.CDLL({library!r})
        lib.unlisted_mm.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
        assert lib.unlisted_mm(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k,
                                  torch.cuda.current_stream().cuda_stream) == 0
        return c
    with _stream():
        _kernel()(((n + 15) // 16, (m + 15) // 16), (16, 16),
                  (a.data_ptr(), b.data_ptr(), c.data_ptr(), cupy.int32(m), cupy.int32(n), cupy.int32(k)))
    return c
'''


def _nvcc():
    return shutil.which("nvcc") or next((str(p) for p in Path("/usr/local").glob("cuda*/bin/nvcc")), None)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The kernel built outside any worker: as a shared library with a C launcher, and as a bare cubin."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    pytest.importorskip("cupy", reason="CuPy is not installed")
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("needs nvcc to build the stand-in library")
    work = tmp_path_factory.mktemp("unlisted")
    (work / "lib.cu").write_text(_LAUNCHER)
    (work / "k.cu").write_text(_KERNEL)
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    for cmd in ([nvcc, "-shared", "-Xcompiler", "-fPIC", f"-arch={arch}", "-o", str(work / "libunlisted.so"),
                 str(work / "lib.cu")],
                [nvcc, "-cubin", f"-arch={arch}", "-o", str(work / "k.cubin"), str(work / "k.cu")]):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    return work


@pytest.mark.gpu
@pytest.mark.parametrize(("how", "expected"), [("library", "forbidden_op"), ("cubin", "forbidden_op"),
                                               ("compiled", "pass")])
def test_a_cupy_file_owns_only_what_cupy_compiled_for_it(built, how, expected):
    from gauntlet import discover
    from gauntlet.judge.evaluate import Options, evaluate
    path = built / f"candidate_{how}.py"
    path.write_text(_CANDIDATE.format(how=how, kernel=_KERNEL, cubin=str(built / "k.cubin"),
                                      library=str(built / "libunlisted.so")))
    opts = Options(device="cuda", dtypes=("float32",), examples=2, shrink=False, timing=False, case_timeout_s=120.0)
    record = evaluate(discover.get_problem("gemm"), discover.get_solution("gemm", str(path)), opts).to_json()
    shown = "\n".join(f"[{r['code']}] {r['detail'][:300]}" for r in record["reasons"])
    if expected == "pass":
        assert record["verdict"] == "pass", shown
    else:
        assert record["verdict"] != "pass" and any(
            r["code"] == expected and "no backend compiled" in r["detail"] for r in record["reasons"]), shown
