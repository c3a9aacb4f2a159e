"""Square fp32 matrix product C = A @ B, 4096 x 4096 x 4096 (137 GFLOP, compute-bound).

With TF32 disabled, eager runs cuBLAS's fp32 SIMT path (~2 ms on an H200)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 4096
K = 4096
N = 4096


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
