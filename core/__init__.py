"""kernelpilot: tile tuning of CUTLASS kernels and a multi-DSL kernel optimization pipeline.

Importing this package is cheap on purpose: the CLI must answer ``--help`` instantly, so nothing here
imports torch, triton, litellm or the plugins.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernelpilot")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
