"""The statement parser: drives a :class:`~tirx.script.builder.FunctionBuilder` from the AST of
one ``def`` (:class:`Parser`), statement by statement, with the expressions evaluated by
:class:`~tirx.script.evaluator.Evaluator`.

Every statement kind the language has is a ``stmt_<Kind>`` method; any other is refused with
the user's line and a hint. Nothing here recurses in Python: compound statements are
generators run from an explicit stack (:meth:`Parser.block`), so ``elif`` chains as long as
CPython compiles parse without a recursion limit.
"""

from __future__ import annotations

import ast

from ..errors import Span, TirxError, TirxSyntaxError
from ..ir import nodes as ir
from . import forms, loops
from .builder import FunctionBuilder
from .evaluator import Evaluator
from .namespace import LaunchSpec, ScalarType, TensorAnnotation
from .refusals import python_failure, refusal
from .source import assigned_names, is_docstring, mutable_names

__all__ = ["Parser"]


class Parser:
    """Drives a :class:`FunctionBuilder` from the AST of one ``def``."""

    def __init__(self, filename: str, scope: dict, annotations=None):
        self.filename = filename
        self.scope = scope
        self.annotations = annotations or {}
        # What the parse depended on besides the def's text, for the front-end cache: the
        # names the body resolved outside itself (scope, builtins; in order), and whether it
        # compared objects by identity (``is`` with neither side None, True or False).
        self.free_names: dict[str, None] = {}
        self.compared_identity = False
        # The same per macro expanded, by id: (macro, the names its body resolved in the
        # macro's own scope, over all its expansions). On a front-end cache hit the lazy
        # parse expands each macro with its scope and file lines as read at decoration, by
        # id: (macro, scope, lines, names), set by the decorator (frontend.Record.snapshots).
        self.macro_names: dict[int, tuple] = {}
        self.macro_snapshots: dict[int, tuple] = {}
        self.expanding: list = []  # the macros being expanded, outermost first
        self.called = None  # (macro name, call Span) of the innermost expansion: spans keep it

    def span(self, node) -> Span:
        end = node.end_col_offset if getattr(node, "end_lineno", None) == node.lineno else None
        return Span(self.filename, node.lineno, node.col_offset, end, self.called)

    def parse(self, fdef: ast.FunctionDef) -> ir.Function:
        b = FunctionBuilder(fdef.name, self.span(fdef))
        self.b = b
        self.ev = Evaluator(self, b)
        self._check_signature(fdef)
        b.mutable_names = mutable_names(fdef)
        assigned = assigned_names(fdef)
        for arg in fdef.args.args:
            self._param(arg, arg.arg in assigned)
        body = list(fdef.body)
        if body and is_docstring(body[0]):
            body = body[1:]
        if (
            body
            and isinstance(body[0], ast.With)
            and any(self._is_device_entry(ast.Expr(item.context_expr)) for item in body[0].items)
        ):
            raise TirxSyntaxError(
                "T.device_entry(...) is a statement, not a with-block",
                self.span(body[0]),
                hint="write T.device_entry(launch=...) as the kernel's first statement and the "
                "body after it, at the same indentation",
            )
        if not body or not self._is_device_entry(body[0]):
            where = body[0] if body else fdef
            raise TirxSyntaxError(
                "a kernel must start with T.device_entry(launch=T.cuda.LaunchConfig(...))",
                self.span(where),
                hint="add T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32)) "
                "as the first statement",
            )
        self._device_entry(body[0])
        self.block(body[1:])
        return b.finish()

    # ------------------------------------------------------------------ signature

    def _check_signature(self, fdef):
        type_params = getattr(fdef, "type_params", None)  # def k[T](...), Python 3.12
        if type_params:
            raise TirxSyntaxError(
                "a generic kernel (def k[T](...)) is not part of the kernel language",
                self.span(type_params[0]),
                hint="make a Python function that takes the values and defines the kernel "
                "inside (a factory); the kernel captures them as compile-time values",
            )
        a = fdef.args
        extras = a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults
        if extras:
            raise TirxSyntaxError(
                "kernel parameters must be plain positional parameters with annotations",
                self.span(fdef),
            )
        if fdef.returns is not None:
            raise TirxSyntaxError(
                "a kernel returns nothing; remove the return annotation", self.span(fdef.returns)
            )

    def _param(self, arg: ast.arg, assigned: bool = False):
        span = self.span(arg)
        if arg.annotation is None:
            raise TirxSyntaxError(
                f"parameter {arg.arg!r} needs an annotation",
                span,
                hint='annotate it, e.g. A: T.Tensor((16, 16), "float16") or n: T.int32',
            )
        if arg.arg in self.annotations:
            ann = self.annotations[arg.arg]
        else:
            ann = self._unevaluated_annotation(arg)
        if isinstance(ann, TensorAnnotation):
            self.b.add_tensor_param(arg.arg, ann.shape, ann.dtype, span)
        elif isinstance(ann, ScalarType):
            _check_scalar_parameter(arg.arg, ann.dtype, self.span(arg.annotation))
            self.b.add_scalar_param(arg.arg, ann.dtype, span, assigned)
        else:
            raise TirxSyntaxError(
                f"parameter {arg.arg!r}: annotation must be T.Tensor(shape, dtype) or a scalar "
                f"type such as T.int32, got {ann!r}",
                self.span(arg.annotation),
            )

    def _unevaluated_annotation(self, arg: ast.arg):
        """An annotation Python left as a string (``from __future__ import annotations``):
        evaluated from the kernel's globals and closure, which hold only the names the body
        uses; a name the annotation alone uses is missing there, and the hint says why."""
        try:
            return self.ev.const(arg.annotation)
        except TirxSyntaxError as e:
            if not (e.message.startswith("name ") and e.message.endswith("is not defined")):
                raise
            closest = f" ({e.hint})" if e.hint else ""
            raise TirxSyntaxError(
                e.message,
                e.span,
                hint="Python left this annotation unevaluated (`from __future__ import "
                "annotations` or a string), so tirx evaluates it from the kernel's globals and "
                "closure, and a closure holds only the names the kernel body uses: remove the "
                f"future import from the kernel's module, or use the name in the body{closest}",
            ) from None

    def _is_device_entry(self, stmt) -> bool:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        try:
            f = self.ev.const(stmt.value.func)
        except TirxError:
            return False
        return getattr(f, "key", None) == "device_entry"

    def _device_entry(self, stmt):
        call = stmt.value
        kw = {k.arg: self.ev.const(k.value) for k in call.keywords}
        launch = kw.pop("launch", None)
        if call.args and launch is None:
            launch = self.ev.const(call.args[0])
        if not isinstance(launch, LaunchSpec) or kw:
            raise TirxSyntaxError(
                "T.device_entry takes launch=T.cuda.LaunchConfig(grid=..., block=...)",
                self.span(call),
            )
        self.b.launch = ir.LaunchConfig(
            launch.grid, launch.block, launch.dynamic_smem_bytes, launch.cluster, launch.sms_grid
        )

    # ----------------------------------------------------------------- statements

    def block(self, stmts) -> None:
        """Parse a list of statements, and everything nested in them, without recursion.

        An ``elif`` chain nests each arm in the previous one's ``orelse``, and CPython compiles
        chains of thousands of arms: more than Python's recursion limit allows a recursive
        parser. So the handlers of compound statements (``if``, ``for``, ``while``) are
        generators: each yields the blocks inside it in order and resumes when that block is
        done, and this loop runs them from its own stack. A simple statement is parsed at once
        (:meth:`stmt`)."""
        stack: list = [(None, iter(stmts))]  # (compound node or None for a block, iterator)
        try:
            while stack:
                node, steps = stack[-1]
                if node is None:  # a block: its next statement
                    s = next(steps, None)
                    if s is None:
                        stack.pop()
                    elif type(s) in _COMPOUND:
                        stack.append((s, self._compound(s)))
                    else:
                        self.stmt(s)
                    continue
                try:
                    inner = next(steps, None)  # a compound statement's next block
                except TirxError as e:
                    raise e.with_span(self.span(node)) from None
                except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                    raise python_failure(e, self.span(node)) from None
                if inner is None:
                    stack.pop()
                else:
                    stack.append((None, iter(inner)))
        except BaseException:
            # leave the builder's scopes as the handlers' with-blocks would: innermost first
            for node, steps in reversed(stack):
                if node is not None:
                    steps.close()
            raise

    def _compound(self, node):
        return getattr(self, "stmt_" + type(node).__name__)(node)

    def stmt(self, node) -> None:
        """Parse one statement (a compound one with everything inside it)."""
        if type(node) in _COMPOUND:
            self.block([node])
            return
        handler = getattr(self, "stmt_" + type(node).__name__, None)
        if handler is None:
            raise refusal(node, self.span(node))
        self.statement = node  # the simple statement being parsed (see script/effects.py)
        try:
            handler(node)
        except TirxError as e:
            raise e.with_span(self.span(node)) from None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise TirxSyntaxError(str(e), self.span(node)) from None

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        if is_docstring(node) or _is_ellipsis(node.value):  # ``...`` as a body: a pass
            return
        if not isinstance(node.value, ast.Call):
            raise TirxSyntaxError("an expression statement has no effect", self.span(node))
        value = self.ev.call(node.value)
        if value is not None:
            raise TirxSyntaxError(
                "this value is computed and dropped",
                self.span(node),
                hint="assign it to a name or remove the line",
            )

    def stmt_Assign(self, node):
        if len(node.targets) != 1:
            raise TirxSyntaxError(
                "chained assignment (a = b = ...) is not supported", self.span(node)
            )
        target = node.targets[0]
        if forms.assign_form(self, node):  # x = T.meta_var(...), T.bind_(...), ...
            return
        if isinstance(target, ast.Name):
            value = self.ev.value(node.value, name_hint=target.id)
            self.b.assign(target.id, value, self.span(node))
        elif isinstance(target, ast.Subscript):
            self._store(target, self.ev.value(node.value), node)
        else:
            hint = "assign one value per statement: x = a, then y = b on the next line"
            if isinstance(target, (ast.Tuple, ast.List)):  # the values, kept in Python
                names, value = ", ".join(map(ast.unparse, target.elts)), ast.unparse(node.value)
                hint = (f"unpack the values with T.meta_var: {names} = "
                        f"T.meta_var({value}) (a macro's tuple, or a tuple of values); or "
                        f"{hint}")  # fmt: skip
            raise TirxSyntaxError(
                "only names and tensor elements can be assigned (no tuple unpacking)",
                self.span(target),
                hint=hint,
            )

    def stmt_AnnAssign(self, node):
        if forms.let_form(self, node):  # x: T.let = ...
            return
        if not isinstance(node.target, ast.Name):
            raise TirxSyntaxError("annotated assignment needs a name", self.span(node))
        ann = self.ev.const(node.annotation)
        if not isinstance(ann, ScalarType):
            raise TirxSyntaxError(
                "annotate local variables with a scalar type, e.g. x: T.int32",
                self.span(node.annotation),
            )
        # ``x: T.int32`` alone declares the variable; it starts at zero (the real TIRx leaves
        # it unset), so that both targets read the same value before the first assignment
        value = ir.cast(self.ev.value(node.value) if node.value is not None else 0, ann.dtype)
        self.b.assign(node.target.id, value, self.span(node), force_var=True)

    def stmt_AugAssign(self, node):
        rhs = self.ev.value(node.value)
        if isinstance(node.target, ast.Name):
            cur = self.ev.value(node.target)
            value = self.ev.binop_ast(type(node.op), cur, rhs, node)
            self.b.assign(node.target.id, value, self.span(node))
        elif isinstance(node.target, ast.Subscript):
            cur = self.ev.value(node.target)
            self._store(node.target, self.ev.binop_ast(type(node.op), cur, rhs, node), node)
        else:
            raise TirxSyntaxError(
                "only names and tensor elements can be assigned", self.span(node.target)
            )

    def _store(self, target: ast.Subscript, value, node):
        view = self.ev.value(target.value)
        if not isinstance(view, ir.View):
            raise TirxSyntaxError("only tensor elements can be assigned", self.span(target))
        indices = self.ev.indices(target.slice)
        self.b.store(view, indices, value, self.span(node))

    # The compound statements' handlers are generators that yield their inner blocks (see
    # :meth:`block`); a ``with`` around a ``yield`` closes its scope after that block.

    def stmt_For(self, node):
        if node.orelse:
            raise TirxSyntaxError("for ... else is not supported", self.span(node))
        key = loops.loop_key(self.ev, node.iter)
        if key is not None:  # T.serial, T.unroll, T.vectorized, T.grid
            yield from loops.for_form(self, node, key)
            return
        if not isinstance(node.target, ast.Name):
            raise TirxSyntaxError("the loop variable must be a single name", self.span(node.target))
        start, stop, step, kind = self.ev.loop_range(node.iter)
        with self.b.loop(node.target.id, start, stop, step, kind, self.span(node)):
            yield node.body

    def stmt_While(self, node):
        if node.orelse:
            raise TirxSyntaxError("while ... else is not supported", self.span(node))
        cond = self.ev.condition(node.test)
        with self.b.while_loop(cond, self.span(node)):
            yield node.body

    def stmt_If(self, node):
        cond = self.ev.condition(node.test)
        if isinstance(cond, bool):  # static if: trace only the taken branch, in the current
            # frame (as in Python, the names it binds stay visible after the ``if``)
            yield node.body if cond else node.orelse
            return
        with self.b.branch(cond, self.span(node)) as br:
            yield node.body
            if node.orelse:
                br.else_()
                yield node.orelse

    def stmt_Break(self, node):
        self.b.loop_control(ir.Break(self.span(node)))

    def stmt_Continue(self, node):
        self.b.loop_control(ir.Continue(self.span(node)))


# Statements whose handlers are generators over their inner blocks (see Parser.block).
_COMPOUND = frozenset({ast.If, ast.For, ast.While})


# The scalar types a kernel parameter may have: those both targets pass (the CUDA launcher
# packs each as a 32- or 64-bit value; tests/test_refusals.py checks that it has these).
SCALAR_PARAMETER_DTYPES = frozenset(
    ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float32", "float64")
)  # fmt: skip


def _check_scalar_parameter(name: str, dtype, span: Span) -> None:
    if dtype.name in SCALAR_PARAMETER_DTYPES:
        return
    fp8 = dtype.name.startswith("float8")
    what = "fp8 scalars are" if fp8 else f"{dtype.name} scalars are"
    raise TirxSyntaxError(
        f"parameter {name!r}: {what} not a kernel parameter type",
        span,
        hint=f"declare {name}: T.float32 and convert inside with T.{dtype.name}({name}), or "
        f'pass a 1-element tensor ({name}: T.Tensor((1,), "{dtype.name}")) and read {name}[0]',
    )


def _is_ellipsis(e) -> bool:
    return isinstance(e, ast.Constant) and e.value is Ellipsis
