"""LayerNorm over the last dimension with an affine weight and bias.

One program per row, walking the row in fixed 256-element chunks (three passes: mean, variance,
normalize).  Statistics are accumulated in float64, as written by someone worried about precision.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float64)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float64)
        acc += x
    mean = tl.sum(acc, axis=0) / N
    acc2 = tl.zeros((BLOCK_SIZE,), dtype=tl.float64)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float64)
        d = tl.where(cols < N, x - mean, 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float64)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float64)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float64)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        M, N = x.shape
        y = torch.empty_like(x)
        layernorm_kernel[(M,)](
            x, self.weight, self.bias, y, x.stride(0), y.stride(0), N, self.eps, BLOCK_SIZE=256
        )
        return y
