"""The IR builder the parser drives (and that can be driven directly).

Scopes are an explicit stack of frames. Compile-time bindings (views, layouts, constants) live
in the frame of the block that made them; kernel variables live in the function frame and are
declared once at the top of the kernel.
"""

from __future__ import annotations

import contextlib

from ..dtypes import DType, dtype_of
from ..errors import Span, TirxSyntaxError
from ..ir import nodes as ir
from .checks import int_literal
from .tensor import default_layout, make_buffer, region

__all__ = ["FunctionBuilder"]

_C_RESERVED = {
    "int",
    "float",
    "double",
    "char",
    "short",
    "long",
    "unsigned",
    "signed",
    "void",
    "bool",
    "if",
    "else",
    "for",
    "while",
    "do",
    "break",
    "continue",
    "return",
    "switch",
    "case",
    "default",
    "goto",
    "struct",
    "union",
    "enum",
    "const",
    "volatile",
    "static",
    "extern",
    "auto",
    "register",
    "sizeof",
    "typedef",
    "inline",
    "asm",
    "new",
    "delete",
    "this",
    "class",
    "template",
    "typename",
    "namespace",
    "using",
    "true",
    "false",
    "main",
    "min",
    "max",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    # the rest of C++'s keywords and alternative tokens (NVRTC compiles C++)
    *"""alignas alignof and and_eq bitand bitor catch char8_t char16_t char32_t co_await co_return
    co_yield compl concept const_cast consteval constexpr constinit decltype dynamic_cast
    explicit export friend mutable noexcept not not_eq nullptr operator or or_eq private
    protected public reinterpret_cast requires static_assert static_cast thread_local throw try
    typeid virtual wchar_t xor xor_eq restrict NULL""".split(),
    # names the generated code itself uses
    "TIRX_DEVICE",
    "printf",
    "clock64",
    "floorf",
    "isinf",
    "isnan",
    # the CUDA math functions the math intrinsics call (tirx/backend/cuda/intrinsics.py)
    *"""expf exp exp2f exp2 exp10f exp10 logf log log2f log2 log10f log10 sqrtf sqrt rsqrtf
    rsqrt tanhf tanh sinf sin cosf cos erff erf powf pow fabsf fabs ceilf ceil floor nearbyintf
    nearbyint truncf trunc fmaf fma isfinite""".split(),
}


class _Branch:
    def __init__(self, builder, cond, span):
        self.b, self.cond, self.span = builder, cond, span
        self.then: list = []
        self.orelse: list | None = None

    def else_(self):
        self.b._pop_body()
        self.b.end_frame("`if` branch", self.span)
        self.orelse = []
        self.b.bodies.append(self.orelse)
        self.b.frames.append({})


class FunctionBuilder:
    def __init__(self, name: str, span: Span | None = None):
        # the kernel's C name (its entry point in the module): the Python name when C can
        # spell it, else the ASCII spelling variables get too (``λ`` -> ``u3bb``)
        if not (name.isascii() and name.isidentifier()) or name in _C_RESERVED:
            name = (_ascii_identifier(name) or "kernel") + ("_" if name in _C_RESERVED else "")
        self.name = name
        self.span = span
        self.params: list = []
        self.allocations: list[ir.Buffer] = []
        self.variables: list[ir.Var] = []
        self.frames: list[dict] = [{}]
        self.base = 0  # the frame lookups stop at and variables go to (a macro's own)
        self.immutable: set[ir.Var] = set()  # variables bound by T.let / T.bind_
        self.bodies: list[list] = [[]]
        self.loop_depth = 0
        self.launch: ir.LaunchConfig | None = None
        self.mutable_names: frozenset[str] = frozenset()
        self.cells: set = set()  # the buffers of T.shared_scalar cells (a name that stands for one)
        # names bound in a run-time branch or loop body that has ended, by (body, name): (which
        # one, its span, the body). The body is the frame of the kernel or macro expansion
        # whose statements bound it (frames[base]): only a use in that body is told of it.
        self.ended: dict[tuple[int, str], tuple[str, Span | None, dict]] = {}
        self._c_names: set[str] = set()

    # ------------------------------------------------------------------ names

    def c_name(self, hint: str) -> str:
        """A unique C identifier for a kernel symbol named ``hint`` by the user."""
        # C identifiers are ASCII: any other character of a Python name (``λ``) is spelt by
        # its code point (``u3bb``), so distinct names stay distinct before de-duplication
        base = hint if hint.isascii() and hint.isidentifier() else _ascii_identifier(hint)
        base = base or "v"
        reserved = base.startswith(("__", "tirx_")) or (base[:1] == "_" and base[1:2].isupper())
        if base in _C_RESERVED or reserved:  # (C reserves _X... and __... for itself)
            base = base + "_"
        name, k = base, 1
        while name in self._c_names:
            k += 1
            name = f"{base}_{k}"
        self._c_names.add(name)
        return name

    def lookup(self, name: str):
        for frame in reversed(self.frames[self.base :]):
            if name in frame:
                return frame[name]
        raise KeyError(name)

    def visible_names(self) -> list[str]:
        """The names :meth:`lookup` finds now (for "did you mean" hints)."""
        return [n for frame in self.frames[self.base :] for n in frame]

    def bind(self, name: str, value) -> None:
        self.frames[-1][name] = value

    def end_frame(self, what: str, span) -> None:
        """Leave the innermost frame, a run-time branch's or loop body's (``what``, at
        ``span``): its names are no longer visible (:meth:`ended_name` says why)."""
        for name in self.frames.pop():
            self._ended(name, what, span)

    def _ended(self, name: str, what: str, span) -> None:
        body = self.frames[self.base]
        self.ended[(id(body), name)] = (what, span, body)

    def ended_name(self, name: str) -> tuple[str, Span | None] | None:
        """Where ``name``, not visible now, was bound in a branch or loop that has ended, by
        the statements of the body being read (the kernel's, or a macro expansion's: a name
        a macro bound is not the caller's, nor a caller's the macro's)."""
        body = self.frames[self.base]
        found = self.ended.get((id(body), name))
        return found[:2] if found is not None and found[2] is body else None

    # ------------------------------------------------------------------ params

    def add_tensor_param(self, name, shape, dtype: DType, span):
        layout = default_layout(shape)
        buf = ir.Buffer(
            self.c_name(name),
            dtype,
            ir.Scope.GLOBAL,
            shape,
            layout,
            int(layout.span("m")),
            16,
            span,
        )
        self.params.append(buf)
        self.frames[0][name] = ir.View(buf, dtype, shape, layout, 0, name)

    def add_scalar_param(self, name, dtype: DType, span, assigned: bool = False):
        """A scalar parameter. One the body assigns (``assigned``) is copied into a kernel
        variable first, which the name then refers to: as in Python and C, assigning a
        parameter changes the thread's own copy, on both targets."""
        var = ir.Var(self.c_name(name), dtype)
        self.params.append(var)
        self.frames[0][name] = var
        if assigned:
            copy = self.new_var(name, ir.F32 if dtype.name in ("float16", "bfloat16") else dtype)
            self.emit(ir.Assign(copy, ir.cast(var, copy.dtype), span))
            self.frames[0][name] = copy

    # ------------------------------------------------------------- statements

    def emit(self, stmt) -> None:
        self.bodies[-1].append(stmt)

    def _pop_body(self) -> ir.Stmt:
        return _seq(self.bodies.pop())

    def alloc(
        self, name_hint, shape, dtype, scope, layout="default", align=16, span=None, dynamic=False
    ):
        buf, view = make_buffer(
            self.c_name(name_hint or "buf"), shape, dtype, scope, layout, align, span, dynamic
        )
        self.allocations.append(buf)
        return ir.View(buf, view.dtype, view.shape, view.layout, 0, name_hint or buf.name)

    def new_var(self, name: str, dtype) -> ir.Var:
        var = ir.Var(self.c_name(name), dtype_of(dtype))
        self.variables.append(var)
        return var

    def assign(self, name: str, value, span, force_var=False) -> None:
        current = self._lookup_or_none(name)
        if isinstance(current, ir.ElemLoad) and current.view.buffer in self.cells:
            self.store(current.view, current.indices, value, span)  # x = v into x's cell
            return
        numeric = isinstance(value, (bool, int, float)) and not isinstance(value, ir.View)
        # a number stays a compile-time value where straight-line code keeps one: assigned
        # once on the path (source.mutable_names), not in a run-time branch (a static if's
        # taken branch is straight-line code: it has no frame of its own)
        runtime = isinstance(value, ir.Expr) or (
            numeric
            and (
                force_var
                or name in self.mutable_names
                or isinstance(current, ir.Var)
                or len(self.frames) - 1 > self.base
            )
        )
        if not runtime:
            if isinstance(current, ir.Var):
                raise TirxSyntaxError(
                    f"{name!r} is a kernel variable and cannot be rebound to {type(value).__name__}",
                    span,
                )
            self.bind(name, value)
            return
        value = ir.as_expr(int_literal(value))
        _check_mutable(self, current, name, span)
        if isinstance(current, ir.Var):
            var = current
        else:
            dtype = value.dtype
            if dtype.name in ("float16", "bfloat16"):
                dtype = ir.F32  # 16-bit values compute in float32
            var = self.new_var(name, dtype)
            self.frames[self.base][name] = var
        self.emit(ir.Assign(var, ir.cast(value, var.dtype), span))

    def _lookup_or_none(self, name):
        try:
            return self.lookup(name)
        except KeyError:
            return None

    def store(self, view: ir.View, indices, value, span) -> None:
        sub = region(view, list(indices))
        if sub is not None:
            raise TirxSyntaxError(
                "assigning to a region is not supported; assign elements one at a time",
                span,
            )
        if isinstance(value, ir.View):
            raise TirxSyntaxError("cannot assign a tensor to an element", span)
        self.emit(ir.ElemStore(view, tuple(indices), ir.as_expr(int_literal(value)), span))

    @contextlib.contextmanager
    def loop(self, name, start, stop, step, kind, span):
        current = self._lookup_or_none(name)
        _check_mutable(self, current, name, span)
        if isinstance(current, ir.Var) and current.dtype == ir.I32:
            var = current
        else:
            var = self.new_var(name, "int32")
        self.bodies.append([])
        self.frames.append({name: var})
        self.loop_depth += 1
        try:
            yield var
        finally:
            self.loop_depth -= 1
            self.end_frame("`for` loop", span)
            self._ended(name, "`for` loop's variable", span)
            body = self._pop_body()
        self.emit(
            ir.For(var, ir.cast(start, ir.I32), ir.cast(stop, ir.I32), step, body, kind, span)
        )

    @contextlib.contextmanager
    def while_loop(self, cond, span):
        self.bodies.append([])
        self.frames.append({})
        self.loop_depth += 1
        try:
            yield
        finally:
            self.loop_depth -= 1
            self.end_frame("`while` loop", span)
            body = self._pop_body()
        self.emit(ir.While(ir.as_expr(cond), body, span))

    @contextlib.contextmanager
    def branch(self, cond, span):
        br = _Branch(self, cond, span)
        self.bodies.append(br.then)
        self.frames.append({})
        try:
            yield br
        finally:
            self.end_frame("`if` branch", span)
            last = self.bodies.pop()
        then = _seq(br.then)
        orelse = _seq(last) if br.orelse is not None else None
        self.emit(ir.If(cond, then, orelse, span))

    def loop_control(self, stmt) -> None:
        if self.loop_depth == 0:
            word = "break" if isinstance(stmt, ir.Break) else "continue"
            raise TirxSyntaxError(f"{word} outside a loop", stmt.span)
        self.emit(stmt)

    def finish(self) -> ir.Function:
        if self.launch is None:
            raise TirxSyntaxError("the kernel has no T.device_entry(launch=...)", self.span)
        return ir.Function(
            name=self.name,
            params=tuple(self.params),
            body=_seq(self.bodies[0]),
            launch=self.launch,
            allocations=tuple(self.allocations),
            variables=tuple(self.variables),
            span=self.span,
        )


def _check_mutable(b: FunctionBuilder, current, name: str, span) -> None:
    if isinstance(current, ir.Var) and current in b.immutable:
        raise TirxSyntaxError(
            f"{name!r} is an immutable binding (T.let / T.bind_) and cannot be assigned",
            span,
            hint=f"bind the new value to another name, or make {name!r} a variable "
            "with a plain assignment",
        )


def _ascii_identifier(name: str) -> str:
    out = []
    for ch in name:
        if ch.isascii():
            out.append(ch if ch.isalnum() or ch == "_" else "_")
        else:
            out.append(f"u{ord(ch):x}")
    text = "".join(out)
    return "_" + text if text[:1].isdigit() else text


def _seq(stmts) -> ir.Stmt:
    if len(stmts) == 1:
        return stmts[0]
    return ir.Seq(tuple(stmts))
