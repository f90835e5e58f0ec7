"""Shared test configuration: ``gpu`` tests skip themselves when no CUDA GPU is visible."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# Kernels defined when test modules are imported (collection, before any fixture) already
# consult the front-end cache: from the start, the session's cache is a directory of its own,
# never the user's. The fixture below gives each test the session's pytest-managed one.
os.environ["TIRX_CACHE_DIR"] = tempfile.mkdtemp(prefix="tirx-test-cache-")
atexit.register(shutil.rmtree, os.environ["TIRX_CACHE_DIR"], ignore_errors=True)


def _gpu_count() -> int:
    from tirx.backend.cuda.driver import gpu_count

    return gpu_count()


def pytest_collection_modifyitems(config, items):
    if _gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none visible); run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test session compiles into its own cache directory, never the user's."""
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tirx-cache"))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh, empty cache directory, and nothing remembered from earlier tests."""
    import tirx

    d = tmp_path / "tirx-cache"
    monkeypatch.setenv("TIRX_CACHE_DIR", str(d))
    monkeypatch.delenv("TIRX_CACHE", raising=False)
    tirx.clear_cache()
    yield d
    tirx.clear_cache()
