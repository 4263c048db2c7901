"""GPU timing primitives both sides use: the L2 flush, the GPU hold, the end marker and the output snapshot. Pure
mechanism, no judgement.

The hold (a spin kernel queued on the caller's stream before the start event, as tritonbench's gpu-events mode
does) keeps the host's launch latency out of the event time: the call's kernels are queued behind the spin and start
the moment it ends. It holds the whole GPU, not one stream: its grid fills every SM (every thread slot and all of
the shared memory of each SM, so no block of any other kernel can be resident beside it), so work a call launches on
a stream that is not ordered after the caller's cannot run beside the hold and finish before the start event fires.
Its length is the judge's (HOLD_MS, or what the parent asks for, never the candidate's launch time).

The harness's kernels, PTX loaded through the CUDA driver API (ctypes on libcuda, which torch has loaded already): no
package a candidate could import and patch stands between the harness and them, and nothing is compiled by a tool
the worker does not already have (the driver JIT-compiles the PTX once per process):
- gauntlet_prime: an empty kernel on a stream of the harness's own, launched and waited for first thing inside a
  call's profiler session, so the profiler's first-launch cost on the host is paid before the hold is queued and
  not inside it (`prime`);
- gauntlet_hold: each thread sleeps on %globaltimer for the given nanoseconds from the moment its block starts;
- gauntlet_begin: an empty kernel queued, right after the start event, on a stream of the harness's own that waits
  for that event: it starts once the start event has fired and an SM is free, so it tells where the window opens
  on the profiler's timeline (the start event fires when the hold ends, or later if the host was late to record
  it), and, being off the caller's stream, it delays none of the call's kernels;
- gauntlet_mark: an empty kernel queued on the caller's stream right after the end event (and the snapshot): its
  start bounds the window's end on the profiler's timeline (gauntlet.judge.timing.window);
- gauntlet_snap / gauntlet_snap_bytes: a raw copy of the memory an output spans, on the caller's stream right after
  the end event, so what is judged is the output as it stood when the window closed (`snapshot`).
The profiler names them exactly so; the parent tells them from a candidate's kernels by name and count.
"""
from __future__ import annotations

import ctypes
import statistics

import torch

from .cards import CardMemory, judges_per_gpu  # noqa: F401 - re-exported: the worker and tests use them here

HOLD_MS = 1.0               # the hold before every call on the GPU, correctness and timed, candidate and baseline
HOLD_MIN_MS = HOLD_MS
HOLD_KERNEL, BEGIN_KERNEL = "gauntlet_hold", "gauntlet_begin"
MARK_KERNEL, SNAP_KERNEL = "gauntlet_mark", "gauntlet_snap"
PRIME_KERNEL = "gauntlet_prime"


class Flusher:
    """Writes over a buffer twice the L2 size: what the previous call left in L2 is evicted."""

    def __init__(self, device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def __call__(self):
        self.buf.zero_()


_PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.extern .shared .align 16 .b8 gauntlet_smem[];

.visible .entry gauntlet_hold(.param .u64 gauntlet_hold_ns)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [gauntlet_hold_ns];
    mov.u64 %rd2, %globaltimer;
    add.s64 %rd3, %rd2, %rd1;
SPIN:
    nanosleep.u32 200;
    mov.u64 %rd4, %globaltimer;
    setp.lt.u64 %p1, %rd4, %rd3;
    @%p1 bra SPIN;
    ret;
}

.visible .entry gauntlet_prime()
{
    ret;
}

.visible .entry gauntlet_begin()
{
    ret;
}

.visible .entry gauntlet_mark()
{
    ret;
}

.visible .entry gauntlet_snap(.param .u64 gauntlet_snap_dst, .param .u64 gauntlet_snap_src,
                              .param .u64 gauntlet_snap_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<9>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [gauntlet_snap_dst];
    ld.param.u64 %rd2, [gauntlet_snap_src];
    ld.param.u64 %rd3, [gauntlet_snap_n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.s64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
LOOP:
    setp.ge.u64 %p1, %rd4, %rd3;
    @%p1 bra DONE;
    shl.b64 %rd7, %rd4, 4;
    add.s64 %rd8, %rd2, %rd7;
    ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd8];
    add.s64 %rd9, %rd1, %rd7;
    st.global.v4.u32 [%rd9], {%r5, %r6, %r7, %r8};
    add.s64 %rd4, %rd4, %rd6;
    bra LOOP;
DONE:
    ret;
}

.visible .entry gauntlet_snap_bytes(.param .u64 gauntlet_snap_bytes_dst, .param .u64 gauntlet_snap_bytes_src,
                                    .param .u64 gauntlet_snap_bytes_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [gauntlet_snap_bytes_dst];
    ld.param.u64 %rd2, [gauntlet_snap_bytes_src];
    ld.param.u64 %rd3, [gauntlet_snap_bytes_n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.s64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
LOOP:
    setp.ge.u64 %p1, %rd4, %rd3;
    @%p1 bra DONE;
    add.s64 %rd8, %rd2, %rd4;
    ld.global.u8 %r5, [%rd8];
    add.s64 %rd9, %rd1, %rd4;
    st.global.u8 [%rd9], %r5;
    add.s64 %rd4, %rd4, %rd6;
    bra LOOP;
DONE:
    ret;
}
"""

# CUDA driver API enums (cuda.h)
_ATTR = {"threads_per_block": 1, "sms": 16, "threads_per_sm": 39, "smem_per_sm": 81, "smem_optin": 97,
         "blocks_per_sm": 106, "smem_reserved": 111}
_FUNC_MAX_DYNAMIC_SMEM, _FUNC_CARVEOUT = 8, 9
_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE = 5, 6


class _Kernels:
    """The module and launch geometry, loaded once per process on the device in use (`kernels()`)."""

    def __init__(self):
        torch.cuda.init()
        torch.cuda.current_stream()              # torch's primary context is current on this thread from here on
        self.device = torch.cuda.current_device()
        self.cu = cu = ctypes.CDLL("libcuda.so.1")
        ctx = ctypes.c_void_p()
        self._check(cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        dev = ctypes.c_int()
        self._check(cu.cuDeviceGet(ctypes.byref(dev), self.device), "cuDeviceGet")
        if not ctx.value:                        # torch's runtime always leaves one; retained here only if not
            self._check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self._check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        attr = {}
        for key, code in _ATTR.items():
            value = ctypes.c_int()
            self._check(cu.cuDeviceGetAttribute(ctypes.byref(value), code, dev), f"cuDeviceGetAttribute {key}")
            attr[key] = value.value
        self.module = ctypes.c_void_p()
        log = ctypes.create_string_buffer(8192)
        opts = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE)
        vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(len(log)))
        res = cu.cuModuleLoadDataEx(ctypes.byref(self.module), ctypes.c_char_p(_PTX.encode()), 2, opts, vals)
        self._check(res, f"cuModuleLoadDataEx ({log.value.decode(errors='replace')[:500]})")
        self.fn = {}
        for name in (PRIME_KERNEL, HOLD_KERNEL, BEGIN_KERNEL, MARK_KERNEL, SNAP_KERNEL, SNAP_KERNEL + "_bytes"):
            f = ctypes.c_void_p()
            self._check(cu.cuModuleGetFunction(ctypes.byref(f), self.module, name.encode()), name)
            self.fn[name] = f
        # The hold's geometry: as many blocks of the largest block size as an SM can hold threads for (2 x 1024 on
        # sm_90), each with an equal share of the SM's shared memory: every thread slot and the whole shared memory
        # of every SM are taken, so no block of another kernel fits beside the hold anywhere on the GPU.
        threads = min(1024, attr["threads_per_block"])
        per_sm = max(1, min(attr["threads_per_sm"] // threads, attr["blocks_per_sm"] or 1 << 30))
        hold = self.fn[HOLD_KERNEL]
        self._check(cu.cuFuncSetAttribute(hold, _FUNC_CARVEOUT, 100), "carveout")
        smem = min(attr["smem_optin"], attr["smem_per_sm"] // per_sm - attr["smem_reserved"]) // 1024 * 1024
        occupancy = 0
        for _ in range(16):       # the allocation granularity may round a share up: step down until per_sm fit
            self._check(cu.cuFuncSetAttribute(hold, _FUNC_MAX_DYNAMIC_SMEM, smem), "max dynamic shared memory")
            got = ctypes.c_int()
            self._check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(got), hold, threads,
                                                                       ctypes.c_size_t(smem)), "occupancy")
            occupancy = got.value
            if occupancy >= per_sm or smem <= 1024:
                break
            smem -= 1024
        per_sm = max(1, min(per_sm, occupancy))
        self.geometry = {"sms": attr["sms"], "blocks_per_sm": per_sm, "threads": threads, "smem_bytes": smem,
                         "grid": attr["sms"] * per_sm, "occupancy": occupancy,
                         "threads_per_sm": attr["threads_per_sm"], "smem_per_sm": attr["smem_per_sm"]}
        self.begin_stream = torch.cuda.Stream()

    def _check(self, res: int, what: str) -> None:
        if res != 0:
            text = ctypes.c_char_p()
            try:
                self.cu.cuGetErrorString(res, ctypes.byref(text))
            except (AttributeError, OSError):
                pass
            raise RuntimeError(f"CUDA driver: {what} failed with {res} ({(text.value or b'').decode()})")

    def launch(self, name: str, grid: int, block: int, smem: int, *args: int, stream=None) -> None:
        """Launch kernel `name` on `stream` (default: the current stream) with 64-bit arguments `args`."""
        values = [ctypes.c_uint64(a) for a in args]
        params = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
        stream = ctypes.c_void_p((stream or torch.cuda.current_stream()).cuda_stream)
        self._check(self.cu.cuLaunchKernel(self.fn[name], grid, 1, 1, block, 1, 1, ctypes.c_uint(smem), stream,
                                           params, None), f"launching {name}")


class _Slot:
    """The per-process kernels, an object (not module data) so that loading them late is no change of state."""
    kernels: _Kernels | None = None


_SLOT = _Slot()


def kernels() -> _Kernels:
    """The hold, marker and snapshot kernels of this process, loaded on first use (the worker loads them at
    start-up, before any candidate code runs)."""
    if _SLOT.kernels is None or _SLOT.kernels.device != torch.cuda.current_device():
        _SLOT.kernels = _Kernels()
    return _SLOT.kernels


def prime() -> None:
    """Launch the prime (an empty kernel, on the harness's own stream) and wait for it: the first thing inside every
    call's profiler session, before the hold is queued. The session's first kernel launch carries the profiler's
    own start-up cost on the host: queued as that first launch, the hold can take longer to queue than it runs, so
    the call's kernel reaches the GPU after the hold has run out and the GPU sits idle for as long as the call takes
    to launch, which the event time would count as the kernel's. Primed, the hold's launch is short and the call is
    not starved (gauntlet.child.timing.held_call; docs/benchmarks.md, "Starved by the profiler")."""
    k = kernels()
    k.launch(PRIME_KERNEL, 1, 32, 0, stream=k.begin_stream)
    k.begin_stream.synchronize()


def hold(ms: float) -> None:
    """Queue the hold on the current stream: every SM of the GPU taken for `ms` from the moment it starts."""
    k = kernels()
    g = k.geometry
    k.launch(HOLD_KERNEL, g["grid"], g["threads"], g["smem_bytes"], int(ms * 1e6))


def begin(start) -> None:
    """Queue the begin marker right after the start event `start` was recorded: on the harness's own stream, made to
    wait for that event, so the caller's stream (the call's kernels) does not wait for the marker."""
    k = kernels()
    k.begin_stream.wait_event(start)
    k.launch(BEGIN_KERNEL, 1, 32, 0, stream=k.begin_stream)


def mark() -> None:
    """Queue the end marker on the current stream (right after the end event and the snapshot)."""
    kernels().launch(MARK_KERNEL, 1, 32, 0)


def snapshot(out):
    """A raw copy of every byte a CUDA tensor output spans, made on the current stream, viewed with the output's
    shape, strides and dtype (an expanded or overlapping output is reproduced as it is); anything else is returned
    unchanged, with no kernel. Returns (copy, number of snapshot kernels launched: 0 or 1)."""
    if type(out) is not torch.Tensor or not out.is_cuda or out.layout != torch.strided:  # noqa: E721
        return out, 0
    if out.numel() == 0:
        return torch.empty_strided(out.shape, out.stride(), dtype=out.dtype, device=out.device), 0
    item = out.element_size()
    span = 1 + sum((n - 1) * s for n, s in zip(out.shape, out.stride()))
    nbytes = span * item
    buf = torch.empty(nbytes, dtype=torch.uint8, device=out.device)
    src, dst = out.data_ptr(), buf.data_ptr()
    k = kernels()
    sms = k.geometry["sms"]
    if src % 16 == 0 and dst % 16 == 0 and nbytes % 16 == 0:
        k.launch(SNAP_KERNEL, min(4 * sms, -(-nbytes // (16 * 256))), 256, 0, dst, src, nbytes // 16)
    else:
        k.launch(SNAP_KERNEL + "_bytes", min(4 * sms, -(-nbytes // 256)), 256, 0, dst, src, nbytes)
    return buf.view(out.dtype).as_strided(out.shape, out.stride(), 0), 1


def held_ms(fn, flush: Flusher, n: int = 5, hold_ms: float = HOLD_MIN_MS, stat=statistics.median) -> float:
    """GPU time of fn() over n held, flushed calls, summarised by `stat` (the median; the trusted parent takes the
    minimum for its ceilings: other work on the GPU only ever slows a call down)."""
    times = []
    for _ in range(n):
        flush()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        hold(hold_ms)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return stat(times)
