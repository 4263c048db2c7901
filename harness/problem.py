"""A problem: the data in problem.yaml plus the behaviour in reference.py, validated once on load.

Bad problem files fail here with a message naming the file and the key, not later inside a fuzz loop.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import yaml

# Unit roundoff of each precision a problem can promise (tf32 keeps 10 mantissa bits).
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "tf32": 2.0**-11, "float32": 2.0**-24,
                 "float64": 2.0**-53, "float8_e4m3fn": 2.0**-4, "int8": 0.0, "int32": 0.0}


class ProblemError(ValueError):
    """A problem folder that does not follow the contract."""


@dataclass(frozen=True)
class DtypeSpec:
    name: str            # the name users type: bfloat16, float16, float32, tf32, ...
    torch: str           # the storage dtype handed to make_inputs
    k_norm: float        # norm-wise: at most k_norm times torch's own error (harness/judge/values/check.py)
    k_elem: float        # element-wise: roundings at the dtype's own precision before the output's, in u * scale
    floor: float         # norm-wise floor, in u * scale, for where torch happens to be exact
    tf32: bool = False
    exact: bool = False  # integer problems: the answer must match bit for bit
    k_acc: float = 8192.0   # element-wise: fp32 accumulation and epilogue error, in 2**-24 * scale

    @property
    def unit_roundoff(self) -> float:
        return UNIT_ROUNDOFF.get("tf32" if self.tf32 else self.torch, 0.0)

    def torch_dtype(self):
        import torch
        return getattr(torch, self.torch)


@dataclass(frozen=True)
class FuzzBounds:
    dims: dict              # dim -> (lo, hi) for an integer range, or a list of choices (layouts, flags)
    budget: int             # cap on the product of the integer dims


@dataclass
class Problem:
    id: str
    title: str
    root: Path
    dims: list
    dtypes: dict            # name -> DtypeSpec
    fuzz: dict              # device -> FuzzBounds
    calls_per_case: int
    benchmark: list         # list of dicts: dims + source
    baselines: dict         # label -> solution name in solutions/<id>/
    flops_expr: str
    bytes_expr: str
    output_layout: str = "contiguous"   # "contiguous" (a new row-major tensor) or "any" strides
    # How a KernelBench file is judged here (gauntlet.formats): {inputs: names of make_inputs' outputs in order,
    # parameters: those that replace the module's own}, or {unsupported: why}; None: no mapping stated.
    kernelbench: dict | None = None
    # device -> the float32 net case's shape (gauntlet.judge.values.net): one fixed, moderately large random case per
    # float32 judgement, judged by error statistics; {} where the problem states none.
    net_case: dict = field(default_factory=dict)
    baseline_paths: dict = field(default_factory=dict)   # label -> the file, found by gauntlet.discover
    raw: dict = field(repr=False, default_factory=dict)
    _module: ModuleType | None = field(default=None, repr=False)

    @property
    def reference_path(self) -> Path:
        return self.root / "reference.py"

    def module(self) -> ModuleType:
        """The reference module, imported once per process under a private name."""
        if self._module is None:
            self._module = load_module(self.reference_path, f"gauntlet_problem_{self.id}")
            for name in ("make_inputs", "reference"):
                if not callable(getattr(self._module, name, None)):
                    raise ProblemError(f"{self.reference_path}: must define {name}()")
        return self._module

    def flops(self, shape: dict) -> float:
        return _eval_formula(self.flops_expr, shape, 1, 1)

    def bytes(self, shape: dict, bytes_in: int, bytes_out: int) -> float:
        return _eval_formula(self.bytes_expr, shape, bytes_in, bytes_out)

    def dtype(self, name: str) -> DtypeSpec:
        if name not in self.dtypes:
            raise ProblemError(f"unknown dtype {name!r} for problem {self.id}; known: {', '.join(self.dtypes)}")
        return self.dtypes[name]


def load_module(path: Path, name: str) -> ModuleType:
    """Import a file from its source text. Not through the import system: its bytecode cache (__pycache__/*.pyc,
    trusted when mtime and size match) is a file a candidate could plant. Registered in sys.modules under `name`
    so that dataclasses, pickling of compiled kernels and the tamper watch can find it."""
    path = Path(path)
    source = path.read_bytes()
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _eval_formula(expr: str, shape: dict, bytes_in: int, bytes_out: int) -> float:
    names = dict(shape, bytes_in=bytes_in, bytes_out=bytes_out, math=math, min=min, max=max)
    return float(eval(expr, {"__builtins__": {}}, names))  # noqa: S307 - trusted repo data, no builtins


TOP_KEYS = ("id", "title", "dims", "dtypes", "fuzz", "benchmark", "baselines", "flops", "bytes", "output_layout",
            "kernelbench", "net_case")
LAYOUTS = ("contiguous", "any")
FUZZ_KEYS = ("cpu", "cuda", "calls_per_case")


def _only(path, where: str, found, known) -> None:
    """Unknown keys are errors at every level: a misspelled `budget` must not silently remove the cap."""
    unknown = sorted(set(found) - set(known))
    if unknown:
        raise ProblemError(f"{path}: {where} has unknown key(s) {unknown}; known: {sorted(known)}")


def load_problem(root: Path) -> Problem:
    path = root / "problem.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProblemError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ProblemError(f"{path}: expected a mapping at the top level")

    def need(key, kind):
        if key not in raw:
            raise ProblemError(f"{path}: missing key {key!r}")
        if not isinstance(raw[key], kind):
            raise ProblemError(f"{path}: {key!r} must be a {kind.__name__}")
        return raw[key]

    _only(path, "the top level", raw, TOP_KEYS)
    dims = need("dims", list)
    if not dims or not all(isinstance(d, str) and d.isidentifier() for d in dims):
        raise ProblemError(f"{path}: 'dims' must be a non-empty list of names, got {dims!r}")
    dtypes = {name: _dtype_spec(path, name, spec) for name, spec in need("dtypes", dict).items()}
    fuzz_raw = need("fuzz", dict)
    _only(path, "fuzz", fuzz_raw, FUZZ_KEYS)
    fuzz = {dev: _fuzz_bounds(path, dev, fuzz_raw[dev], dims) for dev in ("cpu", "cuda") if dev in fuzz_raw}
    if "cpu" not in fuzz:
        raise ProblemError(f"{path}: fuzz.cpu bounds are required (CI runs on the CPU)")
    bench = need("benchmark", list)
    for i, shape in enumerate(bench):
        if not isinstance(shape, dict):
            raise ProblemError(f"{path}: benchmark[{i}] must be a mapping of {dims} (and source)")
        missing = [d for d in dims if d not in shape]
        if missing:
            raise ProblemError(f"{path}: benchmark[{i}] lacks {missing}")
        _only(path, f"benchmark[{i}]", shape, list(dims) + ["source"])
    problem = Problem(
        id=raw.get("id", root.name), title=raw.get("title", root.name), root=root, dims=dims, dtypes=dtypes,
        fuzz=fuzz, calls_per_case=int(fuzz_raw.get("calls_per_case", 3)), benchmark=bench,
        baselines=need("baselines", dict), flops_expr=need("flops", str), bytes_expr=need("bytes", str),
        output_layout=raw.get("output_layout", "contiguous"), kernelbench=_kernelbench(path, raw.get("kernelbench")),
        net_case=_net_case(path, raw.get("net_case", {}), dims), raw=raw)
    if problem.output_layout not in LAYOUTS:
        raise ProblemError(f"{path}: output_layout must be one of {LAYOUTS}, got {problem.output_layout!r}")
    if problem.id != root.name:
        raise ProblemError(f"{path}: id {problem.id!r} must match its folder name {root.name!r}")
    sample = {d: 2 for d in dims}
    for expr in (problem.flops_expr, problem.bytes_expr):
        try:
            _eval_formula(expr, sample, 2, 2)
        except Exception as exc:  # noqa: BLE001 - report any formula error with its file
            raise ProblemError(f"{path}: formula {expr!r} does not evaluate: {exc}") from exc
    return problem


def _kernelbench(path, spec) -> dict | None:
    """The problem's KernelBench mapping, checked: `inputs` names every output of make_inputs in order (distinct
    identifiers), `parameters` (optional) a subset of them; or `unsupported` with the reason."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ProblemError(f"{path}: kernelbench must be a mapping ({{inputs: [...], parameters: [...]}} or "
                           f"{{unsupported: why}}), got {spec!r}")
    if "unsupported" in spec:
        _only(path, "kernelbench", spec, ["unsupported"])
        if not isinstance(spec["unsupported"], str) or not spec["unsupported"].strip():
            raise ProblemError(f"{path}: kernelbench.unsupported must say why, as text")
        return {"unsupported": spec["unsupported"].strip()}
    _only(path, "kernelbench", spec, ["inputs", "parameters"])
    inputs, params = spec.get("inputs"), spec.get("parameters", [])
    if not (isinstance(inputs, list) and inputs and all(isinstance(n, str) and n.isidentifier() for n in inputs)
            and len(set(inputs)) == len(inputs)):
        raise ProblemError(f"{path}: kernelbench.inputs must name each output of make_inputs, in order, with "
                           f"distinct identifiers; got {inputs!r}")
    if not (isinstance(params, list) and len(set(params)) == len(params) and set(params) <= set(inputs)):
        raise ProblemError(f"{path}: kernelbench.parameters must be distinct names from kernelbench.inputs "
                           f"{inputs}; got {params!r}")
    return {"inputs": list(inputs), "parameters": list(params)}


def _dtype_spec(path, name, spec) -> DtypeSpec:
    if not isinstance(spec, dict) or "torch" not in spec:
        raise ProblemError(f"{path}: dtypes.{name} must be a mapping with a 'torch' key")
    known = {"torch", "k_norm", "k_elem", "k_acc", "floor", "tf32", "exact"}
    unknown = set(spec) - known
    if unknown:
        raise ProblemError(f"{path}: dtypes.{name} has unknown keys {sorted(unknown)}; known: {sorted(known)}")
    return DtypeSpec(name=name, torch=spec["torch"], k_norm=float(spec.get("k_norm", 4)),
                     k_elem=float(spec.get("k_elem", 8)), floor=float(spec.get("floor", 2)),
                     tf32=bool(spec.get("tf32", False)), exact=bool(spec.get("exact", False)),
                     k_acc=float(spec.get("k_acc", 8192)))


def _net_case(path, raw, dims) -> dict:
    """net_case: {device: {dim: value for every dim}}: fixed shapes, so only their form is checked here."""
    if not isinstance(raw, dict):
        raise ProblemError(f"{path}: 'net_case' must map a device (cpu, cuda) to a shape")
    _only(path, "net_case", raw, ("cpu", "cuda"))
    for device, shape in raw.items():
        if not isinstance(shape, dict) or sorted(shape) != sorted(dims):
            raise ProblemError(f"{path}: net_case.{device} must give exactly the dims {dims}, got {shape!r}")
        bad = [d for d, v in shape.items() if not (isinstance(v, str) or (type(v) is int and v >= 1))]
        if bad:
            raise ProblemError(f"{path}: net_case.{device}: {bad} must be positive integers (or a choice's name)")
    return {device: dict(shape) for device, shape in raw.items()}


def _fuzz_bounds(path, device, spec, dims) -> FuzzBounds:
    if not isinstance(spec, dict):
        raise ProblemError(f"{path}: fuzz.{device} must be a mapping of bounds per dim")
    _only(path, f"fuzz.{device}", spec, list(dims) + ["budget"])
    bounds = {}
    for d in dims:
        if d not in spec:
            raise ProblemError(f"{path}: fuzz.{device} lacks bounds for {d}")
        value = spec[d]
        if isinstance(value, dict) and isinstance(value.get("choices"), list) and value["choices"]:
            bounds[d] = list(value["choices"])
            continue
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)
                and 1 <= value[0] <= value[1]):
            raise ProblemError(f"{path}: fuzz.{device}.{d} must be [lo, hi] with 1 <= lo <= hi, "
                               f"or {{choices: [...]}}; got {value!r}")
        bounds[d] = (value[0], value[1])
    ranges = [b for b in bounds.values() if isinstance(b, tuple)]
    budget = spec.get("budget", math.prod(hi for _, hi in ranges))
    if not isinstance(budget, int) or budget < 1:
        raise ProblemError(f"{path}: fuzz.{device}.budget must be a positive integer, got {budget!r}")
    return FuzzBounds(dims=bounds, budget=budget)
