"""Kernel signatures (tirx/signature.py): which tensors a kernel reads and writes, read off the
lowered program, for every kind of access."""

from __future__ import annotations

import pytest

import tirx
from tests.bulk_kernels import bulk_store
from tests.helpers import define
from tests.test_cta_ops import COUNTER
from tirx.examples.gemm_wgmma import make_gemm_wgmma
from tirx.examples.softmax import make_softmax
from tirx.signature import ParamKind, Signature, TensorSpec, spec_of


def _modes(kernel, target="sim"):
    sig = tirx.compile(kernel, target).signature
    return {p.name: (p.reads, p.writes) for p in sig.params if p.is_tensor}


def test_element_loads_and_stores():
    assert _modes(make_softmax(4, 128)) == {"X": (True, False), "Y": (False, True)}


def test_a_bulk_copy_writes_its_global_destination():
    # Out is written only by cp.async.bulk.global.shared::cta (its first operand)
    assert _modes(bulk_store) == {"A": (True, False), "Out": (False, True)}


def test_an_atomic_reads_and_writes(tmp_path):
    kernel = define(COUNTER, tmp_path, "kernel")
    assert _modes(kernel) == {"A": (True, True), "Old": (False, True)}


def test_a_tma_load_reads_its_tensor():
    # A and B are read only through the tensor maps of cp.async.bulk.tensor (second operand)
    modes = _modes(make_gemm_wgmma(256, 128, 192), "cuda -arch=sm_90")
    assert modes == {"A": (True, False), "B": (True, False), "Out": (False, True)}


def test_scalars_and_the_json_round_trip():
    from tests.test_torch_ops import scale_in_place

    sig = tirx.compile(scale_in_place, "sim").signature
    assert [p.kind for p in sig.params] == [ParamKind.TENSOR, ParamKind.SCALAR]
    assert (
        sig.written == ("X",) and str(sig) == "scale_in_place(X: float32[4, 32] in/out, s: float32)"
    )
    assert Signature.from_json(sig.to_json()) == sig
    with pytest.raises(ValueError, match="no parameter 'Z'"):
        sig.param("Z")


def test_specs_of_arguments():
    import numpy as np
    import torch

    assert spec_of(torch.empty(2, 3, dtype=torch.bfloat16)) == TensorSpec((2, 3), "bfloat16", "cpu")
    assert spec_of(torch.empty(4, device="meta")).device == "meta"
    assert spec_of(np.zeros((5,), np.int32)) == TensorSpec((5,), "int32", "cpu")
    assert spec_of(3) == 3 and TensorSpec((2, 3), "float16").size(1) == 3
