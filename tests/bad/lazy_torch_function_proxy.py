"""Known-bad: returns a lazy proxy instead of a tensor: an object that implements __torch_function__, shape, dtype
and device, and only computes the product when something asks for its values (GPU MODE saw "lazy tensors" whose
work happened inside the checker's comparison, outside the timed region). Anything that is not a plain
torch.Tensor is rejected before its values are looked at, so the proxy never gets to run code in a comparison.
Expected: not_a_tensor."""
import torch

BACKEND = "torch"
EXPECTED = "not_a_tensor"
DEVICE = "cpu"


class LazyProduct:
    def __init__(self, a, b):
        self._a, self._b, self._value = a, b, None
        self.shape = torch.Size((a.shape[0], b.shape[1]))
        self.dtype, self.device = a.dtype, a.device

    def _force(self):
        if self._value is None:
            self._value = torch.matmul(self._a, self._b)
        return self._value

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda x: x._force() if isinstance(x, LazyProduct) else x   # noqa: E731
        return func(*[unwrap(x) for x in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})

    def __getattr__(self, name):           # everything else (numpy, tolist, cpu, ...) forces the value
        return getattr(self._force(), name)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return 2


def solve(a, b):
    return LazyProduct(a, b)
