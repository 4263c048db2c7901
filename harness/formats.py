"""Which kind of file a candidate is, read statically: a native solution, a KernelBench file or a GPU MODE submission.

The field's other two formats are judged through a thin wrapper (harness/child/adapters.py builds `solve` from
them inside the candidate's worker), so they get the same worker, confinement, checks and timing as a native file:
- native: `BACKEND = "torch" | "triton" | "cupy" | "cute"` and `solve(*inputs)` (README, the contract);
- kernelbench: `class ModelNew(nn.Module)` (beside or instead of `Model`), optionally `get_init_inputs()` (the
  constructor's arguments; `get_inputs()` is ignored: the judge makes the inputs). The problem's `kernelbench:` key
  in problem.yaml says which of its inputs go to `forward` and which replace the module's parameters;
- gpumode: `custom_kernel(data)`, `data` being the tuple the problem's make_inputs returns (reference-kernels'
  convention: `data` is what generate_input returns); `from task import input_t, output_t` is provided.

Everything here reads the source with `ast` in the trusted process; nothing of the candidate is imported. The
format is found from the names a file defines at its top level (or forced with --format), and an adapted file's
backend from what it uses (a `@triton.jit` kernel, `import cupy`, `import cutlass`; else plain torch), from a
literal BACKEND it declares, or from --backend. A file that compiles C++/CUDA through torch.utils.cpp_extension
(KernelBench's usual load_inline) is `unsupported`: Gauntlet has no backend that compiles C++ inside the confined
worker.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

FORMATS = ("native", "kernelbench", "gpumode")
LABELS = {"native": "native (BACKEND + solve)", "kernelbench": "KernelBench (class ModelNew)",
          "gpumode": "GPU MODE (custom_kernel(data))"}
_BACKENDS = ("torch", "triton", "cupy", "cute")     # gauntlet.discover.BACKENDS (kept here: discover imports this)


@dataclass(frozen=True)
class FileFormat:
    """What the source says about itself. `error`: the file cannot be judged as any format (an import_error,
    blamed on the file); `unsupported`: a file Gauntlet cannot judge (not a failure of the candidate)."""
    format: str | None
    backend: str | None
    adapter: dict = field(default_factory=dict)     # for an adapted file: format, backend, backend_from
    error: str | None = None
    unsupported: str | None = None


def read(tree: ast.Module, literals: dict, forced_format: str | None = None,
         forced_backend: str | None = None) -> FileFormat:
    """The format and backend of a parsed file. `literals`: the top-level names assigned a literal (BACKEND, DTYPES).
    `forced_format` (--format; None or "auto" detects) and `forced_backend` (--backend, for adapted files)."""
    declared = literals.get("BACKEND") if isinstance(literals.get("BACKEND"), str) else None
    fmt, error = _format(tree, forced_format)
    if error:
        return FileFormat(None, declared, error=error)
    if fmt == "native":
        return FileFormat("native", declared)
    compiles = _compiles_cpp(tree)
    if compiles:
        # Checked before any backend: whatever else the file uses, its module body would build C++ at import.
        return FileFormat(fmt, None, {"format": fmt, "backend": None, "backend_from": (
            f"C++/CUDA built with torch.utils.cpp_extension ({compiles}): no backend of Gauntlet's")}, unsupported=(
            f"{LABELS[fmt]} file compiles C++/CUDA with torch.utils.cpp_extension ({compiles}): Gauntlet runs no "
            "compiler for candidates (no backend builds C++ inside the confined worker). Port the kernel to Triton "
            "(@triton.jit), or to CUDA through CuPy (cupy.RawKernel, a GPU is needed), or judge it elsewhere"))
    if forced_backend:
        backend, how = forced_backend, "--backend"
    elif declared:
        backend, how = declared, "BACKEND in the file"
    else:
        backend, how = _backend(tree)
        if backend is None:
            return FileFormat(fmt, None, {"format": fmt}, error=f"{LABELS[fmt]} file: {how}")
    return FileFormat(fmt, backend, {"format": fmt, "backend": backend, "backend_from": how})


def defined_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(functions and assigned names, classes) defined at the top level of a module, including under `if`/`try`."""
    names, classes = set(), set()
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            classes.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names, classes


def _top_level(body):
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body + node.orelse + node.finalbody
                                  + [n for h in node.handlers for n in h.body])


def _markers(tree: ast.Module) -> dict[str, str]:
    """format -> the name that marks it, for each format whose mark the file carries."""
    names, classes = defined_names(tree)
    found = {}
    if "solve" in names:
        found["native"] = "solve"
    if "ModelNew" in classes or "ModelNew" in names:
        found["kernelbench"] = "class ModelNew"
    if "custom_kernel" in names:
        found["gpumode"] = "custom_kernel"
    if not found and "BACKEND" in names:
        found["native"] = "BACKEND"        # a native file that lost its solve: the worker says what it lacks
    return found


def _format(tree, forced) -> tuple[str | None, str | None]:
    found = _markers(tree)
    if forced and forced != "auto":
        if forced not in FORMATS:
            return None, f"unknown format {forced!r}; known: {', '.join(FORMATS)}"
        if forced not in found:
            need = {"native": "no solve()", "kernelbench": "no class ModelNew", "gpumode": "no custom_kernel()"}
            return None, (f"judged as {LABELS[forced]} (--format {forced}) but the file defines {need[forced]}"
                          + (f"; it looks like {LABELS[next(iter(found))]}" if found else ""))
        return forced, None
    if len(found) == 1:
        return next(iter(found)), None
    if not found:
        return None, ("the file is none of the formats Gauntlet judges: a native solution defines BACKEND = "
                      f"{' | '.join(repr(b) for b in _BACKENDS)} and solve(*inputs); a KernelBench file defines "
                      "class ModelNew(nn.Module) (and get_init_inputs() when its constructor takes arguments); a "
                      "GPU MODE submission defines custom_kernel(data). See docs/guide.md, \"The other formats: "
                      "KernelBench and GPU MODE files\"")
    marks = ", ".join(f"{mark} ({LABELS[f]})" for f, mark in found.items())
    return None, f"the file defines the marks of several formats: {marks}; say which with --format"


def _aliases(tree: ast.Module, module: str) -> tuple[set[str], set[str]]:
    """(names bound to `module` or a submodule of it, names imported from it) anywhere in the file."""
    mods, members = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == module or a.name.startswith(module + "."):
                    mods.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == module or node.module.startswith(module + ".")):
            members |= {a.asname or a.name for a in node.names}
    return mods, members


def _triton_kernels(tree: ast.Module) -> list[str]:
    """Functions made Triton kernels: decorated with (or passed to) triton.jit / autotune / heuristics."""
    mods, members = _aliases(tree, "triton")
    kinds = {"jit", "autotune", "heuristics"}

    def is_triton(node) -> bool:
        node = node.func if isinstance(node, ast.Call) else node
        if isinstance(node, ast.Attribute):
            return node.attr in kinds and isinstance(node.value, ast.Name) and node.value.id in mods
        return isinstance(node, ast.Name) and node.id in members and node.id in kinds | {"jit"}

    found = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(map(is_triton,
                                                                                           n.decorator_list))]
    found += [n.targets[0].id for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
              and is_triton(n.value) and isinstance(n.targets[0], ast.Name)]
    return found


def _backend(tree: ast.Module) -> tuple[str | None, str]:
    """(backend, how it was found) from what the file uses; (None, why) when it is ambiguous."""
    uses = {}
    kernels = _triton_kernels(tree)
    if kernels:
        uses["triton"] = f"@triton.jit kernel(s) {', '.join(sorted(set(kernels))[:5])}"
    if any(_aliases(tree, "cupy")):
        uses["cupy"] = "imports cupy"
    if any(_aliases(tree, "cutlass")):
        uses["cute"] = "imports cutlass (CuTe DSL)"
    if len(uses) > 1:
        return None, (f"it uses several backends ({'; '.join(f'{b}: {w}' for b, w in uses.items())}); say which "
                      "with --backend or a BACKEND = '...' line")
    if uses:
        backend, how = next(iter(uses.items()))
        return backend, f"detected: {how}"
    return "torch", "detected: no Triton kernel, CuPy or CuTe DSL in the file: plain torch"


def _compiles_cpp(tree: ast.Module) -> str:
    """How the file reaches torch.utils.cpp_extension ('' when it does not)."""
    mods, members = _aliases(tree, "torch.utils.cpp_extension")
    used = sorted(m for m in members if m in ("load_inline", "load", "CUDAExtension", "CppExtension"))
    if used:
        return ", ".join(used)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("load_inline", "cpp_extension"):
            return node.attr
    return ""


# --- the problem's side: can this format be judged on this problem? ---------------------------------------------

def problem_support(problem, fmt: str | None) -> str | None:
    """None when `problem` can judge a file of format `fmt`; else why not (the user paired a file with a problem the
    adapter has no mapping for). GPU MODE files fit every problem: `data` is the problem's inputs tuple."""
    if fmt != "kernelbench":
        return None
    mapping = problem.kernelbench
    if mapping is None:
        return (f"problem {problem.id} states no KernelBench mapping, so a KernelBench file cannot be judged on it. "
                f"To judge one, add to {problem.root / 'problem.yaml'}:\n  {suggested_mapping(problem)}\n"
                "(`inputs` names make_inputs' outputs in order; move into `parameters: [...]` those the module "
                "holds as its own weights, which the judge then sets from the inputs)")
    if mapping.get("unsupported"):
        return f"problem {problem.id} takes no KernelBench files: {mapping['unsupported']}"
    return None


def suggested_mapping(problem) -> str:
    """The `kernelbench:` line to add, its inputs named as the problem's reference() takes them (read with ast from
    reference.py: nothing runs), else A, B, ... one per argument it cannot name."""
    names = []
    try:
        tree = ast.parse((problem.root / "reference.py").read_text())
        ref = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "reference")
        names = [a.arg for a in ref.args.posonlyargs + ref.args.args]
    except (OSError, SyntaxError, StopIteration, UnicodeDecodeError):
        pass
    names = names or ["A", "B"]
    return f"kernelbench: {{inputs: [{', '.join(names)}]}}"


def describe_mapping(problem, fmt: str) -> str:
    """The mapping in one line, for the record and the printed verdict."""
    if fmt == "gpumode":
        return "custom_kernel(data), data = make_inputs' tuple; its return value is the output"
    mapping = problem.kernelbench or {}
    params = list(mapping.get("parameters", []))
    args = [n for n in mapping.get("inputs", []) if n not in params]
    return f"ModelNew(*get_init_inputs()).forward({', '.join(args)})" + (
        f" with its parameters {', '.join(params)} taken from the inputs" if params else "")
