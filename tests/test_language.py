"""The everyday kernel language (SPEC §4), run on the simulator and compiled for CUDA.

Each kernel is checked two ways: its simulated result against numpy, and its CUDA build
(NVRTC to CUBIN) — so a feature that parses but generates bad C++ fails here too.
"""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import define


def run_sim(kernel, *args):
    exe = tirx.compile(kernel, target="sim")
    exe(*args)
    return exe


def build_cuda(kernel):
    exe = tirx.compile(kernel, target="cuda -arch=sm_80")
    assert exe.cubin[:4] == b"\x7fELF"
    return exe


def test_floor_division_and_modulo_of_negatives(tmp_path):
    k = define(
        """
        @T.function
        def k(X: T.Tensor((32,), "int32"), Q: T.Tensor((32,), "int32"),
              Rm: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            Q[i] = X[i] // 5
            Rm[i] = X[i] % -3
        """,
        tmp_path,
        "k",
    )
    x = np.arange(-16, 16, dtype=np.int32)
    q, r = np.zeros(32, np.int32), np.zeros(32, np.int32)
    run_sim(k, x, q, r)
    np.testing.assert_array_equal(q, x // 5)
    np.testing.assert_array_equal(r, x % -3)
    src = build_cuda(k).source
    assert "tirx_floordiv" in src and "tirx_floormod" in src


def test_loops_branches_while_break_continue(tmp_path):
    k = define(
        """
        @T.function
        def k(Out: T.Tensor((64,), "int32"), n: T.int32):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
            t = T.cuda.thread_idx("x") + 32 * T.cuda.block_idx("x")
            acc = 0
            for i in range(1, n, 2):
                if i % 3 == 0:
                    continue
                acc += i
            j = 0
            while True:
                j += 1
                if j >= t:
                    break
            if t < 10:
                Out[t] = acc
            elif t < 20:
                Out[t] = j
            else:
                Out[t] = max(t, 40) - min(t, 3)
        """,
        tmp_path,
        "k",
    )
    out = np.zeros(64, np.int32)
    run_sim(k, out, 12)
    acc = sum(i for i in range(1, 12, 2) if i % 3)
    want = [acc if t < 10 else max(t, 1) if t < 20 else max(t, 40) - min(t, 3) for t in range(64)]
    np.testing.assert_array_equal(out, want)
    build_cuda(k)


STATIC_IF_ALLOC = """
@T.function
def k(A: T.Tensor((8, 8), "float32"), Out: T.Tensor((8, 8), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    t = T.cuda.thread_idx("x")
    if wide:
        s = T.alloc_shared((8, 8), "float32", align=128)
        scale = 2.0
    else:
        s = T.alloc_shared((8, 8), "float32")
        scale = 3.0
    s[t // 8, t % 8] = A[t // 8, t % 8] * scale
    T.cuda.cta_sync()
    Out[t // 8, t % 8] = s[7 - t // 8, t % 8]
"""


@pytest.mark.parametrize("wide", [True, False])
def test_a_static_if_keeps_the_names_of_its_taken_branch(tmp_path, wide):
    """A condition known when the kernel is built keeps only the taken branch, and (as in
    Python) what it binds -- a tensor here, as a scalar -- is visible after the ``if`` (it was
    "name 's' is not defined")."""
    k = define(STATIC_IF_ALLOC, tmp_path, "k", wide=wide)
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.zeros((8, 8), np.float32)
    run_sim(k, a, out)
    np.testing.assert_array_equal(out, a[::-1] * (2.0 if wide else 3.0))
    exe = build_cuda(k)
    assert len([b for b in exe.lowered.allocations if b.scope.value == "shared"]) == 1


def test_a_tensor_bound_in_a_runtime_branch_says_why_it_is_gone_after_it(tmp_path):
    src = STATIC_IF_ALLOC.replace("if wide:", "if t < 32:")
    with pytest.raises(tirx.TirxSyntaxError) as e:
        define(src, tmp_path, "k")
    err = e.value
    assert "name 's' is not defined here: it was bound inside the `if` branch at line" in str(err)
    assert "visible only there" in err.message and "did you mean" not in str(err)
    assert "allocate 's' once before the `if`" in err.hint
    assert "s[t // 8, t % 8] = A" in str(err)  # located at the use


def test_a_loop_variable_used_after_its_loop_says_so(tmp_path):
    src = """
    @T.function
    def k(Out: T.Tensor((32,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        for i in range(lane):
            Out[i] = 1
        Out[lane] = i
    """
    with pytest.raises(tirx.TirxSyntaxError) as e:
        define(src, tmp_path, "k")
    assert "'i' is not defined here: it is the loop variable of the `for` loop at line" in str(
        e.value
    )
    assert "last = i" in e.value.hint


STATIC_IF_INT = """
@T.function
def k(A: T.Tensor((16,), "float32"), Out: T.Tensor((16,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=16))
    t = T.cuda.thread_idx("x")
    if wide:
        K = 16
        acc = 0.0
    else:
        K = 8
        acc = 0.0
    s = T.alloc_shared((K,), "float32")
    if t < K:
        s[t] = A[t]
    T.cuda.cta_sync()
    for j in T.unroll(K):
        acc += s[j]
    Out[t] = acc
"""


@pytest.mark.parametrize("wide", [True, False])
def test_an_int_a_static_if_picks_is_a_compile_time_int(tmp_path, wide):
    """Only the taken branch of a static ``if`` is built, so ``K`` has one value, known when
    the kernel is built, as ``K = 16`` at the top level has: a shape and an unroll count (it
    was a kernel variable, refused by both); ``acc``, assigned again by ``+=``, is one."""
    k = define(STATIC_IF_INT, tmp_path, "k", wide=wide)
    a = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    run_sim(k, a, out)
    np.testing.assert_array_equal(out, np.full(16, a[: 16 if wide else 8].sum()))
    exe = build_cuda(k)
    assert [v.name for v in exe.lowered.variables if v.name.startswith("K")] == []


def test_an_int_a_runtime_if_picks_stays_a_variable_named_in_words(tmp_path):
    """Both branches of a run-time ``if`` are built: ``K`` is a kernel variable (each thread's
    value), and a shape made of it is refused naming it, not printing the IR's repr."""
    src = STATIC_IF_INT.replace("if wide:", "if t < 4:")
    body = src.split("    s = T.alloc_shared")[0] + "    Out[t] = T.float32(K)\n"
    k = define(body, tmp_path, "k")
    out = np.zeros(16, np.float32)
    run_sim(k, np.zeros(16, np.float32), out)
    np.testing.assert_array_equal(out, [16.0] * 4 + [8.0] * 12)
    with pytest.raises(tirx.TirxSyntaxError) as e:
        define(src, tmp_path, "k")
    assert "shape entries must be positive compile-time ints, got 'K', a run-time int32 " in str(
        e.value
    )
    assert "Var(" not in str(e.value) and "DType(" not in str(e.value)
    assert "assign the size once" in e.value.hint


MACRO_SCOPES = """
@T.macro
def fill(Out, t):
    for i in range(2):
        Out[t] = 1.0
    if t < 4:
        tmp = T.alloc_local((1,), "float32")
        tmp[0] = 2.0
        Out[t] = tmp[0]
    USE_IN_MACRO

@T.function
def k(Out: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.cuda.thread_idx("x")
    fill(Out, t)
    USE_IN_KERNEL
"""


@pytest.mark.parametrize("use", ["Out[t] = Out[t] + i", "Out[t] = tmp[0]"])
def test_a_name_a_macro_bound_in_a_loop_or_branch_is_plainly_undefined_in_the_kernel(tmp_path, use):
    """The kernel never bound ``i`` or ``tmp``: the macro's loop or branch is not the
    kernel's, so the error is the plain one (it named a loop or branch "at line N" of the
    macro's file as if it were the kernel's)."""
    src = MACRO_SCOPES.replace("USE_IN_MACRO", "pass").replace("USE_IN_KERNEL", use)
    with pytest.raises(tirx.TirxSyntaxError) as e:
        define(src, tmp_path, "k")
    name = "i" if "i" in use.split("+")[-1] else "tmp"
    assert e.value.message == f"name {name!r} is not defined"
    assert "bound inside" not in str(e.value) and "loop variable" not in str(e.value)


def test_a_name_a_macro_bound_in_its_own_loop_is_explained_in_the_macro(tmp_path):
    """Within the macro's own body, its loop variable used after the loop is explained."""
    src = MACRO_SCOPES.replace("USE_IN_MACRO", "Out[t] = Out[t] + i")
    src = src.replace("USE_IN_KERNEL", "pass")
    with pytest.raises(tirx.TirxSyntaxError) as e:
        define(src, tmp_path, "k")
    assert "'i' is not defined here: it is the loop variable of the `for` loop at line" in str(
        e.value
    )


def test_a_binding_place_in_another_file_is_named_with_its_file():
    from tirx.errors import Span
    from tirx.script.refusals import undefined_name

    ended = ("`for` loop's variable", Span("/x/macros.py", 7))
    err = undefined_name("i", Span("/y/kernel.py", 10), [], ended)
    assert "the `for` loop at line 7 of macros.py," in err.message
    err = undefined_name("i", Span("/x/macros.py", 10), [], ended)
    assert "the `for` loop at line 7," in err.message


def test_serial_unroll_negative_step_and_scalars(tmp_path):
    k = define(
        """
        @T.function
        def k(Out: T.Tensor((4, 8), "float32"), scale: T.float32, base: T.int32):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=(8, 4)))
            x = T.cuda.thread_idx("x")
            y = T.cuda.thread_idx("y")
            s = T.float32(0)
            for i in T.unroll(4):
                s += T.float32(i)
            for i in T.serial(8, 0, -2):
                s += T.cast(i, "float32") * scale
            Out[y, x] = s + T.float32(base + 8 * y + x) + T.float32(T.cuda.block_dim("y"))
        """,
        tmp_path,
        "k",
    )
    out = np.zeros((4, 8), np.float32)
    run_sim(k, out, 0.5, 100)
    s = sum(range(4)) + sum(range(8, 0, -2)) * 0.5
    want = s + 100 + np.arange(32, dtype=np.float32).reshape(4, 8) + 4
    np.testing.assert_array_equal(out, want)
    src = build_cuda(k).source
    assert "#pragma unroll" in src


def test_casts_and_half_precision_rounding(tmp_path):
    k = define(
        """
        @T.function
        def k(X: T.Tensor((32,), "float32"), H: T.Tensor((32,), "float16"),
              Bf: T.Tensor((32,), "bfloat16"), I: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            H[i] = X[i]
            Bf[i] = X[i] * 2
            I[i] = T.int32(X[i])
        """,
        tmp_path,
        "k",
    )
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(32) * 100).astype(np.float32)
    h = np.zeros(32, np.float16)
    bf = np.zeros(32, np.uint16)
    i = np.zeros(32, np.int32)
    run_sim(k, x, h, bf, i)
    np.testing.assert_array_equal(h, x.astype(np.float16))
    np.testing.assert_array_equal(i, np.trunc(x).astype(np.int32))
    import torch

    want_bf = torch.from_numpy(x * 2).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(bf, want_bf)
    build_cuda(k)


def test_printf_reaches_the_given_stream(tmp_path):
    import io

    k = define(
        """
        @T.function
        def k(X: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            if i < 2:
                T.cuda.printf("lane %d sees %d and %.1f\\n", i, X[i], T.float32(i) / 2)
        """,
        tmp_path,
        "k",
    )
    buf = io.StringIO()
    tirx.compile(k, target="sim")(np.arange(32, dtype=np.int32) * 7, stdout=buf)
    assert buf.getvalue().splitlines() == ["lane 0 sees 0 and 0.0", "lane 1 sees 7 and 0.5"]
    assert "printf(" in build_cuda(k).source


def test_regions_with_runtime_starts(tmp_path):
    k = define(
        """
        @T.function
        def k(A: T.Tensor((4, 16), "int32"), Out: T.Tensor((4, 16), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            for r in range(4):
                row = A[r, :]
                out_row = Out[r, 4:16]
                if lane < 12:
                    out_row[lane] = row[lane + 4] * 10 + r
        """,
        tmp_path,
        "k",
    )
    a = np.arange(64, dtype=np.int32).reshape(4, 16)
    out = np.zeros((4, 16), np.int32)
    run_sim(k, a, out)
    want = np.zeros_like(out)
    want[:, 4:] = a[:, 4:] * 10 + np.arange(4)[:, None]
    np.testing.assert_array_equal(out, want)
    build_cuda(k)


@pytest.mark.parametrize("loop", ["T.unroll(4)", "range(4)"])
def test_a_region_with_a_run_time_start_on_a_split_dimension(loop, tmp_path):
    """``s[:, 16 * kk : 16 * kk + 16]`` of a dimension the layout splits into 2 x 32: the
    start is a multiple of the extent whatever ``kk`` is, so the region is whole parts of the
    inner piece (it was refused unless the start was a constant)."""
    k = define(
        f"""
        @T.function
        def k(A: T.Tensor((8, 64), "int32"), Out: T.Tensor((8, 64), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            s = T.alloc_shared((8, 64), "int32", layout=TileLayout(S[(8, 2, 32) : (32, 256, 1)]))
            for i in range(16):
                s[(lane + 32 * i) // 64, (lane + 32 * i) % 64] = A[(lane + 32 * i) // 64, (lane + 32 * i) % 64]
            T.cuda.warp_sync()
            for kk in {loop}:
                v = s[:, 16 * kk : 16 * kk + 16]
                for i in range(4):
                    Out[(lane + 32 * i) // 16, 16 * kk + (lane + 32 * i) % 16] = v[(lane + 32 * i) // 16, (lane + 32 * i) % 16]
        """,
        tmp_path,
        "k",
    )
    a = np.arange(512, dtype=np.int32).reshape(8, 64)
    out = np.zeros((8, 64), np.int32)
    run_sim(k, a, out)
    np.testing.assert_array_equal(out, a)
    build_cuda(k)


def test_argument_checks_name_the_parameter(tmp_path):
    import torch

    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="sim")
    a = torch.zeros((16, 16), dtype=torch.float16)
    b = torch.zeros((8, 16), dtype=torch.float16)
    out = torch.zeros((16, 8), dtype=torch.float32)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        exe(a, b)
    with pytest.raises(TypeError, match="'B'.*float16"):
        exe(a, b.float(), out)
    with pytest.raises(ValueError, match="'Out'.*shape"):
        exe(a, b, out[:8])
    with pytest.raises(ValueError, match="'A'.*contiguous"):
        exe(a.t(), b, out)
    with pytest.raises(TypeError, match="'A'.*tensor"):
        exe([1, 2], b, out)
    cuda = tirx.compile(warp_matmul, target="cuda")
    with pytest.raises(ValueError, match="'A' must be a CUDA tensor"):
        cuda(a, b, out)


def test_scalar_argument_checks(tmp_path):
    k = define(
        """
        @T.function
        def k(Out: T.Tensor((32,), "int32"), n: T.int32):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            Out[T.cuda.lane_id()] = n
        """,
        tmp_path,
        "k",
    )
    exe = tirx.compile(k, target="sim")
    out = np.zeros(32, np.int32)
    with pytest.raises(TypeError, match="'n'.*int"):
        exe(out, 1.5)
    with pytest.raises(ValueError, match="'n'.*does not fit"):
        exe(out, 2**40)
    exe(out, -7)
    assert (out == -7).all()


def test_cuda_target_without_gpu_compiles_and_explains_launch():
    from tirx.backend.cuda.driver import gpu_count

    if gpu_count() > 0:
        pytest.skip("a GPU is visible: launching works here")
    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="cuda")
    assert exe.cubin[:4] == b"\x7fELF"
    with pytest.raises(tirx.LaunchError, match="no CUDA GPU") as info:
        exe.load()
    assert "sim" in str(info.value)
    auto = tirx.compile(warp_matmul)
    assert auto.target.kind == "sim" and "(auto)" in repr(auto)


def test_identity_tests_on_compile_time_values(tmp_path):
    k = define(
        """
        SCALE = None

        @T.function
        def k(Out: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            if SCALE is None:
                Out[i] = i
            else:
                Out[i] = i * SCALE
            if Out is not None and SCALE is not None:
                Out[i] = -1
        """,
        tmp_path,
        "k",
    )
    out = np.zeros(32, np.int32)
    run_sim(k, out)
    np.testing.assert_array_equal(out, np.arange(32))
    with pytest.raises(tirx.TirxSyntaxError, match="use == for kernel values"):
        define(
            """
            @T.function
            def bad(Out: T.Tensor((32,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                if T.cuda.lane_id() is None:
                    Out[0] = 1
            """,
            tmp_path,
        )
