"""Per-row sum of squares: (x * x).sum(dim=1), which eager computes via a full-size temporary."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x * x).sum(dim=1)


ROWS, COLS = 2048, 2048


def get_inputs():
    return [torch.randn(ROWS, COLS) * 2 + 0.5]


def get_init_inputs():
    return []
