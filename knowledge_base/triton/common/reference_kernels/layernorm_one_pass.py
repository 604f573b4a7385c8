"""LayerNorm with the statistics in one pass: sum and sum of squares accumulated in fp32 per row
chunk, variance = E[x^2] - mean^2 (fine in fp32 for normalised activations; use Welford when the
mean is large relative to the spread), then one normalise-and-affine pass that writes the output."""

import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    acc2 = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x
        acc2 += x * x
    mean = tl.sum(acc, axis=0) / n_cols
    var = tl.sum(acc2, axis=0) / n_cols - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=1.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(
            y_ptr + row * stride + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask
        )


class Model(torch.nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = torch.nn.Parameter(0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        y = torch.empty_like(x)
        layernorm_kernel[(x.shape[0],)](
            x, self.weight, self.bias, y, x.shape[1], x.stride(0), self.eps, BLOCK=128
        )
        return y


def reference(model, x):
    return torch.nn.functional.layer_norm(x, (x.shape[1],), model.weight, model.bias, model.eps)


INIT_ARGS = (300,)


def get_example_inputs():
    return [torch.randn(6, 300)]
