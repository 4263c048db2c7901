"""Known-bad (GPU): reserves a persisting-L2 carve-out (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)) and
sets an access-policy window on the current stream covering input B with hitProp = persisting, through ctypes to
libcudart. Lines marked persisting survive the harness's L2 flush (a plain write over a buffer twice the L2 size
evicts only normal lines), so B stays on chip across timed calls: a cold-cache benchmark becomes a warm one. The
answer is computed honestly by torch.matmul. The harness should check after each call that the persisting-L2 limit
is 0 and that the current stream has no access-policy window (or reset both itself before timing).
Expected: tampering.

Seen on the H200 VM of 2026-11-22: the default limit there is already 11.25 MiB (the harness judges changes
against the value before the candidate ran), and this file's cudaDeviceSetLimit call failed, so it raised instead
of cheating: crash. Both outcomes reject it; where the driver allows the carve-out the expected code is tampering."""
import ctypes
import glob
import os

import torch

BACKEND = "torch"
EXPECTED = "tampering"
ALSO_ACCEPTED = ("crash",)
DEVICE = "cuda"
DTYPES = ("bfloat16",)

cudaLimitPersistingL2CacheSize = 0x06
cudaStreamAttributeAccessPolicyWindow = 1
cudaAccessPropertyStreaming, cudaAccessPropertyPersisting = 1, 2


class AccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class StreamAttrValue(ctypes.Union):        # cudaStreamAttrValue == cudaLaunchAttributeValue (64 bytes)
    _fields_ = [("accessPolicyWindow", AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


def _libcudart():
    site = os.path.dirname(os.path.dirname(torch.__file__))
    names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    names += glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libcudart.so*"))
    names += glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "lib", "libcudart.so*"))
    names += glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libcudart*.so*"))
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("libcudart not found")


_rt = None


def solve(a, b):
    global _rt
    if _rt is None:
        _rt = _libcudart()
        props = torch.cuda.get_device_properties(a.device)
        carve = int(getattr(props, "L2_cache_size", 50 << 20) * 3 // 4)
        err = _rt.cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, ctypes.c_size_t(carve))
        if err:
            raise RuntimeError(f"cudaDeviceSetLimit failed: {err}")
    value = StreamAttrValue()
    value.accessPolicyWindow.base_ptr = b.data_ptr()
    value.accessPolicyWindow.num_bytes = min(b.numel() * b.element_size(), 64 << 20)
    value.accessPolicyWindow.hitRatio = 1.0
    value.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting
    value.accessPolicyWindow.missProp = cudaAccessPropertyStreaming
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    _rt.cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, ctypes.byref(value))  # best effort
    return torch.matmul(a, b)
