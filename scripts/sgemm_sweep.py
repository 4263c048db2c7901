"""The SGEMM ladder's rung 8 (solutions/gemm/cupy_sgemm_8_tuned.py): every configuration in its CONFIGS checked on
an odd and an aligned shape against an fp64 product, then timed against cuBLAS's true-fp32 SGEMM on the gemm
problem's benchmark shapes (CUDA events, median of 15 calls after 3 warm-ups, each side's calls back to back).
A quick way to choose CONFIG on a new GPU; the figures that count are `gauntlet eval`'s.

    python scripts/sgemm_sweep.py            # on a machine with a GPU and CuPy
"""
import importlib.util
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 7168, 2048), (4096, 14336, 4096),
          (128, 14336, 4096), (128, 4096, 14336)]


def _rung():
    spec = importlib.util.spec_from_file_location("cupy_sgemm_8_tuned",
                                                  ROOT / "solutions" / "gemm" / "cupy_sgemm_8_tuned.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median_ms(fn, a, b, n=15):
    for _ in range(3):
        fn(a, b)
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(a, b)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[n // 2]


def main(names=None) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    rung = _rung()
    print(torch.cuda.get_device_name(), flush=True)
    for name in names or rung.CONFIGS:
        try:
            for m, n, k in ((131, 257, 67), (512, 512, 512), (128, 512, 4096)):
                a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
                err = (rung.matmul(a, b, name).double() - a.double() @ b.double()).abs().max().item()
                assert err < 1e-4 * k, f"{m}x{n}x{k}: max error {err}"
        except Exception as exc:  # noqa: BLE001 - a configuration that fails to build or is wrong is said, not fatal
            print(f"{name:26s} FAILED {exc!r}"[:600], flush=True)
            continue
        ratios, cells = [], []
        for m, n, k in SHAPES:
            a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
            base = _median_ms(torch.matmul, a, b)
            mine = _median_ms(lambda x, y: rung.matmul(x, y, name), a, b)
            ratios.append(base / mine)
            flop = 2 * m * n * k / 1e9
            cells.append(f"{base / mine:.3f}x {flop / mine:5.1f}T (cuBLAS {flop / base:5.1f}T)")
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        big = math.exp(sum(map(math.log, ratios[:4])) / 4)
        print(f"{name:26s} geomean {geo:.3f} (>=4096: {big:.3f}) | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or None)
