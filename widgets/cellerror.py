"""The error a ``%%tirx`` cell raises: IPython shows its short text only."""

from __future__ import annotations

__all__ = ["CellError"]


class CellError(Exception):
    """An error from a ``%%tirx`` cell, shown by IPython as its short text only."""

    def __init__(self, text: str, original: BaseException | None = None):
        super().__init__(text)
        self.text = text
        self.original = original

    def _render_traceback_(self) -> list[str]:
        return self.text.splitlines()
