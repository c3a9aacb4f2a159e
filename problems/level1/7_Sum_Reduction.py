"""Sum over the middle dim of a 32 x 4096 x 1024 fp32 tensor, keepdim (512 MB read, 128 KB written)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 32
dim1 = 4096
dim2 = 1024
reduce_dim = 1


def get_inputs():
    # positive offset: the sum is not near zero, so relative error is meaningful
    return [torch.rand(batch_size, dim1, dim2) * 2.0 - 0.5]


def get_init_inputs():
    return [reduce_dim]
