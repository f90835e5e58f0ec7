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
* the ``@T.macro`` / ``@T.inline`` functions it calls, which are values of such names (or
  inside them, or passed along as arguments): a macro's expansion depends on the text of its
  own ``def`` (its file's text as linecache has it, the file's name, first line and qualified
  name, as the kernel's key covers the kernel's), on macro or inline, its parameter defaults,
  and the values of the free names its body resolves in its own scope (module globals and
  closure: for ``T.macro`` the closure of decoration, for ``T.inline`` the closure now). The
  evaluator logs those names per macro expanded (``Parser.macro_names``; a macro called by a
  macro too), the entry stores them per macro code, and a macro's fingerprint is made of that
  text's digest, the defaults and the fingerprints of exactly those names' values, computed
  again from the macro's scope at decoration. Editing a macro's file, or a value one of its
  names (or its callees' names) resolves to, is a miss; another macro object with the same
  code and values, a hit. A kernel reads nothing else of a macro: it calls it, passes it on
  or compares it, and its attributes are refused; so a macro the parse never expanded
  contributes only that it is one, and which macros are one object (``==`` on macros is
  identity) is in the fingerprint.
* the parameter annotations Python evaluated, and the decorator's options: fingerprinted too.
* tirx's own code: an entry's header holds the :func:`code_stamp` (version, and the path,
  size and mtime of every .py file of the package) of the code that wrote it, and an entry
  with another stamp is a miss (and is replaced at the next write), so editing tirx
  invalidates every entry. The stamp is not in the key: a process computes it (a few hundred
  file stats) only when it finds an entry, or while NVRTC compiles a kernel it will store.
* the Python version (the ast module, the marshal format).

Parsing, lowering and code generation are deterministic functions of these (they read no
environment, clock or hash order), and which names a parse looks up is itself decided by the
values of the names it looked up before; so equal fingerprints of the logged names mean the
same names looked up, the same parse, the same IR.

**Fingerprints** (:mod:`tirx.fingerprints`, where the rules are) describe a value completely,
as a Python literal: atoms, containers, tirx's own enums, classes, namespace objects and frozen
dataclasses, and macros as above. Anything else has none, and a kernel that reads it, itself
or through a macro, is never cached: a user's function or object (its code is outside the
key), numpy scalars, other modules, sets (their order is hash-seeded). Nor is a kernel whose
body, or a macro's, compares objects with ``is`` (other than None, True, False): identity is
not part of a fingerprint.

A kernel found here is parsed only when its IR is needed (``kernel.ir``: ``script()``, the
simulator, another arch), from the lines the key was computed from and the scope as it was at
decoration, and it expands its macros with their scopes and file lines as they were read at
decoration (``Record.snapshots``); the lists and dicts among the logged values, the kernel's
and its macros', are copied at decoration for that (their contents are fingerprinted, and may
change later).

**On disk:** ``$TIRX_CACHE_DIR/frontend/<key>.entry``, one file per key holding up to eight
variants, newest first (a factory such as ``make_gemm(M, N, K)`` makes one per set of closure
values): each with its logged names, its macros' (per macro code digest), digest, kernel name,
def source and one payload per arch number, the lowered IR and the generated CUDA source as
:mod:`tirx.ir.serial` writes them (:mod:`tirx.frontend_format` is the file format). A
damaged, truncated or foreign file is a miss and is replaced at the next write; an entry that
is not a regular file (a named pipe) is a miss that is never opened for a blocking read.
A writer merges its variant with the entry as it is, writes the result to a temporary file
beside it, and renames that over the entry while it holds an exclusive lock on
``frontend.lock`` (in the cache directory), if the entry's header is still the one it merged
with (else it merges again): concurrent writers never lose each other's variants or archs,
and the lock is held for a header read and a rename only. The merge and the write of a kernel
being compiled happen while NVRTC compiles it (:func:`prepare`); the rename, after it succeeded
(:func:`store`). A writer waits at most
:data:`LOCK_WAIT` seconds for it: a process stopped while it holds the lock (``kill -STOP``, a
debugger) makes the others skip their stores, with one warning per process naming the lock
and its holder's pid, and never stops a compile. Only a successful cuda compile writes, so a
kernel that fails anywhere is never stored.
``TIRX_CACHE=0`` turns this cache off with the other, and ``tirx.clear_cache()`` empties it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings

from . import config
from .files import exclusive_lock, lock_holder, read_regular, sha256, write_temporary
from .fingerprints import MacroNames, fingerprint, macro_code, resolved, snapshot
from .frontend_format import FORMAT_VERSION, STAMP_BYTES, decode, encode, stamp
from .ir import nodes as ir
from .ir import serial
from .isa import registry
from .script import parser as _parser
from .version import __version__

__all__ = ["Record", "lookup", "remember", "load", "prepare", "store", "discard", "clear", "code_stamp",
           "fingerprint"]  # fmt: skip

_SUBDIR = "frontend"
_SUFFIX = ".entry"
_LOCK = "frontend.lock"  # beside the frontend folder, in the cache directory
_VARIANTS = 8  # kept per key, the newest first
_MERGES = 4  # tries at merging with an entry other writers keep replacing
LOCK_WAIT = 1.0  # seconds a writer waits for the lock before it stores nothing
_warned_busy = False

_generation = 0  # bumped by clear(): records found before it hand out no payloads
_CONTRACTS = registry.CONTRACTS  # the instruction-contract table payloads are lowered with


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
                 "generation", "snapshots", "prepared", "staged")  # fmt: skip

    def __init__(self, key, names=None, digest=None, name=None, source=None, payloads=None,
                 found=False, macros=()):  # fmt: skip
        self.key, self.names, self.macros, self.digest = key, names, macros, digest
        self.name, self.source = name, source
        self.payloads = payloads if payloads is not None else {}
        self.found = found
        self.generation = _generation
        self.snapshots: dict[int, tuple] = {}
        self.prepared: dict[int, tuple[bytes, str]] = {}  # arch -> a payload not yet stored
        # arch -> (temporary file, header merged with, payloads merged, generation), prepare's
        self.staged: dict[int, tuple] = {}


def _usable() -> bool:
    """The disk cache is on, and the contract table is tirx's own: a test that replaces it (as
    the memo in tirx/compile.py notices) must neither read nor write lowered IR."""
    return config.cache_enabled() and registry.CONTRACTS is _CONTRACTS


# ------------------------------------------------------------------------------ the key


@functools.cache
def code_stamp() -> str:
    """sha256 hex digest of what tirx's code is: its version and the relative path, size and
    mtime of every .py file of the package (tirx/compat included; the codegen version lives in
    one of them). Computed once per process; editing any file of tirx makes every entry a miss.
    Reads no module it does not need: a kernel defined for the simulator imports no codegen."""

    files: list[tuple[str, int, int]] = []
    _scan(os.path.dirname(os.path.abspath(__file__)), "", files)
    files.sort()
    return sha256(repr((__version__, files)).encode()).hexdigest()


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
            sys.version,
            code.co_filename,
            "".join(lines),
            code.co_firstlineno,
            pyfunc.__qualname__,
            pyfunc.__name__,
            options,
        )
    )
    return sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------ fingerprints


def _digest(names: tuple[str, ...], scope: dict, annotations: dict, macros: MacroNames):
    """sha256 hex digest of the fingerprint of what ``names`` resolve to in ``scope`` and of
    ``annotations`` (the macros reached with ``macros``'s names); None if it has none."""
    fp = fingerprint((names, resolved(names, scope), annotations), macros)
    return None if fp is None else sha256(repr(fp).encode()).hexdigest()


# ------------------------------------------------------------------------------ decoration


def lookup(pyfunc, lines: list[str], scope: dict, annotations: dict, options: dict):
    """At decoration, before parsing: the stored variant of this kernel whose fingerprints
    match ``scope`` and ``annotations`` now (``record.found``; the lists and dicts among its
    names' values in ``scope``, the decorator's own copy, are replaced by copies, and so are
    those in the scopes of its macros, kept in ``record.snapshots``), else a
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
            macros = MacroNames(dict(variant.macros))
            digests[logged] = (_digest(variant.names, scope, annotations, macros), macros)
        digest, macros = digests[logged]
        if digest == variant.digest:
            for name in variant.names:
                if name in scope:
                    scope[name] = snapshot(scope[name])
            for _, macro_scope, _, macro_names in macros.reached.values():
                for name in macro_names:
                    if name in macro_scope:
                        macro_scope[name] = snapshot(macro_scope[name])
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
        code = macro_code(m)[0]
        if code is None:
            return None
        table.setdefault(code, {}).update(macro_names)
    macros = tuple((code, tuple(n)) for code, n in table.items())
    digest = _digest(names, parser.scope, parser.annotations, MacroNames(dict(macros)))
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
    if sha256(blob).hexdigest() == digest:
        try:
            lowered, source = serial.loads(blob)
            if isinstance(lowered, ir.Function) and isinstance(source, str):
                return lowered, source
        except Exception:  # noqa: BLE001 - whatever fails in reading it, it is not used
            pass
    del record.payloads[arch]  # compiled again; the store after that replaces it
    return None


def prepare(kernel, arch: int, lowered: ir.Function, source: str) -> None:
    """Do what :func:`store` will do, ahead of it, short of the rename that puts the entry in
    place: encode the payload, merge the variant with the entry on disk as it is now and write
    the result to a temporary file beside it (``record.staged``). ``tirx.compile`` calls this in
    a thread while NVRTC compiles (which releases the GIL), so none of it costs wall time; the
    entry is replaced only after the compile succeeded (:func:`store`), and :func:`discard`
    removes the temporary file of a compile that failed."""
    record = kernel.frontend
    if record is None or arch in record.payloads or not _usable():
        return
    payload = _payload(lowered, source)
    if payload is None:
        return
    record.prepared[arch] = payload
    with contextlib.suppress(OSError):  # store() writes it again
        final = _entry_path(record.key, create=True)
        record.staged[arch] = (*_write_merged(record, {arch: payload}, final), _generation)


def discard(kernel, arch: int) -> None:
    """After a failed compile: remove what :func:`prepare` wrote beside the entry (the encoded
    payload stays in memory for the next try)."""
    record = kernel.frontend
    staged = None if record is None else record.staged.pop(arch, None)
    if staged is not None:
        _remove(staged[0])


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _payload(lowered: ir.Function, source: str) -> tuple[bytes, str] | None:
    try:
        blob = serial.dumps((lowered, source))
    except (TypeError, ValueError, RecursionError):  # not IR alone; marshal's limits
        return None
    return blob, sha256(blob).hexdigest()


def store(kernel, arch: int, lowered: ir.Function, source: str) -> None:
    """After a successful cuda compile of ``kernel``: add ``(lowered, source)`` for arch number
    ``arch`` to its variant on disk (atomically; the other variants, and archs another
    process stored meanwhile, are kept). Nothing for a kernel that cannot be cached."""
    record = kernel.frontend
    if record is None:
        return
    staged = record.staged.pop(arch, None)
    payload = _to_store(record, arch, lowered, source)
    lock = config.cache_dir() / _LOCK
    if staged is not None:
        tmp, seen, merged, generation = staged
        if payload is None or generation != _generation:
            _remove(tmp)
        elif _replace(tmp, _entry_path(record.key), seen, lock):
            record.payloads = merged
            return
    if payload is None:
        return
    record.payloads[arch] = payload
    try:
        final = _entry_path(record.key, create=True)
        for _ in range(_MERGES):
            tmp, seen, merged = _write_merged(record, {}, final)
            if _replace(tmp, final, seen, lock):
                record.payloads = merged
                return
    except OSError:
        pass  # the disk is an optimization (the CUBIN cache, in the same directory, warns)


def _to_store(record: Record, arch: int, lowered: ir.Function, source: str):
    """The payload for arch ``arch`` that :func:`store` adds to ``record``'s variant; None when
    there is none to add (the cache is off, the arch is stored, the IR cannot be encoded)."""
    if not _usable():
        return None
    if record.generation != _generation:  # cleared since: what it held is gone from disk
        record.payloads, record.generation = {}, _generation
    if arch in record.payloads:
        return None
    return record.prepared.pop(arch, None) or _payload(lowered, source)


def _entry_path(key: str, create: bool = False):
    directory = config.cache_dir() / _SUBDIR
    if create:
        directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.mkdir(mode=0o700, exist_ok=True)
    return directory / (key + _SUFFIX)


def _write_merged(record: Record, extra: dict, final) -> tuple[str, bytes | None, dict]:
    """Merge ``record``'s variant (its payloads and ``extra``) with the entry ``final`` as it
    is now, and write the result beside it: ``(the temporary file, the header it was merged
    with, the variant's payloads as merged)``, for :func:`_replace`."""
    data = read_regular(final)
    payloads, others = {**record.payloads, **extra}, []
    for variant in _decode(record.key, data):
        if variant.digest == record.digest:
            payloads = {**variant.payloads, **payloads}
        else:
            others.append(variant)
    mine = Record(record.key, record.names, record.digest, record.name, record.source,
                  payloads, macros=record.macros)  # fmt: skip
    tmp = write_temporary(final, _encode(record.key, [mine, *others][:_VARIANTS]))
    return tmp, stamp(data), payloads


def _replace(tmp: str, final, seen, lock) -> bool:
    """Rename ``tmp`` over the entry ``final`` under the writers' lock, if the entry's header is
    still ``seen`` (else False, and ``tmp`` is removed: merge again). True when done: stored,
    or given up on because the lock was not had in :data:`LOCK_WAIT` seconds.

    The lock is held for a header read and a rename only; the merge and the write happen
    before, so a writer stopped at any point blocks the others for no longer than their wait,
    and one stopped while it holds the lock costs them their stores, never their compiles."""
    try:
        with exclusive_lock(lock, LOCK_WAIT) as held:
            if held is False:
                _lock_busy(lock)
                return True
            if stamp(read_regular(final, head=STAMP_BYTES)) != seen:
                return False  # another writer replaced it meanwhile: merge with theirs
            os.replace(tmp, final)
            tmp = None
            return True
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _lock_busy(lock) -> None:
    """Say once per process that stores are skipped because another process holds the lock."""
    global _warned_busy
    if _warned_busy:
        return
    _warned_busy = True
    pid = lock_holder(lock)
    who = f"process {pid}" if pid is not None else "another process"
    warnings.warn(
        f"tirx: the front-end cache's lock {lock} has been held by {who} for over "
        f"{LOCK_WAIT:g} s (stopped while it stored a kernel?); kernels compile as usual, but "
        f"this process stores none in the front-end cache while the lock is held, so the next "
        f"process parses them again. Resume or end that process, or delete the lock file",
        RuntimeWarning,
        stacklevel=4,
    )


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


# ------------------------------------------------------------------------------ entries


def _read(key: str) -> list[Record]:
    """The variants stored under ``key``, newest first; [] without a whole, valid entry."""
    return _decode(key, read_regular(config.cache_dir() / _SUBDIR / (key + _SUFFIX)))


def _decode(key: str, data: bytes | None) -> list[Record]:
    """The variants of the entry ``data``; [] unless other checks pass and this tirx code wrote
    it (the code stamp is computed only then)."""
    code, variants = decode(key, data)
    if not variants or code != code_stamp():
        return []
    return [Record(key, n, d, name, src, p, True, m) for n, m, d, name, src, p in variants]


def _encode(key: str, records: list[Record]) -> bytes:
    return encode(
        key,
        code_stamp(),
        [(r.names, r.macros, r.digest, r.name, r.source, r.payloads) for r in records],
    )


_parser.frontend_cache = sys.modules[__name__]  # @T.function consults this module
