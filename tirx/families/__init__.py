"""One folder per instruction or construct family; see :mod:`tirx.catalog`."""
