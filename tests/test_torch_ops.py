"""tirx kernels as torch operators (tirx/torch_ops.py, tirx/examples/ops.py): eager calls on
the simulator, the fake implementation, opcheck, torch.compile without graph breaks, a tirx
backward, and the operators inside a two-process torch.distributed program."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tirx
from tirx import T
from tirx.examples import ops
from tirx.examples.softmax import make_softmax
from tirx.examples.warp_matmul import warp_matmul


@T.function
def accumulate(X: T.Tensor((4, 32), "float32"), Acc: T.Tensor((4, 32), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
    r = T.cuda.block_idx("x")
    lane = T.cuda.lane_id()
    Acc[r, lane] = Acc[r, lane] + X[r, lane]


@T.function
def scale_in_place(X: T.Tensor((4, 32), "float32"), s: T.float32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
    r = T.cuda.block_idx("x")
    lane = T.cuda.lane_id()
    X[r, lane] = X[r, lane] * s


def _half(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).half()


def test_a_kernels_outputs_are_the_parameters_it_writes():
    op = tirx.torch_op(warp_matmul, name="tirx_test::warp_matmul")
    assert str(torch.ops.tirx_test.warp_matmul.default._schema).endswith(
        "(Tensor A, Tensor B) -> Tensor"
    )
    a, b = _half(16, 16), _half(8, 16, seed=1)
    out = op(a, b)
    assert out.shape == (16, 8) and out.dtype == torch.float32
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)
    assert tirx.compile(warp_matmul, "sim").signature.written == ("Out",)


def test_an_output_the_kernel_reads_is_an_input_and_is_returned_updated():
    op = tirx.torch_op(accumulate, name="tirx_test::accumulate")
    assert "(Tensor X, Tensor Acc) -> Tensor" in str(torch.ops.tirx_test.accumulate.default._schema)
    x, acc = torch.randn(4, 32), torch.randn(4, 32)
    before = acc.clone()
    out = op(x, acc)
    assert torch.equal(acc, before)  # the argument is not changed
    torch.testing.assert_close(out, before + x)
    torch.library.opcheck(op, (x, acc))


def test_softmax_factory_matches_torch_and_compiles_per_shape():
    for rows, dtype in ((8, torch.float16), (3, torch.bfloat16)):
        x = _half(rows, 128).to(dtype)
        y = ops.softmax(x)
        assert y.shape == x.shape and y.dtype == dtype
        torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)


def test_a_scalar_input_may_only_configure_the_factory():
    def make(X, warps: int = 2):
        return make_softmax(*X.shape, X.dtype, warps=warps)

    op = tirx.torch_op(make, name="tirx_test::softmax_warps", outputs=["Y"])
    schema = str(torch.ops.tirx_test.softmax_warps.default._schema)
    assert schema.endswith("(Tensor X, int warps=2) -> Tensor")
    x = _half(8, 128)
    for warps in (None, 1, 4):
        y = op(x) if warps is None else op(x, warps)
        torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)
    assert set(torch.library.opcheck(op, (x, 4)).values()) == {"SUCCESS"}


def test_softmax_backward_is_a_tirx_kernel_and_matches_torch():
    x = _half(8, 256)
    g = _half(8, 256, seed=2)
    xr = x.clone().requires_grad_()
    ops.softmax(xr).backward(g)
    ref = x.float().requires_grad_()
    torch.softmax(ref, -1).backward(g.float())
    torch.testing.assert_close(xr.grad.float(), ref.grad, rtol=2e-2, atol=2e-3)
    y = torch.softmax(x.float(), -1).half()
    dx = ops.softmax_backward(y, g)
    want = y.float() * (g.float() - (g.float() * y.float()).sum(-1, keepdim=True))
    torch.testing.assert_close(dx.float(), want, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize(
    "op,args",
    [
        (ops.softmax, lambda: (_half(4, 128),)),
        (ops.softmax, lambda: (_half(4, 128).requires_grad_(),)),
        (ops.softmax_backward, lambda: (_half(4, 128), _half(4, 128, seed=1))),
        (ops.gemm, lambda: (_half(64, 32), _half(64, 32, seed=1))),
    ],
)
def test_opcheck(op, args):
    result = torch.library.opcheck(op, args())
    assert set(result.values()) == {"SUCCESS"}, result


def _graph_breaks(fn, *args):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    out = torch.compile(fn, fullgraph=True, backend="aot_eager")(*args)
    return out, sum(counters["graph_break"].values()), torch._dynamo.explain(fn)(*args)


def test_torch_compile_fullgraph_has_no_graph_breaks():
    # aot_eager: the same graph capture (dynamo) and functionalization (AOTAutograd) as the
    # default backend, without inductor's C++ compile of the surrounding ops (seconds per
    # graph on a CPU machine: the test below runs inductor once).
    def model(x, b):
        h = ops.softmax(x * 2)
        return ops.gemm(h, b) + 1

    x, b = _half(64, 128), _half(64, 128, seed=1)
    out, breaks, explained = _graph_breaks(model, x, b)
    assert breaks == 0 and explained.graph_break_count == 0 and explained.graph_count == 1
    torch.testing.assert_close(out, model(x, b))


def test_torch_compile_backward_runs_the_tirx_backward():
    def loss(x):
        return (ops.softmax(x).float() * torch.arange(128.0)).sum()

    x = _half(4, 128)
    xr, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch._dynamo.reset()
    torch.compile(loss, fullgraph=True, backend="aot_eager")(xr).backward()
    loss(xe).backward()
    assert torch.equal(xr.grad, xe.grad)


@pytest.mark.slow
def test_torch_compile_with_inductor_on_cpu():
    torch._dynamo.reset()
    x = _half(4, 128)
    fn = torch.compile(lambda x: ops.softmax(x).float() + 1, fullgraph=True)
    torch.testing.assert_close(fn(x), ops.softmax(x).float() + 1)


def test_fake_tensors_get_the_kernels_output_shapes_and_checked_inputs():
    y = ops.gemm(torch.empty(64, 32, dtype=torch.float16, device="meta"),
                 torch.empty(128, 32, dtype=torch.float16, device="meta"))  # fmt: skip
    assert y.device.type == "meta" and y.shape == (64, 128) and y.dtype == torch.float32
    op = tirx.torch_op(warp_matmul, name="tirx_test::warp_matmul_meta")
    with pytest.raises(ValueError, match="parameter 'B' expects shape"):
        op(torch.empty(16, 16, dtype=torch.float16, device="meta"),
           torch.empty(8, 8, dtype=torch.float16, device="meta"))  # fmt: skip
    with pytest.raises(TypeError, match="parameter 'A' expects dtype float16"):
        op(torch.empty(16, 16, device="meta"), torch.empty(8, 16, device="meta"))


def test_a_function_that_launches_kernels_with_its_own_fake():
    exe = tirx.compile(make_softmax(4, 128), "sim")

    def twice(x: torch.Tensor) -> torch.Tensor:
        mid, out = torch.empty_like(x), torch.empty_like(x)
        exe(x.contiguous(), mid)
        exe(mid, out)
        return out

    op = tirx.torch_op(twice, name="tirx_test::softmax_twice", fake=lambda x: torch.empty_like(x))
    x = _half(4, 128)
    want = torch.softmax(torch.softmax(x.float(), -1).half().float(), -1)
    torch.testing.assert_close(op(x).float(), want, rtol=1e-2, atol=1e-3)
    out, breaks, _ = _graph_breaks(lambda x: op(x) * 2, x)
    assert breaks == 0
    torch.testing.assert_close(out, op(x) * 2)


def test_mistakes_are_named():
    with pytest.raises(ValueError, match="namespace::op"):
        tirx.torch_op(warp_matmul, name="warp_matmul")
    with pytest.raises(ValueError, match="torch's own namespace 'aten': use a namespace"):
        tirx.torch_op(warp_matmul, name="aten::mm")
    with pytest.raises(TypeError, match="list of parameter names"):
        tirx.torch_op(warp_matmul, name="tirx_test::bad", outputs="Out")
    with pytest.raises(ValueError, match="'C' is not a tensor parameter"):
        tirx.torch_op(warp_matmul, name="tirx_test::bad", outputs=["C"])
    with pytest.raises(ValueError, match="writes 'X'.*not among outputs"):
        tirx.torch_op(scale_in_place, name="tirx_test::bad", outputs=[])
    with pytest.raises(TypeError, match="kernel factory.*fake"):
        tirx.torch_op(lambda X: make_softmax(*X.shape), name="tirx_test::bad")
    with pytest.raises(TypeError, match=r"takes \*xs: an operator has a fixed list of inputs"):
        tirx.torch_op(lambda *xs: None, name="tirx_test::bad", outputs=["Y"])
    with pytest.raises(TypeError, match="positional"):
        tirx.torch_op(lambda X, *, warps: None, name="tirx_test::bad", outputs=["Y"])
    # refused before anything is registered (the operator was registered, then refused)
    with pytest.raises(TypeError, match="setup_context= goes with backward="):
        tirx.torch_op(warp_matmul, name="tirx_test::unregistered", setup_context=lambda *a: None)
    assert not hasattr(torch.ops.tirx_test, "unregistered")

    def make(X, s: str):
        return make_softmax(*X.shape)

    with pytest.raises(TypeError, match="annotated 'str'"):
        tirx.torch_op(make, name="tirx_test::bad", outputs=["Y"])

    def unannotated(X, warps=4):  # a slip: warps would be a Tensor with an int default
        return make_softmax(*X.shape, warps=warps)

    with pytest.raises(TypeError, match=r"'warps'.*no annotation.*annotate it \(warps: int = 4\)"):
        tirx.torch_op(unannotated, name="tirx_test::bad", outputs=["Y"])
    with pytest.raises(ValueError, match="one device"):
        ops.gemm(_half(64, 16), _half(64, 16).to("meta"))


def test_scalars_are_operator_arguments():
    op = tirx.torch_op(scale_in_place, name="tirx_test::scale")  # X is read and written
    assert "(Tensor X, float s) -> Tensor" in str(torch.ops.tirx_test.scale.default._schema)
    x = torch.randn(4, 32)
    torch.testing.assert_close(op(x, 2.5), x * 2.5)
    torch.library.opcheck(op, (x, 2.5))


def test_a_factorys_scalar_with_a_default_may_be_left_out_or_named():
    # torch leaves out a trailing argument equal to its schema default (always under
    # torch.compile, even where the caller wrote it) and passes named ones by name
    def factory(X, s: float = 2.0):
        assert X.shape == (4, 32)
        return scale_in_place

    op = tirx.torch_op(factory, name="tirx_test::scale_default", outputs=["X"])
    assert "float s=2." in str(torch.ops.tirx_test.scale_default.default._schema)
    x = torch.randn(4, 32)
    torch.testing.assert_close(op(x), x * 2.0)
    torch.testing.assert_close(op(x, s=3.0), x * 3.0)
    out, breaks, _ = _graph_breaks(lambda t: op(t, 2.0) + op(t, s=0.5), x)
    assert breaks == 0
    torch.testing.assert_close(out, x * 2.5)


_RANK = textwrap.dedent(
    """
    import os, sys, torch, torch.distributed as dist
    from tirx.examples import ops
    rank, world, store, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    gen = torch.Generator().manual_seed(rank)
    a = torch.randn(64, 128, generator=gen).half()
    b = torch.randn(64, 128, generator=gen).half()
    y = ops.gemm(ops.softmax(a), b)
    dist.all_reduce(y)
    torch.save(y, out)
    dist.barrier()  # neither rank tears its connections down while the other still uses them
    dist.destroy_process_group()
    # Skip interpreter finalization: gloo's worker threads can abort it ("terminate called
    # without an active exception", torch's teardown, not the op); the result is on disk.
    sys.stdout.flush()
    os._exit(0)
    """
)


@pytest.mark.slow
def test_two_ranks_all_reduce_a_tirx_op(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    outs = [tmp_path / f"rank{r}.pt" for r in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), "2", str(tmp_path / "store"), str(outs[r])],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for r in range(2)
    ]
    for p in procs:
        text, _ = p.communicate(timeout=300)
        assert p.returncode == 0, text
    want = torch.zeros(64, 64)
    for rank in range(2):
        gen = torch.Generator().manual_seed(rank)
        a = torch.randn(64, 128, generator=gen).half()
        b = torch.randn(64, 128, generator=gen).half()
        want = want + ops.gemm(ops.softmax(a), b)
    for out in outs:
        assert torch.equal(torch.load(out), want)


def test_a_saved_kernel_becomes_an_op(tmp_path):
    exe = tirx.compile(make_softmax(4, 128), "cuda -arch=sm_90")
    op = tirx.torch_op(tirx.load(exe.save(tmp_path / "k.tirx")), name="tirx_test::loaded")
    assert str(torch.ops.tirx_test.loaded.default._schema).endswith("(Tensor X) -> Tensor")
    y = op(torch.empty(4, 128, dtype=torch.float16, device="meta"))
    assert y.shape == (4, 128) and y.device.type == "meta"
    with pytest.raises(ValueError, match="loaded for cuda only; it cannot run on cpu"):
        op(_half(4, 128))


@pytest.mark.gpu
def test_cuda_tensors_run_on_the_gpu():
    x = _half(64, 1024).cuda()
    y = ops.softmax(x)
    assert y.device.type == "cuda"
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)
    xr = x.clone().requires_grad_()
    g = _half(64, 1024, seed=1).cuda()
    ops.softmax(xr).backward(g)
    ref = x.float().requires_grad_()
    torch.softmax(ref, -1).backward(g.float())
    torch.testing.assert_close(xr.grad.float(), ref.grad, rtol=2e-2, atol=2e-3)
    a, b = _half(128, 128).cuda(), _half(128, 128, seed=1).cuda()
    out, breaks, _ = _graph_breaks(lambda a, b: ops.gemm(ops.softmax(a), b), a, b)
    assert breaks == 0
    torch.testing.assert_close(out, ops.gemm(ops.softmax(a), b))
    assert set(torch.library.opcheck(ops.gemm, (a, b)).values()) == {"SUCCESS"}


# ----------------------------------------------------------------- inputs a torch user passes


def test_a_view_starting_inside_a_buffer_is_copied_to_an_aligned_start():
    """A contiguous view whose data pointer breaks the kernel's wide accesses (the softmax
    reads float16 rows as uint64 words, the GEMM as uint32) is copied first: the operator
    gives torch's answer for any tensor torch takes."""
    x = _half(1 + 8 * 256, seed=3)[1:].view(8, 256)
    assert x.is_contiguous() and x.data_ptr() % 8
    torch.testing.assert_close(ops.softmax(x).float(), torch.softmax(x.float(), -1),
                               atol=2e-3, rtol=2e-3)  # fmt: skip
    a, b = _half(1 + 64 * 64, seed=4)[1:].view(64, 64), _half(64, 64, seed=5)
    torch.testing.assert_close(ops.gemm(a, b), a.float() @ b.float().T, atol=1e-3, rtol=1e-3)
    first, second = torch.split(_half(2 * 8 * 256 + 1, seed=6)[1:], 8 * 256)
    torch.testing.assert_close(ops.softmax(second.view(8, 256)).float(),
                               torch.softmax(second.view(8, 256).float(), -1),
                               atol=2e-3, rtol=2e-3)  # fmt: skip


def test_gemm_is_differentiable_and_compiles_with_a_trainable_weight():
    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(_half(64, 128, seed=7))

        def forward(self, x):
            return ops.gemm(x, self.w)

    model = Linear()
    x = _half(64, 128, seed=8).requires_grad_()
    out = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(9))
    out.backward(dout)
    want_x, want_w = dout @ model.w.detach().float(), dout.T @ x.detach().float()
    torch.testing.assert_close(x.grad, want_x.half(), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(model.w.grad, want_w.half(), atol=1e-2, rtol=1e-2)
    assert x.grad.dtype == torch.float16 and model.w.grad.dtype == torch.float16


@pytest.mark.parametrize(
    ("op", "args", "message"),
    [
        ("softmax", (torch.zeros(256, dtype=torch.float16),), r"X must be a 2-D .* \(256,\)"),
        ("softmax", (torch.zeros(2, 3, 4, dtype=torch.float16),), r"X must be a 2-D"),
        ("softmax", (torch.zeros(0, 64, dtype=torch.float16),), r"\(0, 64\) \(empty\)"),
        ("gemm", (torch.zeros(64, 64).half(), torch.zeros(64, 32).half()), r"one row length"),
        ("gemm", (torch.zeros(64).half(), torch.zeros(64, 64).half()), r"A must be a 2-D"),
    ],
)
def test_an_input_of_the_wrong_rank_is_refused_naming_the_operator(op, args, message):
    with pytest.raises(ValueError, match=rf"tirx::{op}: .*{message}"):
        getattr(ops, op)(*args)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_sparse_and_complex_inputs_are_refused_naming_the_input():
    with pytest.raises(TypeError, match="input 'X' is a sparse_coo tensor"):
        ops.softmax(torch.zeros(8, 256).to_sparse())
    # an operator of one kernel (no factory) refuses them as well, as torch.md says
    mm = tirx.torch_op(warp_matmul, name="test_sparse::warp_matmul")
    b = torch.zeros(8, 16).half()
    for sparse in (torch.zeros(16, 16).half().to_sparse(), torch.zeros(16, 16).to_sparse_csr()):
        with pytest.raises(TypeError, match="input 'A' is a sparse_(coo|csr) tensor: tirx "):
            mm(sparse, b)
    with pytest.raises(TypeError, match="input 'X': unknown dtype 'complex64'"):
        ops.softmax(torch.zeros(8, 256, dtype=torch.complex64))


def test_flash_attention_is_one_operator_to_torch_compile_and_differentiable():
    from tirx.examples.attention import flash_attention

    q, k, v = (
        _half(1, shape[0], 16, 64, seed=s) for s, shape in ((10, (2,)), (11, (1,)), (12, (1,)))
    )

    def loss(q, k, v):
        return flash_attention(q * 2, k, v, causal=True).float().square().sum()

    qc, qe = q.clone().requires_grad_(), q.clone().requires_grad_()
    _, breaks, explained = _graph_breaks(loss, qc.detach(), k, v)
    assert breaks == 0 and explained.graph_count == 1
    torch._dynamo.reset()
    torch.compile(loss, fullgraph=True, backend="aot_eager")(qc, k, v).backward()
    loss(qe, k, v).backward()
    assert qc.grad is not None and torch.equal(qc.grad, qe.grad)
    assert set(torch.library.opcheck(ops.flash_attention, (q, k, v, True, 0.3)).values()) == {
        "SUCCESS"
    }


def test_flash_attentions_fake_checks_the_inputs():
    meta = torch.empty(1, 2, 16, 64, dtype=torch.float16, device="meta")
    o, lse = ops.flash_attention(meta, meta, meta)
    assert o.shape == meta.shape and lse.shape == (1, 2, 16) and lse.dtype == torch.float32
    with pytest.raises(ValueError, match="head_dim"):
        ops.flash_attention(*(torch.empty(1, 2, 16, 32, device="meta").half(),) * 3)
    with pytest.raises(ValueError, match="kernel must be one of"):
        ops.flash_attention(meta, meta, meta, kernel="cudnn")
