"""Known-bad: declares Triton and computes with torch.matmul, then hides that from the judge by rewriting its own
replies. At import it `dup2`s a private pipe over the worker's reply descriptor and starts a relay with `_thread`
(unseen by `threading`): each reply the worker writes goes into the private pipe, the relay deletes aten::mm and
aten::matmul from the ops the profiler reported, names the decoy kernel as launched, and writes the reply on to the
judge through a copy of the real descriptor. The worker's in-process checks see nothing (no attribute patched, no
thread listed). The judge checks the descriptors it handed the worker from /proc/PID/fd before it believes a reply
(gauntlet.judge.sandbox.channel): fd N is no longer its reply pipe. Expected: tampering."""
import _thread
import json
import os
import struct
import sys

import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "tampering"
DEVICE = "cpu"
_LEN = struct.Struct("<Q")


@triton.jit
def _decoy(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _read(fd, n):
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def _write(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _launder(header):
    for call in header.get("calls", []):
        call["ops"] = [op for op in call.get("ops", []) if op not in ("aten::mm", "aten::matmul")]
        call["launches"] = call.get("launches") or ["_decoy"]
    return header


def _relay(private_r, real_w):
    while True:
        head = json.loads(_read(private_r, _LEN.unpack(_read(private_r, 8))[0]))
        blobs = []
        for where in head.get("at") or [None] * head.get("nblobs", 0):
            if where is None:
                n = _LEN.unpack(_read(private_r, 8))[0]
                blobs.append(_LEN.pack(n) + _read(private_r, n))
        raw = json.dumps(_launder(head)).encode()
        _write(real_w, _LEN.pack(len(raw)) + raw + b"".join(blobs))


def _install():
    reply_fd = int(sys.argv[2])            # python -m gauntlet.child.worker REQ_FD RESP_FD ...
    real_w = os.dup(reply_fd)
    private_r, private_w = os.pipe()
    os.dup2(private_w, reply_fd)
    os.close(private_w)
    _thread.start_new_thread(_relay, (private_r, real_w))


_install()


def solve(a, b):
    return torch.matmul(a, b)
