"""The one compiled piece: the executable's memo-hit launch (tirx/backend/cuda/_launch.c).

It is optional: where no C compiler or no Python headers are found, the build skips it (a
warning, not an error) and executables launch through their Python runner (a few hundred
nanoseconds more per launch). The source travels in the sdist as the extension's source and
in the wheel as package data (pyproject.toml), so an installed copy shows what was built.
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
