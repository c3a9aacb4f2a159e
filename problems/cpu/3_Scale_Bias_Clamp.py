"""Per-column affine then clamp: clamp(x * weight + bias, -1, 1), with learned weight and bias."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features) * 0.5)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        return torch.clamp(x * self.weight + self.bias, -1.0, 1.0)


ROWS, FEATURES = 4096, 1024


def get_inputs():
    return [torch.randn(ROWS, FEATURES)]


def get_init_inputs():
    return [FEATURES]
