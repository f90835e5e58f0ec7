"""Compilation targets: ``"cuda"`` (optionally ``-arch=sm_XX``), ``"sim"``, or automatic."""

from __future__ import annotations

import re
from dataclasses import field

from .dtypes import StrKind
from .errors import TirxError
from .frozen import Frozen, frozen

__all__ = ["Target", "TargetKind", "SIM_SMS", "is_arch"]

_ARCH = re.compile(r"^sm_(\d+)a?$")


def is_arch(text: str) -> bool:
    """Whether ``text`` is spelt as a CUDA architecture: ``sm_90``, ``sm_90a``."""
    return bool(_ARCH.match(text))


#: the multiprocessors the simulator gives a ``grid="sms"`` kernel unless told otherwise: the
#: H200's 132, the GPU this project measures on (docs/semantics.md, "Launch")
SIM_SMS = 132


class TargetKind(StrKind):
    """The machine a kernel is compiled for."""

    CUDA = "cuda"
    SIM = "sim"


@frozen
class Target(Frozen):
    """Where a kernel runs. ``kind`` is a :class:`TargetKind` (equal to "cuda" or "sim");
    ``arch`` like "sm_90" (cuda only).

    ``auto`` records that the kind was chosen for the user (``target=None``): cuda when a GPU
    is visible, otherwise the simulator.

    ``arch_given`` records that the caller named the arch (``"cuda -arch=sm_90"``, or a Target
    made directly): such a compile asks the GPU nothing and imports no driver bindings, and its
    module is loaded at the first launch (on a GPU machine NVRTC's first compile initializes the
    CUDA driver, which a cold compile starts beside its lowering). Without it the arch came from probing the GPU, and a visible GPU loads the
    module at compile time. (Not part of equality: both name the same code.)

    ``sms`` is the multiprocessor count a ``grid="sms"`` kernel is launched for (``-sms=N``, or
    ``tirx.compile(..., sms=N)``); None: the GPU's own count for cuda, :data:`SIM_SMS` for the
    simulator.
    """

    kind: TargetKind
    arch: str = "sm_90"
    auto: bool = False
    arch_given: bool = field(default=True, compare=False, repr=False)
    sms: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "kind", TargetKind(self.kind))  # Target("sim") works too
        if self.sms is not None and (
            not isinstance(self.sms, int) or isinstance(self.sms, bool) or not 1 <= self.sms < 2**31
        ):
            raise TirxError(
                f"sms must be a positive int (multiprocessors), got {self.sms!r}",
                hint='e.g. tirx.compile(kernel, target="sim", sms=4): a grid="sms" kernel '
                "then runs 4 blocks",
            )

    is_arch = staticmethod(is_arch)  # for the notebook layer, which sees only tirx's names

    def unsupported(self) -> str | None:
        """Why the installed NVRTC cannot compile for this target's named arch, in a sentence;
        None where it can, where no arch was named (or it is the simulator), and where there
        is no NVRTC to ask (the compile then says what is missing)."""
        if self.kind is not TargetKind.CUDA or not self.arch_given:
            return None
        try:
            from .backend.cuda.libnvrtc import api

            archs = api().supported_archs()
        except Exception:  # noqa: BLE001 - no NVRTC library: the compile says what is missing
            return None
        number, specific = self.arch_number, self.arch.endswith("a")
        if number in archs and (number >= 90 or not specific):
            return None
        known = ", ".join(f"sm_{n}" for n in archs if n >= 80)
        return (f"unknown arch {self.arch}: NVRTC here compiles for {known} (and, with an 'a' "
                "for arch-specific features, sm_90a and newer)")  # fmt: skip

    @property
    def arch_number(self) -> int:
        return int(_ARCH.match(self.arch).group(1))

    def __str__(self) -> str:
        text = "sim" if self.kind is TargetKind.SIM else f"cuda -arch={self.arch}"
        text += f" -sms={self.sms}" if self.sms is not None else ""
        return text + (" (auto)" if self.auto else "")

    @staticmethod
    def parse(spec) -> Target:
        """Accept a Target, None (auto), "cuda", "cuda -arch=sm_90", "sim"."""
        from . import config

        if isinstance(spec, Target):
            return spec
        auto = spec is None
        if spec is None:
            spec = config.default_target()
        if spec is None:
            from .backend.cuda.driver import gpu_count

            spec = "cuda" if gpu_count() > 0 else "sim"
        if not isinstance(spec, str):
            raise TirxError(f"target must be a string or tirx.Target, got {spec!r}")
        words = spec.split()
        if not words or words[0] not in ("cuda", "sim"):
            raise TirxError(
                f"unknown target {spec!r}",
                hint='use "cuda", "cuda -arch=sm_90", "sim", or None to choose automatically',
            )
        sms = None
        rest = []
        for w in words[1:]:
            if w.startswith("-sms="):
                value = w[len("-sms=") :]
                if not value.isdigit() or int(value) < 1:
                    raise TirxError(f"bad target option {w!r}", hint="e.g. -sms=4")
                sms = int(value)
            else:
                rest.append(w)
        if words[0] == "sim":
            if rest:
                raise TirxError(
                    f"the sim target takes no options but -sms=N, got {spec!r}",
                    hint='e.g. "sim" or "sim -sms=4"',
                )
            return Target(TargetKind.SIM, "sm_90", auto, sms=sms)
        arch, given = None, True
        for w in rest:  # (string tests: a regex compiled here costs 0.2 ms per process)
            if not w.startswith("-arch="):
                raise TirxError(f"unknown cuda target option {w!r}", hint="e.g. -arch=sm_90")
            value = w[len("-arch=") :]
            if not _ARCH.match(value):
                raise TirxError(f"{w!r}: {value!r} is not a CUDA architecture",
                                hint="write it as sm_80, sm_90 or sm_90a")  # fmt: skip
            if arch is not None:
                raise TirxError(f"the target {spec!r} names two archs: give one -arch=",
                                hint=f'e.g. "cuda -arch={value}"')  # fmt: skip
            arch = value
        if arch is None:
            from .backend.cuda.driver import device_arch, gpu_count

            arch = device_arch(0) if gpu_count() > 0 else None
            arch, given = arch or "sm_80", False
        if int(_ARCH.match(arch).group(1)) < 80:
            raise TirxError(f"tirx needs sm_80 or newer, got {arch}")
        return Target(TargetKind.CUDA, arch, auto, given, sms)
