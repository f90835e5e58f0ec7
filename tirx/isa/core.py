"""The vocabulary of instruction forms: families, modifier slots, operand specs, contracts.

A *form* is one PTX instruction text (``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``).
Each family's contract module (``tirx/families/<family>/isa.py``: :mod:`tirx.families.mma.isa`, ...)
declares its forms as data: a grammar of modifier slots (the PTX syntax line, token by token), a rule saying which
combinations the ISA has, and a builder that turns one combination into a :class:`Contract`.
A contract lists the operands in PTX order; each register operand gives its dtype, the *atom*
(the trailing view shape one instruction covers), how many native 32-bit registers a lane
holds, and the ISA's ownership map ``owner(atom_coord) -> (lane, native_register)``. The
contract checker, the lowering, the error messages, the docs table and the notebook widgets
read the same entry; the simulator does not (its semantics are written from the ISA).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from functools import cached_property

from ..catalog import Family
from ..frozen import Frozen, frozen
from ..ir.nodes import ExecScope

__all__ = ["Family", "Role", "ModifierSlot", "OperandSpec", "Contract", "FamilySpec"]


class Role(enum.Enum):
    REG_OUT = "registers written"
    REG_IN = "registers read"
    ACCUM_IN = "registers read, or a scalar"  # the C operand of an mma
    SHARED = "shared-memory rows"
    SHARED_CHUNK = "a shared-memory chunk written"  # cp.async's destination
    GLOBAL_CHUNK = "a global-memory chunk read"  # cp.async's source
    IMMEDIATE = "an integer immediate"  # cp.async's cp-size, wait_group's N
    SCALAR_IN = "a scalar register read"  # cp.async's src-size, cp.async.bulk's size
    GLOBAL_BLOCK_OUT = "a global-memory block written"  # cp.async.bulk's destination
    SHARED_BLOCK_IN = "a shared-memory block read"  # cp.async.bulk's source
    MBARRIER = "a shared-memory mbarrier object"  # 8 bytes of shared memory
    PRED_OUT = "a predicate written (1 or 0)"  # the mbarrier waits' result
    ACCUM_INOUT = "registers read and written"  # wgmma's accumulator, updated in place
    DESCRIPTOR = "a 64-bit shared-memory matrix descriptor"  # wgmma's a_desc, b_desc
    SHARED_BOX_OUT = "a shared-memory box image written"  # cp.async.bulk.tensor's destination
    GLOBAL_TENSOR_IN = "a global tensor region read (its tensor map)"  # cp.async.bulk.tensor's
    SHARED_BOX_IN = "a shared-memory box image read"  # a tensor store's or reduction's source
    GLOBAL_TENSOR_OUT = "a global tensor region written (its tensor map)"  # their destination


@frozen
class ModifierSlot(Frozen):
    """One position of a PTX syntax line: ``.name`` takes one of ``choices`` (or is absent when
    ``optional``). The PTX ISA spells a form as the mnemonic followed by its slots in order."""

    name: str
    choices: tuple[str, ...]
    optional: bool = False


@frozen
class OperandSpec(Frozen):
    """One operand in PTX order. A register operand's view is in 32-bit words (its ``dtype``),
    or, where ``element_dtype`` is set, in the elements the words pack; ``owner`` maps an atom
    coordinate (in words) to (lane, native register) as the ISA's fragment tables say;
    ``elements_per_word`` says how many of the instruction's elements one word packs."""

    name: str
    role: Role
    dtype: str
    atom: tuple[int, ...]
    registers: int  # native registers per lane for one instruction
    owner: Callable[[tuple[int, ...]], tuple[int, int]] | None = None
    repeat_axes: tuple[str, ...] = ()  # names of the leading repeat dims (mma: "M", "N", "K")
    about: str = ""
    formula: str = ""  # the ownership rule in words, for error hints and pictures
    ptx_type: str = "b32"  # the PTX type of each register (f32, s32, b32)
    elements_per_word: int = 1
    optional: bool = False  # may be left out (cp.async's src-size)
    # the dtype of the elements a word packs, when a view of them is accepted in place of the
    # words (mma's .f16 accumulator as float16 elements): its atom is ``atom`` with the last
    # axis times ``elements_per_word``, checked element by element (isa/operands.py)
    element_dtype: str = ""
    # a 2-D atom whose owner is a term of the row plus a term of the column, in both lane and
    # register (both 0 at (0, 0)): its owner columns are then built from two short lists
    owner_separable: bool = False

    @property
    def in_tile(self) -> bool:
        """Whether ``T.cuda.tile.apply`` takes this operand as a view; immediates and scalars
        are keyword parameters of the tile form instead (cp.async: ``chunk_bytes=``)."""
        return self.role not in (Role.IMMEDIATE, Role.SCALAR_IN)

    def owner_table(self) -> dict[tuple[int, ...], tuple[int, int]]:
        """Every atom coordinate with its (lane, register)."""
        return dict(self.owner_items)

    @cached_property
    def owner_items(self) -> tuple[tuple[tuple[int, ...], tuple[int, int]], ...]:
        """:meth:`owner_table`'s items, in row-major order of the atom, computed once per
        operand (the spec is immutable; a kernel checks one operand at many tile ops)."""
        return tuple((c, self.owner(c)) for c in itertools.product(*(range(e) for e in self.atom)))

    @cached_property
    def owner_columns(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Every atom element's lane (or thread) and register, row-major, as two tuples: from
        a row and a column of owners where :attr:`owner_separable`, else from
        :attr:`owner_items`."""
        if self.owner_separable and len(self.atom) == 2:
            rows, cols = self.atom
            by_row = [self.owner((r, 0)) for r in range(rows)]
            by_col = [self.owner((0, c)) for c in range(cols)]
            lanes = tuple(a + b for a, _ in by_row for b, _ in by_col)
            return lanes, tuple(a + b for _, a in by_row for _, b in by_col)
        items = self.owner_items
        return tuple(lane for _, (lane, _) in items), tuple(reg for _, (_, reg) in items)


@frozen
class Contract(Frozen):
    """One instruction form: its text, family, operands in PTX order, minimum ``sm_`` number and
    the chosen modifiers (slot name -> token, ``None`` for an absent optional slot)."""

    text: str
    family: Family
    operands: tuple[OperandSpec, ...]
    min_arch: int  # e.g. 80 for sm_80
    modifiers: tuple[tuple[str, str | None], ...] = ()
    params: tuple[tuple[str, object], ...] = ()
    # the form is of the arch-specific feature set of sm_{min_arch} (sm_90a's wgmma): it runs
    # on that arch only, compiled for sm_{min_arch}a
    arch_specific: bool = False

    def param(self, key):
        return dict(self.params)[key]

    def modifier(self, slot: str) -> str | None:
        return dict(self.modifiers)[slot]

    @property
    def tile_operands(self) -> tuple[OperandSpec, ...]:
        """The operands ``T.cuda.tile.apply`` takes, in PTX order."""
        return tuple(op for op in self.operands if op.in_tile)

    def operand(self, name: str) -> OperandSpec:
        for op in self.operands:
            if op.name == name:
                return op
        raise KeyError(name)


@frozen
class FamilySpec(Frozen):
    """What a family module declares: the syntax line(s) as modifier slots after ``mnemonic``;
        ``reject(mods)`` says why a combination is not an instruction the ISA has (None: it is);
        ``build(text, mods)`` gives its contract; ``lower(contract, op)`` its per-lane PTX calls
        (``op`` a ``TileOp`` whose operand count was checked). ``mnemonic`` may contain dots
        (``cp.async``). ``exec_scope`` is the group of threads that executes each of the family's
        instructions together, and so the ``scope=`` of its tile operations: ``ExecScope.WARP`` for
        the ``.sync.aligned`` warp instructions, which need all 32 lanes of a warp (the
        machine-limit check reads it for raw calls too), ``ExecScope.THREAD`` for cp.async.
        ``lower_raw(contract, op, address, arch)`` lowers a raw ``T.ptx`` call of the family (``arch``: the target's ``sm_`` number, for rules that depend on the operands); ``None``
        means the generic scalar-operand lowering of :mod:`tirx.transform.raw_ptx`. ``notes``:
        Markdown that docs/instructions.md prints under the family's heading (how it is spelled,
        what is checked, what the simulator models). ``no_picture``: why the family has no lane
    picture in the notebook layer (its operands are not register fragments of a warp), or ""
    when the widgets draw one."""

    family: Family
    mnemonic: str
    slots: tuple[ModifierSlot, ...]
    reject: Callable[[dict], str | None]
    build: Callable[[str, dict], Contract]
    lower: Callable
    isa_section: str = ""
    exec_scope: ExecScope = ExecScope.WARP
    lower_raw: Callable | None = None
    notes: str = ""
    # why the notebook layer draws no lane picture of the family's operands ("" when it does)
    no_picture: str = ""
    # its calls read TMA tensor maps, which the launcher passes as hidden kernel parameters
    tensor_maps: bool = False
    # docs/instructions.md's table of the family's forms, ``doc_rows(forms) -> lines``, for a
    # family with too many forms for one row each (None: one row per form)
    doc_rows: Callable | None = None

    def __post_init__(self):
        if not isinstance(self.exec_scope, ExecScope):
            raise TypeError(f"{self.family}: exec_scope must be an ExecScope")

    def spell(self, mods: dict) -> str:
        """The PTX text of a modifier combination."""
        parts = [self.mnemonic] + [mods[s.name] for s in self.slots if mods.get(s.name)]
        return ".".join(parts)

    def parse(self, text: str) -> tuple[dict | None, str]:
        """``(mods, "")`` for text that follows the slots, else ``(None, why)``."""
        if not self.names(text):
            return None, f"not a {self.mnemonic} instruction"
        tail = text[len(self.mnemonic) + 1 :]
        mods, rest = {}, tail.split(".") if tail else []
        for slot in self.slots:
            if rest and rest[0] in slot.choices:
                mods[slot.name] = rest.pop(0)
            elif slot.optional:
                mods[slot.name] = None
            else:
                got = f".{rest[0]}" if rest else "the end of the text"
                want = ", ".join("." + c for c in slot.choices)
                return None, f"expected {want} for .{slot.name}, found {got}"
        if rest:
            return None, f"unexpected .{'.'.join(rest)} after the last modifier"
        return mods, ""

    def names(self, text: str) -> bool:
        """Whether ``text`` starts with this family's mnemonic (a whole dotted prefix)."""
        return text == self.mnemonic or text.startswith(self.mnemonic + ".")

    def combinations(self):
        """Every modifier combination the slots allow (before ``reject``)."""
        options = [(None, *s.choices) if s.optional else s.choices for s in self.slots]
        for values in itertools.product(*options):
            yield {s.name: v for s, v in zip(self.slots, values)}
