"""Shared test configuration: ``gpu`` tests skip themselves when no CUDA GPU is visible."""

from __future__ import annotations

import pytest


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
