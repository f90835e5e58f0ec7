"""``tirx run``: a kernel on random or given inputs, checked against torch expressions.

Every parameter gets a value: from ``--arg NAME=VALUE`` (a Python expression with ``torch``
and ``np``, or a ``.npy``/``.pt`` file), else a seeded random tensor of the parameter's dtype
and shape (normal floats; small integers, so integer products stay exact). Scalars have no
random value: they must be given. Each ``--check "[NAME =] EXPR"`` evaluates EXPR over the
arguments as they were before the run and compares parameter NAME (default: the last one)
after the run with it, in float64, with ``--atol``/``--rtol``.
"""

from __future__ import annotations

import ast
import time

from .errors import TirxError

__all__ = ["run", "parse_check", "random_value"]


def run(args, load_kernel, target_of) -> int:
    """The command (see the module docstring); returns the exit status."""
    import tirx

    from .cli_load import UsageError, on_gpu

    target = target_of(args, None)
    gpu = on_gpu(target)
    if gpu and not tirx.gpu_available():
        raise TirxError(
            "no CUDA GPU is visible, so the kernel cannot run on the cuda target",
            hint="run it on the CPU simulator: --sim",
        )
    import torch

    if gpu and not torch.cuda.is_available():
        raise TirxError(
            f"this torch ({torch.__version__}) has no CUDA support, so it cannot give the "
            "kernel GPU tensors",
            hint="install a CUDA build of torch, or run on the simulator: --sim",
        )
    kernel = load_kernel(args.kernel)
    checks = [parse_check(text) for text in args.check]
    exe = tirx.compile(kernel, target)
    device = "cuda" if gpu else "cpu"
    params = list(exe.lowered.params)
    names = [p.name for p in params]
    given = _given(args.arg, names)
    generator = torch.Generator().manual_seed(args.seed)
    values, origin = [], []
    for p in params:
        if p.name in given:
            values.append(_to_device(given[p.name], device))
            origin.append("given")
        elif not hasattr(p, "shape"):
            raise UsageError(f"parameter {p.name!r} is a scalar ({p.dtype}): give its value "
                             f"with --arg {p.name}=VALUE")  # fmt: skip
        else:
            values.append(_random(p, generator, device))
            origin.append("random")
    for name, _ in checks:
        if name is not None and name not in names:
            raise UsageError(f"--check {name} = ...: the kernel has no parameter {name!r} "
                             f"(its parameters: {', '.join(names)})")  # fmt: skip
    for name in args.show:
        if name not in names:
            raise UsageError(f"--print {name}: the kernel has no parameter {name!r} "
                             f"(its parameters: {', '.join(names)})")  # fmt: skip
    before = {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in zip(names, values)}
    # the references read the arguments as they were before the run: made now, so that a
    # --check that cannot be evaluated is refused before the kernel runs
    by_name = dict(zip(names, params))
    refs = [(name or names[-1], _reference(name or names[-1], expr, before, by_name))
            for name, expr in checks]  # fmt: skip
    t0 = time.perf_counter()
    try:
        exe(*values)
        if gpu:
            torch.cuda.synchronize()
    except (TypeError, ValueError) as e:  # an argument the checks refused: the user's --arg
        raise UsageError(str(e)) from None
    ms = (time.perf_counter() - t0) * 1e3
    where = f"the GPU ({exe.target})" if gpu else "the simulator"
    inputs = ", ".join(f"{n} {o}" for n, o in zip(names, origin))
    print(f"ran {exe.name} on {where} in {ms:.1f} ms; {inputs} "
          f"(seed {args.seed})")  # fmt: skip
    after = dict(zip(names, values))
    failed = 0
    for out_name, ref in refs:
        ok, text = compare(after[out_name], ref, args.atol, args.rtol)
        failed += not ok
        print(f"{out_name}: {text}")
    for name in args.show:
        print(f"{name} =\n{after[name]}")
    return 1 if failed else 0


def parse_check(text: str) -> tuple[str | None, str]:
    """``"Out = A @ B"`` -> ("Out", "A @ B"); ``"A @ B"`` -> (None, "A @ B")."""
    from .cli_load import UsageError

    try:
        tree = ast.parse(text.strip())
    except SyntaxError as e:
        raise UsageError(f"--check {text!r}: {e.msg}") from None
    if len(tree.body) != 1:
        raise UsageError(f"--check {text!r}: write one expression, or NAME = EXPR")
    node = tree.body[0]
    if isinstance(node, ast.Expr):
        return None, ast.unparse(node.value)
    if (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)):  # fmt: skip
        return node.targets[0].id, ast.unparse(node.value)
    raise UsageError(f"--check {text!r}: write one expression, or NAME = EXPR")


def _random(param, generator, device: str):
    """:func:`random_value` on ``device``; a shape too large for this machine is the command
    line's mistake (a factory's arguments), not a traceback."""
    from .cli_load import UsageError

    try:
        return random_value(param, generator).to(device)
    except (RuntimeError, MemoryError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"cannot make a random {param.dtype} input {param.name!r} of shape "
                         f"{tuple(param.shape)} here ({first}): a smaller shape, or give "
                         f"it with --arg {param.name}=...") from None  # fmt: skip


def random_value(param, generator):
    """A seeded random CPU tensor for a buffer parameter: standard normal floats, integers in
    [-8, 8) ([0, 16) unsigned), random booleans."""
    import torch

    dtype = getattr(torch, param.dtype.torch_name)
    shape = tuple(param.shape)
    if dtype.is_floating_point:  # drawn in float32 (seeded alike for every float dtype)
        return torch.randn(shape, generator=generator).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    low = 0 if not dtype.is_signed else -8
    return torch.randint(low, low + 16, shape, generator=generator).to(dtype)


def compare(out, ref, atol: float, rtol: float) -> tuple[bool, str]:
    """(passed, one line) for ``out`` against ``ref`` (shapes must agree)."""
    import torch

    out = torch.as_tensor(out).detach().cpu().double()
    ref = torch.as_tensor(ref).detach().cpu().double()
    if out.shape != ref.shape:
        return False, f"FAIL: shape {tuple(out.shape)}, the reference's {tuple(ref.shape)}"
    if not out.numel():
        return True, "PASS (empty)"
    close = torch.isclose(out, ref, rtol=rtol, atol=atol)  # equal infinities are close
    finite = out.isfinite() & ref.isfinite()
    diff = torch.where(finite, (out - ref).abs(), torch.zeros_like(out))
    over = "" if finite.all() else f" over the {int(finite.sum())} finite pairs"
    text = f"max |out - ref| = {diff.max().item():.3g}{over} (atol {atol:g}, rtol {rtol:g}): "
    if bool(close.all()):
        return True, text + "PASS"
    # the worst element: a NaN or infinity that disagrees first, else the largest difference
    badness = torch.where(close, -1.0, torch.where(finite, diff, float("inf")))
    worst = tuple(int(i) for i in torch.unravel_index(badness.argmax(), badness.shape))
    return False, (
        text + f"FAIL, {int((~close).sum())} of {out.numel()} elements; worst at {worst}: "
        f"out {out[worst].item():.6g}, ref {ref[worst].item():.6g}"
    )


def _given(pairs: list[str], names: list[str]) -> dict:
    from .cli_load import UsageError

    values = {}
    for pair in pairs:
        name, eq, text = pair.partition("=")
        name = name.strip()
        if not eq or not name:
            raise UsageError(f"--arg {pair!r}: write NAME=VALUE")
        if name not in names:
            raise UsageError(f"--arg {name}: the kernel has no parameter {name!r} "
                             f"(its parameters: {', '.join(names)})")  # fmt: skip
        if name in values:
            raise UsageError(f"--arg {name} is given twice: give each parameter once")
        values[name] = _value(name, text.strip())
    return values


def _value(name: str, text: str):
    import numpy as np
    import torch

    from .cli_load import UsageError

    if text.endswith((".npy", ".pt")):
        return _from_file(name, text)
    try:
        value = eval(text, {"torch": torch, "np": np})  # noqa: S307 - the user's own argument
    except Exception as e:
        raise UsageError(f"--arg {name}={text}: {type(e).__name__}: {e}") from None
    except SystemExit as e:  # exit() in the expression: its status is not the command's
        raise UsageError(f"--arg {name}={text}: the expression called exit({e.code!r}) "
                         "instead of giving a value") from None  # fmt: skip
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            raise UsageError(f"--arg {name}={text}: a meta tensor has no data to run on; make "
                             "it on the CPU (or the GPU)")  # fmt: skip
        if value.requires_grad:  # data on the command line: no autograd graph to keep
            raise UsageError(f"--arg {name}={text}: the tensor requires grad, which a kernel "
                             "does not track; write it without requires_grad=True")  # fmt: skip
    return value


def _from_file(name: str, path: str):
    """The tensor saved in ``path`` (numpy's ``.npy``, torch's ``.pt``), read without
    unpickling anything (a file that needs it is refused as unreadable here)."""
    import numpy as np
    import torch

    from .cli_load import UsageError

    kind = "a .npy file (numpy.save)" if path.endswith(".npy") else "a .pt file (torch.save)"
    try:
        if path.endswith(".npy"):
            return torch.from_numpy(np.load(path, allow_pickle=False))
        value = torch.load(path, weights_only=True)
    except OSError as e:
        raise UsageError(f"--arg {name}={path}: cannot read it: {e.strerror or e}") from None
    except Exception:  # noqa: BLE001 - numpy's and torch's ways of saying "not a tensor file"
        # (their texts suggest unpickling, which a tensor file does not need)
        raise UsageError(f"--arg {name}={path}: not {kind} of a tensor") from None
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"--arg {name}={path}: the file holds a {type(value).__name__}, not a "
                         "tensor")  # fmt: skip
    return value


def _to_device(value, device: str):
    import torch

    return value.to(device) if isinstance(value, torch.Tensor) else value


def _reference(name: str, expr: str, before: dict, params: dict):
    """The value of ``--check "name = expr"`` as a tensor shaped like parameter ``name``."""
    import torch

    from .cli_load import UsageError

    shape = getattr(params[name], "shape", None)
    if shape is None:
        raise UsageError(f"--check {name} = {expr}: {name} is a scalar parameter, which the "
                         "kernel cannot write; check a tensor parameter")  # fmt: skip
    value = _evaluate(expr, before)
    try:
        ref = torch.as_tensor(value)
    except Exception:
        raise UsageError(f"--check {name} = {expr}: that is a {type(value).__name__}, not a "
                         "tensor, array or number to compare with") from None  # fmt: skip
    if tuple(ref.shape) != tuple(shape):
        raise UsageError(f"--check {name} = {expr}: that has shape {tuple(ref.shape)}, and "
                         f"{name} has shape {tuple(shape)}")  # fmt: skip
    return ref


def _evaluate(expr: str, names: dict):
    import numpy as np
    import torch

    from .cli_load import UsageError

    scope = {"torch": torch, "np": np, **names}
    try:
        return eval(expr, scope)  # noqa: S307 - the user's own expression
    except Exception as e:
        known = ", ".join(names)
        raise UsageError(f"--check {expr!r}: {type(e).__name__}: {e} (names: {known}, torch, "
                         "np)") from None  # fmt: skip
    except SystemExit as e:  # exit() in the expression: its status is not the command's
        raise UsageError(f"--check {expr!r}: the expression called exit({e.code!r}) instead "
                         "of giving a value") from None  # fmt: skip
