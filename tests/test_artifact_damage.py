"""Saved kernels (tirx/artifact.py, tirx/backend/cuda/stored.py, tirx/files.py) at their edges:
saving a loaded kernel again, the arch ``tirx.load`` is asked for, the file's mode and a
symbolic link in its place, a damaged manifest or member, and the archs and paths ``save``
refuses. (tests/test_artifact.py has the file and the launch.)"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import zipfile

import pytest
import torch

import tirx
from tirx.artifact import ArtifactError
from tirx.examples.softmax import make_softmax

ARCHS = ["sm_80", "sm_90", "sm_100"]


@pytest.fixture(scope="module")
def exe():
    return tirx.compile(make_softmax(8, 256), "cuda -arch=sm_90")


@pytest.fixture(scope="module")
def multi(exe, tmp_path_factory):
    """A file saved for three archs."""
    return exe.save(tmp_path_factory.mktemp("multi") / "multi.tirx", archs=ARCHS)


def _members(path) -> list[str]:
    with zipfile.ZipFile(path) as z:
        return sorted(z.namelist())


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextlib.contextmanager
def _umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


# ------------------------------------------------------------- a loaded kernel, saved again


def test_a_loaded_kernel_is_saved_again_with_every_arch_it_holds(multi, tmp_path):
    loaded = tirx.load(multi)
    assert list(loaded.images) == ARCHS
    again = loaded.save(tmp_path / "resaved.tirx")
    assert _members(again) == _members(multi)
    for arch in ARCHS:
        assert tirx.load(again, arch=arch).ptx == tirx.load(multi, arch=arch).ptx
    # in place: nothing is dropped
    inplace = tmp_path / "inplace.tirx"
    inplace.write_bytes(multi.read_bytes())
    tirx.load(inplace, arch="sm_100").save(inplace)
    assert _members(inplace) == _members(multi)
    # archs= still picks
    one = loaded.save(tmp_path / "one.tirx", archs=["sm_90"])
    assert [m for m in _members(one) if m.startswith("sm_")] == ["sm_90.cubin", "sm_90.ptx"]


# --------------------------------------------------------------------- the arch load takes


@pytest.mark.parametrize("bad", [90, "banana", "sm_90aa", "a", "sm_70", "sm_80a", "90", ""])
def test_load_checks_its_arch_as_save_checks_archs(exe, multi, tmp_path, bad):
    with pytest.raises(ValueError, match=f"load: arch must name real architectures.*got {bad!r}"):
        tirx.load(multi, arch=bad)
    with pytest.raises(ValueError, match=f"save: archs must name real architectures.*got {bad!r}"):
        exe.save(tmp_path / "x.tirx", archs=[bad])
    with pytest.raises(ValueError, match=f"save: archs must name real architectures.*got {bad!r}"):
        exe.save(tmp_path / "x.tirx", archs=bad)  # a bare value (90 was "int is not iterable")
    assert not (tmp_path / "x.tirx").exists()


def test_load_takes_the_arch_specific_name_and_hints_without_it(multi):
    assert tirx.load(multi, arch="sm_90a").arch == "sm_90"
    with pytest.raises(ArtifactError, match="holds code for sm_80, sm_90, sm_100; asked for "
                       "sm_120a") as info:  # fmt: skip
        tirx.load(multi, arch="sm_120a")
    assert "archs=['sm_120a', ...]" in info.value.hint
    # the command line takes the same spelling (tirx compile --arch sm_90a builds sm_90a)
    assert "--arch sm_120a --out" in info.value.hint


def test_a_loaded_kernel_checks_its_arguments_before_saying_it_needs_a_gpu(multi, monkeypatch):
    from tirx.backend.cuda import stored

    monkeypatch.setattr(stored.driver, "gpu_count", lambda: 0)  # as on a machine without one
    loaded = tirx.load(multi, arch="sm_90")
    x, y = torch.zeros(8, 256).half(), torch.empty(8, 256).half()
    with pytest.raises(TypeError, match="takes 2 arguments"):
        loaded(x)
    with pytest.raises(ValueError, match=r"parameter 'X' expects shape \(8, 256\), got \(3,\)"):
        loaded(torch.zeros(3).half(), y)
    with pytest.raises(TypeError, match="parameter 'X' expects dtype float16"):
        loaded(x.float(), y)
    with pytest.raises(tirx.LaunchError, match="needs a CUDA GPU"):  # a right call
        loaded(x, y)


# -------------------------------------------------------------- the file's mode and links


def test_a_saved_file_has_the_umask_mode_and_keeps_a_replaced_files(exe, tmp_path):
    for mask in (0o022, 0o077, 0o002):
        with _umask(mask):
            path = exe.save(tmp_path / f"new{mask:o}.tirx")
        assert _mode(path) == 0o666 & ~mask
    kept = tmp_path / "kept.tirx"
    kept.write_bytes(b"old")
    os.chmod(kept, 0o640)
    with _umask(0o077):
        exe.save(kept)
    assert _mode(kept) == 0o640 and tirx.load(kept).ptx == exe.ptx
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_cache_entry_stays_private(tmp_path):
    from tirx.files import write_atomic

    with _umask(0o022):
        write_atomic(tmp_path / "entry", b"data")
        (tmp_path / "old").write_bytes(b"x")
        os.chmod(tmp_path / "old", 0o644)
        write_atomic(tmp_path / "old", b"data")
    assert _mode(tmp_path / "entry") == 0o600 and _mode(tmp_path / "old") == 0o600
    os.symlink(tmp_path / "target", tmp_path / "link")
    write_atomic(tmp_path / "link", b"data")  # a cache replaces a link with its own file
    assert not os.path.islink(tmp_path / "link") and not (tmp_path / "target").exists()


def test_saving_to_a_link_writes_its_target_and_keeps_the_link(exe, multi, tmp_path):
    real = tmp_path / "releases" / "real.tirx"
    real.parent.mkdir()
    real.write_bytes(multi.read_bytes())
    os.chmod(real, 0o644)
    current = tmp_path / "current.tirx"
    os.symlink(os.path.join("releases", "real.tirx"), current)  # a relative link
    exe.save(current)
    assert os.readlink(current) == os.path.join("releases", "real.tirx")
    assert _members(real) == _members(exe.save(tmp_path / "plain.tirx"))
    assert _mode(real) == 0o644 and not list(real.parent.glob(".*.tmp"))
    dangling = tmp_path / "dangling.tirx"
    os.symlink(tmp_path / "made.tirx", dangling)
    exe.save(dangling)
    assert os.path.islink(dangling) and tirx.load(tmp_path / "made.tirx").ptx == exe.ptx
    os.symlink(tmp_path / "loop_b", tmp_path / "loop_a")
    os.symlink(tmp_path / "loop_a", tmp_path / "loop_b")
    with pytest.raises(ArtifactError, match="cannot write .*loop_a.*symbolic links"):
        exe.save(tmp_path / "loop_a")


# ---------------------------------------------------------------------- a damaged file


def _rewrite(src, dst, manifest=None, drop=(), members=None, reseal=False):
    """A copy of the saved file ``src`` at ``dst`` with ``manifest(m)`` applied to its
    manifest, the members in ``drop`` left out and those in ``members`` (name -> bytes)
    replaced; the archive comment (the manifest's sha256) is kept, as a zip tool that edits a
    member keeps it, or with ``reseal`` written anew for the edited manifest (as whoever edits
    the manifest on purpose would)."""
    import hashlib

    members = members or {}
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        out.comment = z.comment
        for name in z.namelist():
            data = members.get(name, z.read(name))
            if name == "manifest.json" and manifest is not None:
                m = json.loads(data)
                manifest(m)
                data = json.dumps(m).encode()
            if name == "manifest.json" and reseal:
                out.comment = (
                    b"tirx-kernel manifest sha256 " + hashlib.sha256(data).hexdigest().encode()
                )
            if name not in drop:
                out.writestr(name, data)
    return dst


def test_a_manifest_without_images_is_named(multi, tmp_path):
    bad = _rewrite(multi, tmp_path / "k.tirx", lambda m: m.update(images=[]))
    with pytest.raises(ArtifactError, match=r'lists no images \("images": \[\]\)'):
        tirx.load(bad)
    bad = _rewrite(multi, tmp_path / "k.tirx", lambda m: m["images"][0].update(arch="banana"))
    with pytest.raises(ArtifactError, match="an image for 'banana', which is not an arch"):
        tirx.load(bad)


@pytest.mark.parametrize("member", ["sm_80.ptx", "sm_100.cubin"])
def test_a_missing_member_is_named(multi, tmp_path, member):
    arch = member.split(".")[0]
    bad = _rewrite(multi, tmp_path / "k.tirx", drop=(member,))
    with pytest.raises(ArtifactError, match=f"the {arch} image's member {member} is missing"):
        tirx.load(bad, arch="sm_90")


@pytest.mark.parametrize(
    "field, value",
    [
        ("grid", "x"), ("grid", [1, 1]), ("grid", [0, 1, 1]), ("block", [128, -1, 1]),
        ("block", [128.0, 1, 1]), ("dynamic_shared_bytes", "0"), ("shared_bytes", -4),
        ("cluster", [2, 1]), ("sms_grid", "yes"), ("grid", [True, 1, 1]),
    ],
)  # fmt: skip
def test_a_bad_launch_field_is_named_with_its_value(multi, tmp_path, field, value):
    bad = _rewrite(multi, tmp_path / "k.tirx", lambda m: m["launch"].update({field: value}))
    with pytest.raises(ArtifactError, match=f"launch {field} is ") as info:
        tirx.load(bad)
    assert json.dumps(value) in info.value.message and "save the kernel again" in info.value.hint
    gone = _rewrite(multi, tmp_path / "k.tirx", lambda m: m["launch"].pop("block"))
    with pytest.raises(ArtifactError, match="the manifest's launch has no block"):
        tirx.load(gone)


# ------------------------------------------------------------- archs and paths save refuses


def test_an_arch_nvrtc_does_not_know_is_a_value_error(exe, tmp_path):
    with pytest.raises(ValueError, match="archs names sm_999, which this NVRTC does not "
                       "compile for .*like sm_90"):  # fmt: skip
        exe.save(tmp_path / "x.tirx", archs=["sm_90", "sm_999"])
    assert not (tmp_path / "x.tirx").exists()


def test_save_refuses_an_arch_by_the_nvrtc_steps_error_not_its_wording(
    exe, tmp_path, monkeypatch, cache_dir
):
    """artifact.py reads the error class the NVRTC step raises (UnsupportedArchError), not
    NVRTC's words: an arch this NVRTC compiles (sm_89) refused by the check, in other words
    than NVRTC's, is named as archs' mistake all the same."""
    said = "unknown arch sm_89: NVRTC here compiles for sm_80 (a test's NVRTC)"
    monkeypatch.setattr(
        tirx.Target, "unsupported", lambda self: said if "89" in self.arch else None
    )
    with pytest.raises(ValueError, match="archs names sm_89, which this NVRTC does not compile "
                       r"for .*a test's NVRTC.*like sm_90"):  # fmt: skip
        exe.save(tmp_path / "x.tirx", archs=["sm_90", "sm_89"])
    assert not (tmp_path / "x.tirx").exists()


def test_an_empty_path_is_named(exe):
    with pytest.raises(ArtifactError, match="save: the path is empty"):
        exe.save("")
    with pytest.raises(ArtifactError, match="load: the path is empty"):
        tirx.load("")


# ------------------------------------------------------------ damage the checks must catch


@pytest.fixture(scope="module")
def single(exe, tmp_path_factory):
    """A file saved for sm_90 only (small: random damage hits its headers often)."""
    return exe.save(tmp_path_factory.mktemp("single") / "single.tirx")


def _deflated(path, member: str) -> tuple[int, int]:
    """The offset and length in ``path`` of ``member``'s deflated bytes."""
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    start = info.header_offset + 30  # the local header: 30 bytes, then the name and extra
    names = int.from_bytes(raw[start - 4 : start - 2], "little")
    extra = int.from_bytes(raw[start - 2 : start], "little")
    return start + names + extra, info.compress_size


def test_a_member_zlib_cannot_inflate_is_named_as_damage(single, tmp_path):
    import zlib

    raw = bytearray(single.read_bytes())
    start, size = _deflated(single, "sm_90.ptx")
    for at in range(start + 16, start + size):  # the first flip that zlib refuses
        stream = bytearray(raw[start : start + size])
        stream[at - start] ^= 0xFF
        try:
            zlib.decompressobj(-15).decompress(bytes(stream))
        except zlib.error:
            break
    raw[at] ^= 0xFF
    bad = tmp_path / "bad.tirx"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match=r"member sm_90.ptx is damaged \(zlib.error: ") as info:
        tirx.load(bad)
    assert str(bad) in info.value.message and "save the kernel again" in info.value.hint


def test_random_damage_is_an_artifact_error_or_changes_nothing(exe, single, tmp_path):
    """200 copies of a saved file, each with 1 to 5 random bytes replaced: each one either
    raises ArtifactError or loads the kernel that was saved (the bytes hit a field no reader
    uses: a timestamp, the creating system)."""
    import random

    rng = random.Random(20240607)
    data = single.read_bytes()
    loaded, path = 0, tmp_path / "damaged.tirx"
    for _ in range(200):
        raw = bytearray(data)
        for _ in range(rng.randint(1, 5)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        path.write_bytes(bytes(raw))
        try:
            got = tirx.load(path)
        except ArtifactError:
            continue
        assert (got.ptx, got.cubin, got.signature, got.launch_dims) == (
            exe.ptx, exe.cubin, exe.signature, exe.launch_dims,
        )  # fmt: skip
        loaded += 1
    assert loaded < 50  # most damage is found


def test_a_manifest_nested_too_deeply_is_named(tmp_path):
    deep = tmp_path / "deep.tirx"
    with zipfile.ZipFile(deep, "w") as z:
        z.writestr("manifest.json", "[" * 100000 + "]" * 100000)
    with pytest.raises(ArtifactError, match=r"no readable manifest.json \(nested too deeply\)"):
        tirx.load(deep)


def _param(i, **kw):
    return lambda m: m["signature"]["params"][i].update(kw)


@pytest.mark.parametrize(
    "edit, message",
    [
        (_param(0, shape=[-8, 256]), r"shape of parameter 'X' is \[-8, 256\], not a list of "
         "positive integers"),
        (_param(0, shape=[8.0, 256]), r"shape of parameter 'X' is \[8.0, 256\], not a list"),
        (_param(0, shape=[True, 256]), r"shape of parameter 'X' is \[true, 256\], not a list"),
        (_param(0, shape=[65536, 65536]), r"shape of parameter 'X' .* less than 2 GiB"),
        (_param(0, shape="abc"), r"shape of parameter 'X' is \"abc\""),
        (_param(0, dtype="float17"), r"dtype of parameter 'X' is \"float17\", not a tirx dtype"),
        (_param(0, kind="banana"), r"kind of parameter 'X' is \"banana\""),
        (_param(1, name="X"), "names two parameters 'X'"),
        (_param(0, reads="yes"), r"reads of parameter 'X' is \"yes\", not true or false"),
        (lambda m: m["signature"]["params"][0].pop("name"), "parameter 1 is .*not a parameter "
         "with a name"),
        (lambda m: m["signature"].update(params=5), "parameters is 5, not a list"),
        (lambda m: m.update(signature=None), "signature is null"),
        (lambda m: m.pop("signature"), "the manifest has no signature"),
        (lambda m: m.update(name=5), "the manifest's name is 5"),
        (lambda m: m["launch"].update(block=[2000, 1, 1]), r"launch block is \[2000, 1, 1\], not "
         "three positive integers of at most 1024, 1024 and 64"),
        (lambda m: m["launch"].update(block=[1024, 2, 1]), r"launch block is \[1024, 2, 1\], not "
         r"a block of at most 1024 threads \(it has 2048\)"),
        (lambda m: m["launch"].update(grid=[1, 70000, 1]), r"launch grid is \[1, 70000, 1\]"),
        (lambda m: m["launch"].update(dynamic_shared_bytes=10**12), "launch dynamic_shared_bytes "
         r"is 1000000000000, not at most the 232448 bytes \(227 KB\) that a block has on sm_90"),
        (lambda m: m.update(launch=[]), r"launch is \[\]"),
        (lambda m: m["images"].append(dict(m["images"][0])), "lists the sm_90 image twice"),
        (lambda m: m["images"][0].update(ptx="manifest.json"), "ptx member of the sm_90 image is "
         "\"manifest.json\", not a member of its own"),
        (lambda m: m["images"][0]["sha256"].update(cubin="00"), "sha256 of the sm_90 image is"),
        (lambda m: m.update(pointer_alignment=[{"param": "Q", "bytes": 3}]),
         "pointer_alignment entry is"),
        (lambda m: m.update(tensor_maps=[{"param": "X"}]), "tensor map is"),
        (lambda m: m.update(tensor_maps="x"), "tensor_maps is \"x\", not a list"),
        (_param(0, kind="scalar", shape=[], dtype="float16"), "dtype of parameter 'X' is "
         "\"float16\", not a scalar parameter's"),
        (lambda m: m.update(pointer_alignment=[{"param": "X", "bytes": 16, "access": "zzz",
                                                "what": "rows"}]), "pointer_alignment entry is"),
        (lambda m: m.update(source="other.cu"), "source is \"other.cu\""),
        (lambda m: m.update(source_sha256="00"), "source_sha256 is \"00\", not the sha256 of "
         "kernel.cu"),
    ],
)  # fmt: skip
def test_a_manifest_field_out_of_range_is_named(single, tmp_path, edit, message):
    bad = _rewrite(single, tmp_path / "k.tirx", edit)
    with pytest.raises(ArtifactError, match=message) as info:
        tirx.load(bad)
    assert info.value.message.startswith(f"{bad}: ") and "save the kernel again" in info.value.hint


def test_an_edited_kernel_cu_is_found_by_its_checksum(single, tmp_path):
    # kernel.cu had no checksum: an edit loaded and came back as exe.source
    for text in (b"// anything at all\n", b"\xff\xfe"):
        bad = _rewrite(single, tmp_path / "k.tirx", members={"kernel.cu": text})
        with pytest.raises(ArtifactError, match=r"kernel.cu is damaged \(checksum\)") as info:
            tirx.load(bad)
        assert "save the kernel again" in info.value.hint


def test_a_damaged_image_is_named_with_the_hint(single, tmp_path):
    with zipfile.ZipFile(single) as z:
        cubin = bytearray(z.read("sm_90.cubin"))
    cubin[-1] ^= 0xFF
    bad = _rewrite(single, tmp_path / "k.tirx", members={"sm_90.cubin": bytes(cubin)})
    with pytest.raises(ArtifactError, match=r"the sm_90 image is damaged \(checksum\)") as info:
        tirx.load(bad)
    assert "save the kernel again" in info.value.hint


def test_ptx_that_is_not_text_is_named_even_with_its_checksum_and_seal_made_anew(single, tmp_path):
    import hashlib

    ptx = b"\xff\xfe not text"
    digest = hashlib.sha256(ptx).hexdigest()
    bad = _rewrite(single, tmp_path / "k.tirx", members={"sm_90.ptx": ptx}, reseal=True,
                   manifest=lambda m: m["images"][0]["sha256"].update(ptx=digest))  # fmt: skip
    with pytest.raises(ArtifactError, match="the sm_90 image's PTX is not UTF-8 text") as info:
        tirx.load(bad)
    assert "save the kernel again" in info.value.hint


def test_shared_memory_is_checked_against_every_image_arch(multi, tmp_path):
    bad = _rewrite(multi, tmp_path / "k.tirx",
                   lambda m: m["launch"].update(dynamic_shared_bytes=200 * 1024))  # fmt: skip
    with pytest.raises(ArtifactError, match=r"at most the 166912 bytes \(163 KB\) that a block "
                       "has on sm_80"):  # fmt: skip
        tirx.load(bad, arch="sm_90")


def test_the_limits_a_manifest_is_checked_against_are_the_compilers():
    from tirx import artifact
    from tirx.script import namespace
    from tirx.transform import limits, shared_memory

    assert artifact._GRID_LIMITS == namespace.GRID_LIMITS
    assert artifact._BLOCK_LIMITS == namespace.BLOCK_LIMITS
    assert artifact._MAX_THREADS == namespace.MAX_THREADS_PER_BLOCK
    assert artifact._TENSOR_BYTES == limits.GLOBAL_TENSOR_BYTES
    for n in range(80, 131):
        assert artifact._shared_limit(f"sm_{n}") == shared_memory.optin_limit(n), n


@pytest.mark.parametrize(
    "edit",
    [
        _param(0, shape=[4, 256]),  # every value plausible: only the checksum tells
        _param(1, writes=False),
        lambda m: m["launch"].update(block=[256, 1, 1]),
        lambda m: m.update(tirx_extra=1),
    ],
)
def test_any_edit_of_the_manifest_is_found_by_its_checksum(single, tmp_path, edit):
    bad = _rewrite(single, tmp_path / "k.tirx", edit)
    with pytest.raises(ArtifactError, match="the manifest differs from the sha256 saved with it"):
        tirx.load(bad)


def test_the_manifest_checksum_is_the_archive_comment(exe, single, tmp_path):
    import hashlib

    with zipfile.ZipFile(single) as z:
        text, comment = z.read("manifest.json"), z.comment
    assert comment == b"tirx-kernel manifest sha256 " + hashlib.sha256(text).hexdigest().encode()
    loaded = tirx.load(single)  # a file saved now loads, and saved again, loads again
    assert loaded.ptx == exe.ptx and loaded.signature == exe.signature
    assert tirx.load(loaded.save(tmp_path / "again.tirx")).manifest == loaded.manifest
    plain = tmp_path / "plain.tirx"  # rewritten by a tool that drops the comment
    with zipfile.ZipFile(single) as z, zipfile.ZipFile(plain, "w") as out:
        for name in z.namelist():
            out.writestr(name, z.read(name))
    with pytest.raises(ArtifactError, match="the manifest has no sha256 in the file's comment"):
        tirx.load(plain)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("codegen_version", "999", "saved by codegen version 999; this tirx's codegen is version"),
        ("format_version", 2, "format version 2; this tirx reads version 3"),
    ],
)
def test_a_file_of_another_codegen_or_format_is_refused(single, tmp_path, field, value, message):
    bad = _rewrite(single, tmp_path / "k.tirx", lambda m: m.update({field: value}))
    with pytest.raises(ArtifactError, match=message) as info:
        tirx.load(bad)
    assert info.value.hint == "save the kernel again with this version of tirx"


# ----------------------------------------------------------- an arch and its 'a' variant


@pytest.fixture(scope="module")
def both(exe, tmp_path_factory):
    """A file with an sm_90a image before an sm_90 one."""
    return exe.save(tmp_path_factory.mktemp("both") / "both.tirx", archs=["sm_90a", "sm_90"])


def test_save_takes_the_image_of_the_exact_arch_first(both, tmp_path):
    loaded = tirx.load(both, arch="sm_90a")
    assert list(loaded.images) == ["sm_90a", "sm_90"]
    for arch in ("sm_90", "sm_90a"):
        one = loaded.save(tmp_path / f"{arch}.tirx", archs=[arch])
        assert [m for m in _members(one) if m.startswith("sm_")] == [f"{arch}.cubin",
                                                                      f"{arch}.ptx"]  # fmt: skip


def test_load_takes_the_image_of_the_exact_arch_first(both):
    assert tirx.load(both, arch="sm_90").arch == "sm_90"
    assert tirx.load(both, arch="sm_90a").arch == "sm_90a"


# --------------------------------------------------------------------------- bytes paths


def test_save_takes_a_bytes_path_as_load_does(exe, tmp_path):
    path = exe.save(os.fsencode(tmp_path / "bytes.tirx"))
    assert path == tmp_path / "bytes.tirx"
    assert tirx.load(os.fsencode(path)).ptx == exe.ptx


def test_an_arch_the_kernels_instructions_lack_is_named_as_saves(tmp_path):
    from tirx.examples.gemm_wgmma import make_gemm_wgmma

    exe = tirx.compile(make_gemm_wgmma(256, 128, 256), "cuda -arch=sm_90")
    with pytest.raises(ValueError, match="save: archs names sm_100a, for which kernel") as e:
        exe.save(tmp_path / "wg.tirx", archs=["sm_90a", "sm_100a"])
    assert "needs sm_90a" in str(e.value)
    assert not (tmp_path / "wg.tirx").exists()  # nothing half written
