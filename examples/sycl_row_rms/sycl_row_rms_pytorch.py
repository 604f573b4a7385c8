"""PyTorch reference (the oracle) for sycl_row_rms.cpp: y = sqrt(mean(x**2, dim=-1))."""

import torch


class Model(torch.nn.Module):
    def forward(self, X):
        return X.double().pow(2).mean(dim=-1).sqrt().to(X.dtype)
