"""``tirx`` on the command line (also ``python -m tirx``).

    tirx compile FILE[:KERNEL] [--arch sm_90] [--emit cuda|ptx|sass|ir|lowered] [-o OUT]
    tirx compile FILE[:KERNEL] [--arch sm_90] --out KERNEL.tirx
    tirx run FILE[:KERNEL] --sim --check "Out = A.float() @ B.float().T"
    tirx layout "S[(4,8,4):(1,4@laneid,1@laneid)]" --shape 4,8,4 [--svg OUT] [--png OUT]
    tirx demo [--target cuda|sim]

``FILE`` is a Python file (or an importable module, ``tirx.examples.warp_matmul``) that defines
``@T.function`` kernels; ``:KERNEL`` names one of them, or is an expression in the file's
namespace that makes one (``gemm.py:make_gemm(128, 128, 128)``). Without it the file must
define exactly one kernel.

Exit codes: 0 done (and every check passed); 1 a mistake in the kernel or in what it computes
(a :class:`~tirx.TirxError`, printed with its caret and hint; a Python error in the file,
printed with the file's own lines; a failed ``--check``); 2 a mistake on the command line
(an unknown option, no such file or kernel, an argument or expression that does not fit).
No mistake of the user's ends in a traceback; ``--traceback`` shows the full one anyway.

Nothing here runs at import; torch and the notebook layer load only in the commands that
need them (``layout`` draws with the ``widgets`` package's functions).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path

from .errors import TirxError

__all__ = ["main", "load_kernel", "UsageError"]

EMITS = ("cuda", "ptx", "sass", "ir", "lowered")


class UsageError(Exception):
    """A mistake on the command line: printed as one line, exit status 2."""


class UserCodeError(Exception):
    """A Python error raised by the user's file, already reduced to the file's own lines."""


# ------------------------------------------------------------------------ loading kernels


def _split_ref(text: str) -> tuple[str, str | None]:
    """``FILE[:KERNEL]`` -> (FILE, KERNEL or None). The first ``:`` whose left side is an
    existing file or a module name ends FILE, so KERNEL may hold colons of its own."""
    if os.path.isfile(text):
        return text, None
    for i, ch in enumerate(text):
        if ch == ":" and (os.path.isfile(text[:i]) or _is_module_name(text[:i])):
            return text[:i], text[i + 1 :] or None
    return text, None


def _is_module_name(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _load_namespace(where: str) -> tuple[dict, str | None]:
    """The globals of the file or module ``where`` after running it, and its file name."""
    if os.path.isfile(where):
        path = os.path.abspath(where)
        name = f"_tirx_cli_{Path(path).stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"{where}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look their module up
        sys.path.insert(0, os.path.dirname(path))  # as `python FILE` does
        _run_user_code(lambda: spec.loader.exec_module(module), path)
        return vars(module), path
    if _is_module_name(where) and not where.endswith(".py"):
        try:
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            found = None
        if found is not None:
            path = found.origin
            module = _run_user_code(lambda: importlib.import_module(where), path)
            return vars(module), path
    raise UsageError(f"no such file or module: {where}")


def _run_user_code(action, path: str | None):
    """``action()``; a Python error it raises becomes a UserCodeError quoting ``path``'s
    lines only (a TirxError passes as it is: it renders itself)."""
    try:
        return action()
    except (TirxError, UsageError):
        raise
    except Exception as err:
        raise UserCodeError(_python_error(err, path)) from err


def _python_error(err: BaseException, path: str | None) -> str:
    """``Type: message`` and the frames of ``err`` that are in the user's file."""
    if isinstance(err, SyntaxError) and err.filename == path:
        text = (err.text or "").rstrip("\n")
        stripped = text.lstrip()
        caret = " " * max((err.offset or 1) - 1 - (len(text) - len(stripped)), 0) + "^"
        return (
            f"SyntaxError: {err.msg}\n  File {path}, line {err.lineno}\n    {stripped}\n    {caret}"
        )
    lines = [f"{type(err).__name__}: {err}"]
    for frame in traceback.extract_tb(err.__traceback__):
        if path is not None and frame.filename == path:
            lines.append(f"  File {frame.filename}, line {frame.lineno}, in {frame.name}")
            if frame.line:
                lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)


def load_kernel(ref: str):
    """The kernel that ``FILE[:KERNEL]`` names (see the module docstring).

    Raises UsageError (no such file, kernel or attribute), UserCodeError (the file or the
    KERNEL expression raised) or the TirxError a kernel definition raised."""
    import tirx

    where, name = _split_ref(ref)
    namespace, path = _load_namespace(where)
    if name is None:
        kernels = list(
            {id(v): v for v in namespace.values() if isinstance(v, tirx.Kernel)}.values()
        )
        if len(kernels) == 1:
            return kernels[0]
        if not kernels:
            raise UsageError(f"{where} defines no @T.function kernel")
        names = ", ".join(k.name for k in kernels)
        raise UsageError(f"{where} defines {len(kernels)} kernels ({names}): name one, "
                         f"{where}:{kernels[0].name}")  # fmt: skip
    if name.isidentifier():
        if name not in namespace:
            known = [n for n, v in namespace.items() if isinstance(v, tirx.Kernel)]
            raise UsageError(f"{where} has no {name!r} (its kernels: {', '.join(known) or 'none'})")
        kernel = namespace[name]
    else:  # an expression that makes a kernel, e.g. make_gemm(128, 128, 128)
        try:
            code = compile(name, f"<{where}:KERNEL>", "eval")
        except SyntaxError as e:
            raise UsageError(f"cannot read the kernel expression {name!r}: {e.msg}") from None
        kernel = _run_user_code(lambda: eval(code, namespace), path)  # noqa: S307 - the user's
    if not isinstance(kernel, tirx.Kernel):
        call = f" (call it to make one: {where}:{name}(...))" if callable(kernel) else ""
        raise UsageError(
            f"{where}:{name} is a {type(kernel).__name__}, not a @T.function kernel{call}"
        )
    return kernel


def _target(args, default: str | None):
    """The tirx.Target from --target/--arch (--sim), checked as a usage error."""
    import tirx

    text = getattr(args, "target", None) or default
    if getattr(args, "sim", False):
        text = "sim"
    if args.arch:
        if text not in (None, "cuda"):
            raise UsageError(f"--arch {args.arch} goes with the cuda target, not {text!r}")
        text = f"cuda -arch={args.arch}"
    try:
        return tirx.Target.parse(text)
    except TirxError as e:
        raise UsageError(e.message + (f" ({e.hint})" if e.hint else "")) from None


def on_gpu(target) -> bool:
    """Whether ``target`` runs on the GPU. (Compared with a parsed target's kind rather than a
    string, so it holds whatever type ``Target.kind`` has; an explicit arch probes nothing.)"""
    from .target import Target

    return target.kind == Target.parse("cuda -arch=sm_90").kind


# ------------------------------------------------------------------------ the commands


def cmd_compile(args) -> int:
    import tirx

    if args.out:
        return save_compiled(args)
    target = _target(args, "cuda")
    if args.emit in ("cuda", "ptx", "sass") and not on_gpu(target):
        raise UsageError(f"--emit {args.emit} needs the cuda target (NVRTC compiles without a GPU)")
    kernel = load_kernel(args.kernel)
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
    _write(text, args.output)
    if args.stats:
        print(compile_summary(exe), file=sys.stderr)
    return 0


def save_compiled(args) -> int:
    """``tirx compile FILE --out FILE.tirx``: the compiled kernel as a saved file
    (tirx/artifact.py) for ``tirx.load``, instead of printing what ``--emit`` names."""
    import tirx

    target = _target(args, "cuda")
    if not on_gpu(target):
        raise UsageError("--out saves GPU code: it needs the cuda target (--arch sm_90)")
    exe = tirx.compile(load_kernel(args.kernel), target)
    path = exe.save(args.out)
    print(f"{path}: {exe.name} for {exe.arch}, {path.stat().st_size} bytes")
    return 0


def compile_summary(exe) -> str:
    """One line: target, cache, the stage timings (which add up to the compile call's wall
    time; parse is @T.function's, before the call) and the resources."""
    parts = [f"{exe.name}: {exe.target}, cache {exe.cache}"]
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


def cmd_layout(args) -> int:
    shape = _shape(args.shape)
    # The drawing functions live in the notebook layer; the command line sits above both
    # layers and loads it here only (tests/test_architecture.py names this exception).
    try:
        from widgets import show_layout
    except ImportError as e:
        raise TirxError(
            f"tirx layout draws with the notebook layer, which does not import here ({e})",
            hint="install tirx with its widgets package: pip install -e .",
        ) from None

    view = show_layout(args.spec, shape, lane=args.lane, color_by=args.color_by,
                       dtype_bytes=args.dtype_bytes)  # fmt: skip
    print(view)
    if args.svg:
        _write(view.svg(), args.svg)
    if args.png:
        try:
            view.figure().savefig(args.png, dpi=args.dpi, bbox_inches="tight")
        except OSError as e:
            raise UsageError(f"cannot write {args.png}: {e.strerror}") from None
    return 0


def _shape(text: str | None):
    if text is None:
        return None
    words = [w for w in text.replace("(", " ").replace(")", " ").replace(",", " ").split()]
    if not words or not all(w.isdigit() and int(w) > 0 for w in words):
        raise UsageError(f"--shape {text!r}: write positive extents like 4,8,4")
    return tuple(int(w) for w in words)


# ------------------------------------------------------------------------ the parser


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own mistakes: one line, then where to look
        self.exit(2, f"{self.prog}: error: {message}\n(see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

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
    c.add_argument(
        "-e", "--emit", choices=EMITS, default="cuda", help="what to print (default cuda)"
    )
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
    r.add_argument("--atol", type=float, default=1e-3, help="absolute tolerance (default 1e-3)")
    r.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    r.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    r.add_argument("--print", action="append", default=[], dest="show", metavar="NAME",
                   help="print this parameter after the run")  # fmt: skip
    r.set_defaults(func=cmd_run)

    lay = sub.add_parser("layout", help="print (or draw) which lane and slot hold each element",
                         description="A layout over a logical shape as a text table "
                         "(lane:slot per element, or the address for a memory layout); "
                         "--svg/--png also draw it.")  # fmt: skip
    lay.add_argument("spec", metavar="LAYOUT", help='e.g. "S[(4,8,4):(1,4@laneid,1@laneid)]"')
    lay.add_argument("-s", "--shape", help="logical shape, e.g. 4,8,4 (default: the shard's)")
    lay.add_argument("--lane", type=int, default=None, help="mark this lane's (bank's) cells")
    lay.add_argument("--color-by", choices=("lane", "slot"), default=None)
    lay.add_argument("--dtype-bytes", type=int, default=2, help="element size of a memory layout")
    lay.add_argument("--svg", metavar="OUT", help="also write an SVG picture")
    lay.add_argument("--png", metavar="OUT", help="also write a PNG picture (matplotlib)")
    lay.add_argument("--dpi", type=int, default=150, help="PNG resolution (default 150)")
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
    args = parser.parse_args(argv)
    prog = f"tirx {args.command}"
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
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tirx compile ... | head`: the reader has what it wanted
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the exit flush stays quiet
        return 0
