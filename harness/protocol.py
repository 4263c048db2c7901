"""The wire between the trusted parent and the candidate's child process.

A message is a JSON header plus raw byte blobs, framed by lengths. Never pickle: unpickling bytes that candidate
code could have written would run the candidate's code in the trusted process. The parent treats everything that
arrives as data (outputs to judge, timings to sanity-check), never as a verdict.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import mmap
import os
import select
import struct
import time

_LEN = struct.Struct("<Q")
MAX_HEADER = 16 << 20
MAX_BLOB = 8 << 30
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class ChannelClosed(EOFError):
    """The other side closed the pipe (in the child's case: it died)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, header: dict, blobs: list[bytes] = ()) -> None:
    head = json.dumps(dict(header, nblobs=len(blobs))).encode()
    _write_all(fd, _LEN.pack(len(head)) + head)
    for blob in blobs:
        _write_all(fd, _LEN.pack(len(blob)))
        _write_all(fd, blob)


def widen_pipe(fd: int) -> int:
    """Grow a pipe's buffer from the default 64 KiB to what an unprivileged process may ask for (pipe-max-size,
    1 MiB by default): a GB-sized output (bmm's K = 1 cases) then crosses in 16x fewer wake-ups of each side.
    Returns the size in force; where the kernel refuses, the pipe stays as it was."""
    want = _pipe_max()
    try:
        return fcntl.fcntl(fd, F_SETPIPE_SZ, want) if want else 0
    except OSError:
        return 0


@functools.lru_cache(maxsize=1)
def _pipe_max() -> int:
    """The pipe size to ask for (read once per process: every worker start widens a pipe)."""
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            return min(int(f.read()), 1 << 20)
    except (OSError, ValueError):
        return 0


def _buffer(n: int):
    """Room for n bytes that costs memory only as they arrive: a large blob goes into an anonymous mapping, whose
    pages the kernel commits when written, so a length that the sender announces and never sends (it is the
    candidate's to write, up to the reply's cap) does not take the judge's memory up front."""
    if n <= 1 << 20:
        return bytearray(n)
    try:
        return mmap.mmap(-1, n)
    except (OSError, ValueError, OverflowError) as exc:
        raise ValueError(f"blob of {n} bytes: no room for it here ({exc})") from None


def _read_exact(fd: int, n: int, deadline: float | None):
    """Exactly n bytes, read straight into one writable buffer (no chunks joined, no copy when it becomes a
    tensor)."""
    buf = _buffer(n)
    view, got = memoryview(buf), 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChannelTimeout()
        k = os.readv(fd, [view[got:got + min(n - got, 1 << 24)]])
        if not k:
            raise ChannelClosed()
        got += k
    return buf


def recv(fd: int, timeout: float | None = None, max_blob: int = MAX_BLOB) -> tuple[dict, list[bytes]]:
    """One message. `max_blob` caps each blob (the parent passes the expected output's size): a larger one is a
    ValueError before a byte of it is read."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (hlen,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
    if hlen > MAX_HEADER:
        raise ValueError(f"message header of {hlen} bytes is over the {MAX_HEADER} limit")
    raw = _read_exact(fd, hlen, deadline)
    header = json.loads(raw if isinstance(raw, bytearray) else raw[:])     # json reads bytes, not a mapping
    if not isinstance(header, dict):
        raise ValueError("message header is not a JSON object")
    blobs = []
    nblobs = header.get("nblobs", 0)
    if not isinstance(nblobs, int) or not 0 <= nblobs <= 8:
        raise ValueError(f"message announces {nblobs!r} blobs (at most 8)")
    for _ in range(nblobs):
        (blen,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
        if blen > min(max_blob, MAX_BLOB):
            raise ValueError(f"blob of {blen} bytes is over the {min(max_blob, MAX_BLOB)} bytes expected")
        blobs.append(_read_exact(fd, blen, deadline))
    return header, blobs


# --- tensors as data -------------------------------------------------------------------------------------------

def tensor_to_wire(t) -> tuple[dict, bytes]:
    """Metadata and the contiguous bytes of a tensor, copied to the host."""
    import torch
    host = t.detach().to("cpu", copy=True).contiguous()      # a copy even on the CPU: the blob outlives the call
    raw = host.reshape(-1).view(torch.uint8) if host.numel() else torch.empty(0, dtype=torch.uint8)
    # The host copy's own memory, not a second copy of it (send writes from any buffer).
    return {"dtype": str(host.dtype).removeprefix("torch."), "shape": list(host.shape)}, memoryview(raw.numpy())


def tensor_from_wire(meta: dict, blob: bytes):
    import torch
    dtype = getattr(torch, meta["dtype"], None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype on the wire: {meta['dtype']!r}")
    shape = [int(s) for s in meta["shape"]]
    if memoryview(blob).readonly:
        blob = bytearray(blob)            # torch.frombuffer shares the memory: it must be writable
    flat = torch.frombuffer(blob, dtype=torch.uint8) if blob else torch.empty(0, dtype=torch.uint8)
    expected = dtype.itemsize * (int(torch.tensor(shape).prod()) if shape else 1)
    if flat.numel() != expected:
        raise ValueError(f"tensor blob holds {flat.numel()} bytes, its shape {shape} of {dtype} needs {expected}")
    return flat.view(dtype).reshape(shape)


def digest(x) -> str:
    """A content hash of an input, to compare with the parent's pristine copy after the call."""
    import torch
    if not isinstance(x, torch.Tensor):
        return hashlib.sha256(repr(x).encode()).hexdigest()
    host = x.detach().to("cpu").contiguous()
    raw = host.reshape(-1).view(torch.uint8).numpy().tobytes() if host.numel() else b""
    meta = f"{host.dtype}|{tuple(x.shape)}|{tuple(x.stride())}|".encode()
    return hashlib.sha256(meta + raw).hexdigest()
