"""3x3 convolution (stride 1, padding 1) with bias, followed by ReLU.

x: (batch, in_channels, H, W) NCHW. About 9.7 GFLOP; the conv output is 32 MiB, so the separate
ReLU pass is a visible share of the eager time.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=True)

    def forward(self, x):
        return torch.relu(self.conv(x))


batch_size = 16
in_channels = 64
out_channels = 128
height = 64
width = 64
kernel_size = 3
padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, padding]
