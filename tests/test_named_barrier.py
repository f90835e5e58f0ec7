"""Named barriers (tirx/families/named_barrier/): ``bar.sync a, b`` / ``bar.arrive a, b`` and
``T.cuda.warpgroup_sync(i)``.

Their forms and contracts, the golden CUDA (and what ptxas makes of it), the simulator against
the ISA's rules -- a producer warpgroup that arrives and a consumer that syncs, rounds of a
barrier that lockstep warps complete one after another, the order an arrive gives and the one
it does not -- each fault with its corrected twin, and the GPU against the simulator (``gpu``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tirx
from tests.named_barrier_planted import NAMED_BARRIER_CASES
from tirx import isa
from tirx.errors import ContractError, SimulationError, TirxSyntaxError
from tirx.isa import Family
from tirx.sim import run

from .helpers import caret_line, define

# Warpgroup 0 fills shared memory and arrives; warpgroup 1 waits, then reads it reversed.
HANDOFF = """
@T.function
def handoff(A: T.Tensor((128,), "float32"), Out: T.Tensor((128,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    s = T.alloc_shared((128,), "float32")
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warpgroup_id()
    if wg == 0:
        s[tid] = A[tid] * 2.0
        PRODUCER
    else:
        CONSUMER
        Out[tid - 128] = s[255 - tid] + 1.0
"""
ARRIVE = 'T.ptx["bar.arrive"](1, 256)'
SYNC = 'T.ptx["bar.sync"](1, 256)'


def handoff(tmp_path, producer=ARRIVE, consumer=SYNC):
    source = HANDOFF.replace("PRODUCER", producer).replace("CONSUMER", consumer)
    return define(source, tmp_path, "handoff")


def run_sim(kernel, n=128):
    a = torch.arange(n, dtype=torch.float32)
    out = torch.zeros(n)
    tirx.compile(kernel, target="sim")(a, out)
    return a, out


# Each warpgroup of three exchanges values among its own threads through shared memory and
# meets at its own barrier; every warp runs the same statements in lockstep.
PER_WARPGROUP = """
@T.function
def rotate(A: T.Tensor((384,), "int32"), Out: T.Tensor((384,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
    s = T.alloc_shared((384,), "int32")
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warpgroup_id()
    s[tid] = A[tid]
    MEET
    Out[tid] = s[wg * 128 + (tid + 37) % 128]
"""


def rotate_model(a: np.ndarray) -> np.ndarray:
    tid = np.arange(384)
    return a[(tid // 128) * 128 + (tid + 37) % 128]


def test_the_forms_and_their_contracts():
    forms = [t for t in isa.supported_forms() if t.split(".")[0] in ("bar", "barrier")]
    assert [t for t in forms if ".cluster" not in t] == [
        "bar.sync", "bar.arrive", "bar.cta.sync", "bar.cta.arrive",
        "barrier.sync.aligned", "barrier.arrive.aligned",
        "barrier.cta.sync.aligned", "barrier.cta.arrive.aligned",
    ]  # fmt: skip
    c = tirx.instruction_contract("bar.sync")
    assert c.family is Family.BAR and [o.name for o in c.operands] == ["a", "b"]
    assert tirx.instruction_contract("barrier.sync.aligned").family is Family.BARRIER
    # barrier.cluster is still the cluster family's
    assert tirx.instruction_contract("barrier.cluster.arrive").family is Family.BARRIER_CLUSTER
    with pytest.raises(ContractError, match="aligned form"):
        tirx.instruction_contract("barrier.sync")
    with pytest.raises(ContractError, match="syncthreads_and"):
        tirx.instruction_contract("bar.red")
    with pytest.raises(ContractError, match="T.cuda.warp_sync"):
        tirx.instruction_contract("bar.warp.sync")


def test_golden_cuda_and_what_ptxas_makes_of_it(tmp_path):
    exe = tirx.compile(handoff(tmp_path), target="cuda -arch=sm_90")
    lines = [ln.strip() for ln in exe.source.splitlines() if '"bar.' in ln]
    assert lines == [
        'asm volatile("bar.arrive %0, %1;" : : "r"(1u), "r"(256u) : "memory");',
        'asm volatile("bar.sync %0, %1;" : : "r"(1u), "r"(256u) : "memory");',
    ]
    if exe.sass is not None:  # the disassembler is installed: the barrier instructions
        sass = exe.sass
        assert "BAR.ARV 0x1, 0x100" in sass and "BAR.SYNC" in sass


def test_warpgroup_sync_is_bar_sync_of_128_threads(tmp_path):
    kernel = define(
        PER_WARPGROUP.replace("MEET", "T.cuda.warpgroup_sync(1 + wg)"), tmp_path, "rotate"
    )
    exe = tirx.compile(kernel, target="cuda -arch=sm_90")
    (line,) = [ln.strip() for ln in exe.source.splitlines() if '"bar.' in ln]
    assert line.startswith('asm volatile("bar.sync %0, %1;" : : "r"(') and '"r"(128u)' in line
    a = np.random.default_rng(0).integers(-1000, 1000, 384).astype(np.int32)
    out = np.zeros(384, np.int32)
    tirx.compile(kernel, target="sim")(a, out)
    assert np.array_equal(out, rotate_model(a))


def test_a_producer_arrives_and_a_consumer_syncs(tmp_path):
    a, out = run_sim(handoff(tmp_path))
    assert torch.equal(out, a.flip(0) * 2 + 1)


def test_without_the_barrier_the_read_is_a_race(tmp_path):
    with pytest.raises(SimulationError, match="shared-memory race") as info:
        run_sim(handoff(tmp_path, producer="pass", consumer="pass"))
    assert caret_line(str(info.value)).startswith("Out[tid - 128] = s[255 - tid]")
    # two warpgroups: the hint names the barrier that fits warp roles too
    assert 'T.ptx["bar.arrive"](1, n) after line' in info.value.hint


def test_a_race_within_one_warpgroup_is_told_of_cta_sync_only(tmp_path):
    source = PER_WARPGROUP.replace("MEET", "pass")
    with pytest.raises(SimulationError, match="shared-memory race") as info:
        out = np.zeros(384, np.int32)
        tirx.compile(define(source, tmp_path, "rotate"), "sim")(np.arange(384, dtype=np.int32), out)
    assert "T.cuda.cta_sync()" in info.value.hint and "bar.arrive" not in info.value.hint


def test_an_arrive_before_the_stores_orders_nothing(tmp_path):
    """The producer arrives first and stores after: the consumer's read is not ordered after
    the store, and the race names it."""
    source = HANDOFF.replace("PRODUCER", "pass").replace("CONSUMER", SYNC)
    source = source.replace(
        "s[tid] = A[tid] * 2.0\n        pass", f"{ARRIVE}\n        s[tid] = A[tid] * 2.0"
    )
    with pytest.raises(SimulationError, match="shared-memory race"):
        run_sim(define(source, tmp_path, "handoff"))


# After the handoff the consumer answers through a second array and the producer reads it.
REPLY = """
@T.function
def reply(A: T.Tensor((128,), "float32"), Out: T.Tensor((256,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    s = T.alloc_shared((128,), "float32")
    r = T.alloc_shared((128,), "float32")
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warpgroup_id()
    if wg == 0:
        s[tid] = A[tid]
        T.ptx["bar.arrive"](1, 256)
        BACK
        Out[tid] = r[127 - tid]
    else:
        T.ptx["bar.sync"](1, 256)
        r[tid - 128] = s[255 - tid] * 3.0
        ANSWER
        Out[tid] = 0.0
"""


def test_an_arrive_does_not_acquire(tmp_path):
    """The producer only arrived at barrier 1, so nothing orders its read of r after the
    consumer's store (the simulator runs the producer on, as a GPU may: its read finds bytes
    nobody wrote yet). A second barrier the other way (the consumer arrives, the
    producer syncs) orders it."""
    racy = REPLY.replace("BACK", "pass").replace("ANSWER", "pass")
    a, out = torch.arange(128, dtype=torch.float32), torch.zeros(256)
    with pytest.raises(SimulationError, match="nothing wrote|shared-memory race") as info:
        tirx.compile(define(racy, tmp_path, "reply"), target="sim")(a, out)
    assert caret_line(str(info.value)) == "Out[tid] = r[127 - tid]"
    ordered = REPLY.replace("BACK", 'T.ptx["bar.sync"](2, 256)').replace(
        "ANSWER", 'T.ptx["bar.arrive"](2, 256)'
    )
    tirx.compile(define(ordered, tmp_path, "reply"), target="sim")(a, out)
    assert torch.equal(out[:128], a * 3) and not out[128:].any()


def test_warps_more_than_a_round_arriving_together_are_a_fault(tmp_path):
    """All twelve warps reach ``bar.sync 1, 128`` together: on the GPU the first four to
    arrive complete a round, whichever they are (PTX ISA: the barrier completes when the
    count has arrived), so a warpgroup is not ordered after its own stores; lockstep would
    group them in warp order and hide it. With an id per warpgroup the rounds are fixed."""
    kernel = define(PER_WARPGROUP.replace("MEET", 'T.ptx["bar.sync"](1, 128)'), tmp_path, "rotate")
    a = np.arange(384, dtype=np.int32) * 3
    out = np.zeros(384, np.int32)
    with pytest.raises(SimulationError) as info:
        tirx.compile(kernel, target="sim")(a, out)
    assert "12 warps arrive at barrier 1 together (0 arrived before), and a round of it is 4 " \
        "warps (128 threads)" in info.value.message  # fmt: skip
    assert "its own barrier id" in info.value.hint
    meet = 'T.ptx["bar.sync"](1 + T.cuda.warpgroup_id(), 128)'
    kernel = define(PER_WARPGROUP.replace("MEET", meet), tmp_path, "rotate")
    tirx.compile(kernel, target="sim")(a, out)
    assert np.array_equal(out, rotate_model(a))


# FlashAttention-3's turns: both consumer warpgroups run one branch, each waits at its own
# barrier for its turn and hands the turn over with an arrive on the other's.
TURNS = """
@T.function
def turns(A: T.Tensor((128,), "int32"), Out: T.Tensor((4, 256), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
    h = T.alloc_shared((128,), "int32")
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warpgroup_id()
    if wg == 0:
        h[tid] = A[tid]
    T.cuda.cta_sync()
    if wg > 0:
        c = wg - 1
        i = tid % 128
        if c == 1:
            FIRST
        for j in range(4):
            T.ptx["bar.sync"](1 + c, 256)
            UPDATE
            Out[j, tid - 128] = h[i]
            if j < 3 or c == 0:
                T.ptx["bar.arrive"](2 - c, 256)
"""
FIRST = 'T.ptx["bar.arrive"](1, 256)'
UPDATE = "h[i] = h[i] * 2 + c"


def turns(tmp_path, first=FIRST, update=UPDATE):
    return define(TURNS.replace("FIRST", first).replace("UPDATE", update), tmp_path, "turns")


def run_turns(kernel):
    a = np.arange(128, dtype=np.int32)
    out = np.zeros((4, 256), np.int32)
    tirx.compile(kernel, target="sim")(a, out)
    return a, out


def turns_model(a: np.ndarray) -> np.ndarray:
    """What the turns kernels write: four rounds, warpgroup 1's update then warpgroup 2's."""
    h, want = a.astype(np.int64), np.zeros((4, 256), np.int64)
    for j in range(4):
        for c in range(2):
            h = h * 2 + c
            want[j, 128 * c : 128 * c + 128] = h
    return want


def test_warpgroups_take_turns_inside_one_branch(tmp_path):
    """A branch that holds a bar.sync runs one strand per warpgroup: warpgroup 1 waits at
    barrier 1 while warpgroup 2, in the same branch, goes on to arrive there."""
    a, out = run_turns(turns(tmp_path))
    assert np.array_equal(out, turns_model(a))


def test_a_branch_every_thread_takes_stays_whole(tmp_path):
    """Only a branch that some threads skip is split by warpgroup: in one that every thread
    takes, a cta_sync still finds the whole block."""
    source = """
    @T.function
    def uniform(A: T.Tensor((256,), "int32"), Out: T.Tensor((256,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        s = T.alloc_shared((256,), "int32")
        tid = T.cuda.thread_idx("x")
        if A[0] >= 0:
            s[tid] = A[tid]
            T.cuda.warpgroup_sync(1 + T.cuda.warpgroup_id())
            Out[tid] = s[(tid // 128) * 128 + (tid + 1) % 128]
            T.cuda.cta_sync()
            s[tid] = 0
    """
    a, out = np.arange(256, dtype=np.int32), np.zeros(256, np.int32)
    tirx.compile(define(source, tmp_path, "uniform"), target="sim")(a, out)
    t = np.arange(256)
    assert np.array_equal(out, a[(t // 128) * 128 + (t + 1) % 128])


def test_a_turn_never_given_is_a_deadlock(tmp_path):
    with pytest.raises(SimulationError, match="deadlock") as info:
        run_turns(turns(tmp_path, first="pass"))
    assert "waits at barrier 1, where" in str(info.value)


def test_a_turn_handed_over_before_the_update_is_a_race(tmp_path):
    early = 'T.ptx["bar.arrive"](2 - c, 256)\n            h[i] = h[i] * 2 + c'
    source = TURNS.replace("FIRST", FIRST).replace("UPDATE", early)
    source = source.replace(
        '            if j < 3 or c == 0:\n                T.ptx["bar.arrive"](2 - c, 256)\n', ""
    )
    with pytest.raises(SimulationError, match="shared-memory race"):
        run_turns(define(source, tmp_path, "turns"))


def test_a_count_never_reached_is_a_deadlock_at_the_wait(tmp_path):
    with pytest.raises(SimulationError, match="deadlock") as info:
        run_sim(handoff(tmp_path, producer="pass"))
    msg = str(info.value)
    assert "waits at barrier 1, where 4 of the 8 warps of 256 threads have arrived" in msg
    assert caret_line(msg) == SYNC and "named barrier completes" in msg


def test_another_barrier_number_is_a_deadlock(tmp_path):
    with pytest.raises(SimulationError, match="deadlock"):
        run_sim(handoff(tmp_path, producer='T.ptx["bar.arrive"](2, 256)'))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ('T.ptx["bar.sync"](16, 256)', "barrier 16 does not exist"),
        ('T.ptx["bar.sync"](1, 100)', "not a multiple of 32"),
        ('T.ptx["bar.sync"](0, 256)', "barrier 0 is the one T.cuda.cta_sync"),
        ('T.ptx["bar.arrive"](1)', "takes two operands"),
        ('T.ptx["bar.sync"](1.0, 256)', "is a float32 value"),
    ],
)
def test_compile_time_operands_are_checked_at_the_users_line(tmp_path, call, message):
    with pytest.raises(ContractError, match=message) as info:
        tirx.compile(handoff(tmp_path, consumer=call), target="sim")
    assert caret_line(str(info.value)).startswith("T.ptx[")


def test_warpgroup_sync_takes_one_operand(tmp_path):
    with pytest.raises(TirxSyntaxError, match="takes one operand"):
        handoff(tmp_path, consumer="T.cuda.warpgroup_sync(1, 128)")


@pytest.mark.parametrize(
    ("consumer", "message"),
    [
        ('T.ptx["bar.sync"](wg + 15, 256)', "barrier 16 does not exist"),
        ('T.ptx["bar.sync"](1, 256 + 256 * wg)', "waits for 512 threads, but the block has 256"),
        ('T.ptx["bar.sync"](wg - 1, 256)', "barrier 0 is the one"),
        ('T.ptx["bar.sync"](1 + tid % 2, 256)', "name different values of the barrier"),
        ('T.ptx["bar.sync"](1, 32 * (wg + 1) + 96)', "in use for 256 threads"),
    ],
)
def test_runtime_operands_are_checked_by_the_simulator(tmp_path, consumer, message):
    with pytest.raises(SimulationError, match=message):
        run_sim(handoff(tmp_path, consumer=consumer))


def test_a_warp_that_reaches_it_in_part_is_a_fault(tmp_path):
    consumer = f"if tid % 32 < 16:\n            {SYNC}"
    with pytest.raises(SimulationError, match="reached by 16 of 32 threads of warp 4"):
        run_sim(handoff(tmp_path, consumer=consumer))


@pytest.mark.parametrize("case", NAMED_BARRIER_CASES, ids=lambda c: c.name)
def test_the_parity_kernels_verdicts_on_the_simulator(case):
    """What tests/test_sanitizer_parity.py holds the sanitizer to: each plant a race, the twin
    clean with the answer right."""
    inputs = case.inputs()
    if case.fault:
        with pytest.raises(SimulationError, match=case.kind.pattern):
            run(case.build(), inputs)
        return
    run(case.build(), inputs)
    a, out = inputs
    assert np.array_equal(out, (a * 3)[::-1])


@pytest.mark.gpu
def test_the_gpu_equals_the_simulator(tmp_path):
    kernels = [
        (handoff(tmp_path), torch.arange(128, dtype=torch.float32), torch.float32),
        (
            define(PER_WARPGROUP.replace("MEET", "T.cuda.warpgroup_sync(1 + wg)"), tmp_path,
                   "rotate"),
            torch.arange(384, dtype=torch.int32) * 7 - 100,
            torch.int32,
        ),
    ]  # fmt: skip
    for kernel, a, dtype in kernels:
        sim_out = torch.zeros(a.numel(), dtype=dtype)
        tirx.compile(kernel, target="sim")(a, sim_out)
        gpu_out = torch.zeros(a.numel(), dtype=dtype, device="cuda")
        tirx.compile(kernel, target="cuda")(a.cuda(), gpu_out)
        torch.cuda.synchronize()
        assert torch.equal(gpu_out.cpu(), sim_out)


@pytest.mark.gpu
def test_the_gpu_takes_the_same_turns(tmp_path):
    kernel = turns(tmp_path)
    a, sim_out = run_turns(kernel)
    gpu_out = torch.zeros(4, 256, dtype=torch.int32, device="cuda")
    tirx.compile(kernel, target="cuda")(torch.from_numpy(a).cuda(), gpu_out)
    torch.cuda.synchronize()
    assert np.array_equal(gpu_out.cpu().numpy(), sim_out)
