"""The generated CUDA of every kernel the test suite builds, as a set of digests.

A restructure that must not change behaviour is checked by running this before and after and
comparing the two files: the same set of sources (``#line`` paths aside) means every example
and test kernel generates byte-identical CUDA.

    python .ci/cuda_identity.py OUT.json [pytest args...]     # collect
    python .ci/cuda_identity.py --compare BEFORE.json AFTER.json

Collecting runs pytest in this process with ``tirx.backend.cuda.codegen.generate`` wrapped,
and a fresh ``TIRX_CACHE_DIR`` so no kernel is served from an earlier process's cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile

_LINE = re.compile(r'^(#line \d+) ".*"$', re.M)


def normalized(source: str) -> str:
    return _LINE.sub(r"\1", source)


def collect(out: str, args: list[str]) -> int:
    os.environ["TIRX_CACHE_DIR"] = tempfile.mkdtemp(prefix="tirx-identity-")
    import pytest

    from tirx.backend.cuda import codegen

    seen: dict[str, str] = {}
    original = codegen.generate

    def generate(fn):
        source = original(fn)
        text = normalized(source)
        seen.setdefault(hashlib.sha256(text.encode()).hexdigest(), f"{fn.name}")
        return source

    codegen.generate = generate
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "-m", "not gpu and not reference", *args])
    with open(out, "w") as f:
        json.dump(dict(sorted(seen.items())), f, indent=0)
    print(f"{len(seen)} distinct generated sources -> {out} (pytest exit {rc})")
    return 0


def compare(before: str, after: str) -> int:
    a, b = (json.load(open(p)) for p in (before, after))
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    print(f"before: {len(a)} sources, after: {len(b)}, in both: {len(set(a) & set(b))}")
    for h in only_a:
        print(f"  only before: {a[h]} {h[:12]}")
    for h in only_b:
        print(f"  only after:  {b[h]} {h[:12]}")
    print("identical" if not (only_a or only_b) else "DIFFERENT")
    return 1 if only_a or only_b else 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    sys.exit(collect(sys.argv[1], sys.argv[2:]))
