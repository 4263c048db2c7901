"""Known-bad (GPU): a CuPy-backend file that calls cupy.matmul, i.e. cuBLAS through CuPy, instead of a kernel of its
own (it compiles a RawKernel it never launches, as decoy). CuPy never goes through torch's dispatcher, so the aten-op
guard is blind to it; the planned profiler check of kernel names (cuBLAS / CUTLASS / nvjet / cuDNN / flash kernels
launched by a non-torch backend) catches it. Expected: forbidden_op."""
import cupy as cp
import torch

BACKEND = "cupy"
EXPECTED = "forbidden_op"
DEVICE = "cuda"
DTYPES = ("float16",)

_DECOY = cp.RawKernel(r'''
extern "C" __global__ void decoy(float* x) { x[threadIdx.x] += 0.0f; }
''', "decoy")


def solve(a, b):
    c = cp.matmul(cp.asarray(a), cp.asarray(b))        # cuBLAS (cublasGemmEx) on torch's current device
    return torch.as_tensor(c, device=a.device).clone()
