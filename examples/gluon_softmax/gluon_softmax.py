"""Row-wise softmax written in Gluon (triton.experimental.gluon): explicit layouts, one row per program.

Like examples/softmax/softmax.py it does its math in float64 -- the kind of first draft the
dtype_fix stage exists for.  Gluon does not run under TRITON_INTERPRET; this example needs a GPU.
"""

import torch
import torch.nn as nn
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def softmax_kernel(
    out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: gl.constexpr, WARPS: gl.constexpr
):
    layout: gl.constexpr = gl.BlockedLayout(
        size_per_thread=[4], threads_per_warp=[32], warps_per_cta=[WARPS], order=[0]
    )
    row = gl.program_id(0)
    offs = gl.arange(0, BLOCK_SIZE, layout=layout)
    mask = offs < n_cols
    x = gl.load(in_ptr + row * in_row_stride + offs, mask=mask, other=-float("inf")).to(gl.float64)
    x = x - gl.max(x, axis=0)
    num = gl.exp(x)
    den = gl.sum(num, axis=0)
    y = num / den
    gl.store(out_ptr + row * out_row_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        BLOCK_SIZE = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](
            out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, WARPS=4, num_warps=4
        )
        return out
