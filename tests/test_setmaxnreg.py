"""setmaxnreg (tirx/families/setmaxnreg/): warp specialization's register reallocation.

Its forms and contract; the golden CUDA (the asm and ``__launch_bounds__(threads, 1)``); ptxas's
register count at entry equal to ``Function.launch_registers`` over several patterns (and the
producer/consumer example at 168 with no spills, its SASS with USETMAXREG); each compile-time
rule with a kernel built to break it and its corrected twin; each simulator rule likewise (the
simulator is an independent reading of the ISA: tests/test_architecture.py); and the GPU
running the example and the role kernels as the simulator does (marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tirx
from tirx.errors import ContractError, SimulationError
from tirx.isa import Family, Role

from .helpers import caret_line, define

DEC = "setmaxnreg.dec.sync.aligned.u32"
INC = "setmaxnreg.inc.sync.aligned.u32"

# the roles: warpgroup 0 gives registers back, the others take them
ROLES = """
@T.function
def roles(A: T.Tensor((THREADS,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=THREADS))
    wg = T.cuda.warpgroup_id()
    tid = T.cuda.thread_idx("x")
    if wg == 0:
        T.ptx[DEC](PRODUCER)
        A[tid] = T.float32(1)
    else:
        T.ptx[INC](CONSUMER)
        A[tid] = T.float32(2)
"""


def roles(tmp_path, threads=384, producer=40, consumer=232):
    return define(
        ROLES, tmp_path, "roles", THREADS=threads, PRODUCER=producer, CONSUMER=consumer,
        DEC=DEC, INC=INC,
    )  # fmt: skip


def kernel(tmp_path, body: str, threads: int = 384, params: str = "", **scope):
    """A kernel of ``threads`` threads: ``tid``, ``wg``, ``warp`` and ``lane`` defined, A
    ``(threads,)`` float32, ``body`` (indented 4) after them."""
    text = f"""
@T.function
def k(A: T.Tensor(({threads},), "float32"){params}):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={threads}))
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warpgroup_id()
    warp = T.cuda.warp_id()
    lane = T.cuda.lane_id()
{body}
    A[tid] = T.float32(wg)
"""
    return define(text, tmp_path, "k", DEC=DEC, INC=INC, **scope)


def indent(text: str) -> str:
    return "\n".join("    " + ln for ln in text.strip("\n").splitlines())


# ------------------------------------------------------------------------- form and CUDA


def test_the_forms_and_their_contract():
    from tirx import isa

    assert [t for t in isa.supported_forms() if t.startswith("setmaxnreg")] == [INC, DEC]
    c = tirx.instruction_contract(INC)
    assert c.family is Family.SETMAXNREG and c.min_arch == 90 and c.arch_specific
    (count,) = c.operands
    assert count.role is Role.IMMEDIATE and "24 .. 256" in count.about
    with pytest.raises(ContractError, match="nearest supported: setmaxnreg"):
        tirx.instruction_contract("setmaxnreg.inc.sync.u32")


def test_golden_cuda_of_the_roles(tmp_path):
    exe = tirx.compile(roles(tmp_path), target="cuda -arch=sm_90")
    assert exe.arch == "sm_90a"  # an arch-specific form: compiled for sm_90a
    lines = [ln.strip() for ln in exe.source.splitlines()]
    assert (
        'extern "C" __global__ void __launch_bounds__(384, 1) roles(float* __restrict__ A) {'
        in lines
    )
    assert [ln for ln in lines if "setmaxnreg" in ln] == [
        'asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");',
        'asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");',
    ]
    assert exe.lowered.launch_registers == 168
    if exe.ptx is not None:
        assert "setmaxnreg.dec.sync.aligned.u32 40;" in exe.ptx


def test_a_kernel_without_setmaxnreg_keeps_its_launch_bounds(tmp_path):
    exe = tirx.compile(kernel(tmp_path, indent("A[tid] = T.float32(0)")), "cuda -arch=sm_90")
    assert "__launch_bounds__(384) k(" in exe.source and exe.lowered.launch_registers is None


# (threads, what each warpgroup executes) -> the registers ptxas gives at entry
PATTERNS = [
    (384, ("dec 40", "inc 232", "inc 232"), 168),  # FlashAttention-3's and CUTLASS's numbers
    (384, ("dec 40", "inc 160", "inc 160"), 160),  # an .inc below the cap: ptxas takes it
    (256, ("dec 40", "inc 232"), 232),
    (256, ("dec 40", "dec 56"), 255),  # no .inc: the cap, 255 per thread
    (512, ("dec 56", "inc 144", "inc 144", "inc 144"), 128),
    (128, ("dec 24",), 255),
]


def pattern_kernel(tmp_path, threads, plan):
    arms = []
    for g, step in enumerate(plan):
        act, n = step.split()
        head = "if" if g == 0 else "elif" if g < len(plan) - 1 else "else"
        cond = f" wg == {g}" if head != "else" else ""
        arms.append(f"{head}{cond}:\n    T.ptx[{act.upper()}]({n})")
    return kernel(tmp_path, indent("\n".join(arms)), threads)


@pytest.mark.parametrize("threads,plan,registers", PATTERNS)
def test_ptxas_gives_the_registers_the_launch_is_taken_to_reserve(
    tmp_path, threads, plan, registers
):
    exe = tirx.compile(pattern_kernel(tmp_path, threads, plan), "cuda -arch=sm_90")
    assert exe.lowered.launch_registers == registers
    if exe.stats["registers"] is None:
        pytest.skip("no ptxas statistics (NVRTC without a CUBIN)")
    assert exe.stats["registers"] == registers and exe.stats["spill_stores"] == 0


def test_the_producer_consumer_example_fits_its_registers_and_uses_usetmaxreg():
    from tirx.examples.warp_specialized import make_warp_specialized

    exe = tirx.compile(make_warp_specialized(192, 128), "cuda -arch=sm_90")
    assert exe.lowered.launch_registers == 168  # 40 + 232 + 232 = 3 x 168
    if exe.stats["registers"] is not None:
        assert exe.stats["registers"] == 168
        assert exe.stats["spill_stores"] == exe.stats["spill_loads"] == 0
    if exe.sass is not None:
        lines = [ln for ln in exe.sass.splitlines() if "USETMAXREG" in ln]
        assert any("DEALLOC" in ln and "0x28" in ln for ln in lines)  # .dec 40
        assert any("ALLOC" in ln and "0xe8" in ln for ln in lines)  # .inc 232


# --------------------------------------------------------------- compile-time rules


def test_the_count_is_a_multiple_of_8_in_24_to_256(tmp_path):
    with pytest.raises(ContractError, match="42 is not a multiple of 8") as info:
        tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](42)")), "sim")
    assert caret_line(str(info.value)) == "T.ptx[DEC](42)" and "40 or 48" in info.value.hint
    with pytest.raises(ContractError, match="compile-time int"):
        tirx.compile(kernel(tmp_path, indent("n = tid\nT.ptx[DEC](n)")), "sim")
    with pytest.raises(ContractError, match="takes one operand"):
        tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](40, 48)")), "sim")
    tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](40)")), "sim")  # the twin


def test_the_block_is_whole_warpgroups(tmp_path):
    from tirx.transform.limits import MachineLimitError

    with pytest.raises(MachineLimitError, match="whole warpgroups of 128 threads"):
        tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](40)"), threads=192), "sim")
    tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](40)"), threads=256), "sim")


def test_it_needs_sm_90a(tmp_path):
    k = kernel(tmp_path, indent("T.ptx[DEC](40)"))
    with pytest.raises(ContractError, match="needs sm_90a"):
        tirx.compile(k, "cuda -arch=sm_80")
    assert tirx.compile(k, "cuda -arch=sm_90").arch == "sm_90a"


def test_more_registers_than_the_launch_reserves_is_refused_with_the_arithmetic(tmp_path):
    with pytest.raises(ContractError) as info:
        tirx.compile(roles(tmp_path, consumer=240), "sim")
    msg = str(info.value)
    assert "setmaxnreg.inc 240 at line" in msg and "would wait forever" in msg
    assert "(40 + 240 + 240) x 128 = 66560 registers" in msg
    assert "168 x 384 = 64512" in msg
    assert "at most 232 in warpgroups 1, 2" in info.value.hint
    assert caret_line(msg) == "T.ptx[INC](CONSUMER)"
    a = np.zeros(384, np.float32)  # the twin: FlashAttention-3's numbers fit exactly
    tirx.compile(roles(tmp_path, consumer=232), "sim")(a)
    assert (a == np.repeat([1, 2, 2], 128)).all()


def test_warps_of_a_warpgroup_that_take_different_paths_are_refused(tmp_path):
    bad = "if warp < 2:\n    T.ptx[DEC](40)"
    with pytest.raises(ContractError) as info:
        tirx.compile(kernel(tmp_path, indent(bad)), "sim")
    assert "thread 64 (warp 2, lane 0) does not execute setmaxnreg.dec 40" in str(info.value)
    assert "all 128 threads of a warpgroup" in str(info.value)
    tirx.compile(kernel(tmp_path, indent("if wg == 0:\n    T.ptx[DEC](40)")), "sim")
    # lanes too: one thread per warpgroup is not the warpgroup
    with pytest.raises(ContractError, match=r"thread 1 \(warp 0, lane 1\) does not execute"):
        tirx.compile(kernel(tmp_path, indent("if tid % 128 == 0:\n    T.ptx[DEC](40)")), "sim")


def test_a_dec_may_not_raise_and_an_inc_may_not_lower(tmp_path):
    with pytest.raises(ContractError, match="would raise warpgroup 0's registers: it holds 168"):
        tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](200)")), "sim")
    tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](160)")), "sim")
    plan = "if wg == 0:\n    T.ptx[DEC](40)\nelif wg == 1:\n    T.ptx[INC](232)\nelse:\n    T.ptx[{}](120)"
    with pytest.raises(ContractError, match="would lower warpgroup 2's registers"):
        tirx.compile(kernel(tmp_path, indent(plan.format("INC"))), "sim")
    tirx.compile(kernel(tmp_path, indent(plan.format("DEC"))), "sim")


def test_two_calls_of_a_warpgroup_need_a_barrier_between_them(tmp_path):
    with pytest.raises(ContractError, match="with no barrier between them"):
        tirx.compile(kernel(tmp_path, indent("T.ptx[DEC](40)\nT.ptx[INC](120)")), "sim")
    body = "T.ptx[DEC](40)\nT.cuda.cta_sync()\nT.ptx[INC](120)"
    tirx.compile(kernel(tmp_path, indent(body)), "sim")
    # in a loop, the next iteration's call follows this one's
    with pytest.raises(ContractError, match="with no barrier between them"):
        tirx.compile(kernel(tmp_path, indent("for i in range(2):\n    T.ptx[DEC](40)")), "sim")


def test_a_role_chosen_at_run_time_counts_for_every_warpgroup(tmp_path):
    body = "if warp < split:\n    T.ptx[DEC](40)\nelse:\n    T.ptx[INC](232)"
    with pytest.raises(ContractError, match="cannot tell which warpgroups execute"):
        tirx.compile(kernel(tmp_path, indent(body), params=", split: T.int32"), "sim")


def test_the_branches_are_followed_through_long_chains_and_loops(tmp_path):
    # an elif chain of 1500 arms: the check follows it without recursion
    arms = "\n".join(f"elif tid == {10_000 + i}:\n    A[0] = T.float32({i})" for i in range(1500))
    chain = "if tid == 9999:\n    A[0] = T.float32(0)\n" + arms + "\nelse:\n    T.ptx[DEC](40)"
    tirx.compile(kernel(tmp_path, indent(chain)), "sim")
    # a loop of one iteration runs its call once; a barrier in the loop separates iterations
    tirx.compile(kernel(tmp_path, indent("for i in range(1):\n    T.ptx[DEC](40)")), "sim")
    body = "for i in range(3):\n    T.ptx[DEC](40)\n    T.cuda.cta_sync()"
    tirx.compile(kernel(tmp_path, indent(body)), "sim")


# ------------------------------------------------------------------------ the simulator


def run(k, *scalars, sms=None):
    a = np.zeros(k.ir.params[0].shape, np.float32)
    tirx.compile(k, "sim")(a, *scalars)
    return a


def test_the_simulator_runs_the_roles_in_either_branch_order(tmp_path):
    """A consumer's .inc waits (a strand) until the producer's .dec has filled the pool."""
    first = "if wg != 0:\n    T.ptx[INC](232)\nelse:\n    T.ptx[DEC](40)"
    assert (run(kernel(tmp_path, indent(first))) == np.repeat([0, 1, 2], 128)).all()
    assert (run(roles(tmp_path)) == np.repeat([1, 2, 2], 128)).all()


SPLIT = "if warp < split:\n    T.ptx[DEC](40)\n{other}"


def test_warps_that_execute_different_setmaxnreg_are_a_fault(tmp_path):
    k = kernel(
        tmp_path, indent(SPLIT.format(other="else:\n    T.ptx[DEC](56)")), 256,
        ", split: T.int32",
    )  # fmt: skip
    with pytest.raises(SimulationError) as info:
        run(k, 6)
    msg = str(info.value)
    assert "warp 6 executes setmaxnreg.dec.sync.aligned.u32 56 at line" in msg
    assert "warps 4, 5 of its warpgroup 1 executed setmaxnreg.dec.sync.aligned.u32 40" in msg
    assert "[block (0, 0, 0), warp 6, lane 0]" in msg
    assert caret_line(msg) == "T.ptx[DEC](56)"
    run(k, 4)  # the twin: each warpgroup takes one path


def test_warps_that_never_execute_their_warpgroups_setmaxnreg_are_a_fault(tmp_path):
    k = kernel(tmp_path, indent(SPLIT.format(other="")), 256, ", split: T.int32")
    with pytest.raises(SimulationError) as info:
        run(k, 6)
    msg = str(info.value)
    assert "warps 6, 7 of warpgroup 1 never execute setmaxnreg.dec.sync.aligned.u32 40" in msg
    assert caret_line(msg) == "T.ptx[DEC](40)"
    run(k, 8)


def test_a_warp_with_missing_lanes_is_a_fault(tmp_path):
    k = kernel(tmp_path, indent("if lane < n:\n    T.ptx[DEC](40)"), 128, ", n: T.int32")
    with pytest.raises(SimulationError, match="executed by 16 of 32 lanes of warp 0; lane 16"):
        run(k, 16)
    run(k, 32)


def test_a_dec_above_what_the_warp_holds_is_a_fault(tmp_path):
    body = "if flag > 0:\n    T.ptx[DEC](40)\nT.cuda.cta_sync()\nT.ptx[DEC]({})"
    k = kernel(tmp_path, indent(body.format(56)), 256, ", flag: T.int32")
    with pytest.raises(SimulationError, match="warp 0 holds 40 registers per thread, and"):
        run(k, 1)
    run(k, 0)  # the twin: no earlier .dec, so 56 is below the 255 of the launch
    run(kernel(tmp_path, indent(body.format(32)), 256, ", flag: T.int32"), 1)


# the producer waits on the consumers before it gives its registers back; the consumers take
# theirs before they arrive: the .inc waits for registers only the waiting producer can free
DEADLOCK = """
@T.function
def k(A: T.Tensor((384,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warpgroup_id()
    bar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bar[0], 256)
    T.cuda.cta_sync()
    if wg == 0:
        {producer}
        A[tid] = T.float32(1)
    else:
        T.ptx[INC](232)
        T.ptx["mbarrier.arrive.shared::cta.b64"](bar[0])
        A[tid] = T.float32(2)
"""


def test_an_inc_that_waits_for_a_producer_that_waits_too_is_a_deadlock(tmp_path):
    late = "T.cuda.mbarrier_wait(bar[0], 0)\n        T.ptx[DEC](40)"
    k = define(DEADLOCK.format(producer=late), tmp_path, "k", DEC=DEC, INC=INC)
    with pytest.raises(SimulationError) as info:
        run(k)
    msg = str(info.value)
    assert "deadlock" in msg and "setmaxnreg.inc.sync.aligned.u32 232 at line" in msg
    assert "warps 4, 5, 6, 7, 8, 9, 10, 11 wait for 16384 registers" in msg
    assert "the pool holds 0 registers; the warpgroups hold 168, 168, 168" in msg
    early = "T.ptx[DEC](40)\n        T.cuda.mbarrier_wait(bar[0], 0)"
    a = run(define(DEADLOCK.format(producer=early), tmp_path, "k", DEC=DEC, INC=INC))
    assert (a == np.repeat([1, 2, 2], 128)).all()


def test_the_example_runs_exactly_on_the_simulator():
    from tirx.examples.warp_specialized import make_warp_specialized

    M, N = 192, 128
    a = torch.randint(-50, 50, (M, N), generator=torch.Generator().manual_seed(0)).float()
    out = torch.zeros(M, N)
    tirx.compile(make_warp_specialized(M, N, stages=2, group=2), "sim", sms=2)(a, out)
    assert torch.equal(out, a * a + 1)


# ------------------------------------------------------------------------------- the GPU


@pytest.mark.gpu
@pytest.mark.parametrize("first", ["producer", "consumer"])
def test_gpu_roles_equal_the_simulator(tmp_path, first):
    body = (
        "if wg == 0:\n    T.ptx[DEC](40)\nelse:\n    T.ptx[INC](232)"
        if first == "producer"
        else "if wg != 0:\n    T.ptx[INC](232)\nelse:\n    T.ptx[DEC](40)"
    )
    k = kernel(tmp_path, indent(body))
    sim = run(k)
    gpu = torch.zeros(384, device="cuda")
    tirx.compile(k, "cuda")(gpu)
    torch.cuda.synchronize()
    assert np.array_equal(gpu.cpu().numpy(), sim)


@pytest.mark.gpu
def test_gpu_runs_the_warp_specialized_example():
    from tirx.backend.cuda.driver import multiprocessor_count
    from tirx.examples.warp_specialized import make_warp_specialized

    M, N = 1024, 768
    k = make_warp_specialized(M, N, stages=2)
    a = torch.randint(-50, 50, (M, N), generator=torch.Generator().manual_seed(1)).float()
    out = torch.zeros(M, N, device="cuda")
    exe = tirx.compile(k, "cuda")
    exe(a.cuda(), out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), a * a + 1)
    assert exe.launch_grid() == (multiprocessor_count(0), 1, 1)
    assert exe.stats["registers"] == 168 and exe.stats["spill_stores"] == 0
