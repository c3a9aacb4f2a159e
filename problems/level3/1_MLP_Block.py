"""Transformer MLP block: Linear -> GELU (exact, erf) -> Linear.

x: (num_tokens, d_model). Two GEMMs of 34 GFLOP each at fp32 plus the GELU pass.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


num_tokens = 4096
d_model = 1024
d_hidden = 4096


def get_inputs():
    return [torch.randn(num_tokens, d_model)]


def get_init_inputs():
    return [d_model, d_hidden]
