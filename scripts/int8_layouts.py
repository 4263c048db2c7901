"""Why torch._int_mm is fast in one layout and slow in another: time it with B column-major ("TN", both operands
K-major, what int8 tensor cores read) and B row-major ("NN"), and name the kernels cuBLAS picked.
Usage (on a GPU): python scripts/int8_layouts.py [N]"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def bench(a, b, reps=20):
    for _ in range(3):
        torch._int_mm(a, b)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        torch._int_mm(a, b)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def kernels(a, b):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch._int_mm(a, b)
        torch.cuda.synchronize()
    return sorted({e.name[:90] for e in prof.events() if e.device_type.name == "CUDA"})


def main(n=8192):
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8, device="cuda")
    w = torch.randint(-128, 128, (n, n), dtype=torch.int8, device="cuda")
    layouts = {"TN (B = W.t(), column-major)": w.t(), "NN (B row-major, contiguous)": w.t().contiguous()}
    print(torch.cuda.get_device_name(), f"{n}^3 int8 -> int32")
    for name, b in layouts.items():
        ms = bench(a, b)
        print(f"{name:32s} {ms:8.3f} ms {2 * n**3 / ms / 1e9:8.0f} TOPS  kernels: {kernels(a, b)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8192)
