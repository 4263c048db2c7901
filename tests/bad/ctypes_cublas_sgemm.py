"""Known-bad (GPU): a Triton-backend file that calls cuBLAS directly through ctypes (cublasSgemm_v2 on torch's own
cuBLAS handle, torch.cuda.current_blas_handle()), so no aten op is dispatched and the aten-op guard sees nothing.
A Triton kernel is defined but never launched. The planned profiler check of kernel names (cuBLAS / CUTLASS /
nvjet / ... kernels launched by a non-torch backend) catches it. Expected: forbidden_op."""
import ctypes
import ctypes.util
import glob
import os

import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cuda"
DTYPES = ("float32",)


@triton.jit
def _decoy(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _libcublas():
    names = ["libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"]
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    site = os.path.dirname(os.path.dirname(torch.__file__))
    candidates = names + glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libcublas.so*")) \
        + glob.glob(os.path.join(site, "nvidia", "cublas", "lib", "libcublas.so*")) \
        + glob.glob(os.path.join(torch_lib, "libcublas*.so*"))
    found = ctypes.util.find_library("cublas")
    if found:
        candidates.append(found)
    for name in candidates:
        try:
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)   # torch already loaded it: same library, same handle
        except OSError:
            continue
    raise OSError("libcublas not found")


_lib = None


def solve(a, b):
    global _lib
    if _lib is None:
        _lib = _libcublas()
        _lib.cublasSgemm_v2.restype = ctypes.c_int
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=torch.float32, device=a.device)
    handle = ctypes.c_void_p(torch.cuda.current_blas_handle())
    _lib.cublasSetStream_v2(handle, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    # Row-major C = A @ B is column-major C^T = B^T @ A^T: pass B first, no transposes.
    status = _lib.cublasSgemm_v2(handle, 0, 0, N, M, K, ctypes.byref(one),
                                 ctypes.c_void_p(b.data_ptr()), N, ctypes.c_void_p(a.data_ptr()), K,
                                 ctypes.byref(zero), ctypes.c_void_p(c.data_ptr()), N)
    if status != 0:
        raise RuntimeError(f"cublasSgemm_v2 failed with status {status}")
    return c
