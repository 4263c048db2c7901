"""Which card this process uses and what it holds, from the NVIDIA driver's own libraries through ctypes: no torch
import (the judge reads this before it has imported torch, gauntlet.judge.process.watchdog) and no package a
candidate could patch. Shared by the judge and the worker.
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys


def judges_per_gpu() -> int:
    """GAUNTLET_JUDGES_PER_GPU: how many judges share this GPU (default 1). ValueError when it is not a positive
    integer. Read by the judge (memory share: gauntlet.judge.values.memory) and by the worker at start-up (how long a
    time-sliced sync may take: gauntlet.child.worker)."""
    raw = os.environ.get("GAUNTLET_JUDGES_PER_GPU", "1")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"GAUNTLET_JUDGES_PER_GPU must be a positive integer, got {raw!r}")
    return value


# GPU memory per process, as the driver accounts it (gauntlet.judge.process.watchdog bounds a worker's by it).
class _ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gpu_instance", ctypes.c_uint),
                ("compute_instance", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class CardMemory:
    """GPU memory per process on one card, from NVML (libnvidia-ml, the driver's; through ctypes, so no package is
    needed). `open(uuid)` is None where it cannot be read."""
    NOT_AVAILABLE = (1 << 64) - 1

    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle

    @classmethod
    def current(cls) -> "CardMemory | None":
        """The card torch's current device is, or None (no CUDA, no NVML). Where this process has not started
        CUDA through torch, device 0 of those visible (torch's current device until something sets another),
        asked of the driver directly: no torch import (seconds of the judge's start-up, on its critical path: the
        watchdog needs this card before the workers are let go; docs/benchmarks.md, *One eval*)."""
        try:
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_initialized():
                return cls.open(str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid))
            return cls.open(_first_visible_uuid())
        except Exception:  # noqa: BLE001 - no readable card: no GPU bound (recorded as such)
            return None

    @classmethod
    @functools.lru_cache(maxsize=None)
    def open(cls, uuid: str | None) -> "CardMemory | None":
        if not uuid:
            return None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return None
            handle = ctypes.c_void_p()
            name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) != 0:
                return None
            watch = cls(lib, handle)
            return watch if watch.used_by() is not None else None
        except (OSError, AttributeError):
            return None

    def total(self) -> int:
        mem = _Memory()
        return mem.total if self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(mem)) == 0 else 0

    def used_by(self) -> dict[int, int] | None:
        """{pid: bytes} of the compute processes on the card (a figure NVML cannot give counts 0); None on error."""
        count = ctypes.c_uint(64)
        for _ in range(3):
            infos = (_ProcessInfo * count.value)()
            want = ctypes.c_uint(count.value)
            rc = self.lib.nvmlDeviceGetComputeRunningProcesses_v3(self.handle, ctypes.byref(want), infos)
            if rc == 0:
                return {i.pid: (0 if i.used == self.NOT_AVAILABLE else int(i.used)) for i in infos[:want.value]}
            if rc != 7:                      # NVML_ERROR_INSUFFICIENT_SIZE: `want` says how many; anything else fails
                return None
            count = ctypes.c_uint(want.value + 16)
        return None

    def share_bytes(self, judges: int) -> int:
        """One worker's share: the card's memory over the judges sharing it."""
        return self.total() // max(1, judges)


def _first_visible_uuid() -> str | None:
    """The UUID of CUDA device 0 (of those CUDA_VISIBLE_DEVICES leaves visible), as torch prints it, from libcuda
    (cuInit, cuDeviceGet, cuDeviceGetUuid_v2); None where the driver cannot say."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    dev, raw = ctypes.c_int(), (ctypes.c_ubyte * 16)()
    if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return None
    get = getattr(lib, "cuDeviceGetUuid_v2", None) or lib.cuDeviceGetUuid
    if get(ctypes.byref(raw), dev) != 0:
        return None
    h = bytes(raw).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
