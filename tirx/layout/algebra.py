"""Pure functions on tuples of iters: canonical form, grouping, packing.

:class:`~tirx.layout.TileLayout` methods are thin wrappers over these; keeping them on plain
iter tuples makes each one short and testable on its own (in the manner of pycute).
"""

from __future__ import annotations

from ..errors import LayoutError
from .axes import as_int, m
from .spec import Iter

__all__ = [
    "canonical_shard",
    "canonical_replica",
    "group_iters",
    "check_permutation",
    "pack_iters",
    "unpack_iters",
]

Iters = tuple[Iter, ...]


def _fusable(outer: Iter, inner: Iter) -> bool:
    return outer.axis == inner.axis and inner.extent * inner.stride == outer.stride


def canonical_shard(shard: Iters) -> Iters:
    """Drop unit iters and fuse neighbours ``(eo, so), (ei, si)`` on one axis when ``ei*si == so``.

    One left-to-right pass is enough: a fused iter ``(eo*ei, si)`` meets its outer neighbour
    with the same ``eo*ei*si == eo*so`` test that already failed for ``(eo, so)``.
    """
    out: list[Iter] = []
    for it in shard:
        if it.extent == 1:
            continue
        if out and _fusable(out[-1], it):
            outer = out.pop()
            it = Iter(outer.extent * it.extent, it.stride, it.axis)
        out.append(it)
    return tuple(out)


def _replica_order(it: Iter) -> tuple:
    return (it.axis.name, it.stride, it.extent)


def canonical_replica(replica: Iters) -> Iters:
    """Replicas form a set of combinations, so their order is free: sort, then fuse."""
    out: list[Iter] = []
    for it in sorted((it for it in replica if it.extent != 1), key=_replica_order):
        if out and _fusable(it, out[-1]):
            inner = out.pop()
            it = Iter(inner.extent * it.extent, inner.stride, it.axis)
        out.append(it)
    return tuple(sorted(out, key=_replica_order))


def group_iters(shard: Iters, shape: tuple[int, ...]) -> tuple[Iters, list[int]] | None:
    """Split ``shard`` at dimension boundaries of ``shape``, or None when that is impossible.

    Returns ``(iters, seps)``: dimension ``i`` of ``shape`` is ``iters[seps[i]:seps[i + 1]]``
    and the product of those extents is ``shape[i]``. An iter that straddles a boundary is
    split into an outer ``(a, s * e // a)`` and an inner ``(e // a, s)`` part. A dimension of
    extent 1 takes one unit iter when the next iter is one; other unit iters join the
    dimension being filled. The caller checks that the product of ``shape`` equals the
    product of the extents.
    """
    pending = list(shard)
    out: list[Iter] = []
    seps = [0]
    for need in shape:
        if need == 1 and pending and pending[0].extent == 1:
            out.append(pending.pop(0))  # a unit dimension keeps a unit iter written for it
        while need > 1:
            if not pending:
                return None
            it = pending.pop(0)
            if need % it.extent == 0:
                out.append(it)
                need //= it.extent
            elif it.extent % need == 0:
                inner = it.extent // need
                out.append(Iter(need, it.stride * inner, it.axis))
                pending.insert(0, Iter(inner, it.stride, it.axis))
                need = 1
            else:
                return None
        seps.append(len(out))
    if any(it.extent != 1 for it in pending):
        return None
    if shape:
        out.extend(pending)
        seps[-1] = len(out)
    return tuple(out), seps


def check_permutation(perm: object, n: int, what: str) -> tuple[int, ...]:
    """``perm`` as a tuple if it is a permutation of ``range(n)``, else LayoutError."""
    if not isinstance(perm, (tuple, list, range)):
        raise LayoutError(
            f"{what}: expected a permutation (a tuple of ints), got {perm!r}",
            hint=f"for example {tuple(reversed(range(n)))}",
        )
    items = tuple(as_int(p, f"{what}: a permutation entry") for p in perm)
    if sorted(items) != list(range(n)):
        raise LayoutError(
            f"{what}: {list(items)} is not a permutation of {list(range(n))}",
            hint=f"give each of the {n} positions exactly once",
        )
    return items


def _innermost(shard: Iters) -> int | None:
    """Index of the innermost iter with extent > 1."""
    for k in range(len(shard) - 1, -1, -1):
        if shard[k].extent != 1:
            return k
    return None


def _scale_memory(iters: Iters, scale: int, divide: bool, what: str) -> Iters:
    out = []
    for it in iters:
        if it.axis != m:
            out.append(it)
        elif divide:
            if it.stride % scale:
                raise LayoutError(
                    f"{what}: memory stride {it.stride} is not divisible by {scale}",
                    hint="every m stride must be a multiple of the packing factor",
                )
            out.append(Iter(it.extent, it.stride // scale, m))
        else:
            out.append(Iter(it.extent, it.stride * scale, m))
    return tuple(out)


def pack_iters(shard: Iters, replica: Iters, n: int) -> tuple[Iters, Iters]:
    """Reinterpret ``n`` consecutive elements as one: see :meth:`TileLayout.pack`."""
    k = _innermost(shard)
    if k is None or shard[k].axis != m or shard[k].stride != 1 or shard[k].extent % n:
        raise LayoutError(
            f"pack({n}): the innermost iter must be contiguous memory (stride 1 on m) with "
            f"an extent divisible by {n}",
            hint="only n consecutive elements that sit next to each other in one thread's "
            "storage can become one wider element",
        )
    rest = _scale_memory(shard[:k] + shard[k + 1 :], n, True, f"pack({n})")
    packed = Iter(shard[k].extent // n, 1, m)
    new_shard = rest[:k] + (packed,) + rest[k:]
    return new_shard, _scale_memory(replica, n, True, f"pack({n})")


def unpack_iters(shard: Iters, replica: Iters, n: int) -> tuple[Iters, Iters]:
    """Reinterpret each element as ``n`` narrower ones: see :meth:`TileLayout.unpack`."""
    k = _innermost(shard)
    scaled = _scale_memory(shard, n, False, f"unpack({n})")
    if k is not None and shard[k].axis == m and shard[k].stride == 1:
        new_shard = scaled[:k] + (Iter(shard[k].extent * n, 1, m),) + scaled[k + 1 :]
    else:
        new_shard = scaled + (Iter(n, 1, m),)
    return new_shard, _scale_memory(replica, n, False, f"unpack({n})")
