"""``FILE[:KERNEL]`` on the command line: find the file or module, run it, pick the kernel.

``FILE`` is a Python file or an importable module name. A file that sits in a package (its
folder has an ``__init__.py``) is imported by its dotted name from the nearest folder above
the packages, so its relative imports work (``tirx/examples/gemm_wgmma.py`` is
``tirx.examples.gemm_wgmma``); any other file runs as a module of its own with its folder
first on ``sys.path``, as ``python FILE`` would have it. Neither runs as ``__main__``.

``KERNEL`` is a kernel's name or an expression in the file's namespace that makes one
(``make_gemm(128, 128, 64)``). Mistakes in naming (no such file, kernel or function, a call
that does not fit the function's parameters) are :class:`UsageError`; a Python error raised
inside the user's code is :class:`UserCodeError`, already reduced to the user's own lines.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path

from .errors import TirxError

__all__ = ["on_gpu", "UsageError", "UserCodeError", "load_kernel", "package_module", "split_ref"]


class UsageError(Exception):
    """A mistake on the command line: printed as one line, exit status 2."""


class UserCodeError(Exception):
    """A Python error raised by the user's file, already reduced to the file's own lines."""


def split_ref(text: str) -> tuple[str, str | None]:
    """``FILE[:KERNEL]`` -> (FILE, KERNEL or None). The first ``:`` whose left side is an
    existing file or a module name ends FILE, so KERNEL may hold colons of its own."""
    if os.path.isfile(text):
        return text, None
    colons = [i for i, ch in enumerate(text) if ch == ":"]
    # a file first (a path may hold colons: "co:lon/k.py:kernel"), then a module name
    for found in (os.path.isfile, _is_module_name):
        for i in colons:
            if found(text[:i]):
                return text[:i], text[i + 1 :] or None
    return text, None


def _is_module_name(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def package_module(path: str) -> tuple[str, str] | None:
    """``(dotted name, root)`` of the Python file ``path`` when its folder is a package (has an
    ``__init__.py``): the name walks up through the folders that have one, and ``root`` is the
    first folder above them, the one that must be on ``sys.path``. None for a file outside a
    package, or in folders whose names cannot be imported."""
    folder, base = os.path.split(os.path.abspath(path))
    stem = os.path.splitext(base)[0]
    parts = [] if stem == "__init__" else [stem]
    levels = 0
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        levels += 1
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if not levels or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts), folder


def _same_file(a: str | None, b: str) -> bool:
    try:
        return a is not None and os.path.samefile(a, b)
    except OSError:
        return False


def _load_namespace(where: str) -> tuple[dict, str | None]:
    """The globals of the file or module ``where`` after running it, and its file name."""
    if os.path.isdir(where):
        raise UsageError(f"{where} is a folder: name a Python file in it (or a module)")
    if os.path.isfile(where):
        path = os.path.abspath(where)
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise UsageError(f"cannot read {where}: {e.strerror}") from None
        if not path.endswith(".py"):
            if path.endswith(".tirx"):
                raise UsageError(f"{where}: a saved kernel, not a Python file: it loads with "
                                 "tirx.load(path) in Python")  # fmt: skip
            raise UsageError(f"{where}: not a Python file (name a .py file or a module)")
        with open(path, "rb") as f:
            if b"\0" in f.read():
                raise UsageError(f"{where}: not a Python file (it holds NUL bytes)")
        found = package_module(path)
        module = _import_in_package(path, *found) if found else _run_file(path)
        return vars(module), path
    if _is_module_name(where):
        try:
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            found = None
        if found is not None:
            path = found.origin
            module = _run_user_code(lambda: importlib.import_module(where), path)
            return vars(module), path
    if os.path.exists(where):  # a FIFO, a device
        raise UsageError(f"{where} is not a regular file: name a Python file (or a module)")
    raise UsageError(f"no such file or module: {where}")


def _run_file(path: str):
    """A file outside any package: a module of its own, its folder first on sys.path."""
    name = f"_tirx_cli_{Path(path).stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up
    sys.path.insert(0, os.path.dirname(path))  # as `python FILE` does
    _run_user_code(lambda: spec.loader.exec_module(module), path)
    return module


def _import_in_package(path: str, name: str, root: str):
    """The file ``path`` as module ``name`` of its package, imported from ``root``."""
    if root not in sys.path:
        sys.path.insert(0, root)  # as `python -m name` run from root would have it
    spec = _run_user_code(lambda: importlib.util.find_spec(name), path)
    if spec is not None and _same_file(spec.origin, path):
        return _run_user_code(lambda: importlib.import_module(name), path)
    # Another copy of the package is what imports under that name (tirx itself, installed
    # from a wheel, while FILE is in a checkout): run this file as a module of that package,
    # so its relative imports find the imported copy's modules. It stands in sys.modules only
    # while it runs (dataclasses look their module up), never in place of the imported one.
    parent = name.rpartition(".")[0] or name
    package = _run_user_code(lambda: importlib.import_module(parent), path)
    where = os.path.dirname(getattr(package, "__file__", None) or "?")
    print(f"tirx: note: {path} is module {name}, whose package imports from {where}; its "
          "relative imports use that copy", file=sys.stderr)  # fmt: skip
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        _run_user_code(lambda: spec.loader.exec_module(module), path)
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
    return module


def _run_user_code(action, path: str | None):
    """``action()``; a Python error it raises becomes a UserCodeError quoting the lines of
    ``path`` and of its folder's files (a TirxError passes as it is: it renders itself)."""
    try:
        return action()
    except (TirxError, UsageError):
        raise
    except Exception as err:
        raise UserCodeError(python_error(err, path)) from err
    except SystemExit as err:  # the file's own sys.exit(): its status is not the command's
        where = os.path.basename(path) if path else "the kernel's module"
        raise UserCodeError(
            f"{where} called sys.exit({err.code!r}) while it was imported: a kernel file "
            'defines kernels (put a script\'s exit under `if __name__ == "__main__":`)'
        ) from None


def python_error(err: BaseException, path: str | None) -> str:
    """``Type: message`` and the frames of ``err`` in the user's file ``path`` or beside it."""
    folder = os.path.dirname(path) if path else None
    if isinstance(err, SyntaxError) and err.filename and _in_folder(err.filename, folder):
        text = (err.text or "").rstrip("\n")
        stripped = text.lstrip()
        caret = " " * max((err.offset or 1) - 1 - (len(text) - len(stripped)), 0) + "^"
        return (
            f"SyntaxError: {err.msg}\n  File {err.filename}, line {err.lineno}\n"
            f"    {stripped}\n    {caret}"
        )
    lines = [f"{type(err).__name__}: {err}"]
    for frame in traceback.extract_tb(err.__traceback__):
        if _in_folder(frame.filename, folder):
            lines.append(f"  File {frame.filename}, line {frame.lineno}, in {frame.name}")
            if frame.line:
                lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)


def _in_folder(filename: str, folder: str | None) -> bool:
    # "<frozen importlib._bootstrap>", "<string>": no file (abspath would put it in the cwd)
    if folder is None or filename.startswith("<"):
        return False
    return os.path.dirname(os.path.abspath(filename)) == folder


def _functions(namespace: dict) -> list[str]:
    """The public functions the file itself defines (not those it imports)."""
    import tirx

    own = namespace.get("__name__")
    return [
        n
        for n, v in namespace.items()
        if callable(v) and not isinstance(v, (type, tirx.Kernel)) and not n.startswith("_")
        and getattr(v, "__module__", None) == own
    ]  # fmt: skip


def _names(namespace: dict) -> str:
    """The kernels and the functions a file defines, for a message."""
    import tirx

    kernels = [n for n, v in namespace.items() if isinstance(v, tirx.Kernel)]
    return (
        f"its kernels: {', '.join(kernels) or 'none'}; "
        f"its functions: {', '.join(_functions(namespace)) or 'none'}"
    )


def _not_a_call_of_a_kernel(expr: str, namespace: dict, where: str) -> None:
    """A usage error for ``FILE:kernel(...)`` where ``kernel`` is a kernel, not a factory."""
    import ast

    from .script.parser import KernelFunction

    body = ast.parse(expr, mode="eval").body  # (compiled already: it parses)
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name):
        name = body.func.id
        if isinstance(namespace.get(name), KernelFunction):
            raise UsageError(
                f"{where}:{expr}: {name} is a kernel, not a factory that makes one: write "
                f"{where}:{name}"
            )


def _evaluate(expr: str, where: str, namespace: dict, path: str | None):
    """The kernel expression ``expr`` in the file's namespace."""
    label = f"<{where}:KERNEL>"
    try:
        code = compile(expr, label, "eval")
    except SyntaxError as e:
        raise UsageError(f"cannot read the kernel expression {expr!r}: {e.msg}") from None
    _not_a_call_of_a_kernel(expr, namespace, where)
    try:
        return eval(code, namespace)  # noqa: S307 - the user's own expression
    except TirxError:
        raise
    except Exception as err:
        frames = traceback.extract_tb(err.__traceback__)
        if frames and frames[-1].filename == label:  # the expression itself: a name, a call
            names = _names(namespace)
            raise UsageError(f"{where}:{expr}: {type(err).__name__}: {err} ({names})") from None
        raise UserCodeError(python_error(err, path)) from err
    except SystemExit as err:  # a factory's sys.exit(): its status is not the command's
        raise UserCodeError(
            f"{where}:{expr} called sys.exit({err.code!r}): the kernel expression must return "
            "a kernel (a factory reports a bad argument by raising an exception)"
        ) from None


def load_kernel(ref: str):
    """The kernel that ``FILE[:KERNEL]`` names (see the module docstring).

    Raises UsageError (no such file, kernel or function; a call that does not fit),
    UserCodeError (the file, or a function the expression called, raised) or the TirxError a
    kernel definition raised."""
    import tirx

    where, name = split_ref(ref)
    namespace, path = _load_namespace(where)
    if name is None:
        kernels = list(
            {id(v): v for v in namespace.values() if isinstance(v, tirx.Kernel)}.values()
        )
        if len(kernels) == 1:
            return kernels[0]
        if not kernels:
            functions = _functions(namespace)
            hint = (f"call a function that makes one: {where}:{functions[0]}(...); its functions: "
                    f"{', '.join(functions)}" if functions else "it defines no function either")  # fmt: skip
            raise UsageError(f"{where} defines no @T.function kernel ({hint})")
        names = ", ".join(k.name for k in kernels)
        raise UsageError(f"{where} defines {len(kernels)} kernels ({names}): name one, "
                         f"{where}:{kernels[0].name}")  # fmt: skip
    if name.isidentifier():
        if name not in namespace:
            names = _names(namespace)
            raise UsageError(f"{where} has no {name!r} ({names})")
        kernel = namespace[name]
    else:  # an expression that makes a kernel, e.g. make_gemm(128, 128, 128)
        kernel = _evaluate(name, where, namespace, path)
    if not isinstance(kernel, tirx.Kernel):
        call = f" (call it to make one: {where}:{name}(...))" if callable(kernel) else ""
        raise UsageError(
            f"{where}:{name} is a {type(kernel).__name__}, not a @T.function kernel{call}"
        )
    return kernel


def on_gpu(target) -> bool:
    """Whether ``target`` runs on the GPU. (Compared with a parsed target's kind rather than a
    string, so it holds whatever type ``Target.kind`` has; an explicit arch probes nothing.)"""
    from .target import Target

    return target.kind == Target.parse("cuda -arch=sm_90").kind
