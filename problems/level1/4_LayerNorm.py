"""nn.LayerNorm (with affine weight and bias) over the last dim of an 8192 x 8192 fp32 matrix."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        # non-trivial affine parameters, so a kernel that ignores them fails
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(normalized_shape))
            self.ln.bias.copy_(0.5 * torch.randn(normalized_shape))

    def forward(self, x):
        return self.ln(x)


batch_size = 8192
features = 8192


def get_inputs():
    # offset mean so a one-pass E[x^2]-E[x]^2 variance would lose digits
    return [torch.randn(batch_size, features) * 2.0 + 1.5]


def get_init_inputs():
    return [features]
