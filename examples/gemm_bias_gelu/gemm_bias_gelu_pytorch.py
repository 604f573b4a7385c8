"""PyTorch reference for gemm_bias_gelu.py (same constructor and parameter names)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * in_features**-0.5)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        y = x.float() @ self.weight.float().t() + self.bias.float()
        return F.gelu(y, approximate="tanh").to(x.dtype)
