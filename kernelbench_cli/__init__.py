"""kbench: judge GPU kernels against reference PyTorch models."""
__version__ = "0.1.0"
