"""relu(x + y): two element-wise passes and a temporary in eager mode."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x + y)


N = 1 << 22


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
