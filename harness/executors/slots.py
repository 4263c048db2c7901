"""Which GPU a judging slot gets: the one rule shared by `gauntlet run/eval-many --gpus` (gauntlet.executors.
local) and the pytest plugin's xdist pinning (gauntlet.plugin.pin_xdist_worker).

A slot is one judge process that judges one candidate at a time; slot i is given one device of those this process
may see (CUDA_VISIBLE_DEVICES when it is set, else all of them), round-robin, and sees only that one: its
CUDA_VISIBLE_DEVICES names it before anything in the slot starts CUDA, and the confined workers the slot starts
inherit it (gauntlet.judge.process.isolate copies the judge's environment). Nothing here imports torch or starts CUDA.

On a machine without a GPU, slots are logical: `--gpus N` gives N slots named "0" .. "N-1" (the CPU judges them;
CUDA_VISIBLE_DEVICES is set all the same, so a test sees what a GPU host would), and `--gpus all` needs
GAUNTLET_LOGICAL_GPUS=N to say how many there are.
"""
from __future__ import annotations

import os

from ..discover import UsageError

LOGICAL_ENV = "GAUNTLET_LOGICAL_GPUS"


def visible_devices(environ=os.environ, gpu_count=lambda: 0) -> list[str]:
    """The devices this process may hand out, as CUDA_VISIBLE_DEVICES entries: its own CUDA_VISIBLE_DEVICES when
    set (an empty value hides every GPU), else 0 .. gpu_count()-1."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(gpu_count())]


def slot_device(slot: int, devices: list[str]) -> str:
    """Slot `slot`'s device, round-robin over `devices` (more slots than devices share them)."""
    if not devices:
        raise UsageError("no devices to hand out")
    return devices[slot % len(devices)]


def logical_count(environ=os.environ) -> int | None:
    """GAUNTLET_LOGICAL_GPUS as a positive count; None when unset. ValueError (the user's) when malformed."""
    text = environ.get(LOGICAL_ENV)
    if text is None or not text.strip():
        return None
    return _positive(text, f"{LOGICAL_ENV} must be a positive number of logical GPUs")


def slot_devices(spec: str, device: str, environ=os.environ, cuda_count=None) -> list[str]:
    """The device of each slot for `--gpus SPEC` (a positive count or `all`) on `device` (cpu | cuda).

    cuda: `all` is every device this process sees (`cuda_count()`, torch.cuda.device_count() by default, which
    honours CUDA_VISIBLE_DEVICES); N takes the first N of them and may not exceed them. cpu: N logical slots,
    "0" .. "N-1"; `all` is GAUNTLET_LOGICAL_GPUS of them, and an error without it (a CPU has no GPUs to count).
    ValueError names what was wrong; the CLI reports it as the user's error."""
    if device == "cuda":
        if cuda_count is None:
            import torch
            cuda_count = torch.cuda.device_count
        devices = visible_devices(environ, cuda_count)
        devices = devices[:cuda_count()] if devices else devices
        if not devices:
            raise UsageError("--gpus: no CUDA device is visible (CUDA_VISIBLE_DEVICES hides them all?)")
        if spec == "all":
            return devices
        n = _count(spec)
        if n > len(devices):
            raise UsageError(f"--gpus {n}: only {len(devices)} GPU(s) visible ({', '.join(devices)})")
        return devices[:n]
    if spec == "all":
        n = logical_count(environ)
        if n is None:
            raise UsageError(f"--gpus all on the CPU: there are no GPUs to count; give a number (--gpus 2: two "
                             f"logical slots) or set {LOGICAL_ENV}=N")
        return [str(i) for i in range(n)]
    return [str(i) for i in range(_count(spec))]


def _count(spec: str) -> int:
    return _positive(spec, "--gpus takes a positive number or 'all'")


def _positive(text: str, what: str) -> int:
    """`text` as a positive integer; else ValueError: `what`, and what was given."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"{what}, got {text!r}")
    return n
