"""Materialised 2D transpose x.t().contiguous() of a 12288 x 8192 fp32 matrix (384 MB each way)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.t().contiguous()


rows = 12288
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
