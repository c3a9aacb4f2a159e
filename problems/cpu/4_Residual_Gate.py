"""Gated residual: x + 0.5 * y * z, three element-wise ops and two temporaries in eager mode."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        return x + 0.5 * y * z


N = 1 << 22


def get_inputs():
    return [torch.randn(N), torch.randn(N), torch.rand(N)]


def get_init_inputs():
    return []
