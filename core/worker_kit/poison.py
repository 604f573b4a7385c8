"""Poisoning: memory a candidate may receive starts as NaN / an integer sentinel.

- while the candidate runs, ``torch.empty*`` allocations are *poisoned* (NaN for floats, a sentinel for
  integers): an output element the kernel forgot to write stays poisoned and is reported as unwritten;
- right before each checked candidate forward, every free block the CUDA caching allocator holds is
  poisoned the same way (:func:`poison_cached_memory`), so an output allocated where the Python patch
  cannot see it (``torch::empty_like`` in a C++ extension, an aten op) cannot inherit a correct
  result that the oracle, or an earlier candidate, left in a freed block.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from kernelpilot.worker_kit.compare import flatten
from kernelpilot.worker_kit.timing import sync


@contextlib.contextmanager
def poisoned_allocations(torch: Any) -> Iterator[None]:
    """Make ``torch.empty``-style allocations start as NaN / sentinel so unwritten outputs show up."""
    names = ("empty", "empty_like", "empty_strided")
    originals = {n: getattr(torch, n) for n in names}
    original_new_empty = torch.Tensor.new_empty

    def poison(t: Any) -> Any:
        if t.dtype.is_floating_point:
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.fill_(True)
        elif t.dtype.is_complex:
            t.fill_(complex(float("nan"), float("nan")))
        else:
            t.fill_(torch.iinfo(t.dtype).max)
        return t

    def wrap(fn: Any) -> Any:
        def inner(*args: Any, **kwargs: Any) -> Any:
            return poison(fn(*args, **kwargs))

        return inner

    try:
        for n, fn in originals.items():
            setattr(torch, n, wrap(fn))
        torch.Tensor.new_empty = lambda self, *a, **k: poison(original_new_empty(self, *a, **k))
        yield
    finally:
        for n, fn in originals.items():
            setattr(torch, n, fn)
        torch.Tensor.new_empty = original_new_empty


def poison_dtype(torch: Any, ref: Any) -> Any:
    """The dtype whose ``iinfo.max`` fills free memory before a candidate runs (see
    :func:`poison_cached_memory`).

    Float-only outputs: ``uint8`` (every byte 0xFF, a NaN in float16/bfloat16/float32/float64 and in
    complex parts).  With integer outputs: the widest of their dtypes, so an unwritten integer element
    reads as the sentinel :func:`compare` looks for; the max of int16/int32/int64 (0x7FFF...) is a NaN in
    every float format as well, so float outputs beside them are still caught."""
    try:
        dtypes = [t.dtype for t in flatten(torch, ref)]
    except TypeError:
        return torch.uint8
    ints = [d for d in dtypes if not (d.is_floating_point or d.is_complex or d == torch.bool)]
    if not ints:
        return torch.uint8
    return max(ints, key=lambda d: torch.empty((), dtype=d).element_size())


def inactive_blocks(segments: list[dict[str, Any]], device_index: int | None = None) -> list[tuple[int, int]]:
    """``(address, bytes)`` of each free (``inactive``) block in a ``torch.cuda.memory_snapshot()``.

    Blocks awaiting a free on another stream are skipped (that stream may still use them), and so are
    expandable segments.  Addresses come from the block when the snapshot has them, else from the
    segment's base plus the sizes of the blocks before (a segment's blocks are listed in address
    order)."""
    found = []
    for seg in segments:
        if device_index is not None and seg.get("device", device_index) != device_index:
            continue
        if seg.get("is_expandable"):
            continue  # its free blocks may lie in pages that are not mapped; writing them would fault
        address = int(seg["address"])
        for block in seg.get("blocks", []):
            start = int(block.get("address", address))
            size = int(block["size"])
            if block.get("state") == "inactive" and size > 0:
                found.append((start, size))
            address = start + size
    return found


class _DeviceBytes:
    """``__cuda_array_interface__`` over ``size`` bytes at ``address`` (``torch.as_tensor`` aliases it)."""

    def __init__(self, address: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "strides": None,
            "version": 2,
        }


def _cuda_free_blocks(torch: Any) -> list[tuple[int, int]]:
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + os.environ.get("PYTORCH_ALLOC_CONF", "")
    if "expandable_segments:true" in conf.replace(" ", "").lower():
        return []  # free blocks may lie in unmapped pages there; writing them would fault
    return inactive_blocks(torch.cuda.memory_snapshot(), torch.cuda.current_device())


def _cuda_block_view(torch: Any, address: int, size: int) -> Any:
    return torch.as_tensor(_DeviceBytes(address, size), device="cuda")


# device -> (free blocks of its caching allocator, a uint8 tensor aliasing one block)
FREE_MEMORY: dict[str, tuple[Any, Any]] = {"cuda": (_cuda_free_blocks, _cuda_block_view)}


def poison_cached_memory(torch: Any, device: str, ref: Any) -> int:
    """Fill every free block of the device's caching allocator with the poison of :func:`poison_dtype`;
    returns the bytes filled (0 where the device has no such allocator, e.g. ``cpu``).

    Why: :func:`poisoned_allocations` patches the *Python* ``torch.empty*``.  An output allocated in C++
    (``torch::empty_like`` in a ``load_inline`` extension) or by an aten op comes straight from the
    caching allocator, whose freed blocks may hold the correct answer -- the oracle's intermediates,
    or in a side-by-side run the previous candidate's output for the same inputs.  A kernel that
    never writes its output would then be judged correct.  After this, every block the candidate can
    be handed without a fresh ``cudaMalloc`` reads as NaN / the integer sentinel, and :func:`compare`
    reports the elements it did not write as "never written".

    The blocks are written in place through an aliasing view (``__cuda_array_interface__``), not by
    allocating and freeing poisoned tensors: that leaves the allocator's block layout as it was and
    reaches every free block, whereas allocate-and-free covers only the blocks best-fit happens to
    return.  The oracle still runs first (the poison's dtype follows its outputs); running the
    candidate first instead would not cover side-by-side rounds, where earlier candidates' outputs
    are the stale data.  Cost: one fill per free block plus two synchronisations, microseconds to a
    few milliseconds.  Best effort: a snapshot that fails (another allocator backend) poisons nothing.
    """
    hooks = FREE_MEMORY.get(device)
    if hooks is None:
        return 0
    free_blocks, block_view = hooks
    dtype = poison_dtype(torch, ref)
    value = torch.iinfo(dtype).max
    sync(torch, device)  # blocks freed on other streams are idle from here on
    try:
        blocks = free_blocks(torch)
    except (RuntimeError, AttributeError):
        return 0
    width = torch.empty((), dtype=dtype).element_size()
    filled = 0
    for address, size in blocks:
        usable = size - size % width
        if usable <= 0:
            continue
        block_view(torch, address, usable).view(dtype).fill_(value)
        filled += usable
    sync(torch, device)
    return filled
