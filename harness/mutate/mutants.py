"""Small, honest-looking bugs planted in a Triton solution's kernel source: the operators of `gauntlet mutate`.

Why: a judge that passes every shipped kernel says nothing about the bugs it would miss. Each mutant here is one
edit a kernel author could plausibly make (an off-by-one mask, a dropped tail, a swapped stride), so the fraction
of mutants the judge rejects measures its net, and each escape names a hole or an equivalent mutant.

Pure and deterministic: source text in, mutants out; nothing here imports, runs or judges the candidate. The
source is read with `ast` and each mutant is one or two splices of the original text at the node's position
(`ast.unparse` only for the replaced node), so a mutant's diff is the bug and nothing else: comments, layout and
every other line stay as they were. Only functions decorated with `...jit` (the kernels) are mutated; the host
code around them (config, grid, allocation) is not.

The operator set (fixed; `OPERATORS` in this order):

- `strict_compare`  a comparison's strictness flipped: `a < b` <-> `a <= b`, `a > b` <-> `a >= b` (masks, bounds).
- `bound_off_by_one` the bound of a comparison moved by one: `a < b` -> `a < b - 1`, `a > b` -> `a > b + 1`
                    (same for `<=` / `>=`); not for float constants (`l > 0.0` is a guard, not a bound).
- `swap_strides`    two different stride arguments swapped within one statement (`x * stride_am + y * stride_ak`
                    -> `x * stride_ak + y * stride_am`). A stride is a kernel parameter, not a pointer and not a
                    `constexpr`, used as a factor of a product.
- `drop_tail`       a rounded-up division made a floor one: `tl.cdiv(a, b)` and `(a + b - 1) // b` -> `a // b`
                    (the last, partial block is never visited).
- `acc_dtype`       an accumulator's dtype narrowed: `acc = tl.zeros/tl.full(..., dtype=tl.float32)` ->
                    `tl.float16`, `tl.bfloat16`; `tl.int32` -> `tl.float32`, `tl.int16`. An accumulator is a name
                    the kernel assigns again inside a loop (a sum, a running max). With fp16, a `tl.dot(a, b, acc)`
                    feeding it gets `out_dtype=tl.float16` too (Triton refuses a mismatch; fp16 accumulation with
                    fp16 operands is legal and is the real bug).
- `scale_dropped`   a scale factor not applied: `x * s` -> `x`, `x / s` and `div_rn(x, s)` -> `x`.
- `scale_twice`     a scale factor applied twice: `x * s` -> `x * (s * s)`, `x / s` -> `x / (s * s)`.
- `scale_swap`      one scale used for the other: two different scales swapped within a statement, or a load from
                    one scale pointer reading another (`tl.load(sa_ptr + i)` -> `tl.load(sb_ptr + i)`).
                    A scale is a name containing `scale`, a pointer named like `sa_ptr`/`s_ptrs`, or a local loaded
                    from such a pointer.
- `pid_shift`       a program id off by one: `tl.program_id(i)` -> `(tl.program_id(i) + 1)`.
- `offset_shift`    an offset vector off by one: `tl.arange(a, b)` -> `(tl.arange(a, b) + 1)`.
- `drop_other`      a masked load's fill dropped: `tl.load(p, mask=m, other=0.0)` -> `tl.load(p, mask=m)`.

A mutant whose syntax tree equals the original's (or another mutant's) is never produced.
"""
from __future__ import annotations

import ast
import difflib
import random
import re
from dataclasses import dataclass

OPERATORS = ("strict_compare", "bound_off_by_one", "swap_strides", "drop_tail", "acc_dtype", "scale_dropped",
             "scale_twice", "scale_swap", "pid_shift", "offset_shift", "drop_other")

_FLIP = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_NARROWER = {"float32": ("float16", "bfloat16"), "int32": ("float32", "int16")}
_SCALE_PTR = re.compile(r"^s[a-z0-9]?_ptrs?$")
# A replaced expression needs no parentheses where it stands alone: as a call argument, a keyword value, an
# assignment's value, a subscript index, an element of a tuple.
_SAFE_PARENTS = (ast.Call, ast.keyword, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Tuple, ast.List,
                 ast.Expr, ast.Slice)


@dataclass(frozen=True)
class Edit:
    """Replace source[start:end] (character offsets into the original text) with `text`."""
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Mutant:
    operator: str
    description: str        # what was changed, in words a reader of the kernel recognises
    line: int               # 1-based line of the (first) edit in the original source
    function: str           # the kernel it is in
    source: str             # the whole mutated file

    def diff(self, original: str, path: str = "solution.py") -> str:
        return "".join(difflib.unified_diff(original.splitlines(keepends=True), self.source.splitlines(keepends=True),
                                            f"a/{path}", f"b/{path}", n=0))


class NotMutable(ValueError):
    """The file cannot be mutated: it does not parse, or it has no Triton kernel. The user's input, not a verdict."""


# --- source positions ----------------------------------------------------------------------------------------------

class _Source:
    """The original text and a map from ast positions (line, UTF-8 byte column) to character offsets."""

    def __init__(self, text: str):
        self.text = text
        # Split at "\n" only: ast counts lines that way, str.splitlines also splits at form feeds and the like.
        self.lines = re.split(r"(?<=\n)", text)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.text[a:b]

    def apply(self, edits: list[Edit]) -> str:
        out = self.text
        for e in sorted(edits, key=lambda e: e.start, reverse=True):
            out = out[:e.start] + e.text + out[e.end:]
        return out


@dataclass
class _Site:
    operator: str
    description: str
    node: ast.AST
    edits: list


# --- the kernel and what its names mean ---------------------------------------------------------------------------

def _is_jit(func: ast.FunctionDef) -> bool:
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if ast.unparse(target).split(".")[-1] == "jit":
            return True
    return False


def kernels(tree: ast.Module) -> list[ast.FunctionDef]:
    """The `@triton.jit` functions of a module, top level (where Triton needs them), in source order."""
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and _is_jit(n)]


@dataclass
class _Kernel:
    func: ast.FunctionDef
    params: set
    constexpr: set
    parents: dict
    scale_ptrs: set
    scales: set

    @classmethod
    def of(cls, func: ast.FunctionDef) -> "_Kernel":
        args = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
        params = {a.arg for a in args}
        constexpr = {a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
        parents = {child: parent for parent in ast.walk(func) for child in ast.iter_child_nodes(parent)}
        names = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)} | params
        scale_ptrs = {n for n in names if _SCALE_PTR.match(n) or ("scale" in n.lower() and "ptr" in n.lower())}
        scales = {n for n in names if "scale" in n.lower() and "ptr" not in n.lower()}
        for node in ast.walk(func):      # locals loaded from a scale pointer are scales
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and _is_call(node.value, "load") and node.value.args
                    and _root_name(node.value.args[0]) in scale_ptrs):
                scales.add(node.targets[0].id)
        return cls(func, params, constexpr, parents, scale_ptrs, scales)

    def is_stride(self, name: str) -> bool:
        return name in self.params and name not in self.constexpr and "ptr" not in name


def _is_call(node: ast.AST, attr: str) -> bool:
    """`tl.<attr>(...)` or `<anything>.<attr>(...)` (tl.math.div_rn), or a bare `<attr>(...)`."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == attr) or (isinstance(f, ast.Name) and f.id == attr)


def _root_name(node: ast.AST) -> str | None:
    """The leftmost name of a pointer expression: `sa_ptr` in `sa_ptr + offs * 2`."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.BinOp):
            node = node.left
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        else:
            return None


def _scale_name(node: ast.AST, k: _Kernel) -> str | None:
    """`s` or `s[:, None]` where s is a scale: the factor a scale operator moves."""
    base = node.value if isinstance(node, ast.Subscript) else node
    return base.id if isinstance(base, ast.Name) and base.id in k.scales else None


def _statement_parts(func: ast.FunctionDef):
    """Each simple statement whole, and only the header expression of a compound one (so a name swap stays within
    one line of thought)."""
    for node in ast.walk(func):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            yield node.iter
        elif isinstance(node, (ast.If, ast.While)):
            yield node.test
        elif isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.With, ast.Try)):
            yield node


# --- operators -----------------------------------------------------------------------------------------------------

_ATOMS = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)
_PRECEDENCE = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2, ast.Mod: 2}


def _wrap(text: str, node: ast.AST, k: _Kernel, replacement: ast.AST | None = None) -> str:
    """`text` (the source of `replacement`) standing where `node` stood, in parentheses only where the meaning
    would change without them (so the diff shows the bug, not extra punctuation)."""
    parent = k.parents.get(node)
    if isinstance(replacement, _ATOMS) or isinstance(parent, _SAFE_PARENTS):
        return text
    if isinstance(replacement, ast.BinOp) and isinstance(parent, ast.BinOp):
        mine, theirs = _PRECEDENCE.get(type(replacement.op)), _PRECEDENCE.get(type(parent.op))
        if mine is not None and theirs is not None and (mine > theirs or (mine == theirs and parent.left is node)):
            return text
    return f"({text})"


def _compares(src: _Source, k: _Kernel):
    for node in ast.walk(k.func):
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP):
            continue
        op, right = type(node.ops[0]), node.comparators[0]
        # The operator's own text lies between the two operands: replace just that.
        a = src.offset(node.left.end_lineno, node.left.end_col_offset)
        b = src.offset(right.lineno, right.col_offset)
        between = src.text[a:b]
        text = between.replace(_SYMBOL[op], _FLIP[op], 1)
        if text != between:
            yield _Site("strict_compare", f"`{src.segment(node)}`: `{_SYMBOL[op]}` -> `{_FLIP[op]}`", node,
                        [Edit(a, b, text)])
        if isinstance(right, ast.Constant) and isinstance(right.value, float):
            continue
        sign = "-" if op in (ast.Lt, ast.LtE) else "+"
        atom = isinstance(right, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)) or (
            isinstance(right, ast.BinOp) and isinstance(right.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)))
        bound = src.segment(right)
        if isinstance(right, ast.Constant) and isinstance(right.value, int):
            moved = str(right.value - 1 if sign == "-" else right.value + 1)
        else:
            moved = f"{bound if atom else '(' + bound + ')'} {sign} 1"
        yield _Site("bound_off_by_one", f"`{src.segment(node)}`: bound `{bound}` -> `{moved}`", node,
                    [Edit(*src.span(right), moved)])


def _strides(src: _Source, k: _Kernel):
    for part in _statement_parts(k.func):
        found = []
        for node in ast.walk(part):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                for side in (node.left, node.right):
                    if isinstance(side, ast.Name) and k.is_stride(side.id):
                        found.append(side)
        found.sort(key=lambda n: (n.lineno, n.col_offset))
        for x, y in zip(found, found[1:]):
            if x.id != y.id:
                yield _Site("swap_strides", f"`{x.id}` <-> `{y.id}` in `{_first_line(src.segment(part))}`", x,
                            [Edit(*src.span(x), y.id), Edit(*src.span(y), x.id)])


def _tails(src: _Source, k: _Kernel):
    for node in ast.walk(k.func):
        num = den = None
        if _is_call(node, "cdiv") and len(node.args) == 2:
            num, den = node.args
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            num, den = _ceil_numerator(node.left, node.right)
        if num is None:
            continue
        floor = ast.unparse(ast.BinOp(num, ast.FloorDiv(), den))
        yield _Site("drop_tail", f"`{src.segment(node)}` -> `{floor}`", node,
                    [Edit(*src.span(node), _wrap(floor, node, k, ast.BinOp(num, ast.FloorDiv(), den)))])


def _ceil_numerator(left: ast.AST, den: ast.AST):
    """(a, b) when `left // den` is the round-up `(a + b - 1) // b` or `(a + (b - 1)) // b`; else (None, None)."""
    d = ast.dump(den)
    one = lambda n: isinstance(n, ast.Constant) and n.value == 1          # noqa: E731
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Sub) and one(left.right):
        inner = left.left
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add) and ast.dump(inner.right) == d:
            return inner.left, den
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add):
        r = left.right
        if isinstance(r, ast.BinOp) and isinstance(r.op, ast.Sub) and one(r.right) and ast.dump(r.left) == d:
            return left.left, den
    return None, None


def _accumulators(func: ast.FunctionDef) -> set:
    """Names assigned again inside a loop of the kernel: what a loop accumulates into (a sum, a running max)."""
    names = set()
    for loop in ast.walk(func):
        if isinstance(loop, (ast.For, ast.While)):
            for node in ast.walk(loop):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, ast.AugAssign) else [])
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _acc_dtypes(src: _Source, k: _Kernel):
    accumulators = _accumulators(k.func)
    for node in ast.walk(k.func):
        if not (_is_call(node, "zeros") or _is_call(node, "full")):
            continue
        owner = k.parents.get(node)
        if not (isinstance(owner, ast.Assign) and len(owner.targets) == 1 and isinstance(owner.targets[0], ast.Name)
                and owner.targets[0].id in accumulators):
            continue                # a constant or a one-off buffer, not an accumulator
        slot = 1 if _is_call(node, "zeros") else 2          # tl.zeros(shape, dtype), tl.full(shape, value, dtype)
        dtype = next((kw.value for kw in node.keywords if kw.arg == "dtype"), None)
        if dtype is None and len(node.args) > slot:
            dtype = node.args[slot]
        if not (isinstance(dtype, ast.Attribute) and dtype.attr in _NARROWER):
            continue
        module = ast.unparse(dtype.value)
        for narrow in _NARROWER[dtype.attr]:
            edits = [Edit(*src.span(dtype), f"{module}.{narrow}")]
            if narrow == "float16":
                edits += _dot_out_dtype(src, k, owner.targets[0].id, f"{module}.{narrow}")
            yield _Site("acc_dtype", f"`{src.segment(node)}`: `{dtype.attr}` -> `{narrow}`"
                        + (" (and `out_dtype` of the tl.dot that accumulates into it)" if len(edits) > 1 else ""),
                        node, edits)


def _dot_out_dtype(src: _Source, k: _Kernel, acc: str, dtype: str) -> list[Edit]:
    """Edits that make every `tl.dot(a, b, acc)` accumulating into `acc` produce `dtype` too: Triton refuses an
    accumulator whose dtype is not the dot's `out_dtype`, and fp16 accumulation (`out_dtype=tl.float16`, legal for
    fp16 operands) is the bug a kernel author would really write."""
    edits = []
    for node in ast.walk(k.func):
        if not (_is_call(node, "dot") and len(node.args) >= 3 and isinstance(node.args[2], ast.Name)
                and node.args[2].id == acc):
            continue
        out = next((kw for kw in node.keywords if kw.arg == "out_dtype"), None)
        if out is not None:
            edits.append(Edit(*src.span(out.value), dtype))
        else:
            last = max(list(node.args) + [kw.value for kw in node.keywords], key=lambda n: (n.end_lineno,
                                                                                             n.end_col_offset))
            at = src.offset(last.end_lineno, last.end_col_offset)
            edits.append(Edit(at, at, f", out_dtype={dtype}"))
    return edits


def _scale_ops(src: _Source, k: _Kernel):
    for node in ast.walk(k.func):
        pairs = []                                  # (kept operand, scale factor, is it a division)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            pairs = [(node.right, node.left, False), (node.left, node.right, False)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            pairs = [(node.left, node.right, True)]
        elif (_is_call(node, "div_rn") or _is_call(node, "fdiv")) and len(node.args) == 2:
            pairs = [(node.args[0], node.args[1], True)]
        for kept, factor, div in pairs:
            name = _scale_name(factor, k)
            if name is None:
                continue
            whole, f = src.segment(node), src.segment(factor)
            yield _Site("scale_dropped", f"`{whole}`: scale `{name}` not applied", node,
                        [Edit(*src.span(node), _wrap(src.segment(kept), node, k, kept))])
            yield _Site("scale_twice", f"`{whole}`: scale `{name}` applied twice", node,
                        [Edit(*src.span(factor), f"({f} * {f})")])
    for part in _statement_parts(k.func):           # two scales of one statement swapped
        found = sorted((n for n in ast.walk(part) if isinstance(n, ast.Name) and n.id in k.scales
                        and isinstance(n.ctx, ast.Load)), key=lambda n: (n.lineno, n.col_offset))
        for x, y in zip(found, found[1:]):
            if x.id != y.id:
                yield _Site("scale_swap", f"`{x.id}` <-> `{y.id}` in `{_first_line(src.segment(part))}`", x,
                            [Edit(*src.span(x), y.id), Edit(*src.span(y), x.id)])
    for node in ast.walk(k.func):                   # a load from the other scale pointer
        if not (_is_call(node, "load") and node.args):
            continue
        root = _root_name(node.args[0])
        if root not in k.scale_ptrs:
            continue
        suffix = root.rsplit("_", 1)[-1]
        target = next(n for n in ast.walk(node.args[0]) if isinstance(n, ast.Name) and n.id == root)
        for other in sorted(p for p in k.scale_ptrs if p != root and p.rsplit("_", 1)[-1] == suffix):
            yield _Site("scale_swap", f"`{src.segment(node)}` reads `{other}` instead of `{root}`", node,
                        [Edit(*src.span(target), other)])


def _shifts(src: _Source, k: _Kernel):
    for node in ast.walk(k.func):
        for attr, op in (("program_id", "pid_shift"), ("arange", "offset_shift")):
            if _is_call(node, attr):
                text = src.segment(node)
                yield _Site(op, f"`{text}` -> `{text} + 1`", node, [Edit(*src.span(node), f"({text} + 1)")])


def _others(src: _Source, k: _Kernel):
    for node in ast.walk(k.func):
        if not _is_call(node, "load"):
            continue
        items = sorted(list(node.args) + [kw for kw in node.keywords],
                       key=lambda n: (n.lineno, n.col_offset))
        for i, kw in enumerate(items):
            if isinstance(kw, ast.keyword) and kw.arg == "other" and i > 0:
                a = src.offset(items[i - 1].end_lineno, items[i - 1].end_col_offset)   # from the comma before it
                b = src.offset(kw.end_lineno, kw.end_col_offset)
                yield _Site("drop_other", f"`{src.segment(node)}`: `{src.segment(kw)}` dropped", node,
                            [Edit(a, b, "")])


_FINDERS = (_compares, _strides, _tails, _acc_dtypes, _scale_ops, _shifts, _others)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 90 else line[:87] + "..."


# --- generation and selection ---------------------------------------------------------------------------------------

def generate(source: str, operators: tuple = OPERATORS) -> list[Mutant]:
    """Every mutant of the operator set, in source order (line, column, operator). Raises NotMutable when the
    source does not parse or has no `@triton.jit` kernel."""
    unknown = [op for op in operators if op not in OPERATORS]
    if unknown:
        raise NotMutable(f"unknown mutation operator(s) {unknown}; known: {', '.join(OPERATORS)}")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotMutable(f"the solution does not parse (line {exc.lineno}: {exc.msg}): nothing to mutate") from None
    funcs = kernels(tree)
    if not funcs:
        raise NotMutable("the solution has no @triton.jit kernel at the top level: nothing to mutate")
    src = _Source(source)
    # Edits stay inside one kernel, so comparing that kernel's tree is comparing the programs (and much cheaper).
    seen = {(f.name, ast.dump(f)) for f in funcs}
    out = []
    sites = []
    for func in funcs:
        k = _Kernel.of(func)
        for finder in _FINDERS:
            sites += [(s, func.name) for s in finder(src, k) if s.operator in operators]
    order = {op: i for i, op in enumerate(OPERATORS)}
    sites.sort(key=lambda sf: (sf[0].node.lineno, sf[0].node.col_offset, order[sf[0].operator], sf[0].description))
    for site, fname in sites:
        text = src.apply(site.edits)
        try:
            dump = (fname, ast.dump(next(f for f in kernels(ast.parse(text)) if f.name == fname)))
        except (SyntaxError, StopIteration):
            continue            # a splice that broke the syntax is an operator's mistake, not a bug a human makes
        if dump in seen:
            continue            # the same program as the original, or as an earlier mutant
        seen.add(dump)
        line = src.text.count("\n", 0, min(e.start for e in site.edits)) + 1
        out.append(Mutant(site.operator, site.description, line, fname, text))
    return out


def select(mutants: list[Mutant], max_n: int, seed: int) -> list[Mutant]:
    """At most `max_n` mutants, the same ones for the same seed: stratified by operator (each operator's mutants
    shuffled with the seed, then taken round-robin in OPERATORS order) so a cap keeps every kind of bug that the
    kernel offers; returned in source order."""
    if len(mutants) <= max_n:
        return list(mutants)
    rng = random.Random(seed)
    groups = []
    for op in OPERATORS:
        group = [m for m in mutants if m.operator == op]
        rng.shuffle(group)
        groups.append(group)
    chosen = []
    while len(chosen) < max_n:
        for group in groups:
            if group and len(chosen) < max_n:
                chosen.append(group.pop(0))
    index = {id(m): i for i, m in enumerate(mutants)}
    return sorted(chosen, key=lambda m: index[id(m)])


__all__ = ["Mutant", "NotMutable", "OPERATORS", "generate", "kernels", "select"]
