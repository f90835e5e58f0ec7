"""The generated Python runner of a CUDA executable: its memo's layout and its text.

A runner (see tirx/backend/cuda/executable.py's docstring) is Python source generated per
parameter signature and compiled once (:func:`runner_code`, cached by signature): the checks a
call must pass, the memo hit that skips them, the launch. The memo entry's layout is named once
here (:data:`MEMO`); the C runner (``_launch.c``) must agree with it.
"""

from __future__ import annotations

import functools
import types
import weakref
from typing import NamedTuple

from ...executable import float_overflow, int_range
from ...ir import nodes as ir

__all__ = ["MEMO", "MemoLayout", "remember", "slot", "runner_code", "runner_source"]


def _nothing():
    """Stands in for a weak reference before the first check: no tensor is ever it."""
    return None


class MemoLayout(NamedTuple):
    """Where things are in a memo entry (a tuple), named once for the Python runner, the memo
    builder and ``_launch.c`` (whose ``MEMO_LAYOUT`` must equal :data:`MEMO`, or the compiled
    runner is not used): ``per_tensor`` fields per tensor at offsets ``ref`` (weak reference),
    ``version`` (its version counter) and ``pointer`` (its data pointer); then, after all
    tensors, the packed argument block at ``block`` and its params address at ``params``."""

    per_tensor: int
    ref: int
    version: int
    pointer: int
    block: int
    params: int

    def tensor(self, i: int, field: int) -> int:
        return self.per_tensor * i + field

    def tail(self, tensors: int, field: int) -> int:
        return self.per_tensor * tensors + field

    def entry(self, fields: list, packed) -> tuple:
        """An entry from per-tensor ``(ref, version, pointer)`` triples and ``(block, params)``."""
        out = [None] * self.tail(len(fields), 2)
        for i, (ref, version, pointer) in enumerate(fields):
            out[self.tensor(i, self.ref)] = ref
            out[self.tensor(i, self.version)] = version
            out[self.tensor(i, self.pointer)] = pointer
        block, params = packed
        out[self.tail(len(fields), self.block)] = block
        out[self.tail(len(fields), self.params)] = params
        return tuple(out)

    def empty(self, tensors: int, packed=(None, 0)) -> tuple:
        """An entry no call matches (before the first check, or for unrememberable tensors)."""
        return self.entry([(_nothing, -1, -1)] * tensors, packed)


MEMO = MemoLayout(per_tensor=3, ref=0, version=1, pointer=2, block=0, params=1)


def remember(tensors, pointers, packed) -> tuple:
    """The memo entry for tensors that passed the checks: per tensor a weak reference, its
    version counter and its data pointer; then the packed block and its params address."""
    fields = []
    for t, p in zip(tensors, pointers):
        try:
            fields.append((weakref.ref(t), t._version, p))
        except RuntimeError:  # an inference tensor has no version counter: never remembered
            return MEMO.empty(len(tensors), tuple(packed))
    return MEMO.entry(fields, tuple(packed))


def slot(p, alignment_mask: int = 0, written: bool = False) -> tuple:
    """What the fast check of one parameter looks like (the generated text depends on it). A
    tensor the kernel ``written`` must not require grad on the fast path, hit or miss: the
    checked path decides (it refuses a leaf under grad mode, as torch refuses in-place ops)."""
    if isinstance(p, ir.Buffer):
        return ("tensor", int(alignment_mask), bool(written))
    kind = p.dtype.kind
    if kind == "float":  # and the magnitude that overflows it (inf: none)
        return ("float", float_overflow(p.dtype))
    if kind == "bool":
        return ("bool",)
    return ("int", *int_range(p.dtype))


@functools.lru_cache(maxsize=256)
def runner_code(slots: tuple, ordinal: int, grid, block, smem: int, maps: tuple = ()):
    """The code objects of ``run`` and ``call`` for parameters described by ``slots``."""
    text = runner_source(slots, ordinal, grid, block, smem, maps=maps)
    text += "\n" + runner_source(slots, ordinal, grid, block, smem, variant="call", maps=maps)
    module = compile(text, "<tirx runner>", "exec")
    codes = {c.co_name: c for c in module.co_consts if isinstance(c, types.CodeType)}
    return codes["run"], codes["call"]


def runner_source(
    slots: tuple, ordinal: int, grid=(1, 1, 1), block=(32, 1, 1), smem=0, variant="run", maps=()
) -> str:
    """The text of a runner (see the module docstring) for parameters described by ``slots``:
    ``run(args)``, answering True or False, or (``variant="call"``) ``call(*args)``, which hands
    what it declines to the checked path. ``maps``: per TMA tensor map (a hidden parameter
    after the user's), the index of the tensor it is encoded from, by ``tK(pointer)``, on the
    calls that check the tensors only; the memo keeps the maps (in the packed block, or, for a
    kernel with scalars, in the block's place)."""
    names = [f"a{i}" for i in range(len(slots))]
    tensors = [i for i, slot in enumerate(slots) if slot[0] == "tensor"]
    scalar_checks, tensor_checks, hits, values = [], [], [], []
    for i, slot in enumerate(slots):
        a = names[i]
        if slot[0] == "tensor":
            j = tensors.index(i)
            ref, version, pointer = (
                MEMO.tensor(j, f) for f in (MEMO.ref, MEMO.version, MEMO.pointer)
            )
            hits += [f"m[{ref}]() is {a}", f"{a}._version == m[{version}]", f"p{i} == m[{pointer}]"]
            if len(slot) > 2 and slot[2]:  # written: requires_grad (settable any time) -> checks
                hits.append(f"not {a}.requires_grad")
                tensor_checks.append(f"not {a}.requires_grad")
            tensor_checks += [
                f"{a}.dtype is d{i}",
                f"{a}.shape == s{i}",
                f"{a}.get_device() == {int(ordinal)}",
                f"{a}.is_contiguous()",
            ]
            if slot[1]:  # T.vectorized accesses it as vectors: its pointer must be aligned
                tensor_checks.append(f"not p{i} & {int(slot[1])}")
            values.append(f"p{i}")
        elif slot[0] == "int":
            scalar_checks += [f"type({a}) is int", f"{int(slot[1])} <= {a} <= {int(slot[2])}"]
            values.append(a)
        else:  # float: a Python float as is (an int is converted on the checked path); bool
            scalar_checks.append(f"type({a}) is {slot[0]}")
            if slot[0] == "float" and slot[1] != float("inf"):  # one that would round to an
                # infinity goes to the checked path, which refuses it (inf and nan pass)
                scalar_checks.append(f"(abs({a}) < {slot[1]!r} or {a} - {a} != 0)")
            values.append(a)
    ptrs = [f"p{i}" for i in tensors]
    if len(tensors) > 1:  # aliasing tensors (one of them written) take the checked path
        tensor_checks.append(f"distinct({', '.join(ptrs)})")
    only_tensors = bool(slots) and len(tensors) == len(slots)
    encoded = [f"t{k}(p{i})" for k, i in enumerate(maps)]
    body = [f"[{', '.join(names)}] = args"] + [f"p{i} = a{i}.data_ptr()" for i in tensors]
    body.append(f"ok = {' and '.join(scalar_checks) or 'True'}")
    if tensors:
        remember = f"remember(({', '.join(names[i] for i in tensors)},), ({', '.join(ptrs)},), "
        packed = f"pack({', '.join(values + encoded)})" if only_tensors else "(None, 0)"
        if maps and not only_tensors:  # the encoded maps where the block would be
            packed = f"(({', '.join(encoded)},), 0)"
            kept = MEMO.tail(len(tensors), MEMO.block)
            values += [f"m[{kept}][{k}]" for k in range(len(maps))]
        check = [
            "m = memo[0]",
            f"if not ({' and '.join(hits)}):",
            f"    ok = {' and '.join(tensor_checks)}",
            "    if ok:",
            f"        m = memo[0] = {remember}{packed})",
        ]
        body += check if not scalar_checks else ["if ok:", *(f"    {line}" for line in check)]
    if only_tensors:
        params = f"m[{MEMO.tail(len(tensors), MEMO.params)}]"
    else:
        body += ["if ok:", f"    keep, params = pack({', '.join(values)})"]
        params = "params"
    body.append(f"s = streams[stream({int(ordinal)})]")
    dims = f"{grid[0]}, {grid[1]}, {grid[2]}, {block[0]}, {block[1]}, {block[2]}, {smem}"
    call = variant == "call"
    lines = ["def call(*args, **kw):" if call else "def run(args):", "    try:"]
    lines += [f"        {line}" for line in body]
    lines += [
        "    except Exception:",
        "        ok = False",
        "    if not ok or kw:" if call else "    if not ok:",
        "        return slow()(args, kw)" if call else "        return False",
        f"    (err,) = entry(fn, {dims}, s, {params}, 0)",
        "    if err is not OK:",
        f"        fail(err, {grid}, {block}, {smem}, s, {params})",
    ]
    if not call:
        lines.append("    return True")
    return "\n".join(lines) + "\n"
