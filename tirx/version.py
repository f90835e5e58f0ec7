"""The version of tirx (a leaf module: the caches key on it without importing tirx)."""

__version__ = "0.1.0"
