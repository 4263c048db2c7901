"""A KernelBench-style file that builds its kernel with torch.utils.cpp_extension.load_inline, as most KernelBench
CUDA solutions do. Gauntlet compiles no C++ for candidates: `unsupported`, said clearly, never run."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = "torch::Tensor mm(torch::Tensor a, torch::Tensor b) { return a.mm(b); }"
ext = load_inline(name="mm_ext", cpp_sources=source, functions=["mm"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.mm(A, B)
