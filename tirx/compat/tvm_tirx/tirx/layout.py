"""``tvm_tirx.tirx.layout`` is ``tirx.layout``."""

from tirx.layout import *  # noqa: F401,F403
from tirx.layout import __all__  # noqa: F401
