"""The kernel language: the ``T`` namespace and the ``@T.function`` parser."""

from .namespace import T

__all__ = ["T"]
