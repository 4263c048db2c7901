"""Timed outputs handed to the judge in GPU memory the judge owns (CUDA IPC). Pure mechanism, no judgement.

The judge allocates one buffer of `slots` equal slots on the card, shares it with the candidate's worker through a
CUDA IPC handle (torch's own: UntypedStorage._share_cuda_ / _new_shared_cuda, what torch.multiprocessing uses), and
the worker writes each timed call's output, as the values stood when the call's window closed (its snapshot,
gauntlet.gpu.snapshot), into slot k, in logical (row-major) order, at the end of the batch. The judge reads the slots
right after the batch's reply, with the worker stopped, before it sends the worker anything else: no later request
can tell the candidate which output is looked at, and every one is (gauntlet.judge.values.taken).

Why the judge's memory and not the worker's: a snapshot the worker keeps is the candidate's memory, which it can
rewrite whenever it runs again (a SIGCONT handler runs at the judge's next request); the slots are read before the
worker runs again. What the IPC mapping does not stop: the worker can write the slots until the judge reads them
(between its batch and the judge's stop, and GPU work it left queued), which is work the second clock and the quiet
check see, never a choice made after the judge has picked what to check.

A handle is JSON (bytes fields in base64), so it crosses the wire like any request. Both sides must be on the same
card; where the worker cannot open the handle it says so and sends its outputs as reply blobs instead
(gauntlet.child.worker), which the judge copies out of its sealed area on receipt (gauntlet.protocol.recv).
"""
from __future__ import annotations

import base64

import torch

SLOT_ALIGN = 512             # every slot starts on this boundary (the snapshot kernel's 16-byte copies, and more)
_BYTES_FIELDS = (1, 4, 6)    # the handle, the ref-counter file's name and the event handle in _share_cuda_'s tuple


def slot_bytes(nbytes: int) -> int:
    return max(SLOT_ALIGN, -(-int(nbytes) // SLOT_ALIGN) * SLOT_ALIGN)


class Drop:
    """The judge's side: the buffer, its handle, and views of its slots."""

    def __init__(self, slots: int, nbytes: int, device: str = "cuda"):
        self.slots, self.nbytes, self.stride = int(slots), int(nbytes), slot_bytes(nbytes)
        self.buf = torch.zeros(self.slots * self.stride, dtype=torch.uint8, device=device)
        shared = list(self.buf.untyped_storage()._share_cuda_())
        for i in _BYTES_FIELDS:
            shared[i] = None if shared[i] is None else base64.b64encode(bytes(shared[i])).decode()
        torch.cuda.synchronize()     # zeros written before the worker can see the memory
        self.handle = {"ipc": shared, "slots": self.slots, "nbytes": self.nbytes, "stride": self.stride}

    def slot(self, k: int) -> torch.Tensor:
        """Slot k's nbytes as a uint8 tensor sharing the judge's buffer (no copy)."""
        if not 0 <= k < self.slots:
            raise IndexError(f"slot {k} of {self.slots}")
        return self.buf[k * self.stride: k * self.stride + self.nbytes]

    def poison(self) -> None:
        """Every slot overwritten before a batch: a slot the worker leaves unwritten reads as NaN (or -1), never an
        earlier batch's answer."""
        self.buf.fill_(0xFF)
        torch.cuda.synchronize()     # done before the worker, on its own stream, writes its outputs


def attach(handle: dict) -> torch.Tensor:
    """The worker's side: the judge's buffer as a uint8 tensor. Raises on a handle this process cannot open."""
    args = list(handle["ipc"])
    for i in _BYTES_FIELDS:
        args[i] = None if args[i] is None else base64.b64decode(args[i])
    torch.cuda._lazy_init()
    storage = torch.UntypedStorage._new_shared_cuda(*args)
    buf = torch.empty(0, dtype=torch.uint8, device=f"cuda:{args[0]}")
    buf.set_(storage, 0, (storage.nbytes(),), (1,))
    if buf.numel() < int(handle["slots"]) * int(handle["stride"]):
        raise ValueError(f"shared buffer of {buf.numel()} bytes, {handle['slots']} slots of {handle['stride']} asked")
    return buf


def put(buf: torch.Tensor, handle: dict, k: int, snap) -> bool:
    """Write `snap` (a CUDA tensor) into slot k in logical order, on the current stream. False when it cannot go
    there (not a CUDA tensor, or more bytes than a slot: a wrongly shaped or typed output, judged by its
    description alone)."""
    if type(snap) is not torch.Tensor or not snap.is_cuda or not 0 <= k < int(handle["slots"]):  # noqa: E721
        return False
    n = snap.numel() * snap.element_size()
    if n > int(handle["nbytes"]) or snap.layout != torch.strided:
        return False
    if n:
        start = k * int(handle["stride"])
        buf[start:start + n].view(snap.dtype).view(snap.shape).copy_(snap)
    return True
