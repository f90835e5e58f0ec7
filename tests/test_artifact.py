"""Saved kernels (tirx/artifact.py, tirx/backend/cuda/stored.py): the file, loading it in a
process that never saw the source, launching it as the original launches (recorded on the
CPU, run on the GPU), and the errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch

import tirx
from tests.helpers import LaunchRecorder
from tirx.artifact import ArtifactError
from tirx.examples.gemm_wgmma import make_gemm_wgmma
from tirx.examples.softmax import make_softmax

KERNEL = textwrap.dedent(
    """
    from tirx import T

    @T.function
    def axpy(X: T.Tensor((4, 32), "float32"), Y: T.Tensor((4, 32), "float32"), a: T.float32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
        r = T.cuda.block_idx("x")
        lane = T.cuda.lane_id()
        Y[r, lane] = a * X[r, lane] + Y[r, lane]
    """
)

FRESH = textwrap.dedent(
    """
    import json, sys, torch, tirx
    exe = tirx.load(sys.argv[1])
    try:
        exe(torch.zeros(4, 32), torch.zeros(4, 32), 2.0)
        error = None
    except tirx.LaunchError as e:
        error = str(e)
    print(json.dumps({
        "repr": repr(exe), "signature": str(exe.signature), "ptx": exe.ptx,
        "launch": exe.manifest["launch"], "error": error,
        "nvrtc": [m for m in sys.modules if "nvrtc" in m and m.startswith("cuda")],
        "source_module": any("axpy" in m for m in sys.modules),
    }))
    """
)


def test_a_fresh_process_loads_the_file_without_the_source(tmp_path):
    src = tmp_path / "axpy_kernel.py"
    src.write_text(KERNEL)
    out = tmp_path / "axpy.tirx"
    made = subprocess.run([sys.executable, "-m", "tirx", "compile", str(src), "--arch", "sm_90",
                           "--out", str(out)], capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "axpy for sm_90" in made.stdout
    from tirx.cli import load_kernel

    want = tirx.compile(load_kernel(str(src)), "cuda -arch=sm_90")
    src.unlink()  # the loading process cannot see the source
    (tmp_path / "fresh.py").write_text(FRESH)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # as on a machine without a GPU
    ran = subprocess.run([sys.executable, str(tmp_path / "fresh.py"), str(out)], cwd=elsewhere,
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    assert got["ptx"] == want.ptx and ".target sm_90" in got["ptx"]
    assert got["signature"] == "axpy(X: float32[4, 32] in, Y: float32[4, 32] in/out, a: float32)"
    assert got["launch"] == {"grid": [4, 1, 1], "block": [32, 1, 1],
                             "dynamic_shared_bytes": 0, "shared_bytes": 0}  # fmt: skip
    assert "needs a CUDA GPU" in got["error"] and "none is visible" in got["error"]
    assert got["nvrtc"] == [] and not got["source_module"]
    assert "(loaded)" in got["repr"]


def test_the_file_is_a_zip_with_a_json_manifest(tmp_path):
    exe = tirx.compile(make_softmax(8, 256), "cuda -arch=sm_90")
    path = exe.save(tmp_path / "softmax.tirx", archs=["sm_80", "sm_90"])
    z = zipfile.ZipFile(path)
    assert sorted(z.namelist()) == sorted(["manifest.json", "sm_80.cubin", "sm_80.ptx",
                                           "sm_90.cubin", "sm_90.ptx", "kernel.cu"])  # fmt: skip
    m = json.loads(z.read("manifest.json"))
    assert m["format"] == "tirx-kernel" and m["tirx_version"] == tirx.__version__
    assert [p["name"] for p in m["signature"]["params"]] == ["X", "Y"]
    assert [p["writes"] for p in m["signature"]["params"]] == [False, True]
    assert m["launch"]["grid"] == [2, 1, 1] and m["launch"]["block"] == [128, 1, 1]
    assert z.read("sm_90.ptx").decode() == exe.ptx and z.read("sm_90.cubin") == exe.cubin
    assert ".target sm_80" in z.read("sm_80.ptx").decode()
    assert z.read("kernel.cu").decode() == exe.source
    assert tirx.load(path, arch="sm_80").arch == "sm_80"
    assert tirx.load(path, arch="sm_90").ptx == exe.ptx
    with pytest.raises(ArtifactError, match="holds code for sm_80, sm_90; asked for sm_86"):
        tirx.load(path, arch="sm_86")


def _fake_encode(fields, address):
    """A stand-in for cuTensorMapEncodeTiled: 128 bytes made from the map and the address."""
    text = repr((fields, address)).encode()
    return (text * (128 // len(text) + 1))[:128]


def _attach_recorder(exe) -> LaunchRecorder:
    """tests.helpers.attach_recorder for any kernel: its launch kinds (tensor maps included)
    and any dynamic shared memory."""
    from tirx.backend.cuda import driver

    class FakeKernel:
        name, handle, max_dynamic_smem = exe.name, None, 1 << 20

    recorder = LaunchRecorder(exe.launch_kinds)
    exe._attach(driver.Launcher(FakeKernel(), exe.launch_kinds, entry=recorder), -1)
    return recorder


def _recorded(exe, *args):
    rec = _attach_recorder(exe)
    exe(*args)
    return rec.calls


@pytest.mark.parametrize("make", ["softmax", "wgmma_tma"])
def test_a_loaded_kernel_launches_as_the_original(tmp_path, make):
    if make == "softmax":
        exe = tirx.compile(make_softmax(8, 256), "cuda -arch=sm_90")
        args = (torch.randn(8, 256).half(), torch.empty(8, 256).half())
    else:  # TMA tensor maps (hidden parameters), 16-byte pointers, dynamic shared memory
        exe = tirx.compile(make_gemm_wgmma(256, 128, 192), "cuda -arch=sm_90")
        args = (torch.randn(256, 192).half(), torch.randn(128, 192).half(), torch.empty(256, 128))
    loaded = tirx.load(exe.save(tmp_path / "k.tirx"))
    exe.encode_map = loaded.encode_map = _fake_encode  # before the encoders are made
    assert loaded.signature == exe.signature and loaded.launch_dims == exe.launch_dims
    assert loaded.launch_kinds == exe.launch_kinds
    assert [(r.index, r.name, r.nbytes, r.what, r.kind) if r else None
            for r in loaded.pointer_requirements().per_param] == [
        (r.index, r.name, r.nbytes, r.what, r.kind) if r else None
        for r in exe.pointer_requirements().per_param
    ]  # fmt: skip
    assert [(i, tm.origin, tm.fields) for i, tm in loaded.map_sources()] == [
        (i, tm.origin, tm.fields) for i, tm in exe.map_sources()
    ]
    assert _recorded(loaded, *args) == _recorded(exe, *args)


def test_a_loaded_kernel_checks_its_arguments_as_the_original(tmp_path):
    exe = tirx.compile(make_gemm_wgmma(256, 128, 192), "cuda -arch=sm_90")
    loaded = tirx.load(exe.save(tmp_path / "k.tirx"))
    loaded.encode_map = _fake_encode
    _attach_recorder(loaded)
    a, b, out = torch.randn(256, 192).half(), torch.randn(128, 192).half(), torch.empty(256, 128)
    with pytest.raises(ValueError, match="parameter 'B' expects shape"):
        loaded(a, a, out)
    with pytest.raises(TypeError, match="parameter 'Out' expects dtype float32"):
        loaded(a, b, out.half())
    shifted = torch.randn(256 * 192 + 1).half()[1:].view(256, 192)
    with pytest.raises(tirx.LaunchError, match="parameter 'A' is the global source of cp.async"):
        loaded(shifted, b, out)
    buffer = torch.empty(256 * 128)  # Out's memory, and A's at its start
    with pytest.raises(ValueError, match="overlap in memory.*writes 'Out'"):
        loaded(buffer.view(torch.float16)[: 256 * 192].view(256, 192), b, buffer.view(256, 128))


def test_what_cannot_be_saved_or_loaded(tmp_path, monkeypatch):
    k = make_softmax(4, 128)
    with pytest.raises(TypeError, match="simulator"):
        tirx.compile(k, "sim").save(tmp_path / "x.tirx")
    exe = tirx.compile(k, "cuda -arch=sm_90")
    with pytest.raises(ValueError, match="archs must name"):
        exe.save(tmp_path / "x.tirx", archs=["sm_70"])
    path = exe.save(tmp_path / "k.tirx")
    loaded = tirx.load(path)
    with pytest.raises(tirx.TirxError, match="no IR"):
        loaded.script()
    assert tirx.load(loaded.save(tmp_path / "again.tirx")).ptx == exe.ptx
    with pytest.raises(ArtifactError, match="no source to compile sm_80"):
        loaded.save(tmp_path / "more.tirx", archs=["sm_80"])
    monkeypatch.setattr(tirx.version, "__version__", "9.9.9")
    with pytest.raises(ArtifactError, match="saved by tirx 0.1.0; this is tirx 9.9.9"):
        tirx.load(path)
    monkeypatch.undo()
    damaged = tmp_path / "damaged.tirx"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(damaged, "w") as dst:
        dst.comment = src.comment  # the manifest's sha256: the manifest is as saved
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(
                name, data[:-1] + bytes([data[-1] ^ 1]) if name.endswith(".cubin") else data
            )
    with pytest.raises(ArtifactError, match=r"the sm_90 image is damaged \(checksum\)"):
        tirx.load(damaged)
    (tmp_path / "text.tirx").write_text("hello")
    with pytest.raises(ArtifactError, match="not a saved kernel"):
        tirx.load(tmp_path / "text.tirx")
    with pytest.raises(ArtifactError, match="cannot read"):
        tirx.load(tmp_path / "missing.tirx")
    with pytest.raises(ArtifactError, match="cannot write"):
        exe.save(tmp_path / "no" / "dir.tirx")


def test_the_cli_refuses_a_simulator_artifact(tmp_path):
    from tirx.cli import main

    assert main(["compile", "tirx/examples/warp_matmul.py", "--target", "sim",
                 "--out", str(tmp_path / "x.tirx")]) == 2  # fmt: skip
    assert not (tmp_path / "x.tirx").exists()


@pytest.mark.gpu
def test_a_loaded_kernel_computes_what_the_original_does(tmp_path):
    exe = tirx.compile(make_gemm_wgmma(256, 128, 192), "cuda")
    path = exe.save(tmp_path / "gemm.tirx")
    code = textwrap.dedent(
        f"""
        import torch, tirx
        exe = tirx.load({str(path)!r})
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(256, 192, device="cuda", generator=g).half()
        b = torch.randn(128, 192, device="cuda", generator=g).half()
        out = torch.empty(256, 128, device="cuda")
        exe(a, b, out)
        torch.save(out.cpu(), {str(tmp_path / "out.pt")!r})
        """
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 192, device="cuda", generator=g).half()
    b = torch.randn(128, 192, device="cuda", generator=g).half()
    out = torch.empty(256, 128, device="cuda")
    exe(a, b, out)
    assert torch.equal(torch.load(tmp_path / "out.pt"), out.cpu())
