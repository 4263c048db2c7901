"""`@triton.autotune` under Triton's CPU interpreter: run one config, picked by a fixed rule, and say which.

Why this exists. On the first call of each key, Triton's `Autotuner.run` benchmarks every config with the active
GPU driver's benchmarker (`driver.active.get_benchmarker()`, triton/runtime/autotuner.py, Triton 3.6.0). Under
TRITON_INTERPRET=1 there is no driver ("0 active drivers"), so every autotuned kernel, the common idiom in
third-party Triton code, would crash on the CPU before computing anything.

The rule. The interpreter runs the first config left after the autotuner's own pruning (`prune_configs_by`:
`early_config_prune`, then `perf_model` / `top_k`, exactly as Triton applies them, so with a perf model it is the
model's favourite). A CPU cannot know which config a GPU would time fastest; a kernel must be right with every
config it lists anyway. Each launch is marked `name [autotune: config 2 of 3: BLOCK=64, num_warps=4, num_stages=3]`
(gauntlet.backends.triton_interpreter.mark_launches), so the judgement record lists the config under the dtype's
`kernels`, and the worker's stderr says it once per kernel and config.

What stays as on the GPU: the rest of `Autotuner.run` runs unchanged. The per-key cache (the rule runs once per new
key, i.e. new values of `key`'s arguments or new argument dtypes), the check that call arguments do not redefine a
tuned meta-parameter, and the hooks around tuning: the chosen config is "benchmarked" by exactly one run wrapped as
Triton wraps each benchmark run (config.pre_hook, pre_hook: `reset_to_zero` zeroes and `restore_value` copies, the
kernel, post_hook: `restore_value` restores), then `pre_hook(reset_only=True)` zeroes the `reset_to_zero` arguments
again, then config.pre_hook and the real run. So a kernel that accumulates into its output (atomics, split-K)
without declaring `reset_to_zero` is wrong here as it is on the GPU, where the benchmark runs it many times before
the real call, and one that declares it is right. A later call with a known key runs the cached config with no
hooks, as on the GPU. A single config is run without benchmark or hooks, as Triton does. `@triton.heuristics` needs
nothing: it only computes meta-parameters on the host.

Not the same: configs the GPU would drop because they do not compile or fit (OutOfResources, ptxas errors) are not
known here, so the first config is run even if the GPU would reject it.
"""
from __future__ import annotations

import inspect
import sys
import threading
import warnings

_MARK = "_gauntlet_autotune_patch"     # attribute on Autotuner: the original methods, so patching twice is a no-op
_local = threading.local()            # the autotuners whose run() is on this thread's stack, innermost last


def unsupported_internals(autotuner_cls) -> list[str]:
    """What about this Triton's Autotuner differs from what the patch relies on ([] when it matches)."""
    problems = []
    methods = {**autotuner_cls.__dict__, **autotuner_cls.__dict__.get(_MARK, {})}    # Triton's own, if patched
    for name, params in (("prune_configs", ["self", "kwargs"]), ("run", ["self", "args", "kwargs"]),
                         ("_bench", ["self", "args", "config", "meta"])):
        fn = methods.get(name)
        if fn is None or list(inspect.signature(fn).parameters) != params:
            problems.append(f"Autotuner.{name} is missing or its signature changed")
    if "do_bench" not in methods:
        problems.append("Autotuner.do_bench is missing")
    sources = {name: _source(methods.get(name)) for name in ("run", "_bench")}
    for name, needle in (("run", "self.prune_configs(kwargs)"), ("run", "reset_only=True"),
                         ("_bench", "self.do_bench(kernel_call")):
        if needle not in sources[name]:
            problems.append(f"Autotuner.{name} no longer calls {needle!r}")
    return problems


def patch_autotuner() -> bool:
    """Make Triton's Autotuner run one config without benchmarking when the interpreter runs its kernels (see the
    module docstring); outside the interpreter it behaves as before. Returns True when the patch is in place, False
    (with a warning) when this Triton's Autotuner is not the one the patch was written for. Idempotent."""
    from triton.runtime import autotuner as at
    cls = at.Autotuner
    if _MARK in cls.__dict__:
        return True
    problems = unsupported_internals(cls)
    if problems:
        warnings.warn("triton_autotune.patch_autotuner: autotuned kernels will crash under the interpreter; this "
                      "Triton's Autotuner differs: " + "; ".join(problems))
        return False
    originals = {name: cls.__dict__[name] for name in ("prune_configs", "run", "do_bench")}

    def prune_configs(self, kwargs):
        pruned = list(originals["prune_configs"](self, kwargs))
        if not _interpreting():
            return pruned
        chosen = pruned[:1]
        if chosen and not any(c is chosen[0] for c in self.configs):
            # made by early_config_prune, not one of self.configs: kept (the last few) to name it at launch
            self._gauntlet_made = (getattr(self, "_gauntlet_made", []) + chosen)[-8:]
        if chosen:
            _announce(self, chosen[0])
        return chosen

    def run(self, *args, **kwargs):
        stack = _stack()
        stack.append(self)
        try:
            return originals["run"](self, *args, **kwargs)
        finally:
            stack.pop()

    cls.prune_configs = prune_configs
    cls.run = run
    # Replaces a cached_property, and the user's own do_bench too: both need the GPU driver.
    cls.do_bench = property(lambda self: _run_once if _interpreting() else originals["do_bench"].__get__(self, cls))
    setattr(cls, _MARK, originals)
    return True


def unpatch_autotuner() -> bool:
    """Put Triton's Autotuner methods back (for tests that show the crash). True if a patch was undone."""
    from triton.runtime import autotuner as at
    originals = at.Autotuner.__dict__.get(_MARK)
    if originals is None:
        return False
    for name, fn in originals.items():
        setattr(at.Autotuner, name, fn)
    delattr(at.Autotuner, _MARK)
    return True


def launch_note(kwargs: dict) -> str:
    """'autotune: config i of n: ...' for a launch made by the innermost running autotuner, matched on the launch's
    meta-parameters; '' for a launch that no autotuner made."""
    stack = _stack()
    if not stack:
        return ""
    tuner = stack[-1]
    for config in list(tuner.configs) + getattr(tuner, "_gauntlet_made", []):
        if all(k in kwargs and _same(kwargs[k], v) for k, v in config.all_kwargs().items()):
            return f"autotune: {_position(tuner, config)}: {describe(config)}"[:300]   # values are the author's
    return ""


def describe(config) -> str:
    """A config's meta-parameters and launch options, as a kernel author writes them."""
    parts = [f"{k}={v}" for k, v in config.kwargs.items()]
    parts += [f"num_warps={config.num_warps}", f"num_stages={config.num_stages}"]
    parts += [f"num_ctas={config.num_ctas}"] if config.num_ctas != 1 else []
    parts += [f"maxnreg={config.maxnreg}"] if config.maxnreg is not None else []
    return ", ".join(parts)


def _run_once(kernel_call, quantiles=None, **_):
    """The interpreter's stand-in for the GPU benchmarker: one run, with the hooks the autotuner put around it,
    and a time of 0 for every quantile (the rule, not a time, picks the config)."""
    kernel_call()
    return [0.0] * len(quantiles) if quantiles else 0.0


def _position(tuner, config) -> str:
    index = next((i for i, c in enumerate(tuner.configs) if c is config), None)
    if index is None:
        return "a config made by early_config_prune"
    return f"config {index + 1} of {len(tuner.configs)}"


def _announce(tuner, config) -> None:
    # Remembered on the autotuner, not in this module: the child's state snapshot treats harness module data as
    # the harness's own and would see a module-level set grow during solve as tampering.
    name = getattr(getattr(tuner, "base_fn", None), "__name__", "kernel")
    key = (_position(tuner, config), describe(config))
    announced = tuner.__dict__.setdefault("_gauntlet_announced", set())
    if key in announced:
        return
    announced.add(key)
    print(f"gauntlet: Triton interpreter: autotuned kernel {name} runs {_position(tuner, config)} without "
          f"benchmarking (the first config left after prune_configs_by): {describe(config)}", file=sys.stderr)


def _interpreting() -> bool:
    # Checked per call, so an Autotuner in a process that also runs kernels on a GPU keeps benchmarking there.
    from triton import knobs
    return bool(knobs.runtime.interpret)


def _same(a, b) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - a value without a plain ==
        return a is b


def _stack() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _source(fn) -> str:
    try:
        return inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return ""
