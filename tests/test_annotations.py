"""Parameter annotations Python left unevaluated (``from __future__ import annotations``)."""

from __future__ import annotations

import pytest

import tirx
from tirx import T


def _kernel(n):
    @T.function
    def copy(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        B[T.cuda.lane_id()] = A[T.cuda.lane_id()]

    return copy


def _kernel_using_n(n):
    @T.function
    def copy(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        if T.cuda.lane_id() < n:
            B[T.cuda.lane_id()] = A[T.cuda.lane_id()]

    return copy


def test_a_name_only_the_annotation_uses_is_explained_at_its_line():
    with pytest.raises(tirx.TirxSyntaxError) as info:
        tirx.compile(_kernel(32), target="sim")
    err = info.value
    assert "'n' is not defined" in err.message
    assert "from __future__ import annotations" in err.hint
    assert err.span.line == _kernel.__code__.co_firstlineno + 2


def test_the_same_annotation_works_when_the_body_uses_the_name():
    import numpy as np

    a = np.arange(32, dtype=np.float32)
    b = np.zeros(32, dtype=np.float32)
    tirx.compile(_kernel_using_n(32), target="sim")(a, b)
    assert (a == b).all()
