"""bf16 matrix product C = A @ B, 4096 x 4096 x 4096, bf16 inputs and output (fp32 accumulate).

get_inputs returns bfloat16 tensors on purpose; the comparison uses TOLERANCE (bf16 output rounding
alone is ~4e-3 relative)."""
import torch
import torch.nn as nn

TOLERANCE = 1e-2


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 4096
K = 4096
N = 4096


def get_inputs():
    A = torch.randn(M, K).to(torch.bfloat16)
    B = torch.randn(K, N).to(torch.bfloat16)
    return [A, B]


def get_init_inputs():
    return []
