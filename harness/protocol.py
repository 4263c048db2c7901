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
import sys
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


def send(fd: int, header: dict, blobs: list[bytes] = (), area: Area | None = None) -> None:
    """One message. With an `area` (the worker's side of the judge's shared blob area), each blob of AREA_MIN bytes
    or more that still fits is written there instead of into the pipe, one after another from the area's start, and
    the header's `at` says where ([offset, length], or null for a blob that crossed the pipe)."""
    at, offset = [], 0
    for blob in blobs:
        n = memoryview(blob).nbytes
        if area is not None and n >= AREA_MIN and offset + n <= area.size:
            area.put(offset, blob)
            at.append([offset, n])
            offset += n
        else:
            at.append(None)
    extra = {"at": at} if any(x is not None for x in at) else {}
    head = json.dumps(dict(header, nblobs=len(blobs), **extra)).encode()
    _write_all(fd, _LEN.pack(len(head)) + head)
    for blob, where in zip(blobs, at):
        if where is None:
            _write_all(fd, _LEN.pack(memoryview(blob).nbytes))
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


PAGE_LOCKED_MAX = 1 << 30     # the largest blob taken into page-locked memory (_page_locked_buffer)


def _page_locked_buffer(n: int):
    """Writable room for a blob in page-locked memory from torch's caching host allocator, where this process has
    CUDA running (the judge on a GPU), or None. Fresh pageable memory faults in every page of a large output, and a
    copy from it to the GPU is staged; a page-locked block used before costs neither (docs/benchmarks.md, "Figures
    moved from docstrings"). Blobs over PAGE_LOCKED_MAX stay pageable: the cache keeps what it pins."""
    torch = sys.modules.get("torch")
    if torch is None or not AREA_MIN <= n <= PAGE_LOCKED_MAX or not torch.cuda.is_initialized():
        return None
    host = _page_locked((n,), torch.uint8)
    return None if host is None else memoryview(host.numpy())   # the array keeps the tensor, and its block, alive


def _onto_device(mapping, offset: int, n: int, device: str | None):
    """The blob copied from the area straight onto a CUDA `device`, as a uint8 tensor there (one copy, which the driver
    stages itself), or None (no CUDA device asked for, none running, or a small blob). For a large spot-checked output
    this skips pinning a new host block per output size, which is slow, and the copy into it. The copy is taken before
    anything reads it, as for a host blob: bytes the worker writes there later change nothing. The judge's mapping of
    the area is read-only: torch warns that the buffer is not writable, and nothing writes through the view, which goes
    with this call."""
    torch = sys.modules.get("torch")
    if device is None or not str(device).startswith("cuda") or torch is None or n < AREA_MIN \
            or not torch.cuda.is_initialized():
        return None
    return _area_view(mapping, offset, n).to(device)


def _area_view(mapping, offset: int, n: int):
    """n bytes of the area from `offset`, as a uint8 tensor sharing its memory (no copy)."""
    import warnings

    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(mapping, dtype=torch.uint8, count=n, offset=offset)


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


def recv(fd: int, timeout: float | None = None, max_blob: int = MAX_BLOB,
         area: Area | None = None, device: str | None = None) -> tuple[dict, list[bytes]]:
    """One message. `max_blob` caps each blob (the parent passes the expected output's size): a larger one is a
    ValueError before a byte of it is read. A blob the header places in `area` (the judge's side: send) is copied
    out of it at once, so the reply's blobs are the judge's own whatever the sender writes there next. With a CUDA
    `device` (a spot-checked timed output, judged on the GPU), such a blob is copied from the area straight to the
    device and arrives as a uint8 tensor there (Area.take)."""
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
    at = header.pop("at", None)
    if at is not None and not (isinstance(at, list) and len(at) == nblobs):
        raise ValueError(f"message's 'at' is not a list of {nblobs} places")
    cap = min(max_blob, MAX_BLOB)
    for i in range(nblobs):
        where = at[i] if at is not None else None
        if where is not None:
            blobs.append(_from_area(area, where, cap, device))
            continue
        (blen,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
        if blen > cap:
            raise ValueError(f"blob of {blen} bytes is over the {cap} bytes expected")
        blobs.append(_read_exact(fd, blen, deadline))
    return header, blobs


def _from_area(area: Area | None, where, cap: int, device: str | None = None):
    if area is None:
        raise ValueError("message places a blob in a shared area this channel does not have")
    if not (isinstance(where, list) and len(where) == 2 and all(type(x) is int for x in where)):
        raise ValueError(f"blob place {where!r} is not [offset, length]")
    offset, n = where
    if n > cap:
        raise ValueError(f"blob of {n} bytes is over the {cap} bytes expected")
    if offset < 0 or n < 0 or offset + n > area.size:
        raise ValueError(f"blob place {where!r} is outside the {area.size}-byte area")
    return area.take(offset, n, device)


# --- the shared blob area ----------------------------------------------------------------------------------------

AREA_MIN = 1 << 20          # blobs this large or larger go through the area (a smaller one is cheap in the pipe)
AREA_SIZE = MAX_BLOB        # address space only: pages are committed as the worker writes them


class Area:
    """A file in shared memory (memfd) that the judge creates, sizes and seals before the worker starts, and the
    worker inherits: large blobs (outputs of correctness calls, spot-checked timed outputs) go through it instead of
    the pipe. A pipe moves a large output a megabyte at a time with a context switch for each; written here and
    copied out it costs two memory copies.

    Why it is safe with candidate code in the worker: the file's size is sealed (F_SEAL_SHRINK, F_SEAL_GROW, then
    F_SEAL_SEAL, all before the worker exists), so nothing the worker does can make the judge's read of it fault
    (a truncated shared mapping raises SIGBUS); the judge maps it read-only and copies each blob out before judging
    it (recv), so the worker changing the bytes later changes nothing, and changing them during the copy only
    changes which bytes the candidate sent, which it chooses anyway. Holes it punches read as zeros. Each worker
    has its own area (the baseline worker's is never passed to the candidate's), closed with the worker."""

    def __init__(self, fd: int, size: int, writable: bool):
        self.fd, self.size = fd, size
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        self.map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=prot) if size else None

    @classmethod
    def create(cls, size: int = AREA_SIZE) -> Area | None:
        """The judge's side: a new sealed area, or None where this kernel or Python has no sealable memfd (the pipe
        then carries everything, as before)."""
        names = ("F_ADD_SEALS", "F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_SEAL")
        seals = [getattr(fcntl, name, None) for name in names]
        if not hasattr(os, "memfd_create") or None in seals:
            return None
        add, shrink, grow, seal = seals
        try:
            fd = os.memfd_create("gauntlet-blobs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except OSError:
            return None
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, add, shrink | grow | seal)
            return cls(fd, size, writable=False)
        except (OSError, ValueError, OverflowError):
            os.close(fd)
            return None

    @classmethod
    def attach(cls, fd: int) -> Area:
        """The worker's side: the inherited area, mapped for writing."""
        return cls(fd, os.fstat(fd).st_size, writable=True)

    def put(self, offset: int, blob) -> None:
        with memoryview(blob) as view, view.cast("B") as raw, memoryview(self.map) as area:
            area[offset:offset + raw.nbytes] = raw

    def take(self, offset: int, n: int, device: str | None = None):
        on = _onto_device(self.map, offset, n, device)
        if on is not None:
            return on
        buf = _page_locked_buffer(n) or _buffer(n)
        with memoryview(buf) as dst, memoryview(self.map) as area:
            dst[:n] = area[offset:offset + n]
        return buf

    def close(self) -> None:
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:       # a view of it still alive somewhere: the mapping goes with the process
                pass
            self.map = None
        try:
            os.close(self.fd)
        except OSError:
            pass


# --- tensors as data -------------------------------------------------------------------------------------------

def tensor_to_wire(t) -> tuple[dict, bytes]:
    """Metadata and the contiguous bytes of a tensor, copied to the host. A GPU tensor lands in page-locked memory
    from torch's caching host allocator: a freed block is used again by the next reply, so a large output does
    not first fault in fresh pages, which costs far more than the copy itself (spots of timed calls and
    correctness outputs cross this way every call)."""
    import torch
    host = _page_locked_copy(t) if t.is_cuda else None
    if host is None:
        host = t.detach().to("cpu", copy=True).contiguous()  # a copy even on the CPU: the blob outlives the call
    raw = host.reshape(-1).view(torch.uint8) if host.numel() else torch.empty(0, dtype=torch.uint8)
    # The host copy's own memory, not a second copy of it (send writes from any buffer).
    return {"dtype": str(host.dtype).removeprefix("torch."), "shape": list(host.shape)}, memoryview(raw.numpy())


def _page_locked_copy(t):
    """`t` copied into a page-locked host tensor (synchronously), or None where page-locked memory is refused."""
    host = _page_locked(t.shape, t.dtype)
    if host is not None:
        host.copy_(t.detach())
    return host


def _page_locked(shape, dtype):
    """An empty page-locked host tensor from torch's caching host allocator, or None where it is refused."""
    import torch
    try:
        return torch.empty(shape, dtype=dtype, pin_memory=True)
    except RuntimeError:
        return None


def tensor_from_wire(meta: dict, blob: bytes):
    import torch
    dtype = getattr(torch, meta["dtype"], None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype on the wire: {meta['dtype']!r}")
    shape = [int(s) for s in meta["shape"]]
    if isinstance(blob, torch.Tensor):    # taken from the area onto the judge's GPU (Area.take)
        flat = blob.reshape(-1).view(torch.uint8)
    else:
        if memoryview(blob).readonly:
            blob = bytearray(blob)        # torch.frombuffer shares the memory: it must be writable
        flat = torch.frombuffer(blob, dtype=torch.uint8) if blob else torch.empty(0, dtype=torch.uint8)
    expected = dtype.itemsize * (int(torch.tensor(shape).prod()) if shape else 1)
    if flat.numel() != expected:
        raise ValueError(f"tensor blob holds {flat.numel()} bytes, its shape {shape} of {dtype} needs {expected}")
    return flat.view(dtype).reshape(shape)


def digest(x) -> str:
    """A content hash of an input, to compare with the parent's pristine copy after the call (both sides compute it
    the same way: on the GPU for a CUDA tensor, sha256 of its bytes otherwise).

    A CUDA tensor is folded on its own device (`fold`), not copied to the host and hashed there: both the worker and the
    judge digest every input of every correctness call, and for grouped_gemm_moe (GB-sized inputs) the two copies and
    sha256 passes would be most of a dtype's correctness time (docs/benchmarks.md). The fold is a sum over mixed
    (position, value) words, not a cryptographic hash: an accidental or careless change of an input goes unseen only by
    a 64-bit coincidence per lane, and a crafted collision is no threat worth a stronger hash, since a candidate that
    wants to hide a change can forge its digest in its own process with either hash (README, threat model)."""
    import torch
    if not isinstance(x, torch.Tensor):
        return hashlib.sha256(repr(x).encode()).hexdigest()
    meta = f"{x.dtype}|{tuple(x.shape)}|{tuple(x.stride())}|".encode()
    if x.is_cuda and x.element_size() in _INT_VIEW:
        return "fold:" + hashlib.sha256(meta + fold(x)).hexdigest()
    host = x.detach().to("cpu").contiguous()
    raw = host.reshape(-1).view(torch.uint8).numpy().tobytes() if host.numel() else b""
    return hashlib.sha256(meta + raw).hexdigest()


def _s64(c: int) -> int:
    return c - (1 << 64) if c >= 1 << 63 else c


_INT_VIEW = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}
_GOLDEN, _MIX1, _MIX2 = _s64(0x9E3779B97F4A7C15), _s64(0xBF58476D1CE4E5B9), _s64(0x94D049BB133111EB)
FOLD_CHUNK = 1 << 22            # elements folded at once: the fold's scratch is about 5 x 32 MiB at most


def _shr(z, s: int):
    """A logical right shift of int64 words (torch's >> on a signed tensor keeps the sign)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def fold(x) -> bytes:
    """Two 64-bit lanes over every element of `x` in logical order, computed where `x` lives: each element's bits,
    xored with its position times the golden ratio, through splitmix64's finaliser (a bijection), summed (lane 1) and
    summed weighted by 2*position+1 (lane 2), modulo 2**64. Any one changed element changes lane 1; a swap or any
    other set of changes leaves a lane unchanged only if its mixed words' differences cancel modulo 2**64, a
    coincidence an accident does not make (there is no key: a crafted set can). Works in chunks of FOLD_CHUNK
    elements (along the first dimension where `x` is not contiguous), so a GB input needs no more GPU memory than a
    small one (the worker digests its inputs beside the output it holds, within the judge's memory share)."""
    import torch
    x = x.detach()
    ints = getattr(torch, _INT_VIEW[x.element_size()])
    width = 8 * x.element_size()
    lanes = torch.zeros(2, dtype=torch.int64, device=x.device)
    if x.numel() == 0:
        return lanes.cpu().numpy().tobytes()
    if x.is_contiguous() or x.dim() < 2:
        flat = x.contiguous().reshape(-1)
        pieces = ((start, flat[start:start + FOLD_CHUNK]) for start in range(0, flat.numel(), FOLD_CHUNK))
    else:
        row = x[0].numel()
        rows = max(1, FOLD_CHUNK // max(1, row))
        pieces = ((i * row, x[i:i + rows].contiguous().reshape(-1)) for i in range(0, x.shape[0], rows))
    for start, piece in pieces:
        bits = piece.view(ints).to(torch.int64)
        if width < 64:
            bits = bits & ((1 << width) - 1)
        pos = torch.arange(start, start + piece.numel(), dtype=torch.int64, device=x.device)
        z = bits ^ (pos * _GOLDEN)
        z = (z ^ _shr(z, 30)) * _MIX1
        z = (z ^ _shr(z, 27)) * _MIX2
        z = z ^ _shr(z, 31)
        lanes[0] += z.sum()
        lanes[1] += (z * (2 * pos + 1)).sum()
    return lanes.cpu().numpy().tobytes()


def picked(out, picks: list[int]) -> str | None:
    """The hex bytes of a tensor's elements at `picks` (flat indices in logical order, modulo its size), the same
    in the worker (from the snapshot) and in the parent (from the output it fetched); None for anything else."""
    import torch
    if type(out) is not torch.Tensor or out.numel() == 0 or not picks:       # noqa: E721
        return None
    flat = out.reshape(-1)
    index = torch.tensor([p % flat.numel() for p in picks], device=flat.device)
    return flat[index].contiguous().view(torch.uint8).cpu().numpy().tobytes().hex()
