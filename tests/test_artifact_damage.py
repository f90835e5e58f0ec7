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
    assert not (tmp_path / "x.tirx").exists()


def test_load_takes_the_arch_specific_name_and_hints_without_it(multi):
    assert tirx.load(multi, arch="sm_90a").arch == "sm_90"
    with pytest.raises(ArtifactError, match="holds code for sm_80, sm_90, sm_100; asked for "
                       "sm_120a") as info:  # fmt: skip
        tirx.load(multi, arch="sm_120a")
    assert "archs=['sm_120a', ...]" in info.value.hint
    assert "--arch sm_120 --out" in info.value.hint  # one 'a' off, not every trailing one


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


def _rewrite(src, dst, manifest=None, drop=()):
    """A copy of the saved file ``src`` at ``dst`` with ``manifest(m)`` applied to its
    manifest and the members in ``drop`` left out."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for name in z.namelist():
            data = z.read(name)
            if name == "manifest.json" and manifest is not None:
                m = json.loads(data)
                manifest(m)
                data = json.dumps(m).encode()
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
