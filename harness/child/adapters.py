"""The thin wrappers that turn a KernelBench file or a GPU MODE submission into `solve(*inputs)`, in the worker.

Runs beside candidate code (it imports and calls it), so it decides nothing: the wrapper is only the calling
convention. The worker calls the `solve` made here exactly as it calls a native one: the same inputs in guard
bands, profiler, tamper watch, hold and timing loop, and the parent judges what comes back. What the file is, and
whether the problem can take it, was settled statically in the judge (gauntlet.formats) before this process began.

- GPU MODE: `custom_kernel(data)` with `data = tuple(inputs)`, the tuple the problem's make_inputs returns (as
  reference-kernels hands custom_kernel what generate_input returns); its return value is the output. A `task`
  module with `input_t` and `output_t` is provided, since every reference-kernels submission imports them.
- KernelBench: `ModelNew(*get_init_inputs())` is built once, at import (no arguments without get_init_inputs), and
  moved to the device. Each call runs its forward through torch.func.functional_call with the problem's inputs in
  place of the module's parameters (problem.yaml's `kernelbench:` says which inputs are parameters and which are
  forward's arguments), so the weights are the problem's, never the module's own random initialisation. The
  module's parameters must be exactly as many as the mapping gives; they are matched by name (the last part of a
  parameter's name: `linear.weight` is `weight`) when each mapped name fits one parameter, else in registration
  order (nn.Linear registers weight, then bias).
"""
from __future__ import annotations

import sys
import traceback
import types
from pathlib import Path


class AdapterError(Exception):
    """The file does not follow its format's contract (an import_error, with this message)."""


def load(fmt: str, path, problem, device: str):
    """(the candidate's module, solve) for a file of format `fmt`."""
    if fmt == "gpumode":
        return _gpumode(Path(path))
    if fmt == "kernelbench":
        return _kernelbench(Path(path), problem, device)
    raise AdapterError(f"no adapter for format {fmt!r}")


def _import(path: Path):
    from ..problem import load_module
    return load_module(path, "gauntlet_candidate")


# --- GPU MODE ----------------------------------------------------------------------------------------------------

def _task_module() -> None:
    """reference-kernels' task.py types, for `from task import input_t, output_t` (annotations only)."""
    if "task" in sys.modules:
        return
    from typing import TypeVar
    task = types.ModuleType("task")
    task.input_t = TypeVar("input_t", bound=tuple)
    task.output_t = TypeVar("output_t")
    sys.modules["task"] = task


def _gpumode(path: Path):
    _task_module()
    module = _import(path)
    kernel = getattr(module, "custom_kernel", None)
    if not callable(kernel):
        raise AdapterError(f"GPU MODE submission {path.name}: custom_kernel is not a function after import")

    def solve(*inputs):
        return kernel(tuple(inputs))

    return module, solve


# --- KernelBench ---------------------------------------------------------------------------------------------------

def _kernelbench(path: Path, problem, device: str):
    import torch
    from torch.func import functional_call

    mapping = problem.kernelbench or {}
    if "inputs" not in mapping:
        from ..formats import problem_support       # the same words, and the line to add, as the CLI's refusal
        raise AdapterError(problem_support(problem, "kernelbench")
                           or f"problem {problem.id} has no KernelBench mapping")
    module = _import(path)
    cls = getattr(module, "ModelNew", None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise AdapterError(f"KernelBench file {path.name}: ModelNew must be a subclass of torch.nn.Module, "
                           f"got {cls!r}")
    model = _build(module, cls, path).to(device).eval()
    names = list(mapping["inputs"])
    wanted = list(mapping["parameters"])
    by_param = _match_parameters(model, wanted, problem.id, path.name)
    slot = {name: i for i, name in enumerate(names)}
    params = [(param, slot[name]) for param, name in by_param.items()]
    args = [slot[n] for n in names if n not in wanted]

    def solve(*inputs):
        if len(inputs) != len(names):
            raise RuntimeError(f"problem {problem.id}'s make_inputs gave {len(inputs)} inputs but its problem.yaml "
                               f"kernelbench.inputs names {len(names)} ({names}): the problem's error")
        return functional_call(model, {p: inputs[i] for p, i in params}, tuple(inputs[i] for i in args))

    return module, solve


def _build(module, cls, path: Path):
    init = getattr(module, "get_init_inputs", None)
    try:
        values = list(init()) if callable(init) else []
    except Exception as exc:  # noqa: BLE001 - the file's own code: an import error with its traceback
        raise AdapterError(f"KernelBench file {path.name}: get_init_inputs() raised {type(exc).__name__}: {exc}\n"
                           + _tb()) from None
    try:
        return cls(*values)
    except Exception as exc:  # noqa: BLE001
        hint = "" if callable(init) else (" (the file defines no get_init_inputs(), so ModelNew() was called with no "
                                          "arguments; define it to give the constructor's)")
        raise AdapterError(f"KernelBench file {path.name}: ModelNew(*{values!r}) raised {type(exc).__name__}: "
                           f"{exc}{hint}\n" + _tb()) from None


def _match_parameters(model, wanted: list[str], problem_id: str, filename: str) -> dict[str, str]:
    """module parameter name -> the problem's input name that replaces it."""
    have = [name for name, _ in model.named_parameters()]
    if len(have) != len(wanted):
        gives = f"its inputs {', '.join(wanted)} as parameters" if wanted else "no parameters (every input is an " \
                                                                               "argument of forward)"
        raise AdapterError(f"KernelBench file {filename}: ModelNew has {len(have)} parameter(s) "
                           f"({', '.join(have) or 'none'}), but problem {problem_id} gives {gives}. The problem's "
                           "inputs replace the module's parameters, so the module must hold exactly those")
    last = {name: name.rsplit(".", 1)[-1] for name in have}
    by_name = {w: [h for h in have if last[h] == w] for w in wanted}
    if all(len(found) == 1 for found in by_name.values()):
        return {found[0]: w for w, found in by_name.items()}
    return dict(zip(have, wanted))                  # registration order


def _tb(limit: int = 2000) -> str:
    text = traceback.format_exc()
    return text if len(text) <= limit else "...\n" + text[-limit:]
