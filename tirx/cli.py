"""``tirx`` on the command line (also ``python -m tirx``).

    tirx compile FILE[:KERNEL] [--arch sm_90] [--emit cuda|ptx|sass|ir|lowered] [-o OUT]
    tirx compile FILE[:KERNEL] [--arch sm_90] --out KERNEL.tirx
    tirx run FILE[:KERNEL] --sim --check "Out = A.float() @ B.float().T"
    tirx layout "S[(4,8,4):(1,4@laneid,1@laneid)]" --shape 4,8,4 [--svg OUT] [--png OUT]
    tirx demo [--target cuda|sim]

``FILE`` is a Python file (or an importable module, ``tirx.examples.warp_matmul``) that defines
``@T.function`` kernels; ``:KERNEL`` names one of them, or is an expression in the file's
namespace that makes one (``gemm.py:make_gemm(128, 128, 128)``). Without it the file must
define exactly one kernel. tirx/cli_load.py finds and runs the file (a file inside a package
is imported by its dotted name, so its relative imports work).

Exit codes: 0 done (and every check passed); 1 a mistake in the kernel or in what it computes
(a :class:`~tirx.TirxError`, printed with its caret and hint; a Python error in the file,
printed with the file's own lines; a failed ``--check``); 2 a mistake on the command line
(an unknown option, no such file or kernel, an unknown arch, an argument, expression or
layout that does not fit). ``tirx layout`` shows at most MAX_CELLS elements.
No mistake of the user's ends in a traceback; ``--traceback`` shows the full one anyway.

Nothing here runs at import; torch and the notebook layer load only in the commands that
need them (``layout`` draws with the ``widgets`` package's functions).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from pathlib import Path

from .cli_load import UsageError, UserCodeError, load_kernel, on_gpu
from .errors import TirxError

__all__ = ["main", "load_kernel", "UsageError"]

EMITS = ("cuda", "ptx", "sass", "ir", "lowered")


def _target(args, default: str | None):
    """The tirx.Target from --target/--arch (--sim), checked as a usage error."""
    import tirx

    text = getattr(args, "target", None) or default
    if getattr(args, "sim", False):
        text = "sim"
    if args.arch is not None:
        if not args.arch.strip():
            raise UsageError("--arch is empty: name an arch, e.g. --arch sm_90")
        from .target import is_arch

        if not is_arch(args.arch):
            raise UsageError(f"--arch {args.arch!r} is not a CUDA architecture: write it as "
                             "sm_80, sm_90 or sm_90a")  # fmt: skip
        if text not in (None, "cuda"):
            if str(text).startswith("cuda"):
                raise UsageError(f"--arch {args.arch} and the target {text!r} both say which "
                                 "arch: give one of them")  # fmt: skip
            raise UsageError(f"--arch {args.arch} goes with the cuda target, not {text!r}")
        text = f"cuda -arch={args.arch}"
    try:
        target = tirx.Target.parse(text)
    except TirxError as e:
        raise _usage(e) from None
    _check_arch(target)
    return target


def _check_arch(target) -> None:
    """Refuse a named arch that this NVRTC cannot compile for, as a command-line mistake
    (else the compile fails later, exit 1, as if the kernel were wrong)."""
    why = target.unsupported() if on_gpu(target) else None
    if why is not None:
        raise UsageError(why)


# ------------------------------------------------------------------------ the commands


def cmd_compile(args) -> int:
    import tirx

    if args.out is not None:
        return save_compiled(args)
    args.emit = args.emit or "cuda"
    target = _target(args, "cuda")
    if args.emit in ("cuda", "ptx", "sass") and not on_gpu(target):
        raise UsageError(f"--emit {args.emit} needs the cuda target (NVRTC compiles without a GPU)")
    kernel = load_kernel(args.kernel)
    _not_the_source(args.output, "-o", args.kernel, kernel)
    exe = tirx.compile(kernel, target)
    if args.emit == "ir":
        text = exe.script()
    elif args.emit == "lowered":
        text = exe.script(lowered=True)
    else:
        text = {"cuda": exe.source, "ptx": exe.ptx, "sass": exe.sass}[args.emit]
        if text is None:
            raise TirxError(
                "no SASS: the disassembler (nvdisasm) is not installed",
                hint="pip install 'tirx[sass]', or --emit ptx",
            )
    if args.output not in (None, "-"):
        _writable(args.output, "-o")
    _write(text, args.output)
    if args.stats:
        print(compile_summary(exe), file=sys.stderr)
    _wrote(args.output, f"{args.emit}, {len(text.splitlines())} lines")
    return 0


def save_compiled(args) -> int:
    """``tirx compile FILE --out FILE.tirx``: the compiled kernel as a saved file
    (tirx/artifact.py) for ``tirx.load``, instead of printing what ``--emit`` names."""
    import tirx

    if args.output is not None or args.emit is not None:
        given = "-o" if args.output is not None else "--emit"
        raise UsageError(f"--out saves the compiled kernel; {given} prints what the compiler "
                         "made: give one of them")  # fmt: skip
    _writable(args.out, "--out")
    target = _target(args, "cuda")
    if not on_gpu(target):
        raise UsageError("--out saves GPU code: it needs the cuda target (--arch sm_90)")
    kernel = load_kernel(args.kernel)
    _not_the_source(args.out, "--out", args.kernel, kernel)
    exe = tirx.compile(kernel, target)
    path = exe.save(args.out)
    print(f"{path}: {exe.name} for {exe.arch}, {path.stat().st_size} bytes")
    if args.stats:
        print(compile_summary(exe), file=sys.stderr)
    return 0


def _writable(path: str, option: str) -> None:
    """Refuse, as a command-line mistake, an output path that cannot be a file: empty, a
    folder, or in a folder that does not exist."""
    if not path:
        raise UsageError(f"{option} is empty: name the file to write")
    if os.path.isdir(path):
        raise UsageError(f"cannot write {path}: it is a folder (name a file in it)")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {path}: there is no folder {folder}")


def _not_the_source(output: str | None, option: str, ref: str, kernel) -> None:
    """Refuse to write the output over the Python file the kernel came from (the file named on
    the command line, or the kernel's own): the user's source would be lost."""
    if output in (None, "-"):
        return
    from .cli_load import split_ref

    code = getattr(getattr(kernel, "pyfunc", None), "__code__", None)
    sources = {split_ref(ref)[0], code.co_filename if code is not None else None}
    for source in sources - {None}:
        try:
            same = os.path.samefile(output, source)
        except OSError:
            continue
        if same:
            raise UsageError(f"{option} {output} is the kernel's own source file: writing there "
                             "would replace your code; name another file")  # fmt: skip


def compile_summary(exe) -> str:
    """One line: target, cache, the stage timings (which add up to the compile call's wall
    time; parse is @T.function's, before the call) and the resources."""
    built = getattr(exe, "arch", None)
    target = str(exe.target)
    if built and getattr(exe.target, "arch", built) != built:  # sm_90 asked, sm_90a built
        target += f" (built for {built})"
    parts = [f"{exe.name}: {target}, cache {exe.cache}"]
    parts.append(" · ".join(f"{k} {v:.2f} ms" for k, v in exe.timings.items()))
    call = sum(v for k, v in exe.timings.items() if k != "parse")
    parts.append(f"compile {call:.2f} ms")
    stats = exe.stats
    if "registers" in stats:
        parts.append(f"{stats['registers']} registers, {stats.get('spill_stores')} spill stores")
    parts.append(f"{stats['shared_bytes']} shared bytes")
    return "; ".join(parts)


def _write(text: str, output: str | None) -> None:
    text = text if text.endswith("\n") else text + "\n"
    if output in (None, "-"):
        sys.stdout.write(text)
        return
    try:
        Path(output).write_text(text)
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror}") from None


def cmd_run(args) -> int:
    from . import cli_run

    return cli_run.run(args, load_kernel, _target)


# What `tirx layout` draws at most: the table and the SVG take ~30 us per element (a 128 x 128
# tile in half a second), a matplotlib PNG ~1.5 ms (64 x 64 in about 7 s). A larger shape is
# refused at once rather than left running for minutes.
MAX_CELLS = 16384
MAX_PNG_CELLS = 4096


def cmd_layout(args) -> int:
    shape = _shape(args.shape)
    for path, option in ((args.svg, "--svg"), (args.png, "--png")):
        if path is not None:  # before anything is printed
            _writable(path, option)
    # The drawing functions live in the notebook layer; the command line sits above both
    # layers and loads it here only (tests/test_architecture.py names this exception).
    try:
        from widgets import show_layout
        from widgets.model import parse_layout
    except ImportError as e:
        raise TirxError(
            f"tirx layout draws with the notebook layer, which does not import here ({e})",
            hint="install tirx with its widgets package: pip install -e .",
        ) from None

    try:  # every input of this command is the command line's: a refusal is a usage error
        layout = parse_layout(args.spec)
        cells = layout.size()
        if shape and _product(shape) != cells:
            raise UsageError(f"--shape {args.shape} has {_product(shape)} elements but the layout "
                             f"has {cells}: give a shape whose product is {cells}")  # fmt: skip
        _bound(cells, args.png)
        view = show_layout(layout, shape, lane=args.lane, color_by=args.color_by,
                           dtype_bytes=args.dtype_bytes)  # fmt: skip
    except TirxError as e:
        raise _usage(e) from None
    if args.svg:  # the pictures first: a reader that stops early (`| head`) cuts the table only
        _write(view.svg(), args.svg)
    if args.png:
        try:
            view.figure().savefig(args.png, dpi=args.dpi, bbox_inches="tight", format="png")
        except OSError as e:
            raise UsageError(f"cannot write {args.png}: {e.strerror}") from None
    print(view)
    if args.svg:
        _wrote(args.svg, f"SVG, {cells} cells")
    if args.png:
        _wrote(args.png, f"PNG, {cells} cells at {args.dpi} dpi")
    return 0


def _product(shape) -> int:
    out = 1
    for n in shape:
        out *= n
    return out


def _bound(cells: int, png: str | None) -> None:
    """Refuse a layout too large to print or draw in reasonable time."""
    if cells > MAX_CELLS:
        raise UsageError(f"the layout covers {cells} elements; tirx layout shows at most "
                         f"{MAX_CELLS} (128 x 128): show one tile of it, a layout over fewer "
                         "elements")  # fmt: skip
    if png and cells > MAX_PNG_CELLS:
        raise UsageError(f"the layout covers {cells} elements; --png draws at most "
                         f"{MAX_PNG_CELLS} (64 x 64, about 7 s): use --svg for larger ones")  # fmt: skip


def _wrote(path: str, what: str) -> None:
    """Say on stderr what a command wrote (stdout keeps the table or the code)."""
    if path in ("-", None):
        return
    try:
        size = f", {os.path.getsize(path) / 1000:.1f} kB"
    except OSError:
        size = ""
    print(f"wrote {path} ({what}{size})", file=sys.stderr)


def _shape(text: str | None):
    if text is None:
        return None
    words = [w for w in text.replace("(", " ").replace(")", " ").replace(",", " ").split()]
    if not words or not all(w.isdigit() and int(w) > 0 for w in words):
        raise UsageError(f"--shape {text!r}: the extents must be positive integers; write "
                         "them like 4,8,4")  # fmt: skip
    return tuple(int(w) for w in words)


# `tirx layout`'s options whose value may start with "-": argparse takes "-4,-8,4" for an
# option (only a plain number like -4 passes as a value), so the value is glued to its option
# (--shape=-4,-8,4) and reaches _shape, which refuses it in tirx's words.
VALUE_OPTIONS = ("--shape", "-s")


def _glue_dashed_values(argv: list[str]) -> list[str]:
    """``argv`` with ``tirx layout``'s ``--shape -4,8`` written ``--shape=-4,8`` (``-s -4,8``:
    ``-s-4,8``); the other commands' words as they are."""
    command = next((i for i, word in enumerate(argv) if not word.startswith("-")), len(argv))
    if argv[command : command + 1] != ["layout"]:
        return list(argv)
    out: list[str] = argv[: command + 1]
    words = iter(argv[command + 1 :])
    for word in words:
        if word == "--":
            out += [word, *words]
            break
        if word in VALUE_OPTIONS:
            value = next(words, None)
            if value is not None and value[:1] == "-" and value[1:2] in "0123456789(":
                out.append(f"{word}={value}" if word.startswith("--") else word + value)
                continue
            out += [word] if value is None else [word, value]
            continue
        out.append(word)
    return out


# ------------------------------------------------------------------------ the parser


def _int_in(low: int, high: int):
    """An argparse type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    return parse


def _tolerance(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number >= 0")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own mistakes: one line, then where to look
        self.exit(2, f"{self.prog}: error: {message}\n(see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from .version import __version__

    top = _Parser(prog="tirx", description="Compile, run and check TIRx kernels; draw layouts.",
                  epilog="exit status: 0 ok, 1 an error in the kernel or a failed check, "
                  "2 a command-line mistake")  # fmt: skip
    top.add_argument("--version", action="version", version=f"tirx {__version__}")
    top.add_argument("--traceback", action="store_true", help="show full Python tracebacks")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    ref_help = "a Python file or module with @T.function kernels; :KERNEL picks one"

    c = sub.add_parser("compile", help="print a kernel's CUDA, PTX, SASS or IR",
                       description="Compile a kernel and print what the compiler made of it.")  # fmt: skip
    c.add_argument("kernel", metavar="FILE[:KERNEL]", help=ref_help)
    c.add_argument("-t", "--target", default=None,
                   help='"cuda" (default), "cuda -arch=sm_90" or "sim" (ir/lowered only)')  # fmt: skip
    c.add_argument("-a", "--arch", default=None, help="CUDA architecture, e.g. sm_90 "
                   "(default: the GPU's, else sm_80)")  # fmt: skip
    c.add_argument("-e", "--emit", choices=EMITS, default=None, help="what to print (default cuda)")
    c.add_argument("-o", "--output", metavar="OUT", help="write to this file instead of stdout")
    c.add_argument("--out", metavar="FILE.tirx", help="save the compiled kernel (cubin, PTX, "
                   "signature, launch) for tirx.load, instead of printing")  # fmt: skip
    c.add_argument("--stats", action="store_true",
                   help="print timings and resources on stderr")  # fmt: skip
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run a kernel on random or given inputs and check it",
                       description="Run a kernel and compare its output with a torch expression. "
                       "Inputs are random (seeded) unless --arg gives them; the names in a "
                       "--check expression are the arguments as they were before the run, "
                       "with torch and np.",
                       epilog='example: tirx run tirx/examples/warp_matmul.py --sim '
                       '--check "Out = A.float() @ B.float().T"')  # fmt: skip
    r.add_argument("kernel", metavar="FILE[:KERNEL]", help=ref_help)
    where = r.add_mutually_exclusive_group()
    where.add_argument("--sim", action="store_true", help="run on the CPU simulator")
    where.add_argument("-t", "--target", default=None,
                       help='"cuda", "sim" (default: the GPU when visible, else the simulator)')  # fmt: skip
    r.add_argument("-a", "--arch", default=None, help="CUDA architecture, e.g. sm_90")
    r.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter's value: a Python expression (torch, np) or a .npy/.pt file")  # fmt: skip
    r.add_argument("--check", action="append", default=[], metavar="[NAME =] EXPR",
                   help="compare parameter NAME (default: the last) after the run with EXPR")  # fmt: skip
    r.add_argument("--atol", type=_tolerance, default=1e-3,
                   help="absolute tolerance (default 1e-3)")  # fmt: skip
    r.add_argument("--rtol", type=_tolerance, default=1e-3,
                   help="relative tolerance (default 1e-3)")  # fmt: skip
    r.add_argument("--seed", type=_int_in(0, 2**63 - 1), default=0,
                   help="seed of the random inputs (default 0)")  # fmt: skip
    r.add_argument("--print", action="append", default=[], dest="show", metavar="NAME",
                   help="print this parameter after the run")  # fmt: skip
    r.set_defaults(func=cmd_run)

    lay = sub.add_parser("layout", help="print (or draw) which lane and slot hold each element",
                         description="A layout over a logical shape as a text table "
                         "(lane:slot per element, or the address for a memory layout); "
                         "--svg/--png also draw it.")  # fmt: skip
    lay.add_argument("spec", metavar="LAYOUT", help='e.g. "S[(4,8,4):(1,4@laneid,1@laneid)]"')
    lay.add_argument("-s", "--shape", help="logical shape, e.g. 4,8,4 (default: the shard's)")
    lay.add_argument("--lane", type=_int_in(0, 31), default=None,
                     help="mark this lane's (bank's) cells, 0..31")  # fmt: skip
    lay.add_argument("--color-by", choices=("lane", "slot"), default=None)
    lay.add_argument("--dtype-bytes", type=int, choices=(1, 2, 4, 8), default=2,
                     help="element size of a memory layout (default 2)")  # fmt: skip
    lay.add_argument("--svg", metavar="OUT", help="also write an SVG picture")
    lay.add_argument("--png", metavar="OUT", help="also write a PNG picture (matplotlib)")
    lay.add_argument("--dpi", type=_int_in(10, 1200), default=150,
                     help="PNG resolution, 10..1200 (default 150)")  # fmt: skip
    lay.set_defaults(func=cmd_layout)

    # `tirx demo ...` is handed to the demo's own parser in main; listed here for --help
    sub.add_parser("demo", help="the seed kernel end to end (python -m tirx.demo)")
    return top


def main(argv=None) -> int:
    """The ``tirx`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["demo"]:  # all its options are the demo's own (python -m tirx.demo)
        from . import demo

        return demo.main(argv[1:], prog="tirx demo")
    parser = build_parser()
    args = parser.parse_args(_glue_dashed_values(argv))
    prog = f"tirx {args.command}"
    stdout = sys.stdout
    if not isinstance(stdout, _Output):
        sys.stdout = _Output(stdout)
    try:
        return _run(args, prog)
    finally:
        sys.stdout = stdout  # (after a broken pipe its descriptor writes to /dev/null)


def _run(args, prog: str) -> int:
    """The command, its errors turned into messages and exit statuses."""
    try:
        return args.func(args)
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except UserCodeError as e:
        if args.traceback:
            traceback.print_exception(e.__cause__)
        print(e, file=sys.stderr)
        return 1
    except TirxError as e:
        if args.traceback:
            traceback.print_exc()
        if e.hint:
            e = e._with(hint=command_line_hint(e.hint))
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # a pipe broken outside stdout's writes: the work did not end
        return 141  # as a program killed by SIGPIPE


_TARGETS = (
    (re.compile(r'target="cuda -arch=(sm_\w+)"'), r"--arch \1"),
    (re.compile(r'target="sim"'), "--sim"),
    (re.compile(r'target="cuda"'), "no --arch (the GPU's own)"),
)


def _usage(e: TirxError) -> UsageError:
    """A TirxError about the command line's own values (a target, a layout) as a usage error:
    its message and hint on one line."""
    return UsageError(e.message + (f" ({command_line_hint(e.hint)})" if e.hint else ""))


def command_line_hint(hint: str) -> str:
    """A hint in the command's spelling: the Python API's ``target="cuda -arch=sm_90"`` is
    ``--arch sm_90`` here, ``target="sim"`` is ``--sim``."""
    for pattern, spelled in _TARGETS:
        hint = pattern.sub(spelled, hint)
    return hint


class _Output:
    """``sys.stdout`` for a command: once the reader of a pipe has gone (``tirx run ... |
    head -1``), what is printed is dropped and the command goes on to its end, so that its
    exit status is its own (a failed ``--check`` is still 1) and the files it writes are
    written."""

    def __init__(self, stream):
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self._gone = True
        try:  # the interpreter's flush at exit writes to /dev/null, quietly
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError):  # no descriptor (a test's StringIO)
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)
