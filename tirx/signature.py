"""A compiled kernel's signature: its parameters, and which tensors it reads and writes.

The torch integration (tirx/torch_ops.py) builds an operator's schema and its fake
implementation from it, and a saved kernel (tirx/artifact.py) carries it in its manifest so
that it can be checked and called without the kernel's source.

Which tensors a kernel writes is read off the lowered program, the code both targets run:

* an element store (``Store``) or an atomic (``Atomic``) on a global tensor writes it;
* a float32/float16 pair conversion (``HalfConversion``) writes its destination's tensor and
  reads its source's;
* a PTX call whose first operand is a tensor's global address writes it (PTX puts the
  destination first: the bulk copy ``cp.async.bulk.global.shared::cta`` and the bulk
  reductions); a global address in any other place is read (the source of ``cp.async``, the
  tensor map of a TMA load);
* an element load (``Load``) reads it.

A kernel that writes a tensor only through inline PTX the lowering cannot see into would be
missed; tirx has no such form (raw ``T.ptx`` calls are lowered to the same ``PtxCall``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import StrKind
from .ir import nodes as ir
from .ir.visitor import walk

__all__ = ["ParamKind", "ParamSpec", "Signature", "TensorSpec", "spec_of", "effects"]


class ParamKind(StrKind):
    """What a parameter takes: a global tensor or a scalar."""

    TENSOR = "tensor"
    SCALAR = "scalar"


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: ``name``, ``kind``, ``dtype`` (a tirx dtype name such as "float16"),
    ``shape`` (a tensor's; ``()`` for a scalar), and whether the kernel ``reads`` and
    ``writes`` it (always False for a scalar)."""

    name: str
    kind: ParamKind
    dtype: str
    shape: tuple[int, ...] = ()
    reads: bool = False
    writes: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.kind is ParamKind.TENSOR

    def to_json(self) -> dict:
        return {
            "name": self.name, "kind": self.kind.value, "dtype": self.dtype,
            "shape": list(self.shape), "reads": self.reads, "writes": self.writes,
        }  # fmt: skip

    @classmethod
    def from_json(cls, d: dict) -> ParamSpec:
        return cls(
            str(d["name"]), ParamKind(d["kind"]), str(d["dtype"]),
            tuple(int(x) for x in d["shape"]), bool(d["reads"]), bool(d["writes"]),
        )  # fmt: skip


@dataclass(frozen=True)
class Signature:
    """A kernel's ``name`` and its parameters in order."""

    name: str
    params: tuple[ParamSpec, ...]

    @classmethod
    def of(cls, fn: ir.Function) -> Signature:
        """The signature of the lowered ``fn``."""
        reads, writes = effects(fn)
        params = []
        for p in fn.params:
            if isinstance(p, ir.Buffer):
                params.append(ParamSpec(p.name, ParamKind.TENSOR, p.dtype.name, tuple(p.shape),
                                        p in reads, p in writes))  # fmt: skip
            else:
                params.append(ParamSpec(p.name, ParamKind.SCALAR, p.dtype.name))
        return cls(fn.name, tuple(params))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def written(self) -> tuple[str, ...]:
        """The tensor parameters the kernel writes, in order."""
        return tuple(p.name for p in self.params if p.writes)

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise ValueError(f"kernel {self.name!r} has no parameter {name!r} (its parameters: "
                         f"{', '.join(self.names)})")  # fmt: skip

    def to_json(self) -> dict:
        return {"name": self.name, "params": [p.to_json() for p in self.params]}

    @classmethod
    def from_json(cls, d: dict) -> Signature:
        return cls(str(d["name"]), tuple(ParamSpec.from_json(p) for p in d["params"]))

    def __str__(self) -> str:
        def one(p: ParamSpec) -> str:
            if not p.is_tensor:
                return f"{p.name}: {p.dtype}"
            mode = {(True, True): "in/out", (False, True): "out", (True, False): "in"}.get(
                (p.reads, p.writes), "unused"
            )
            return f"{p.name}: {p.dtype}{list(p.shape)} {mode}"

        return f"{self.name}({', '.join(one(p) for p in self.params)})"


def effects(fn: ir.Function) -> tuple[frozenset, frozenset]:
    """``(read, written)``: the tensor parameters (``ir.Buffer`` objects) the lowered ``fn``
    reads and writes (see the module docstring)."""
    params = {p for p in fn.params if isinstance(p, ir.Buffer)}
    read, written = set(), set()
    for node in walk(fn.body):
        if isinstance(node, ir.Store) and node.buffer in params:
            written.add(node.buffer)
        elif isinstance(node, ir.Load) and node.buffer in params:
            read.add(node.buffer)
        elif hasattr(node, "tensor_effects"):  # a family's statement says what it touches
            reads, writes = node.tensor_effects()
            read.update(b for b in reads if b in params)
            written.update(b for b in writes if b in params)
        elif isinstance(node, ir.PtxCall):
            for i, op in enumerate(node.operands):
                address = getattr(op, "address", None)
                if isinstance(address, ir.GlobalAddress) and address.buffer in params:
                    (written if i == 0 else read).add(address.buffer)
    return frozenset(read), frozenset(written)


@dataclass(frozen=True)
class TensorSpec:
    """What a kernel factory sees of a tensor argument: its ``shape`` (ints), ``dtype`` (the
    tirx dtype name, "float16", ready for ``T.Tensor``) and ``device`` ("cpu" or "cuda").
    Hashable: factories' results are remembered per spec."""

    shape: tuple[int, ...]
    dtype: str
    device: str = "cpu"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]


def spec_of(value):
    """A :class:`TensorSpec` for a torch tensor (fake or real) or a numpy array; any other
    value is returned as it is (scalars reach factories unchanged). A symbolic size becomes an
    int (under ``torch.compile`` that specializes the graph to it)."""
    mod = type(value).__module__
    if mod.startswith("torch") and hasattr(value, "dtype") and hasattr(value, "shape"):
        dtype = str(value.dtype).removeprefix("torch.")
        return TensorSpec(tuple(int(d) for d in value.shape), dtype, value.device.type)
    if mod.startswith("numpy") and hasattr(value, "dtype") and hasattr(value, "shape"):
        return TensorSpec(tuple(int(d) for d in value.shape), value.dtype.name, "cpu")
    return value
