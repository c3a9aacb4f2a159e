"""RMSNorm over the last dim (x * rsqrt(mean(x^2) + eps) * weight), 16384 x 4096 fp32.

Written as plain torch ops, so eager runs several elementwise/reduction kernels."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(dim))

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


batch_size = 16384
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim) * 1.5 + 0.25]


def get_init_inputs():
    return [dim]
