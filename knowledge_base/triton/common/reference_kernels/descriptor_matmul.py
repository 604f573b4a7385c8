"""Matmul with tensor descriptors (the successor of block pointers): tl.make_tensor_descriptor describes
each 2-D tensor once (shape, strides, tile shape), desc.load / desc.store move whole tiles at
coordinates, and out-of-bounds elements read as zero / are not written, so no masks.  On Hopper the
compiler lowers them to TMA copies, on Intel Xe to 2-D block loads.  Newer Triton removed
tl.make_block_ptr in favour of this API; descriptors need a last stride of 1 and 16-byte aligned rows,
and on NVIDIA a scratch allocator for descriptors built on the device (triton.set_allocator)."""

import torch
import triton
import triton.language as tl


@triton.jit
def descriptor_matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(
        a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K]
    )
    b_desc = tl.make_tensor_descriptor(
        b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N]
    )
    c_desc = tl.make_tensor_descriptor(
        c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N]
    )
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc += tl.dot(a, b)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))


def _scratch(size: int, alignment: int, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


class Model(torch.nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        if a.is_cuda:
            triton.set_allocator(_scratch)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        descriptor_matmul_kernel[grid](
            a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32
        )
        return c


def reference(model, a, b):
    return a @ b


INIT_ARGS = ()


def get_example_inputs():
    # rows of 72 / 48 floats: 16-byte aligned strides, as descriptors require
    return [torch.randn(50, 72), torch.randn(72, 48)]
