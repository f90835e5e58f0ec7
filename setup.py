"""The one compiled piece: the executable's memo-hit launch (tirx/backend/cuda/_launch.c).

It is optional: where no C compiler or no Python headers are found, the build skips it and
executables launch through their Python runner (a few hundred nanoseconds more per launch).
Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tirx.backend.cuda._launch",
            ["tirx/backend/cuda/_launch.c"],
            optional=True,
        )
    ]
)
