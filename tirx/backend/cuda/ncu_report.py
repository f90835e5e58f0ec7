"""Nsight Compute's CSV, read: the numbers a kernel author reads first.

``ncu --csv`` prints its "details" page as one row per (profiled launch, metric), with columns
that include ``"ID"``, ``"Kernel Name"``, ``"Block Size"``, ``"Grid Size"``, ``"Metric
Name"``, ``"Metric Unit"`` and ``"Metric Value"`` (which other columns appear depends on the
version: they are found by their header, not their place). Values may carry thousands
separators (``"1,234"``); units are ncu's (``ns``, ``nsecond``, ``us``, ``byte``, ``Kbyte``, ``%``,
``register/thread``, ...), turned into seconds, bytes and plain counts here. Lines that are not
CSV (``==PROF==`` progress, warnings) are skipped.

:class:`NcuProfile` holds one launch's values and names the ones that matter: duration, SM and
tensor-pipe throughput, DRAM and L2 throughput and bytes, achieved occupancy, registers per
thread, local-memory (spill) instructions, shared-memory bank conflicts and wavefronts, global
sectors and requests, and the floating-point work for a roofline.
"""

from __future__ import annotations

import csv
import html
from dataclasses import dataclass, field

from ...errors import TirxError

__all__ = ["NcuProfile", "parse_csv", "to_base", "METRICS", "TENSOR_OPS"]

#: The metrics ``exe.profile`` asks for (ncu names), each with what it says.
METRICS: dict[str, str] = {
    "gpu__time_duration.sum": "kernel duration",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput, % of peak",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active":
        "tensor pipe (mma.sync: HMMA) active, % of peak",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active":
        "tensor pipe (wgmma: GMMA) active, % of peak",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput, % of peak",
    "dram__bytes_read.sum": "DRAM bytes read",
    "dram__bytes_write.sum": "DRAM bytes written",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2 throughput, % of peak",
    "lts__t_bytes.sum": "L2 bytes",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy, %",
    "launch__registers_per_thread": "registers per thread",
    "smsp__sass_inst_executed_op_local_ld.sum": "local-memory loads (spills)",
    "smsp__sass_inst_executed_op_local_st.sum": "local-memory stores (spills)",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "shared load bank conflicts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "shared store bank conflicts",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "shared load wavefronts",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": "shared store wavefronts",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "global load sectors",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "global store sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "global load requests",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "global store requests",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": "FP32 FMA (thread instructions)",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": "FP32 add (thread instructions)",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": "FP32 multiply (thread instructions)",
    "sm__ops_path_tensor_src_fp16_dst_fp16.sum": "tensor ops, f16 -> f16",
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum": "tensor ops, f16 -> f32",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum": "tensor ops, bf16 -> f32",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum": "tensor ops, tf32 -> f32",
}  # fmt: skip
TENSOR_OPS = tuple(k for k in METRICS if k.startswith("sm__ops_path_tensor"))
_FFMA, _FADD, _FMUL = (f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
                       for op in ("ffma", "fadd", "fmul"))  # fmt: skip

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
# times, long and short: Nsight Compute 2025.3.1 on the H200 prints gpu__time_duration in "ns"
# with --print-units base ("us" with auto), not "nsecond"
_TIME = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
         "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}  # fmt: skip


def to_base(value: str, unit: str) -> tuple[float | None, str]:
    """``value`` (as ncu prints it) in base units, and the base unit: seconds for times,
    bytes for sizes (``Kbyte`` is 1000 bytes, ``KiB`` 1024), bytes per second for rates;
    other units (``%``, ``register/thread``, ``sector``, ``inst``) as they are. None for a
    value that is not a number (``n/a``)."""
    text = value.strip().replace(",", "")
    try:
        number = float(text)
    except ValueError:
        return None, unit
    unit = unit.strip()
    per = ""
    head, slash, tail = unit.partition("/")
    if slash and tail in _TIME:  # a rate: Tbyte/second, byte/s
        unit = head
        number /= _TIME[tail]
        per = "/s"
    if unit in _TIME:
        return number * _TIME[unit], "s" + per
    if unit in _BINARY:
        return number * _BINARY[unit], "B" + per
    if unit.endswith("byte") and unit[:-4] in _PREFIX:
        return number * _PREFIX[unit[:-4]], "B" + per
    return number, unit + per


def parse_csv(text: str) -> list[NcuProfile]:
    """The launches in ``ncu --csv`` output ``text`` (in order), one :class:`NcuProfile`
    each. TirxError when the text holds no metric table."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    header = next((r for r in rows if "Metric Name" in r and "Metric Value" in r), None)
    if header is None:
        raise TirxError(
            "Nsight Compute printed no metric table (no CSV header with 'Metric Name')",
            hint="see the output of ncu above; was a kernel launched and profiled?",
        )
    col = {name: i for i, name in enumerate(header)}
    launches: dict[str, NcuProfile] = {}
    for row in rows:
        if row is header or len(row) != len(header) or row == header:
            continue
        launch = row[col["ID"]] if "ID" in col else "0"
        prof = launches.get(launch)
        if prof is None:
            info = {k: row[col[k]] for k in ("Block Size", "Grid Size", "Device", "CC")
                    if k in col}  # fmt: skip
            name = row[col["Kernel Name"]] if "Kernel Name" in col else "?"
            prof = launches[launch] = NcuProfile(name, info)
        unit = row[col["Metric Unit"]] if "Metric Unit" in col else ""
        value, base = to_base(row[col["Metric Value"]], unit)
        metric = row[col["Metric Name"]]
        if value is not None:
            prof.values[metric] = value
            prof.units[metric] = base
    return list(launches.values())


def _fmt(value, digits=3) -> str:
    if value is None:
        return "—"
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.{digits}g}"


def _bytes(value) -> str:
    if value is None:
        return "—"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{int(value)} B"


def _rate(value) -> str:
    if value is None:
        return "—"
    for unit, scale in (("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} FLOP/s"


@dataclass
class NcuProfile:
    """One kernel launch as Nsight Compute measured it: ``values`` by ncu metric name in base
    units (seconds, bytes, counts, percent), ``info`` the launch's grid, block and device as
    ncu printed them, ``missing`` the metrics this ncu could not collect, ``flops`` the
    floating-point operations given by the caller (else counted from ncu's FP32 and tensor
    counters)."""

    kernel: str
    info: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)
    missing: tuple = ()
    flops_given: float | None = None

    def get(self, metric: str) -> float | None:
        return self.values.get(metric)

    def _sum(self, *metrics) -> float | None:
        found = [self.values[m] for m in metrics if m in self.values]
        return sum(found) if found else None

    # ------------------------------------------------------------------ the numbers

    @property
    def duration_us(self) -> float | None:
        s = self.get("gpu__time_duration.sum")
        return None if s is None else s * 1e6

    @property
    def sm_throughput(self) -> float | None:
        return self.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")

    @property
    def tensor_pipe(self) -> float | None:
        """The busier tensor pipe (mma.sync's HMMA or wgmma's GMMA), % of its peak."""
        found = [self.values[m] for m in METRICS if "pipe_tensor" in m and m in self.values]
        return max(found) if found else None

    @property
    def dram_throughput(self) -> float | None:
        return self.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")

    @property
    def dram_bytes(self) -> float | None:
        return self._sum("dram__bytes_read.sum", "dram__bytes_write.sum")

    @property
    def l2_throughput(self) -> float | None:
        return self.get("lts__throughput.avg.pct_of_peak_sustained_elapsed")

    @property
    def l2_bytes(self) -> float | None:
        return self.get("lts__t_bytes.sum")

    @property
    def occupancy(self) -> float | None:
        return self.get("sm__warps_active.avg.pct_of_peak_sustained_active")

    @property
    def registers(self) -> int | None:
        r = self.get("launch__registers_per_thread")
        return None if r is None else int(r)

    @property
    def spills(self) -> tuple[float | None, float | None]:
        """Local-memory load and store instructions (warp-level): spills, or local arrays
        indexed at run time."""
        return (self.get("smsp__sass_inst_executed_op_local_ld.sum"),
                self.get("smsp__sass_inst_executed_op_local_st.sum"))  # fmt: skip

    @property
    def bank_conflicts(self) -> tuple[float | None, float | None]:
        """Shared-memory bank conflicts of loads and of stores (replayed wavefronts)."""
        return (self.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
                self.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"))  # fmt: skip

    @property
    def flops(self) -> float | None:
        """Floating-point operations: the caller's count when given, else ncu's (an FP32 FMA
        is 2; the tensor counters count operations)."""
        if self.flops_given is not None:
            return self.flops_given
        parts = [2 * self.values[_FFMA]] if _FFMA in self.values else []
        parts += [self.values[m] for m in (_FADD, _FMUL, *TENSOR_OPS) if m in self.values]
        return sum(parts) if parts else None

    @property
    def flop_rate(self) -> float | None:
        """FLOP/s over the kernel's duration."""
        f, d = self.flops, self.get("gpu__time_duration.sum")
        return f / d if f is not None and d else None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity: FLOPs per byte of DRAM traffic."""
        f, b = self.flops, self.dram_bytes
        return f / b if f is not None and b else None

    # ------------------------------------------------------------------ faces

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, value, meaning) of the table."""
        pct = lambda v: "—" if v is None else f"{v:.1f} %"  # noqa: E731
        ld, st = self.spills
        cld, cst = self.bank_conflicts
        rate = self.flop_rate
        return [
            ("duration", "—" if self.duration_us is None else f"{self.duration_us:.2f} µs",
             "gpu__time_duration (clocks not locked)"),
            ("SM throughput", pct(self.sm_throughput), "busiest SM unit, % of its peak"),
            ("tensor pipe", pct(self.tensor_pipe), "tensor-core pipe active, % of peak"),
            ("DRAM throughput", pct(self.dram_throughput), f"{_bytes(self.dram_bytes)} moved"),
            ("L2 throughput", pct(self.l2_throughput), f"{_bytes(self.l2_bytes)} through L2"),
            ("achieved occupancy", pct(self.occupancy), "active warps / maximum per SM"),
            ("registers", _fmt(self.registers), "per thread"),
            ("spills", f"{_fmt(ld)} ld / {_fmt(st)} st", "local-memory instructions"),
            ("bank conflicts", f"{_fmt(cld)} ld / {_fmt(cst)} st", "shared-memory replays"),
            ("FLOP/s", _rate(rate),
             f"{_fmt(self.flops)} FLOPs" + (" (given)" if self.flops_given is not None else "")),
        ]  # fmt: skip

    def header(self) -> str:
        where = ", ".join(f"{k.lower()} {v}" for k, v in self.info.items())
        return f"ncu profile of '{self.kernel}'" + (f" ({where})" if where else "")

    def table(self) -> str:
        out = [self.header()]
        out += [f"  {what:<19} {value:>18}   {meaning}" for what, value, meaning in self.rows()]
        if self.missing:
            out.append(f"  not collected by this ncu: {', '.join(self.missing)}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        e = html.escape
        rows = "".join(
            f"<tr><td>{e(a)}</td><td style='text-align:right'><b>{e(b)}</b></td>"
            f"<td>{e(c)}</td></tr>"
            for a, b, c in self.rows()
        )
        note = (f"<div>not collected by this ncu: {e(', '.join(self.missing))}</div>"
                if self.missing else "")  # fmt: skip
        return (
            f'<div class="tirx-ncu"><div>{e(self.header())}</div>'
            f'<table style="font-size:12px">{rows}</table>{note}</div>'
        )
