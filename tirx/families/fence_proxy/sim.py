"""The proxy fence in the simulator (PTX ISA, memory consistency model: "Proxies"; "membar /
fence: fence.proxy.async"). ``fence.proxy.async`` (all state spaces) and
``fence.proxy.async.shared::cta`` publish the executing thread's generic-proxy writes of shared
memory to the async proxy (:mod:`tirx.sim.proxy`): an asynchronous reader issued after a barrier
that orders it after the fence sees them. ``fence.proxy.async.global`` is accepted and publishes
nothing here: the model keeps no proxy state for global memory (a bulk store's full wait makes
its writes visible to its thread); a shared write it leaves unfenced is reported naming it."""

from __future__ import annotations

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.trace import record_copy

__all__ = ["compile_call", "FORMS"]

# fence text -> whether it orders shared memory (".global" orders global memory only)
_FENCES = {
    "fence.proxy.async": True,
    "fence.proxy.async.shared::cta": True,
    "fence.proxy.async.global": False,
}
FORMS = "fence.proxy.async[.global|.shared::cta]"


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one proxy fence for a set of threads."""
    if text not in _FENCES:
        raise unknown_instruction(stmt, text, FORMS)
    if stmt.operands:
        raise compiler.error(f"{text} takes no operands")
    proxy = m.shared.async_proxy() if _FENCES[text] else None
    span, sh = stmt.span, m.shared

    def fence(idx):
        m.span = span
        if proxy is not None:
            proxy.fence(idx)
        else:  # orders global memory only: remembered for the message of a shared write
            site = sh.site()
            sh.global_fences.update(dict.fromkeys(idx.tolist(), site))
        if m.traces is not None:
            record_copy(m, stmt, "fence", idx)

    return fence
