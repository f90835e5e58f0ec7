"""The front-end cache: a kernel that an earlier process compiled is not parsed, lowered or
code-generated again.

The CUBIN cache (backend/cuda/cache.py) is keyed by the generated CUDA source, so a process that
finds its CUBIN on disk has still parsed, lowered and generated the kernel: most of a warm
compile. This cache keeps the front end's output per kernel and arch, the lowered IR and the
generated source, under a key ``@T.function`` computes *before* parsing. On a hit the
decorator parses nothing and ``tirx.compile`` goes from the stored IR and source straight to
the CUBIN cache.

**What a parse depends on, and how each part is covered:**

* the text of the ``def``: the key holds the full text of its file (as linecache has it, so a
  notebook cell's too), the file's name, the def's first line and its (qualified) name. Any
  edit anywhere in the file is a miss.
* the values its free names resolve to (globals, closure cells, builtins), all read in one
  place, ``Evaluator.ex_Name``, which logs the names (``Parser.free_names``). An entry stores
  the names and a digest of the *fingerprints* of their values; at decoration the fingerprints
  are computed again from the function's scope, and a different digest is a miss.
* the parameter annotations Python evaluated, and the decorator's options: fingerprinted too.
* tirx's own code: the key holds :func:`code_stamp` (version, and the path,
  size and mtime of every .py file of the package), so editing tirx invalidates every entry.
* the Python version (the ast module, the marshal format).

Parsing, lowering and code generation are deterministic functions of these (they read no
environment, clock or hash order), and which names a parse looks up is itself decided by the
values of the names it looked up before; so equal fingerprints of the logged names mean the
same names looked up, the same parse, the same IR.

**Fingerprints** describe a value completely, as a Python literal: None, bool, int, float and
str by type and value; tuples, lists and dicts by their items; tirx's enums by class and
member; tirx's classes, functions and modules by where they live (checked: the name resolves
to that very object); the ``T`` namespace, its parts and members (intrinsics, scalar types)
and the ``S``/``R`` spec builders by their place (tirx's own objects, made at import, holding
nothing a user sets); tirx's frozen dataclasses with value equality (layouts, specs, axes,
dtypes, ``T.Tensor(...)`` annotations, launch configs, PTX instruction names) by class and the
fingerprints of all their fields. Anything else has none, and a kernel that reads it is never
cached: a user's function or object (its code is outside the key), numpy scalars, other
modules, sets (their order is hash-seeded). Nor is a kernel whose body compares objects with
``is`` (other than None, True, False): identity is not part of a fingerprint.

A kernel found here is parsed only when its IR is needed (``kernel.ir``: ``script()``, the
simulator, another arch), from the lines the key was computed from and the scope as it was at
decoration; the lists and dicts among the logged values are copied at decoration for that
(their contents are fingerprinted, and may change later).

**On disk:** ``$TIRX_CACHE_DIR/frontend/<key>.entry``, one file per key holding up to eight
variants, newest first (a factory such as ``make_gemm(M, N, K)`` makes one per set of closure
values): each with its logged names, digest, kernel name, def source and one payload per arch
number, the lowered IR and the generated CUDA source as :mod:`tirx.ir.serial` writes them. The
file is a header (magic, format version, key, sha256 and length of the metadata, length of the
payloads), the metadata (tuples of strings and ints in :mod:`marshal`'s format: the Python
version is in the key, and reading it costs microseconds), then the payloads, each checked
against its own sha256 (in the metadata) before it is read. Writes are atomic, as in the CUBIN
cache; a damaged, truncated or foreign file is a miss and is replaced at the next write; an entry that is not a regular file (a named pipe)
is a miss that is never opened for a blocking read. Writers take an exclusive lock on
``frontend.lock`` (in the cache directory) while they read, merge and replace an entry, so concurrent writers never
lose each other's variants or archs. Only a
successful cuda compile writes, so a kernel that fails anywhere is never stored.
``TIRX_CACHE=0`` turns this cache off with the other, and ``tirx.clear_cache()`` empties it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import marshal
import os
import stat
import struct
import sys
import types

from . import config
from .ir import nodes as ir
from .ir import serial
from .isa import registry
from .script import parser as _parser
from .script.evaluator import BUILTINS
from .script.macros import Macro

__all__ = ["Record", "lookup", "remember", "load", "store", "clear", "code_stamp", "fingerprint"]

MAGIC = b"TIRXFRNT"
FORMAT_VERSION = 2  # 2: each variant holds the names its macros resolved
_HEADER = struct.Struct("<8sI64s32sQQ")  # magic, version, key, sha256(meta), 2 lengths
_SUBDIR = "frontend"
_SUFFIX = ".entry"
_LOCK = "frontend.lock"  # beside the frontend folder, in the cache directory
_VARIANTS = 8  # kept per key, the newest first
_BUDGET = 50_000  # items one fingerprint may visit; a bigger value is not worth a cache entry

_generation = 0  # bumped by clear(): records found before it hand out no payloads
_CONTRACTS = registry._CACHE  # the instruction-contract table payloads are lowered with


class Record:
    """What the cache knows of one kernel.

    ``key`` names its entry (computed at decoration). The rest is one variant, known after a
    hit (``found``) or a parse (:func:`remember`): the ``names`` the body resolved outside
    itself, ``macros``: per macro the parse expanded, ``(its code digest, the names its body
    resolved in its own scope)``, the ``digest`` of the names' values' fingerprints (and the
    annotations'), the kernel's ``name`` and def ``source``, and ``payloads``: arch number ->
    (``(lowered IR, CUDA source)`` as :mod:`tirx.ir.serial` writes it, its sha256 hex digest).
    ``snapshots`` (a hit's, not stored): per macro reached, by id, ``(macro, scope, lines,
    names)`` as they were at decoration, which a later parse expands it with.
    """

    __slots__ = ("key", "names", "macros", "digest", "name", "source", "payloads", "found",
                 "generation", "snapshots")  # fmt: skip

    def __init__(self, key, names=None, digest=None, name=None, source=None, payloads=None,
                 found=False, macros=()):  # fmt: skip
        self.key, self.names, self.macros, self.digest = key, names, macros, digest
        self.name, self.source = name, source
        self.payloads = payloads if payloads is not None else {}
        self.found = found
        self.generation = _generation
        self.snapshots: dict[int, tuple] = {}


def _usable() -> bool:
    """The disk cache is on, and the contract table is tirx's own: a test that replaces it (as
    the memo in tirx/compile.py notices) must neither read nor write lowered IR."""
    return config.cache_enabled() and registry._CACHE is _CONTRACTS


def _sha256(data: bytes):
    from .backend.cuda.cache import sha256  # imported with the first kernel, not with tirx

    return sha256(data)


# ------------------------------------------------------------------------------ the key


@functools.cache
def code_stamp() -> str:
    """sha256 hex digest of what tirx's code is: its version and the relative path, size and
    mtime of every .py file of the package (tirx/compat included; the codegen version lives in
    one of them). Computed once per process; editing any file of tirx makes every entry a miss.
    Reads no module it does not need: a kernel defined for the simulator imports no codegen."""
    from . import __version__

    files: list[tuple[str, int, int]] = []
    _scan(os.path.dirname(os.path.abspath(__file__)), "", files)
    files.sort()
    return _sha256(repr((__version__, files)).encode()).hexdigest()


def _scan(folder: str, prefix: str, files: list) -> None:
    """Append ``(relative path, size, mtime_ns)`` of every .py file under ``folder``."""
    with os.scandir(folder) as entries:  # with DirEntry.stat: half the time of os.walk
        for e in entries:
            if e.name.endswith(".py"):
                st = e.stat()
                files.append((prefix + e.name, st.st_size, st.st_mtime_ns))
            elif e.name != "__pycache__" and e.is_dir():
                _scan(e.path, f"{prefix}{e.name}/", files)


def _key(pyfunc, lines: list[str], options) -> str:
    code = pyfunc.__code__
    text = repr(
        (
            "tirx-frontend",
            FORMAT_VERSION,
            code_stamp(),
            sys.version,
            code.co_filename,
            "".join(lines),
            code.co_firstlineno,
            pyfunc.__qualname__,
            pyfunc.__name__,
            options,
        )
    )
    return _sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------ fingerprints


class _Unfit(Exception):
    """A value without a fingerprint (raised through the recursion)."""


_ATOMS = frozenset({type(None), bool, int, float, str})


class _Macros:
    """The macro part of one fingerprint: ``names``, code digest -> the names the bodies of
    macros with that code resolved (from a parse or an entry); ``reached`` collects, per
    macro expanded there (by id), ``(macro, scope, lines, names)`` as the fingerprint read
    them."""

    __slots__ = ("names", "reached")

    def __init__(self, names: dict[str, tuple[str, ...]]):
        self.names = names
        self.reached: dict[int, tuple] = {}


def fingerprint(value, macros: _Macros | None = None) -> tuple | None:
    """``value`` described completely as a Python literal (the rules are in the module
    docstring), or None when it cannot be. Macros have one only with ``macros``, the names
    their bodies resolved."""
    budget = _BUDGET
    memo: dict[int, tuple] = {}  # id -> fingerprint of the dataclasses seen (axes recur)
    order: dict[int, int] = {}  # id -> index of each macro reached, in the order reached

    def fp(v, mutable: bool, data: bool = False) -> tuple:
        # ``mutable``: lists and dicts are accepted (not inside dataclass fields, where the
        # copy made for a later parse, _snapshot, would not reach them, nor in a macro's
        # defaults). ``data``: inside a dataclass, whose memo would hide a macro's aliasing.
        nonlocal budget
        budget -= 1
        if budget < 0:
            raise _Unfit
        t = type(v)
        if t in _ATOMS:
            return (t.__name__, v)
        if t is tuple or (t is list and mutable):
            return (t.__name__, *[fp(x, mutable, data) for x in v])
        if t is dict and mutable:
            return ("dict", *[(fp(k, True), fp(x, True)) for k, x in v.items()])
        if t is Macro and macros is not None and not data:
            return fp_macro(v)
        fields = _frozen_fields(t)
        if fields is not None:
            known = memo.get(id(v))
            if known is None:
                known = memo[id(v)] = (
                    "data", t.__module__, t.__qualname__,
                    *[fp(getattr(v, f), False, True) for f in fields],
                )  # fmt: skip
            return known
        place = _singletons().get(id(v))
        if place is not None and place[1] is v:
            return ("T", place[0])
        if isinstance(v, enum.Enum) and _is_tirx(t.__module__):
            return ("enum", t.__module__, t.__qualname__, v.name)
        if isinstance(v, type) or t is types.FunctionType:
            if _is_tirx(v.__module__) and _resolve(v.__module__, v.__qualname__) is v:
                return ("ref", v.__module__, v.__qualname__)
        elif t is types.ModuleType and _is_tirx(v.__name__) and sys.modules.get(v.__name__) is v:
            return ("module", v.__name__)
        raise _Unfit

    def fp_macro(m: Macro) -> tuple:
        # A macro reached again is named by its first place: a kernel may compare macros
        # with == (identity), so which of them are one object is part of the fingerprint.
        index = order.get(id(m))
        if index is not None:
            return ("macro again", index)
        order[id(m)] = len(order)
        code, lines = _macro_code(m)
        names = macros.names.get(code) if code is not None else None
        if names is None:  # never expanded: its code and scope are not part of the parse
            return ("macro",)
        scope = m.scope()
        macros.reached[id(m)] = (m, scope, lines, names)
        f = m.function
        return (
            "macro", code, fp(f.__defaults__, False), fp(f.__kwdefaults__, False),
            fp((names, _resolved(names, scope)), True),
        )  # fmt: skip

    try:
        return fp(value, True)
    except Exception:  # noqa: BLE001 - _Unfit, RecursionError, or a value's own code raising
        return None


_TEXTS: dict[str, tuple[list, str]] = {}  # file name -> (linecache's lines, sha256 of them)


def _macro_code(m: Macro) -> tuple[str | None, list | None]:
    """``(code digest, lines)`` of macro ``m``: sha256 hex digest of what its ``def``'s text
    is, as a kernel's key covers it (its file's full text as linecache has it now, the file's
    name, the def's first line, its qualified name and name) and of ``T.macro`` or
    ``T.inline``; and those lines. ``(None, None)`` without readable source."""
    f = m.function
    lines = _parser._source_lines(f)
    if lines is None:
        return None, None
    code = f.__code__
    memo = _TEXTS.get(code.co_filename)
    if memo is None or memo[0] is not lines:  # linecache's list is new when the file is
        if len(_TEXTS) >= 16:
            _TEXTS.clear()
        memo = _TEXTS[code.co_filename] = (lines, _sha256("".join(lines).encode()).hexdigest())
    text = repr(
        ("tirx-macro", code.co_filename, memo[1], code.co_firstlineno, f.__qualname__,
         f.__name__, m.late_binding)
    )  # fmt: skip
    return _sha256(text.encode()).hexdigest(), lines


def _is_tirx(module) -> bool:
    return isinstance(module, str) and module.split(".", 1)[0] in ("tirx", "tvm_tirx")


def _resolve(module: str, qualname: str):
    """The object ``module.qualname`` names now, or None."""
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


@functools.cache
def _frozen_fields(cls) -> tuple[str, ...] | None:
    """The field names of ``cls`` when it is a frozen dataclass of tirx with value equality,
    defined at module level; else None."""
    if (
        "__dataclass_params__" not in vars(cls)
        or not cls.__dataclass_params__.frozen
        or cls.__eq__ is object.__eq__
        or not _is_tirx(cls.__module__)
        or _resolve(cls.__module__, cls.__qualname__) is not cls
    ):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _singletons() -> dict[int, tuple[str, object]]:
    """tirx's namespace objects by id, with their place: ``T``, its parts (``T.cuda``,
    ``T.cuda.tile``, ``T.ptx``) and members (intrinsics, scalar types), ``S`` and ``R``."""
    from .layout.spec import R, S
    from .script import namespace

    table = {id(S): ("S", S), id(R): ("R", R)}

    def walk(obj, place):
        table[id(obj)] = (place, obj)
        for name, value in vars(obj).items():
            if type(value).__module__ == namespace.__name__ and not isinstance(value, type):
                walk(value, f"{place}.{name}")

    walk(namespace.T, "T")
    return table


def _resolved(names: tuple[str, ...], scope: dict) -> tuple:
    """What ``names`` resolve to: ``scope``, else the builtins a kernel may name, else
    nothing."""
    return tuple(
        (1, scope[n]) if n in scope else (0, "builtin" if n in BUILTINS else "undefined")
        for n in names
    )


def _digest(names: tuple[str, ...], scope: dict, annotations: dict, macros: _Macros):
    """sha256 hex digest of the fingerprint of what ``names`` resolve to in ``scope`` and of
    ``annotations`` (the macros reached with ``macros``'s names); None if it has none."""
    fp = fingerprint((names, _resolved(names, scope), annotations), macros)
    return None if fp is None else _sha256(repr(fp).encode()).hexdigest()


def _snapshot(value):
    """``value`` with the lists and dicts in it copied (tuples holding them rebuilt)."""
    t = type(value)
    if t is list:
        return [_snapshot(v) for v in value]
    if t is dict:
        return {k: _snapshot(v) for k, v in value.items()}
    if t is tuple:
        items = tuple(_snapshot(v) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


# ------------------------------------------------------------------------------ decoration


def lookup(pyfunc, lines: list[str], scope: dict, annotations: dict, options: dict):
    """At decoration, before parsing: the stored variant of this kernel whose fingerprints
    match ``scope`` and ``annotations`` now (``record.found``; the lists and dicts among its
    names' values in ``scope``, the decorator's own copy, are replaced by copies), else a
    record of the key alone, for :func:`remember`. None: nothing to cache (the cache is off,
    or a decorator option has no fingerprint)."""
    if not _usable():
        return None
    options_fp = fingerprint(options)
    if options_fp is None:
        return None
    key = _key(pyfunc, lines, options_fp)
    digests: dict[tuple, tuple] = {}  # variants usually log the same names
    for variant in _read(key):
        logged = (variant.names, variant.macros)
        if logged not in digests:
            macros = _Macros(dict(variant.macros))
            digests[logged] = (_digest(variant.names, scope, annotations, macros), macros)
        digest, macros = digests[logged]
        if digest == variant.digest:
            for name in variant.names:
                if name in scope:
                    scope[name] = _snapshot(scope[name])
            for _, macro_scope, _, macro_names in macros.reached.values():
                for name in macro_names:
                    if name in macro_scope:
                        macro_scope[name] = _snapshot(macro_scope[name])
            variant.snapshots = macros.reached
            return variant
    return Record(key)


def remember(record: Record, kernel, parser) -> Record | None:
    """After ``parser`` parsed ``kernel``: ``record`` completed with what the parse read, to be
    stored by :func:`store`; None when the kernel cannot be cached."""
    if parser.compared_identity:
        return None
    names = tuple(parser.free_names)
    table: dict[str, dict[str, None]] = {}  # code digest -> names (macros of one code merged)
    for m, macro_names in parser.macro_names.values():
        code = _macro_code(m)[0]
        if code is None:
            return None
        table.setdefault(code, {}).update(macro_names)
    macros = tuple((code, tuple(n)) for code, n in table.items())
    digest = _digest(names, parser.scope, parser.annotations, _Macros(dict(macros)))
    if digest is None:
        return None
    record.names, record.macros, record.digest = names, macros, digest
    record.name, record.source = kernel.name, kernel.source
    return record


# ------------------------------------------------------------------------------ compile


def load(kernel, arch: int) -> tuple[ir.Function, str] | None:
    """``(lowered IR, generated CUDA source)`` stored for ``kernel`` and arch number ``arch``,
    or None (not stored, damaged, or the cache was cleared or turned off since)."""
    record = kernel.frontend
    if record is None or record.generation != _generation or not _usable():
        return None
    payload = record.payloads.get(arch)
    if payload is None:
        return None
    blob, digest = payload
    if _sha256(blob).hexdigest() == digest:
        try:
            lowered, source = serial.loads(blob)
            if isinstance(lowered, ir.Function) and isinstance(source, str):
                return lowered, source
        except Exception:  # noqa: BLE001 - whatever fails in reading it, it is not used
            pass
    del record.payloads[arch]  # compiled again; the store after that replaces it
    return None


def store(kernel, arch: int, lowered: ir.Function, source: str) -> None:
    """After a successful cuda compile of ``kernel``: add ``(lowered, source)`` for arch number
    ``arch`` to its variant on disk (atomically; the other variants, and archs another
    process stored meanwhile, are kept). Nothing for a kernel that cannot be cached."""
    record = kernel.frontend
    if record is None or not _usable():
        return
    if record.generation != _generation:  # cleared since: what it held is gone from disk
        record.payloads, record.generation = {}, _generation
    if arch in record.payloads:
        return
    try:
        blob = serial.dumps((lowered, source))
    except (TypeError, ValueError, RecursionError):  # not IR alone; marshal's limits
        return
    record.payloads[arch] = (blob, _sha256(blob).hexdigest())
    from .backend.cuda.cache import write_atomic

    directory = config.cache_dir() / _SUBDIR
    try:
        directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.mkdir(mode=0o700, exist_ok=True)
        # Read, merge and write under the directory's lock: two processes storing variants or
        # archs of one key at once would otherwise each write back what it read before the
        # other's write, and one of the two would be lost.
        with _writer_lock(directory.parent):
            others = []
            for variant in _read(record.key):
                if variant.digest == record.digest:
                    record.payloads = {**variant.payloads, **record.payloads}
                else:
                    others.append(variant)
            data = _encode(record.key, [record, *others][:_VARIANTS])
            write_atomic(directory / (record.key + _SUFFIX), data)
    except OSError:
        pass  # the disk is an optimization (the CUBIN cache, in the same directory, warns)


@contextlib.contextmanager
def _writer_lock(directory):
    """Hold an exclusive ``flock`` on ``directory/frontend.lock`` (created if missing) while writers
    merge; readers take no lock (writes are atomic renames). Where there is no ``fcntl`` or the
    lock file is not a regular file, writers go unlocked, as before."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(directory / _LOCK, flags, 0o600)
    except OSError:
        yield
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed, or the process dies
        yield
    finally:
        os.close(fd)


def clear() -> None:
    """Delete every entry (and stray temporary file) on disk; records found before hand out
    no payloads."""
    global _generation
    _generation += 1
    directory = config.cache_dir() / _SUBDIR
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.endswith(_SUFFIX) or (name.startswith(".") and name.endswith(".tmp")):
            with contextlib.suppress(OSError):
                os.unlink(directory / name)


# ------------------------------------------------------------------------------ the format


def _encode(key: str, records: list[Record]) -> bytes:
    variants, blobs, at = [], [], 0
    for r in records:
        index = []
        for arch, (blob, digest) in sorted(r.payloads.items()):
            index.append((arch, at, len(blob), digest))
            blobs.append(blob)
            at += len(blob)
        variants.append((r.names, r.macros, r.digest, r.name, r.source, tuple(index)))
    meta = marshal.dumps(tuple(variants))
    header = _HEADER.pack(
        MAGIC, FORMAT_VERSION, key.encode(), _sha256(meta).digest(), len(meta), at
    )
    return header + meta + b"".join(blobs)


def _read(key: str) -> list[Record]:
    """The variants stored under ``key``, newest first; [] without a whole, valid entry."""
    from .backend.cuda.cache import read_regular  # skips a named pipe, never blocks on it

    data = read_regular(config.cache_dir() / _SUBDIR / (key + _SUFFIX))
    if data is None or len(data) < _HEADER.size:
        return []
    magic, version, k, checksum, n_meta, n_payloads = _HEADER.unpack_from(data)
    start = _HEADER.size
    if (
        magic != MAGIC
        or version != FORMAT_VERSION
        or k != key.encode()
        or len(data) != start + n_meta + n_payloads
    ):
        return []
    meta = data[start : start + n_meta]
    if _sha256(meta).digest() != checksum:
        return []
    base = start + n_meta
    try:
        return [
            Record(key, names, digest, name, source, found=True, macros=macros, payloads={
                arch: (data[base + at : base + at + size], sha) for arch, at, size, sha in index
            })
            for names, macros, digest, name, source, index in marshal.loads(meta)
        ]  # fmt: skip
    except (ValueError, TypeError, EOFError):
        return []


_parser.frontend_cache = sys.modules[__name__]  # @T.function consults this module
