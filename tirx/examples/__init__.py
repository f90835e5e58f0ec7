"""Example kernels. ``warp_matmul`` is the seed guide's code, verbatim."""
