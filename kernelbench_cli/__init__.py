"""kbench: judge GPU kernels against reference PyTorch models."""
__version__ = "0.1.0"

__all__ = ["evaluate", "evaluate_many"]


def __getattr__(name):   # lazy: importing the package must not import torch (the API pulls it in on use)
    if name in __all__:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'kernelbench_cli' has no attribute {name!r}")
