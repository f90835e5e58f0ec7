"""The front-end cache (tirx/frontend_cache.py) with kernels that call ``@T.macro`` / ``@T.inline``:
a macro is fingerprinted by its def's text and the values its body read in its own scope, so
such a kernel is found again in a new process, and any change to what its expansion depends on
is a miss.

Cross-process cases run in fresh subprocesses (as tests/test_frontend_cache.py does) with the
macros in a file of their own (``macs.py``) and the values they read in another
(``params.py``), so that the kernel's own file, and with it the cache key, stays the same.
"""

from __future__ import annotations

import linecache
import types
from pathlib import Path

import numpy as np
import pytest

import tirx
from tests.helpers import PRELUDE
from tests.test_frontend_cache import TARGET, compile_in_subprocess, entries, run_file
from tirx import fingerprints

PARAMS = {"SCALE": 3, "BIAS": 100, "OFFSET": 1000, "LATE": 10}

# scaled() reads the global SCALE and calls bias(), which reads BIAS; offset reads its closure
# cell c; late is an inline reading the global LATE.
MACROS = """\
from tirx import T
from params import SCALE, BIAS, OFFSET, LATE


@T.macro
def bias(dst, i):
    dst[i] = dst[i] + BIAS


@T.macro
def scaled(dst, i, value):
    dst[i] = value * SCALE
    bias(dst, i)


def make_offset(c):
    @T.macro
    def offset(dst, i):
        dst[i] = dst[i] + c

    return offset


offset = make_offset(OFFSET)


@T.inline
def late(i):
    return i + LATE
"""

KERNEL = """
from macs import scaled, offset, late


@T.function
def k(A: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    scaled(A, lane, late(lane))
    offset(A, lane)
"""


def write_files(folder: Path, macros: str = MACROS, **changes) -> None:
    values = {**PARAMS, **changes}
    (folder / "params.py").write_text("".join(f"{k} = {v}\n" for k, v in values.items()))
    (folder / "macs.py").write_text(macros)
    (folder / "kern.py").write_text(PRELUDE + KERNEL)


def expected_lines(scale=3, bias=100, offset=1000, late=10) -> list[str]:
    """The generated statements of the kernel for these values."""
    return [
        f"A[(tirx_tid & 31)] = ((lane + {late}) * {scale});",
        f"A[(tirx_tid & 31)] = (A[(tirx_tid & 31)] + {bias});",
        f"A[(tirx_tid & 31)] = (A[(tirx_tid & 31)] + {offset});",
    ]


def has_lines(source: str, lines: list[str]) -> bool:
    return all(line in source for line in lines)


# --- across processes -----------------------------------------------------------------------


def test_a_kernel_calling_macros_is_found_by_a_second_process(cache_dir, tmp_path):
    write_files(tmp_path)
    cold = compile_in_subprocess(cache_dir, tmp_path)
    assert (cold["cache"], cold["found"], cold["parsed"]) == ("miss", False, True)
    assert cold["cacheable"] and len(entries(cache_dir)) == 1
    warm = compile_in_subprocess(cache_dir, tmp_path)
    assert (warm["cache"], warm["found"], warm["parsed"]) == ("hit", True, False)
    assert warm["timings"]["parse"] == warm["timings"]["lower"] == 0
    plain = compile_in_subprocess(cache_dir, tmp_path, TIRX_CACHE="0")
    assert not plain["cacheable"]
    assert warm["source"] == cold["source"] == plain["source"]
    assert warm["ptx"] == plain["ptx"]
    assert has_lines(warm["source"], expected_lines())


# what changes (a value in params.py, or the text of macs.py), and the statements it gives
CHANGES = {
    "a global the macro reads": ({"SCALE": 7}, expected_lines(scale=7)),
    "a global the callee macro reads": ({"BIAS": 200}, expected_lines(bias=200)),
    "a closure value the macro reads": ({"OFFSET": 5000}, expected_lines(offset=5000)),
    "a global the inline reads": ({"LATE": 20}, expected_lines(late=20)),
    "the macro's body": (
        {"macros": MACROS.replace("value * SCALE", "value * SCALE * 2")},
        ["A[(tirx_tid & 31)] = ((lane + 10) * 3 * 2);"],
    ),
    "the callee's body": (
        {"macros": MACROS.replace("dst[i] + BIAS", "dst[i] - BIAS")},
        ["A[(tirx_tid & 31)] = (A[(tirx_tid & 31)] - 100);"],
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_to_what_a_macro_expands_to_is_a_miss(cache_dir, tmp_path, change):
    write_files(tmp_path)
    first = compile_in_subprocess(cache_dir, tmp_path)
    assert has_lines(first["source"], expected_lines())
    values, lines = CHANGES[change]
    write_files(tmp_path, **values)
    changed = compile_in_subprocess(cache_dir, tmp_path)
    assert not changed["found"] and changed["parsed"]
    assert has_lines(changed["source"], lines) and changed["source"] != first["source"]
    again = compile_in_subprocess(cache_dir, tmp_path)  # the changed kernel's own variant
    assert again["found"] and again["source"] == changed["source"]


def test_a_macro_swapped_for_another_of_the_same_name_is_a_miss(cache_dir, tmp_path):
    """Two files each define ``op``; the kernel's file imports it from a third, which picks."""
    for name, body in [("one", "dst[i] = i + 1"), ("two", "dst[i] = i + 2")]:
        (tmp_path / f"{name}.py").write_text(f"from tirx import T\n\n\n@T.macro\ndef op(dst, i):"
                                             f"\n    {body}\n")  # fmt: skip
    pick = tmp_path / "pick.py"
    kernel = KERNEL.replace("from macs import scaled, offset, late", "from pick import op")
    kernel = kernel.replace("scaled(A, lane, late(lane))\n    offset(A, lane)", "op(A, lane)")
    (tmp_path / "kern.py").write_text(PRELUDE + kernel)
    pick.write_text("from one import op\n")
    first = compile_in_subprocess(cache_dir, tmp_path)
    assert "(lane + 1)" in first["source"]
    assert compile_in_subprocess(cache_dir, tmp_path)["found"]
    pick.write_text("from two import op\n")
    swapped = compile_in_subprocess(cache_dir, tmp_path)
    assert not swapped["found"] and "(lane + 2)" in swapped["source"]


# --- in one process, through the disk -------------------------------------------------------

SIM_KERNEL = """
@T.function
def k(A: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    A[lane] = lane
    CALL
"""


def kernel_file(folder: Path, call: str, defs: str = "", name: str = "kern.py") -> Path:
    path = folder / name
    path.write_text(PRELUDE + defs + SIM_KERNEL.replace("CALL", call))
    return path


def simulate(kernel) -> np.ndarray:
    out = np.zeros(32, np.int32)
    tirx.compile(kernel, "sim")(out)
    return out


LANES = np.arange(32)

# a factory of macros with one code: each call makes a new macro object, its closure ``c``
FACTORY = """\
from tirx import T


def make_add(c):
    @T.macro
    def add(dst, i):
        dst[i] = dst[i] + c

    return add


def make_sub(c):
    @T.macro
    def sub(dst, i):
        dst[i] = dst[i] - c

    return sub


def make_bump(c, k):
    @T.macro
    def bump(dst, i, n=c, *, m=k):  # c and k are read when bump is defined, into its defaults
        dst[i] = dst[i] + n * 10 + m

    return bump


@T.macro
def apply(op, dst, i):
    op(dst, i)
    op(dst, i)
"""


def module(folder: Path, name: str, text: str) -> dict:
    """The namespace of ``folder/name.py`` holding ``text``, executed as an import would."""
    path = folder / f"{name}.py"
    path.write_text(text)
    linecache.checkcache(str(path))
    namespace: dict = {"__name__": name}
    exec(compile(text, str(path), "exec"), namespace)  # noqa: S102
    return namespace


def factory(folder: Path) -> dict:
    return module(folder, "factory", FACTORY)


def test_macros_of_one_code_and_closure_share_an_entry_and_other_closures_miss(cache_dir, tmp_path):
    make_add = factory(tmp_path)["make_add"]
    path = kernel_file(tmp_path, "add(A, lane)")
    cold = run_file(path, add=make_add(5))
    source = tirx.compile(cold, TARGET).source
    again = run_file(path, add=make_add(5))  # another macro object, the same expansion
    assert again.frontend.found and tirx.compile(again, TARGET).source == source
    assert (simulate(again) == LANES + 5).all()
    other = run_file(path, add=make_add(6))
    assert other.frontend is not None and not other.frontend.found
    assert tirx.compile(other, TARGET).source != source
    assert (simulate(other) == LANES + 6).all()
    assert len(entries(cache_dir)) == 1  # one key, two variants


def test_a_macro_parameter_default_is_part_of_the_fingerprint(cache_dir, tmp_path):
    make_bump = factory(tmp_path)["make_bump"]
    path = kernel_file(tmp_path, "bump(A, lane)")
    tirx.compile(run_file(path, bump=make_bump(1, 1)), TARGET)
    assert run_file(path, bump=make_bump(1, 1)).frontend.found
    for c, k in [(2, 1), (1, 2)]:  # a positional default, a keyword-only one
        other = run_file(path, bump=make_bump(c, k))
        assert not other.frontend.found and (simulate(other) == LANES + 10 * c + k).all()


def test_a_macro_passed_to_a_macro_is_part_of_the_fingerprint(cache_dir, tmp_path):
    ns = factory(tmp_path)
    path = kernel_file(tmp_path, "apply(op, A, lane)")
    sources = {}
    for c in (1, 2):
        kernel = run_file(path, apply=ns["apply"], op=ns["make_add"](c))
        assert not kernel.frontend.found
        sources[c] = tirx.compile(kernel, TARGET).source
        assert (simulate(kernel) == LANES + 2 * c).all()
    assert sources[1] != sources[2]
    for c in (1, 2):
        kernel = run_file(path, apply=ns["apply"], op=ns["make_add"](c))
        assert kernel.frontend.found and tirx.compile(kernel, TARGET).source == sources[c]
        assert (simulate(kernel) == LANES + 2 * c).all()


LATE_BINDING = """\
from tirx import T


def make_pair():
    n = 1

    @T.macro
    def early(dst, i):
        dst[i] = dst[i] + n

    @T.inline
    def late(dst, i):
        dst[i] = dst[i] + n

    def set_n(value):
        nonlocal n
        n = value

    return early, late, set_n
"""


@pytest.mark.parametrize("which", ["early", "late"])
def test_an_inline_reads_its_closure_now_a_macro_at_decoration(cache_dir, tmp_path, which):
    early, late, set_n = module(tmp_path, "pair", LATE_BINDING)["make_pair"]()
    path = kernel_file(tmp_path, "mac(A, lane)")
    macro = early if which == "early" else late
    tirx.compile(run_file(path, mac=macro), TARGET)
    assert run_file(path, mac=macro).frontend.found
    set_n(2)  # after the macros' decoration, before the kernel's
    kernel = run_file(path, mac=macro)
    if which == "early":  # T.macro: its closure as decorated, so the same expansion
        assert kernel.frontend.found and (simulate(kernel) == LANES + 1).all()
    else:  # T.inline: its closure now
        assert not kernel.frontend.found and (simulate(kernel) == LANES + 2).all()


def test_a_found_kernel_expands_its_macros_as_they_were_at_decoration(cache_dir, tmp_path):
    path = kernel_file(tmp_path, "bump(A, lane)", "\n@T.macro\ndef bump(dst, i):\n"
                       "    dst[i] = dst[i] + STEP[0]\n")  # fmt: skip
    cold = run_file(path, STEP=[3])
    cold_exe = tirx.compile(cold, TARGET)
    step = [3]
    kernel = run_file(path, STEP=step)
    assert kernel.frontend.found and kernel._ir is None
    step[0] = 9  # after decoration: neither the stored code nor the later parse sees it
    assert "+ 3" in kernel.script() and "+ 9" not in kernel.script()
    assert tirx.compile(kernel, TARGET).source == cold_exe.source
    assert (simulate(kernel) == LANES + 3).all()


def test_a_macro_reading_a_value_without_fingerprint_is_never_cached(cache_dir, tmp_path):
    path = kernel_file(tmp_path, "bump(A, lane)", "\n@T.macro\ndef bump(dst, i):\n"
                       "    dst[i] = dst[i] + cfg.n\n")  # fmt: skip
    kernel = run_file(path, cfg=types.SimpleNamespace(n=4))
    assert kernel.frontend is None
    assert (simulate(kernel) == LANES + 4).all()
    tirx.compile(kernel, TARGET)
    assert entries(cache_dir) == []
    # its corrected twin, reading a number, is cached
    twin = kernel_file(tmp_path, "bump(A, lane)", "\n@T.macro\ndef bump(dst, i):\n"
                       "    dst[i] = dst[i] + n\n", "twin.py")  # fmt: skip
    kernel = run_file(twin, n=4)
    assert kernel.frontend is not None
    tirx.compile(kernel, TARGET)
    assert len(entries(cache_dir)) == 1


def test_which_macros_are_one_object_is_part_of_the_fingerprint(cache_dir, tmp_path):
    """``==`` on macros compares identity: X and Y one object, or two equal ones, differ."""
    make_add = factory(tmp_path)["make_add"]
    path = kernel_file(tmp_path, "if X == Y:\n        X(A, lane)\n    else:\n"
                       "        Y(A, lane)\n        Y(A, lane)")  # fmt: skip
    one = make_add(1)
    tirx.compile(run_file(path, X=one, Y=one), TARGET)
    assert run_file(path, X=one, Y=one).frontend.found
    two = run_file(path, X=make_add(1), Y=make_add(1))  # same code and closure, two objects
    assert not two.frontend.found and (simulate(two) == LANES + 2).all()
    tirx.compile(two, TARGET)
    assert run_file(path, X=make_add(1), Y=make_add(1)).frontend.found


def test_a_macro_never_expanded_is_not_part_of_the_fingerprint(cache_dir, tmp_path):
    """...unless a macro of its code was (macros of one code log their names together)."""
    ns = factory(tmp_path)
    make_add, make_sub = ns["make_add"], ns["make_sub"]
    path = kernel_file(tmp_path, "OPS[0](A, lane)")
    tirx.compile(run_file(path, OPS=(make_add(1), make_sub(7))), TARGET)
    assert run_file(path, OPS=(make_add(1), make_sub(8))).frontend.found  # OPS[1] unused
    assert not run_file(path, OPS=(make_add(1), make_add(8))).frontend.found
    changed = run_file(path, OPS=(make_add(2), make_sub(7)))
    assert not changed.frontend.found and (simulate(changed) == LANES + 2).all()


def test_a_recursive_macro_is_cached(cache_dir, tmp_path):
    recursive = "\n@T.macro\ndef down(dst, i, n):\n    if n > 0:\n        dst[i] = dst[i] + n\n"
    path = kernel_file(tmp_path, "down(A, lane, 3)", recursive + "        down(dst, i, n - 1)\n")
    source = tirx.compile(run_file(path), TARGET).source
    kernel = run_file(path)
    assert kernel.frontend.found and tirx.compile(kernel, TARGET).source == source
    assert (simulate(kernel) == LANES + 6).all()


def test_an_attribute_of_a_macro_is_refused_in_a_kernel(cache_dir, tmp_path):
    """A kernel uses a macro by calling it; its attributes (the closure) are not fingerprinted."""
    make_add = factory(tmp_path)["make_add"]
    path = kernel_file(tmp_path, "A[lane] = lane + add.closure['c']")
    with pytest.raises(tirx.TirxError) as info:
        run_file(path, add=make_add(3))
    err = info.value
    assert "a macro has no attribute 'closure'" in err.message
    line = path.read_text().splitlines().index("    A[lane] = lane + add.closure['c']") + 1
    assert err.span.line == line and "add(...)" in err.hint
    twin = run_file(kernel_file(tmp_path, "add(A, lane)", name="twin.py"), add=make_add(3))
    assert (simulate(twin) == LANES + 3).all()


def test_macros_in_notebook_cells(cache_dir):
    """A macro's cell text is part of its code: the same cell name with other text misses."""
    cells = {"macro": "<ipython-input-3-00000000000a>", "kernel": "<ipython-input-4-00000000000b>"}

    def run_cell(name: str, text: str, namespace: dict):
        linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
        exec(compile(text, name, "exec"), namespace)  # noqa: S102

    def run(amount: int):
        namespace = {"__name__": "__main__"}
        run_cell(cells["macro"], PRELUDE + "\n@T.macro\ndef bump(dst, i):\n"
                 f"    dst[i] = dst[i] + {amount}\n", namespace)  # fmt: skip
        run_cell(cells["kernel"], PRELUDE + SIM_KERNEL.replace("CALL", "bump(A, lane)"),
                 namespace)  # fmt: skip
        return namespace["k"]

    try:
        tirx.compile(run(3), TARGET)
        again = run(3)
        assert again.frontend.found and (simulate(again) == LANES + 3).all()
        other = run(4)  # the macro's cell run again with other text, the kernel's unchanged
        assert not other.frontend.found and (simulate(other) == LANES + 4).all()
    finally:
        for name in cells.values():
            linecache.cache.pop(name, None)


def test_a_macro_has_a_fingerprint_only_with_the_names_its_body_read(tmp_path):
    make_add = factory(tmp_path)["make_add"]
    assert fingerprints.fingerprint(make_add(1)) is None
    unexpanded = fingerprints.fingerprint(make_add(1), fingerprints.MacroNames({}))
    assert unexpanded == fingerprints.fingerprint(make_add(2), fingerprints.MacroNames({}))
    code, _ = fingerprints.macro_code(make_add(1))
    table = {code: ("c",)}
    fps = [fingerprints.fingerprint(make_add(c), fingerprints.MacroNames(table)) for c in (1, 1, 2)]
    assert fps[0] == fps[1] != fps[2] and None not in fps
    one = make_add(1)
    same = fingerprints.fingerprint((one, one), fingerprints.MacroNames(table))
    assert same != fingerprints.fingerprint((one, make_add(1)), fingerprints.MacroNames(table))


def _namespace_objects(obj, place):
    """``T``'s parts and members, found by walking it: ``(place, object)``."""
    from tirx.script import namespace

    yield place, obj
    for name, value in vars(obj).items():
        if type(value).__module__ == namespace.__name__ and not isinstance(value, type):
            yield from _namespace_objects(value, f"{place}.{name}")


def test_every_namespace_object_has_a_fingerprint_by_its_place():
    from tirx.layout import R, S
    from tirx.script.namespace import T

    found = list(_namespace_objects(T, "T"))
    assert len(found) > 150
    for place, obj in [*found, ("S", S), ("R", R)]:
        fp = fingerprints.fingerprint(obj)
        assert fp is not None and fp[0] == "T", place
        # its own place, or the canonical name of an alias (T.f32 is T.float32)
        assert fp[1] == place or eval(fp[1], {"T": T}) is obj, place  # noqa: S307


def test_an_object_claiming_a_namespace_place_has_no_fingerprint():
    from tirx.script.namespace import LetType, T

    class Impostor:  # as if defined beside T's parts
        _place = "T.cuda"

    Impostor.__module__ = "tirx.script.namespace"

    assert fingerprints.fingerprint(Impostor()) is None
    assert fingerprints.fingerprint(T.let[T.int32]) is None  # a T.let[...] is made per use
    assert fingerprints.fingerprint(LetType()) is None
    assert fingerprints.fingerprint(T.let) == ("T", "T.let")
