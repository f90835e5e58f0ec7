"""The file format of a front-end cache entry (tirx/frontend_cache.py): bytes to variants and
back, knowing nothing of where entries live or what a variant means.

``$TIRX_CACHE_DIR/frontend/<key>.entry`` holds up to eight variants of one kernel, newest
first: each a tuple ``(names, macros, digest, name, source, payloads)`` of tuples of strings
and ints, and ``payloads`` a dict ``arch number -> (blob, sha256 hex digest of the blob)``.
The file is a header (magic, format version, key, the stamp of the tirx code that wrote it,
sha256 and length of the metadata, length of the payloads), the metadata (the variants without their blobs, in :mod:`marshal`'s format: the
Python version is in the key, and reading it costs microseconds), then the blobs, each checked
against its own sha256 (in the metadata) by the reader before it is used.

The header names its entry's content: it holds the metadata's sha256, and the metadata every
blob's. Writers compare the header they merged with against the one on disk before they
replace an entry (:func:`stamp`).
"""

from __future__ import annotations

import marshal
import struct

from .files import sha256

__all__ = ["MAGIC", "FORMAT_VERSION", "encode", "decode", "stamp"]

MAGIC = b"TIRXFRNT"
FORMAT_VERSION = 3  # 2: each variant holds the names its macros resolved; 3: the code stamp
HEADER = struct.Struct("<8sI64s64s32sQQ")  # magic, version, key, code, sha256(meta), 2 lengths


def encode(key: str, code: str, variants) -> bytes:
    """The bytes of an entry of ``key`` holding ``variants`` (tuples as the module says),
    written by tirx code ``code`` (a 64-character stamp)."""
    metas, blobs, at = [], [], 0
    for names, macros, digest, name, source, payloads in variants:
        index = []
        for arch, (blob, sha) in sorted(payloads.items()):
            index.append((arch, at, len(blob), sha))
            blobs.append(blob)
            at += len(blob)
        metas.append((names, macros, digest, name, source, tuple(index)))
    meta = marshal.dumps(tuple(metas))
    header = HEADER.pack(
        MAGIC, FORMAT_VERSION, key.encode(), code.encode(), sha256(meta).digest(), len(meta), at
    )
    return header + meta + b"".join(blobs)


def decode(key: str, data: bytes | None) -> tuple[str | None, list[tuple]]:
    """``(code stamp, variants)`` of the entry ``data``; ``(None, [])`` unless it is a whole,
    valid entry of ``key``. (The blobs' own digests are checked when a blob is used.)"""
    if data is None or len(data) < HEADER.size:
        return None, []
    magic, version, k, code, checksum, n_meta, n_payloads = HEADER.unpack_from(data)
    start = HEADER.size
    if (
        magic != MAGIC
        or version != FORMAT_VERSION
        or k != key.encode()
        or len(data) != start + n_meta + n_payloads
    ):
        return None, []
    meta = data[start : start + n_meta]
    if sha256(meta).digest() != checksum:
        return None, []
    base = start + n_meta
    try:
        return code.rstrip(b"\0").decode(errors="replace"), [
            (names, macros, digest, name, source, {
                arch: (data[base + at : base + at + size], sha) for arch, at, size, sha in index
            })
            for names, macros, digest, name, source, index in marshal.loads(meta)
        ]  # fmt: skip
    except (ValueError, TypeError, EOFError):
        return None, []


def stamp(data: bytes | None) -> bytes | None:
    """What tells two versions of an entry apart (its header); None for no entry. Reading the
    first :data:`STAMP_BYTES` bytes of a file is enough."""
    return None if data is None else data[: HEADER.size]


STAMP_BYTES = HEADER.size
