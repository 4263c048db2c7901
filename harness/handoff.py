"""Timed outputs handed to the judge through CUDA IPC. Pure mechanism, no judgement.

The worker allocates one buffer of `slots` equal slots on the card (cudaMalloc, outside torch's caching allocator,
so the allocation is the buffer) and writes each timed call's output, as the values stood when the call's window
closed (its snapshot, gauntlet.gpu.snapshot), into slot k, in logical (row-major) order, at the end of the batch.
The judge maps the buffer through its IPC handle (cudaIpcOpenMemHandle) and reads every slot right after the
batch's reply, with the worker stopped, before it sends the worker anything else; then it poisons the slots, so a
slot the worker leaves unwritten next time reads NaN (or -1), never an earlier answer. No later request can tell the
candidate which output is looked at, and every one is (gauntlet.judge.values.taken).

Why the worker exports and the judge imports, not the other way round: the worker runs under Landlock, which
forbids it ptrace-class access to processes outside its domain, and opening another process's IPC handle needs that
(a confined worker's cudaIpcOpenMemHandle of the judge's buffer fails with cudaErrorMapBufferObjectFailed); the
judge, the worker's parent and outside its domain, may open the worker's.

What the mapping does not stop: the worker can write the slots until the judge reads them (between its batch and
the judge's stop, and GPU work it left queued); that is work inside the batch's wall time, which the second clock
counts, never a choice made after the judge has picked what to check. A worker that frees the buffer under the
judge's mapping is undefined behaviour by CUDA's documentation; the judge only ever reads it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import sys

import torch

SLOT_ALIGN = 512             # every slot starts on this boundary (the snapshot kernel's 16-byte copies, and more)
HANDLE_BYTES = 64            # sizeof(cudaIpcMemHandle_t)
_LAZY_PEER_ACCESS = 1        # cudaIpcMemLazyEnablePeerAccess, the only flag cudaIpcOpenMemHandle takes


class HandoffError(RuntimeError):
    """The buffer could not be made or mapped (no CUDA runtime to call, or the driver refused)."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * HANDLE_BYTES)]


@functools.lru_cache(maxsize=1)
def _cudart():
    """The CUDA runtime torch itself loaded (the one whose primary context both sides already use)."""
    candidates = []
    for root in sys.path:
        candidates += sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libcudart.so*")))
    found = ctypes.util.find_library("cudart")
    candidates += ([found] if found else []) + ["/usr/local/cuda/lib64/libcudart.so"]
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise HandoffError("no CUDA runtime library (libcudart) to call")


def _check(code: int, what: str) -> None:
    if code != 0:
        lib = _cudart()
        lib.cudaGetErrorName.restype = ctypes.c_char_p
        raise HandoffError(f"{what} failed: {lib.cudaGetErrorName(code).decode()} ({code})")


def slot_bytes(nbytes: int) -> int:
    return max(SLOT_ALIGN, -(-int(nbytes) // SLOT_ALIGN) * SLOT_ALIGN)


class _Raw:
    """A device pointer seen by torch.as_tensor as a uint8 array (no copy)."""

    def __init__(self, ptr: int, n: int):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 2}


def _tensor(ptr: int, n: int, device: int) -> torch.Tensor:
    return torch.as_tensor(_Raw(ptr, n), device=f"cuda:{device}")


class Drop:
    """The worker's side: the buffer it owns, its handle (JSON: hex) and its slots."""

    def __init__(self, slots: int, nbytes: int):
        self.slots, self.nbytes, self.stride = int(slots), int(nbytes), slot_bytes(nbytes)
        lib, ptr, handle = _cudart(), ctypes.c_void_p(), _Handle()
        torch.cuda.synchronize()
        _check(lib.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(self.slots * self.stride)), "cudaMalloc")
        self.ptr = ptr.value
        try:
            _check(lib.cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(self.ptr)), "cudaIpcGetMemHandle")
            _check(lib.cudaMemset(ctypes.c_void_p(self.ptr), 0xFF, ctypes.c_size_t(self.slots * self.stride)),
                   "cudaMemset")
        except HandoffError:
            self.close()
            raise
        device = torch.cuda.current_device()
        self.buf = _tensor(self.ptr, self.slots * self.stride, device)
        self.handle = {"ipc": bytes(handle).hex(), "device": device,
                       "slots": self.slots, "nbytes": self.nbytes, "stride": self.stride}

    def put(self, k: int, snap) -> bool:
        """Write `snap` (a CUDA tensor) into slot k in logical order, on the current stream. False when it cannot
        go there (not a CUDA tensor, or more bytes than a slot: a wrong dtype or shape, judged by its description
        alone)."""
        if type(snap) is not torch.Tensor or not snap.is_cuda or snap.layout != torch.strided:  # noqa: E721
            return False
        n = snap.numel() * snap.element_size()
        if not 0 <= k < self.slots or n > self.nbytes:
            return False
        if n:
            self.buf[k * self.stride: k * self.stride + n].view(snap.dtype).view(snap.shape).copy_(snap)
        return True

    def close(self) -> None:
        if getattr(self, "ptr", None):
            self.buf = None
            torch.cuda.synchronize()
            _cudart().cudaFree(ctypes.c_void_p(self.ptr))
            self.ptr = None


class View:
    """The judge's side: the worker's buffer mapped here, read-only by use."""

    def __init__(self, handle: dict, slots: int, nbytes: int):
        """Maps `handle`, after checking it describes `slots` slots of at least `nbytes` (what the judge asked)."""
        if not (isinstance(handle, dict) and isinstance(handle.get("ipc"), str) and len(handle["ipc"]) == 2 * 64
                and all(type(handle.get(k)) is int for k in ("device", "slots", "nbytes", "stride"))):
            raise ValueError("the timing buffer's handle is malformed")
        if handle["slots"] != slots or handle["nbytes"] != nbytes or handle["stride"] != slot_bytes(nbytes) \
                or handle["device"] != torch.cuda.current_device():
            raise ValueError(f"the timing buffer's handle describes {handle['slots']} slots of {handle['nbytes']} "
                             f"bytes on device {handle['device']}; {slots} of {nbytes} were asked for")
        raw = _Handle.from_buffer_copy(bytes.fromhex(handle["ipc"]))
        ptr, lib = ctypes.c_void_p(), _cudart()
        lib.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), _Handle, ctypes.c_uint]
        _check(lib.cudaIpcOpenMemHandle(ctypes.byref(ptr), raw, _LAZY_PEER_ACCESS), "cudaIpcOpenMemHandle")
        self.ptr, self.handle = ptr.value, dict(handle)
        self.slots, self.nbytes, self.stride = slots, nbytes, handle["stride"]
        self.buf = _tensor(self.ptr, slots * self.stride, handle["device"])

    def slot(self, k: int) -> torch.Tensor:
        """Slot k's nbytes as a uint8 tensor on the mapping (no copy)."""
        if not 0 <= k < self.slots:
            raise IndexError(f"slot {k} of {self.slots}")
        return self.buf[k * self.stride: k * self.stride + self.nbytes]

    def poison(self) -> None:
        """Every slot overwritten once read, and the writes done before the worker runs again."""
        self.buf.fill_(0xFF)
        torch.cuda.synchronize()

    def close(self) -> None:
        if getattr(self, "ptr", None):
            self.buf = None
            torch.cuda.synchronize()
            _cudart().cudaIpcCloseMemHandle(ctypes.c_void_p(self.ptr))
            self.ptr = None
