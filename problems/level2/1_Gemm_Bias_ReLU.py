"""Linear (matmul + bias) followed by ReLU.

out = relu(x @ W^T + b), x: (batch, in_features), W: (out_features, in_features).
About 69 GFLOP at fp32; compute-bound, so the eager time is the fp32 GEMM plus one elementwise pass.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 4096
in_features = 2048
out_features = 4096


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
