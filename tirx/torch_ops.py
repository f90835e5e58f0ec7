"""tirx kernels as torch operators: ``torch.library`` custom ops with a fake implementation.

    softmax = tirx.torch_op(lambda X: make_softmax(*X.shape, X.dtype),
                            name="tirx::softmax", outputs=["Y"])
    y = softmax(x)                                  # eager, CUDA or CPU tensors
    torch.compile(model, fullgraph=True)            # one node in the graph, no break

What :func:`torch_op` takes, in three forms:

* **a kernel** (``@T.function``, or an executable from ``tirx.compile`` or ``tirx.load``): the
  operator's inputs are the kernel's parameters it does not only write, its outputs the
  parameters it writes (read off the lowered program: tirx/signature.py), or those named by
  ``outputs=``. Each call allocates the outputs (``torch.empty``) and returns them, as torch
  operators do. An output the kernel also reads is an input too: the operator copies it and
  returns the updated copy, so no argument is ever changed in place.
* **a kernel factory** with ``outputs=``: a function of the operator's inputs that makes the
  kernel for them. It receives each tensor as a :class:`~tirx.signature.TensorSpec` (shape,
  tirx dtype name, device; never data) and each scalar as it is. Its parameters are the
  operator's inputs: a tensor input must be a parameter of the kernel it returns, a scalar
  input may be one (it is then passed to the kernel) or only configure the factory (an int
  annotated ``warps: int = 4``); ``outputs`` names the kernel's other parameters. Kernels are
  remembered per (specs, scalars).
* **a function that launches tirx kernels itself**, with ``fake=`` (and no ``outputs``): it
  becomes the operator as it is (its type annotations give the schema, as for
  ``torch.library.custom_op``).

Each call runs on the inputs' device: CUDA tensors on the GPU (target "cuda"), CPU tensors on
the simulator (target "sim"), compiled once per device. The fake implementation that
``torch.compile`` and the meta device use checks every input's shape and dtype against the
kernel's parameters (a ValueError or TypeError naming it) and returns empty outputs of the
kernel's shapes and dtypes; ``fake=`` replaces it. ``backward=`` (with an optional
``setup_context=``) registers a backward through ``torch.library.register_autograd``; without
``setup_context`` the context saves every tensor input and every output, in that order
(``ctx.saved_tensors``).
"""

from __future__ import annotations

import functools
import inspect
import threading

from .dtypes import dtype_of
from .signature import Signature, TensorSpec, spec_of

__all__ = ["torch_op", "compile_for"]

_SCALAR_SCHEMA = {"int": "int", "uint": "int", "float": "float", "bool": "bool"}


def torch_op(kernel, /, *, name: str, outputs=None, fake=None, backward=None, setup_context=None):
    """Register ``kernel`` (a kernel, a kernel factory, or a function that launches kernels:
    see the module docstring) as the torch operator ``name`` ("namespace::op") and return it
    (a ``torch.library.CustomOpDef``: call it, or ``torch.ops.namespace.op``)."""
    import torch

    _check_name(name)
    for arg, value in (("fake", fake), ("backward", backward), ("setup_context", setup_context)):
        if value is not None and not callable(value):
            raise TypeError(f"torch_op: {arg} must be a function, got {type(value).__name__}")
    if setup_context is not None and backward is None:  # before anything is registered
        raise TypeError("torch_op: setup_context= goes with backward=")
    from .executable import Executable
    from .script.parser import KernelFunction

    if isinstance(kernel, (KernelFunction, Executable)):
        plan = _Plan.fixed(kernel, outputs)
    elif not callable(kernel):
        raise TypeError(f"torch_op: kernel must be a @T.function kernel, an executable or a "
                        f"function, got {type(kernel).__name__}")  # fmt: skip
    elif outputs is None:
        if fake is None:
            raise TypeError(
                f"torch_op({name!r}): a function is either a kernel factory (name the kernel's "
                f"outputs: outputs=['Y']) or launches tirx kernels itself (give its fake "
                f"implementation: fake=...)"
            )
        op = torch.library.custom_op(name, kernel, mutates_args=())
        return _finish(op, fake, backward, setup_context)
    else:
        plan = _Plan.factory(kernel, outputs)
    op = torch.library.custom_op(name, plan.run, mutates_args=(), schema=plan.schema())
    return _finish(op, fake or plan.fake, backward, setup_context)


def _finish(op, fake, backward, setup_context):
    op.register_fake(fake)
    if backward is not None:
        op.register_autograd(backward, setup_context=setup_context or _save_all)
    return op


def _save_all(ctx, inputs, output):
    """The default ``setup_context``: save every tensor input, then every output."""
    import torch

    outs = output if isinstance(output, tuple) else (output,)
    ctx.save_for_backward(*(x for x in inputs if isinstance(x, torch.Tensor)), *outs)


def _check_name(name) -> None:
    if not isinstance(name, str) or name.count("::") != 1:
        raise ValueError(f'torch_op: name must be "namespace::op", got {name!r}')
    ns, op = name.split("::")
    if not (ns.isidentifier() and op.isidentifier()):
        raise ValueError(f"torch_op: name {name!r}: namespace and op must be identifiers")
    if ns in _TORCH_NAMESPACES:  # its operators are torch's own: none can be replaced
        raise ValueError(f"torch_op: name {name!r} is in torch's own namespace {ns!r}: use a "
                         f"namespace of your own, e.g. 'mylib::{op}'")  # fmt: skip


_TORCH_NAMESPACES = frozenset({"aten", "prim", "prims", "_quantized", "quantized", "torch"})


def compile_for(kernel, device):
    """``tirx.compile(kernel)`` for tensors on ``device`` (a torch device or its type): the
    GPU's arch for "cuda", the simulator for "cpu". Remembered by ``tirx.compile``."""
    from .compile import compile as tirx_compile

    kind = getattr(device, "type", device)
    if kind == "cuda":
        return tirx_compile(kernel, "cuda")
    if kind == "cpu":
        return tirx_compile(kernel, "sim")
    raise ValueError(f"tirx runs kernels on cuda (GPU) or cpu (simulator) tensors, not {kind}")


class _Bound:
    """One kernel bound to the operator: its signature, the checks of the plan against it, and
    its executables per device."""

    def __init__(self, source, outputs, input_names, tensor_inputs=None):
        from .executable import Executable

        self.source = source
        self.tensor_inputs = frozenset(input_names if tensor_inputs is None else tensor_inputs)
        self.signature = _signature(source)
        self.outputs = tuple(outputs) if outputs is not None else self.signature.written
        self.exes = {}
        if isinstance(source, Executable):
            self.exes[_device_kind(source)] = source
        self._check(input_names)

    def _check(self, input_names) -> None:
        sig, known = self.signature, set(self.signature.names)
        for o in self.outputs:
            if o not in known or not sig.param(o).is_tensor:
                raise ValueError(f"outputs: {o!r} is not a tensor parameter of kernel "
                                 f"{sig.name!r} ({sig})")  # fmt: skip
        for n in input_names:
            if n not in known and n in self.tensor_inputs:  # a scalar may only configure
                raise ValueError(f"the operator's tensor input {n!r} is not a parameter of "
                                 f"kernel {sig.name!r} ({sig})")  # fmt: skip
        for p in sig.params:
            if p.writes and p.name not in self.outputs:
                raise ValueError(
                    f"kernel {sig.name!r} writes {p.name!r}, which is not among outputs="
                    f"{list(self.outputs)}: a torch operator must not change its inputs; add it "
                    f"to outputs (it is then returned, updated, as a new tensor)"
                )
            if p.name not in self.outputs and p.name not in input_names:
                raise ValueError(f"kernel {sig.name!r} parameter {p.name!r} is neither an input "
                                 f"of the operator nor among outputs")  # fmt: skip
            if p.name in self.outputs and p.reads and p.name not in input_names:
                raise ValueError(
                    f"kernel {sig.name!r} reads its output {p.name!r}: pass it as an input "
                    f"too (the operator returns the updated copy)"
                )
        if not self.outputs:
            raise ValueError(f"outputs: the operator would return nothing (kernel {sig.name!r} "
                             f"writes no tensor parameter); name its outputs")  # fmt: skip

    def exe(self, device):
        kind = device.type
        exe = self.exes.get(kind)
        if exe is None:
            from .executable import Executable

            kernel = self.source.kernel if isinstance(self.source, Executable) else self.source
            if kernel is None:
                raise ValueError(f"kernel {self.signature.name!r} was loaded for "
                                 f"{next(iter(self.exes))} only; it cannot run on {kind} "
                                 f"tensors")  # fmt: skip
            exe = self.exes[kind] = compile_for(kernel, kind)
        return exe


def _signature(source) -> Signature:
    from .executable import Executable

    if isinstance(source, Executable):
        return source.signature
    from .compile import compile as tirx_compile
    from .script.parser import KernelFunction

    if not isinstance(source, KernelFunction):
        raise TypeError(f"a kernel factory must return a @T.function kernel or an executable, "
                        f"got {type(source).__name__}")  # fmt: skip
    return tirx_compile(source, "sim").signature  # lowering only: the simulator's executable


def _device_kind(exe) -> str:
    return "cpu" if exe.target.kind == "sim" else "cuda"


class _Plan:
    """How the operator's inputs become a kernel's arguments, and its outputs."""

    def __init__(self, inputs, kinds, defaults, bind, outputs):
        self.inputs = tuple(inputs)  # the operator's parameter names
        self.kinds = tuple(kinds)  # their schema types
        self.defaults = defaults  # name -> default value (factories' scalars)
        self._bind = bind  # (args) -> _Bound
        self.outputs = outputs  # names (a fixed kernel: from its _Bound), or None

    @classmethod
    def fixed(cls, kernel, outputs) -> _Plan:
        sig = _signature(kernel)
        outs = _check_outputs(outputs) if outputs is not None else sig.written
        names = [p.name for p in sig.params if p.name not in outs or p.reads]
        bound = _Bound(kernel, outs, names)
        kinds = [_schema_type(sig.param(n)) for n in names]
        _need_tensor(names, kinds)

        def bind(args):
            for n, a in zip(names, args):
                _dense(n, a)
            return bound

        return cls(names, kinds, {}, bind, bound.outputs)

    @classmethod
    def factory(cls, make, outputs) -> _Plan:
        outputs = _check_outputs(outputs)
        params = _factory_params(make)
        names = [p.name for p in params]
        kinds = [_annotation_type(p) for p in params]
        defaults = {p.name: p.default for p in params if p.default is not p.empty}
        tensors = [n for n, k in zip(names, kinds) if k == "Tensor"]
        _need_tensor(names, kinds)
        memo, lock = {}, threading.Lock()

        def bind(args):
            specs = tuple(_spec(n, a) for n, a in zip(names, args))
            key = tuple(_hashable(sp) for sp in specs)
            bound = memo.get(key)
            if bound is None:
                with lock:
                    bound = memo.get(key)
                    if bound is None:
                        _check_dtypes(names, specs)  # a new key: a dtype not seen before
                        made = make(*specs)
                        bound = memo[key] = _Bound(made, outputs, names, tensors)
            return bound

        return cls(names, kinds, defaults, bind, tuple(outputs))

    def schema(self) -> str:
        args = []
        for n, k in zip(self.inputs, self.kinds):
            d = self.defaults.get(n, inspect.Parameter.empty)
            args.append(f"{k} {n}" + ("" if d is inspect.Parameter.empty else f"={d!r}"))
        outs = self.outputs
        ret = "Tensor" if len(outs) == 1 else "(" + ", ".join(["Tensor"] * len(outs)) + ")"
        return f"({', '.join(args)}) -> {ret}"

    def complete(self, args, kwargs) -> tuple:
        """The operator's inputs in order: torch leaves out a trailing argument equal to its
        schema default (always under torch.compile) and may pass some by name."""
        if len(args) == len(self.inputs) and not kwargs:
            return args
        values = {**self.defaults, **dict(zip(self.inputs, args)), **kwargs}
        return tuple(values[n] for n in self.inputs)

    def run(self, *args, **kwargs):
        """The real implementation: bind, compile for the device, allocate, launch."""
        args = self.complete(args, kwargs)
        bound = self._bind(args)
        device = _device_of(args, self.inputs)
        exe = bound.exe(device)
        aligned = exe.pointer_alignments
        values = dict(zip(self.inputs, args))
        call, outs = [], {}
        for p in bound.signature.params:
            if p.name in bound.outputs:
                given = values.get(p.name)
                t = (given.clone(memory_format=_contiguous()) if given is not None
                     else _empty(p, device))  # fmt: skip
                outs[p.name] = t
                call.append(t)
            elif p.is_tensor:
                call.append(_aligned(values[p.name].contiguous(), aligned.get(p.name, 1)))
            else:
                call.append(values[p.name])
        exe(*call)
        result = tuple(outs[o] for o in bound.outputs)
        return result[0] if len(result) == 1 else result

    def fake(self, *args, **kwargs):
        """The fake implementation: check inputs against the kernel, return empty outputs."""
        args = self.complete(args, kwargs)
        bound = self._bind(args)
        ref = _first_tensor(args, self.inputs)
        _device_of(args, self.inputs)
        known = set(bound.signature.names)
        for n, a in zip(self.inputs, args):
            if n in known and bound.signature.param(n).is_tensor:
                _check_tensor(bound.signature.param(n), a)
        out = tuple(
            ref.new_empty(
                bound.signature.param(o).shape, dtype=_torch_dtype(bound.signature.param(o).dtype)
            )
            for o in bound.outputs
        )
        return out[0] if len(out) == 1 else out


def _aligned(t, multiple: int):
    """``t``, or a copy of it where its data pointer is not a multiple of ``multiple``: a view
    that starts inside another tensor (``x[1:]``, a split of a packed buffer) may break the
    kernel's aligned accesses, and a copy of its own starts aligned."""
    if multiple > 1 and t.data_ptr() % multiple:
        return t.clone(memory_format=_contiguous())
    return t


def aligned_inputs(exe, args) -> list:
    """The arguments of ``exe``, each tensor whose data pointer is not the multiple the
    kernel's accesses need (``exe.pointer_alignments``) copied: for the entry points of
    operators that call kernels themselves (``flash_attention``, ``scaled_mm``). Only inputs
    may be copied: an output's writes would land in the copy."""
    need = exe.pointer_alignments
    return [_aligned(a, need.get(p.name, 1)) if hasattr(a, "data_ptr") else a
            for p, a in zip(exe.signature.params, args)]  # fmt: skip


def _spec(name: str, value):
    """``spec_of(value)``, refusing a sparse tensor (:func:`_dense`)."""
    _dense(name, value)
    return spec_of(value)


def _dense(name: str, value) -> None:
    """Refuse, with the operator's input ``name``, a tensor of a layout without a plain data
    pointer (sparse)."""
    layout = getattr(value, "layout", None)
    if layout is not None and str(layout) != "torch.strided":
        raise TypeError(f"input {name!r} is a {str(layout).removeprefix('torch.')} tensor: "
                        f"tirx kernels take dense tensors (.to_dense())")  # fmt: skip


def _check_dtypes(names, specs) -> None:
    """Refuse, with the operator's input, a tensor of a dtype tirx has no kernel for (complex,
    quantized)."""
    for name, spec in zip(names, specs):
        if isinstance(spec, TensorSpec):
            try:
                dtype_of(spec.dtype)
            except (ValueError, TypeError) as e:
                raise TypeError(f"input {name!r}: {e}") from None


def _check_outputs(outputs) -> tuple[str, ...]:
    if isinstance(outputs, str) or not isinstance(outputs, (list, tuple)):
        raise TypeError(f"outputs must be a list of parameter names, got {outputs!r}")
    if not all(isinstance(o, str) for o in outputs) or len(set(outputs)) != len(outputs):
        raise TypeError(f"outputs must be distinct parameter names, got {outputs!r}")
    return tuple(outputs)


def _need_tensor(names, kinds) -> None:
    if "Tensor" not in kinds:
        raise TypeError(f"torch_op: the operator's inputs ({', '.join(names)}) hold no tensor; "
                        f"it takes its device from its tensor inputs")  # fmt: skip


def _factory_params(make):
    try:
        params = list(inspect.signature(make).parameters.values())
    except (TypeError, ValueError):
        raise TypeError(f"torch_op: cannot read the parameters of {make!r}") from None
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise TypeError(f"torch_op: the factory takes {star}{p.name}: an operator has a fixed "
                            f"list of inputs, so name each parameter (def make(X, Y): ...)")  # fmt: skip
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"torch_op: the factory's parameter {p.name!r} must be positional "
                            f"(its parameters are the operator's inputs)")  # fmt: skip
    if not params:
        raise TypeError("torch_op: the factory takes no parameters: the operator needs inputs")
    return params


def _annotation_type(p) -> str:
    ann = p.annotation
    if ann is p.empty:
        if p.default is not p.empty and p.default is not None:
            kind = type(p.default).__name__
            raise TypeError(f"torch_op: parameter {p.name!r} of the factory has no annotation, "
                            f"so it is a tensor, but its default {p.default!r} is "
                            f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}: "
                            f"annotate it ({p.name}: {kind} = {p.default!r})")  # fmt: skip
        return "Tensor"
    text = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
    text = text.rsplit(".", 1)[-1]
    found = {"Tensor": "Tensor", "TensorSpec": "Tensor", "int": "int", "float": "float",
             "bool": "bool"}.get(text)  # fmt: skip
    if found is None:
        raise TypeError(f"torch_op: parameter {p.name!r} of the factory is annotated {text!r}; "
                        f"use torch.Tensor (or none), int, float or bool")  # fmt: skip
    return found


def _schema_type(p) -> str:
    if p.is_tensor:
        return "Tensor"
    from .dtypes import dtype_of

    return _SCALAR_SCHEMA[dtype_of(p.dtype).kind.value]


def _hashable(v):
    if isinstance(v, (TensorSpec, int, float, bool, str, type(None))):
        return v
    kind = type(v).__name__
    if kind in ("SymInt", "SymFloat", "SymBool"):  # under torch.compile: specialize
        return {"SymInt": int, "SymFloat": float, "SymBool": bool}[kind](v)
    return repr(v)


def _device_of(args, names):
    import torch

    devices = {a.device for a in args if isinstance(a, torch.Tensor)}
    if len(devices) > 1:
        got = ", ".join(f"{n}: {a.device}" for n, a in zip(names, args)
                        if isinstance(a, torch.Tensor))  # fmt: skip
        raise ValueError(f"the operator's tensors must be on one device, got {got}")
    return devices.pop()


def _first_tensor(args, names):
    import torch

    for a in args:
        if isinstance(a, torch.Tensor):
            return a
    raise TypeError(f"the operator needs a tensor input ({', '.join(names)})")


def _check_tensor(p, t) -> None:
    want = _torch_dtype(p.dtype)
    if t.dtype != want:
        raise TypeError(f"parameter {p.name!r} expects dtype {p.dtype}, got {t.dtype}")
    if tuple(t.shape) != p.shape:
        raise ValueError(f"parameter {p.name!r} expects shape {p.shape}, got {tuple(t.shape)}")


def _empty(p, device):
    import torch

    return torch.empty(p.shape, dtype=_torch_dtype(p.dtype), device=device)


@functools.cache
def _torch_dtype(name: str):
    import torch

    from .dtypes import dtype_of

    return getattr(torch, dtype_of(name).torch_name)


def _contiguous():
    import torch

    return torch.contiguous_format
