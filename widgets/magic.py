"""``%%tirx``: a notebook cell as a compiled, inspectable, runnable kernel.

``%load_ext tirx`` calls :func:`load_ipython_extension`. The cell's text is registered in
:mod:`linecache` under its own name (``<tirx-cell-N>``, N the prompt's execution count),
compiled with that name and executed in the user namespace, so ``@T.function`` reads the kernel
from the cell text itself and every error or traceback quotes the cell's own lines. Line numbers
are the cell's as the notebook shows them (the ``%%tirx`` line is line 1), and errors name the
cell as IPython does, ``Cell In[N]``. Errors show compactly (message, the line, a caret, a
hint) instead of a long traceback.

``--check`` follows ``tirx run``'s rule (tirx/cli_run.py): the reference is evaluated over the
arguments as they were before the run, and a copy of it is kept, so a kernel that updates an
argument in place is checked against what it should have made of the old value.
"""

from __future__ import annotations

import argparse
import ast
import linecache
import sys
import time
import traceback

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

import tirx
from tirx.errors import TirxError, label_source, source_label

from .capture import c_stdout
from .cellerror import CellError
from .panel import KernelPanel, RunReport

__all__ = ["TirxMagics", "CellError", "load_ipython_extension", "register_cell", "prelude"]

DEFAULT_SECTIONS = ("cuda", "ptx", "sass", "ir", "resources")
# the simulator profile's per-line metrics (docs/profiling.md), for --heat
HEAT_METRICS = ("instructions", "sectors", "excess_sectors", "coalescing", "wavefronts",
                "conflicts", "global_bytes", "shared_bytes")  # fmt: skip
ALL_SECTIONS = ("cuda", "ptx", "sass", "ir", "lowered", "resources")


def register_cell(text: str, count: int | None = None) -> str:
    """Put the body ``text`` of a ``%%tirx`` cell into linecache under a fresh name for the
    cell with execution count ``count`` and return the name. Line 1 is the magic's own line
    (kept blank: the text stays Python), so the body's lines have the numbers the notebook
    shows; errors call the cell ``Cell In[count]``."""
    stem = f"<tirx-cell-{count if count is not None else 0}"
    name, again = f"{stem}>", 1
    while name in linecache.cache:  # a count seen before (a cell run without history, a restart)
        again += 1
        name = f"{stem}.{again}>"
    lines = ["\n", *text.splitlines(keepends=True)]
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[name] = (len(text) + 1, None, lines, name)
    if count is not None:
        label_source(name, f"Cell In[{count}]")
    return name


def _prompt_count(shell, cell: str) -> int | None:
    """The number the prompt shows for the running cell, ``In [4]``: the one its input was
    stored under in the history (IPython 8 moves ``execution_count`` on after a cell, 9
    before, so that attribute alone is off by one in one of them). A cell run without history
    is named with the current count, as IPython names such cells itself."""
    stored = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if stored and "%%tirx" in stored[-1] and stored[-1].rstrip().endswith(cell.rstrip()):
        return len(stored) - 1
    return getattr(shell, "execution_count", None)


def prelude() -> dict:
    """The names a ``%%tirx`` cell can use without importing them."""
    import numpy as np
    import torch

    import tirx.layout as layout

    names = {name: getattr(layout, name) for name in layout.__all__}
    names.update(tirx=tirx, T=tirx.T, torch=torch, np=np)
    return names


def _is_kernel(obj) -> bool:
    return isinstance(obj, tirx.Kernel)


def _compact(err: BaseException, filename: str) -> str:
    """A short report: TirxErrors render themselves; Python errors keep only the cell's frames."""
    if isinstance(err, TirxError):
        return f"{type(err).__name__}: {err}"
    if isinstance(err, SyntaxError) and err.filename == filename:
        caret = " " * max(
            (err.offset or 1) - 1 - (len(err.text or "") - len((err.text or "").lstrip())), 0
        )
        return (
            f"SyntaxError: {err.msg}\n  {source_label(filename)}, line {err.lineno}\n"
            f"    {(err.text or '').strip()}\n    {caret}^"
        )
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == filename]
    lines = [f"{type(err).__name__}: {err}"]
    for f in frames:
        lines.append(f"  {source_label(f.filename)}, line {f.lineno}")
        if f.line:
            lines.append(f"    {f.line.strip()}")
    return "\n".join(lines)


def _unquote(text):
    """IPython's argument splitter keeps quotes around a value; drop one matching pair."""
    if text and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _tolerance(text: str) -> float:
    """An argparse type for --atol/--rtol: a finite number >= 0 (as ``tirx run`` asks)."""
    text = _unquote(text)
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number >= 0")
    return value


@magics_class
class TirxMagics(Magics):
    """The ``%%tirx`` cell magic."""

    @magic_arguments()
    @argument("-t", "--target", default="auto", help="where to run: auto (GPU if visible, "
              "else simulator), cuda or sim")  # fmt: skip
    @argument("-a", "--arch", default=None, help="CUDA architecture for the code, e.g. sm_90")
    @argument("-s", "--sections", default=",".join(DEFAULT_SECTIONS),
              help="comma list of cuda, ptx, sass, ir, lowered, resources; or all / none")  # fmt: skip
    @argument("-k", "--kernel", default=None, help="only this kernel of the cell")
    @argument("--run", default=None, metavar="ARGS",
              help="run the kernel on these arguments (a Python expression)")  # fmt: skip
    @argument("--check", default=None, metavar="EXPR",
              help="compare the output with this torch expression (needs --run)")  # fmt: skip
    @argument("--out", default=None, metavar="EXPR", help="the output to compare "
              "(default: the last argument)")  # fmt: skip
    @argument("--atol", type=_tolerance, default=1e-3, help="absolute tolerance of --check")
    @argument("--rtol", type=_tolerance, default=1e-3, help="relative tolerance of --check")
    @argument("--profile", action="store_true", help="profile the run (needs --run): on the "
              "simulator per source line, shown as a heat column beside the kernel's Python; "
              "on the GPU with Nsight Compute (ncu), a table and a roofline")  # fmt: skip
    @argument("--heat", default=None, metavar="METRIC", help="what the heat column of "
              "--profile shows: " + ", ".join(HEAT_METRICS) + " (default: instructions)")  # fmt: skip
    @argument("-q", "--quiet", action="store_true", help="no panel")
    @cell_magic
    def tirx(self, line, cell):
        """Compile the tirx kernels of this cell, show a panel per kernel, optionally run one.

        The cell is ordinary tirx code: T, S, R, TileLayout, ComposeLayout, the axes (laneid,
        warpid, m, ...), tirx, torch and np are available without imports. Example::

            %%tirx --run "a, b, out" --check "a.float() @ b.float().T"
            %%tirx --run "a, b, out" --profile --heat conflicts
        """
        opts = self._options(line)
        ns = self.shell.user_ns
        for name, value in prelude().items():
            ns.setdefault(name, value)
        filename = register_cell(cell, _prompt_count(self.shell, cell))
        try:
            code = compile("\n" + cell, filename, "exec")  # line 1 is the %%tirx line
            exec(code, ns)  # noqa: S102 - the user's own cell
        except Exception as err:
            raise CellError(_compact(err, filename), err) from None
        kernels = self._kernels(cell, ns, opts.kernel)
        if not kernels:
            ns["_tirx"] = []
            note = _no_kernel(cell, ns)
            if opts.run:
                raise UsageError(f"%%tirx: --run needs a kernel: {note}")
            print(f"%%tirx: nothing to show: {note}")
            return
        if opts.run and len(kernels) != 1:
            names = ", ".join(k.name for k in kernels)
            raise UsageError(f"%%tirx: --run needs exactly one kernel; the cell defines {names}: "
                             "choose one with -k NAME")  # fmt: skip
        # the arguments and the reference, before anything runs (tirx run's rule)
        inputs = self._inputs(opts, ns) if opts.run else None
        panels = []
        for kernel in kernels:
            panel = self._panel(kernel, opts, filename)
            panels.append(panel)
            panel.heat = opts.heat
            if opts.run:
                try:
                    panel.run, panel.profile = self._run(panel.exe, opts, ns, *inputs)
                except Exception as err:
                    if not opts.quiet:
                        display(panel)
                    if isinstance(err, UsageError):  # --out, read after the run
                        raise
                    raise CellError(_compact(err, filename), err) from None
                if opts.quiet and panel.run.passed is False:  # no panel, but never a silent FAIL
                    print(f"{panel.name}: {panel.run.text()}")
            if not opts.quiet:
                display(panel)
                wrong = getattr(panel.run, "mismatch", None)
                if wrong is not None:  # a failed --check: which elements, as a picture
                    display(wrong)
        ns["_tirx"] = panels

    # ------------------------------------------------------------------ options

    def _options(self, line: str):
        try:
            opts = parse_argstring(self.tirx, line)
        except UsageError as e:
            raise UsageError(f"%%tirx: {e}\n{self._usage()}") from None
        except ValueError as e:  # shlex: "No closing quotation"
            raise UsageError(f"%%tirx: a quote in the options is not closed ({e}): close it\n"
                             f"{self._usage()}") from None  # fmt: skip
        for key in ("target", "arch", "sections", "kernel", "run", "check", "out", "heat"):
            setattr(opts, key, _unquote(getattr(opts, key)))
        if opts.target not in ("auto", "cuda", "sim"):
            raise UsageError(f"%%tirx: unknown target {opts.target!r} (auto, cuda or sim)\n"
                             f"{self._usage()}")  # fmt: skip
        if opts.arch is not None:
            _check_arch(opts.arch)
        words = [w.strip() for w in opts.sections.split(",") if w.strip()]
        if words == ["all"]:
            words = list(ALL_SECTIONS)
        elif words == ["none"]:
            words = []
        bad = [w for w in words if w not in ALL_SECTIONS]
        if bad:
            raise UsageError(f"%%tirx: unknown section {bad[0]!r}; choose from "
                             f"{', '.join(ALL_SECTIONS)}, all or none")  # fmt: skip
        opts.sections = tuple(words)
        if opts.check and not opts.run:
            raise UsageError("%%tirx: --check needs --run ARGS (the inputs to run on)")
        if opts.profile and not opts.run:
            raise UsageError("%%tirx: --profile needs --run ARGS (the inputs to profile)")
        if opts.heat is not None and opts.heat not in HEAT_METRICS:
            raise UsageError(f"%%tirx: unknown --heat metric {opts.heat!r}; choose from "
                             f"{', '.join(HEAT_METRICS)}")  # fmt: skip
        if opts.heat is not None and not opts.profile:
            raise UsageError(f"%%tirx: --heat {opts.heat} colours the profile's heat column: "
                             "add --profile (and --run ARGS)")  # fmt: skip
        opts.heat = opts.heat or HEAT_METRICS[0]
        return opts

    def _usage(self) -> str:
        words = self.tirx.parser.format_usage().split()  # "usage: %tirx [-t TARGET] ..."
        return " ".join(["usage: %%tirx", *words[2:]])

    # ------------------------------------------------------------------ compile

    @staticmethod
    def _kernels(cell: str, ns: dict, only: str | None) -> list:
        names = [n.name for n in ast.parse(cell).body if isinstance(n, ast.FunctionDef)]
        kernels = [ns[n] for n in dict.fromkeys(names) if _is_kernel(ns.get(n))]
        if only is not None:
            kernels = [k for k in kernels if k.name == only]
            if not kernels:
                raise UsageError(f"%%tirx: the cell defines no kernel named {only!r}")
        return kernels

    def _panel(self, kernel, opts, filename) -> KernelPanel:
        cuda_target = "cuda" if opts.arch is None else f"cuda -arch={opts.arch}"
        run_target = {"auto": None, "cuda": cuda_target, "sim": "sim"}[opts.target]
        try:
            exe = tirx.compile(kernel, target=run_target)
        except Exception as err:
            raise CellError(_compact(err, filename), err) from None
        code, code_error = exe, ""
        wants_code = any(s in opts.sections for s in ("cuda", "ptx", "sass", "resources"))
        if exe.target.kind != "cuda" and wants_code:
            try:
                code = tirx.compile(kernel, target=cuda_target)
            except Exception as err:  # NVRTC missing, say: the panel says why
                code, code_error = None, f"{type(err).__name__}: {err}".splitlines()[0]
        return KernelPanel(kernel.name, exe, code, code_error, opts.sections)

    # ------------------------------------------------------------------ run

    @staticmethod
    def _inputs(opts, ns) -> tuple[tuple, object]:
        """``(the --run arguments, a copy of the --check reference or None)``, evaluated before
        the run: the reference sees the arguments as they were, as ``tirx run``'s does."""
        args = _evaluate("--run", opts.run, ns)
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        if not opts.check:
            return args, None
        value = _evaluate("--check", opts.check, ns)
        # a mistake in --out is refused now too; its value is read again after the run
        out = _evaluate("--out", opts.out, ns) if opts.out else args[-1]
        ref = _reference(value, opts.check)
        shape = getattr(out, "shape", None)
        name = _output_name(opts)
        if shape is None:
            where = f"--out {opts.out!r}" if opts.out else "the last --run argument"
            raise UsageError(f"%%tirx: the output to check, {where}, is a {type(out).__name__}, "
                             "not a tensor or array the kernel writes: name one with --out")  # fmt: skip
        if tuple(ref.shape) != tuple(shape):
            raise UsageError(f"%%tirx: --check {opts.check!r} has shape {tuple(ref.shape)}, "
                             f"and the output {name} has shape {tuple(shape)}")  # fmt: skip
        return args, ref

    def _run(self, exe, opts, ns, args, ref):
        """Run (and with --profile profile) the kernel on ``args``: ``(RunReport, profile or
        None)``; with --check the output is compared with ``ref``."""
        device = "cuda" if exe.target.kind == "cuda" else "cpu"
        if device == "cuda" and not tirx.gpu_available():
            raise tirx.LaunchError(
                "no CUDA GPU is visible, so this kernel cannot be launched",
                hint="run it on the CPU simulator with -t sim (or -t auto)",
            )
        moved = [_to_device(a, device) for a in args] if _can_move(device) else list(args)
        profile = None
        t0 = time.perf_counter()
        if device == "cuda":
            import torch

            with c_stdout() as printed:
                exe(*moved)
                torch.cuda.synchronize()
            if printed.text:
                sys.stdout.write(printed.text)
        elif opts.profile:  # on the simulator, the profiled run is the run
            profile = exe.profile(*moved, stdout=sys.stdout)
        else:
            exe(*moved, stdout=sys.stdout)
        ms = (time.perf_counter() - t0) * 1e3
        if opts.profile and device == "cuda":  # Nsight Compute, in a process of its own
            profile = exe.profile(*moved)
        for original, used in zip(args, moved):
            if used is not original:
                _copy_back(original, used)
        where = "the GPU" if device == "cuda" else "the simulator"
        report = RunReport(where, ms)
        if opts.check:
            out = _evaluate("--out", opts.out, ns) if opts.out else args[-1]
            report.max_error, report.passed, report.note = _compare(out, ref, opts.atol, opts.rtol)
            if report.passed is False and report.max_error is not None:  # where it is wrong
                from .mismatch_map import mismatch

                name = _output_name(opts)
                report.mismatch = mismatch(out, ref, opts.atol, opts.rtol, name=name)
        return report, profile


def _output_name(opts) -> str:
    """How messages name the output a check compares: --out's text, else the last --run
    argument's."""
    return opts.out or opts.run.split(",")[-1].strip()


def _evaluate(option: str, text: str, ns: dict):
    """The value of an option's expression; a mistake in it is a UsageError naming it."""
    try:
        return eval(text, ns)  # noqa: S307 - the user's own expression
    except Exception as err:
        detail = err.msg if isinstance(err, SyntaxError) else str(err)
        raise UsageError(f"%%tirx: {option} {text!r}: {type(err).__name__}: {detail}") from None


def _reference(value, text: str):
    """A copy of the --check value as a tensor (the expression may give an argument itself,
    which the kernel then overwrites)."""
    import torch

    try:
        if value is None or isinstance(value, (str, bytes)):
            raise TypeError
        ref = torch.as_tensor(value)
    except Exception:
        raise UsageError(f"%%tirx: --check must give a tensor, an array or a number (got "
                         f"{type(value).__name__} from {text!r})") from None  # fmt: skip
    return ref.detach().clone()


def _check_arch(arch: str) -> None:
    """Refuse ``-a ARCH`` as ``tirx compile --arch`` does: an arch tirx does not take, or one
    this NVRTC cannot compile for (sm_XXa only from sm_90a). Without NVRTC nothing more is
    checked here: the panel says what is missing."""
    if not arch.strip():
        raise UsageError("%%tirx: --arch is empty: name an arch, e.g. -a sm_90")
    if not tirx.Target.is_arch(arch):
        raise UsageError(f"%%tirx: --arch {arch!r} is not a CUDA architecture: write it as "
                         "sm_80, sm_90 or sm_90a")  # fmt: skip
    try:
        target = tirx.Target.parse(f"cuda -arch={arch}")
    except TirxError as e:
        raise UsageError(f"%%tirx: --arch {arch}: {e.message}") from None
    why = target.unsupported()  # as tirx compile --arch refuses it
    if why is not None:
        raise UsageError(f"%%tirx: {why}")


def _no_kernel(cell: str, ns: dict) -> str:
    """Why a cell shows no panel, and what it must hold."""
    bound = []
    for node in ast.parse(cell).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        else:
            targets = [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            bound += [n.id for n in ast.walk(target)
                      if isinstance(n, ast.Name) and _is_kernel(ns.get(n.id))]  # fmt: skip
    text = ("the cell defines no kernel at top level (write one there: @T.function, then "
            "def NAME(...))")  # fmt: skip
    if bound:
        names = list(dict.fromkeys(bound))
        text += (f"; {', '.join(names)} {'is a kernel' if len(names) == 1 else 'are kernels'} "
                 "bound by an assignment, which %%tirx does not show")  # fmt: skip
    return text


def _can_move(device: str) -> bool:
    """Whether torch can put arrays on ``device`` (a CPU-only torch cannot reach a GPU: the
    executable then says what is missing)."""
    if device == "cpu":
        return True
    import torch

    return torch.cuda.is_available()


def _to_device(value, device: str):
    """Arrays on the device the executable runs on: a CPU tensor or numpy array goes to the GPU
    for the cuda target and a CUDA tensor to the CPU for the simulator (copied back after the
    run), so one notebook runs on either machine."""
    kind = type(value).__module__.split(".")[0]
    if kind == "torch" and hasattr(value, "device") and value.device.type != device:
        return value.to(device)
    if kind == "numpy" and device == "cuda" and hasattr(value, "dtype"):
        import torch

        return torch.from_numpy(value).to(device)
    return value


def _copy_back(original, used) -> None:
    if type(original).__module__.split(".")[0] == "numpy":
        original[...] = used.cpu().numpy()
    else:
        original.copy_(used.to(original.device))


def _compare(out, ref, atol: float, rtol: float):
    import torch

    out = torch.as_tensor(out).detach().cpu().double()
    ref = torch.as_tensor(ref).detach().cpu().double()
    if out.shape != ref.shape:
        return None, False, f"shapes differ: out {tuple(out.shape)}, ref {tuple(ref.shape)}"
    err = (out - ref).abs().max().item() if out.numel() else 0.0
    ok = bool(torch.allclose(out, ref, rtol=rtol, atol=atol))
    return err, ok, f"atol {atol:g}, rtol {rtol:g}"


def load_ipython_extension(ipython) -> None:
    """``%load_ext tirx`` (through ``tirx.load_ipython_extension``): register ``%%tirx`` and
    the handler that shows tirx errors from the user's side (:mod:`widgets.errorview`)."""
    from .errorview import install

    ipython.register_magics(TirxMagics)
    install(ipython)
