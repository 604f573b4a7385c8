"""Shared machinery of the target models: input parsing helpers and the model base class.

Every target model (``bmg``, ``pvc``, ``sm90`` ...) offers the same surface so the tuner, the CLI and
the LLM proposer never special-case a backend: parse a raw dict into a frozen config, check it,
enumerate the legal space, give the library's default, step to neighbours, estimate a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.hw_models.axes import SearchAxis
from kernelpilot.hw_models.catalogue import Device, get_device
from kernelpilot.hw_models.dtypes import DTypePair, parse_dtype
from kernelpilot.hw_models.types import CheckResult, TileConfig

# --------------------------------------------------------------------------------------------------
# parsing helpers: every error names `where` (file + entry) and the field, and lists allowed values


def reject_unknown_fields(raw: dict[str, Any], allowed: Iterable[str], where: str) -> None:
    allowed_sorted = sorted(allowed)
    for key in raw:
        if key not in allowed_sorted:
            raise InputError(
                f"{where}: unknown field {key!r}; allowed fields: {', '.join(allowed_sorted)}", field=str(key)
            )


def choice(raw: Any, allowed: Iterable[str], where: str, field: str) -> str:
    allowed_list = list(allowed)
    if not isinstance(raw, str) or raw not in allowed_list:
        raise InputError(f"{where}: {field} {raw!r} is not one of: {', '.join(allowed_list)}", field=field)
    return raw


def int_value(raw: Any, where: str, field: str, *, minimum: int | None = None) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InputError(f"{where}: {field} must be an integer, got {raw!r}", field=field)
    if minimum is not None and raw < minimum:
        raise InputError(f"{where}: {field} must be >= {minimum}, got {raw}", field=field)
    return raw


def int_tuple(raw: Any, where: str, field: str, length: int | tuple[int, ...]) -> tuple[int, ...]:
    """A list of positive integers of the given length(s), e.g. ``wg: [256, 256, 32]``."""
    lengths = (length,) if isinstance(length, int) else length
    if isinstance(raw, str):  # accept "256x256x32" as a convenience
        parts = raw.lower().replace(",", "x").split("x")
        try:
            raw = [int(p) for p in parts]
        except ValueError:
            raw = None
    if not isinstance(raw, (list, tuple)) or len(raw) not in lengths:
        want = " or ".join(str(n) for n in lengths)
        raise InputError(
            f"{where}: {field} must be a list of {want} positive integers, got {raw!r}", field=field
        )
    out = []
    for i, value in enumerate(raw):
        out.append(int_value(value, where, f"{field}[{i}]", minimum=1))
    return tuple(out)


def bool_value(raw: Any, where: str, field: str) -> bool:
    if not isinstance(raw, bool):
        raise InputError(f"{where}: {field} must be true or false, got {raw!r}", field=field)
    return raw


def problem_dtype(problem: dict[str, Any] | None, default: DTypePair) -> DTypePair:
    if problem and "dtype" in problem:
        return parse_dtype(problem["dtype"], "problem")
    return default


def check_problem_dtype(dtype: DTypePair, problem: dict[str, Any], out: Any, family: str) -> None:
    """A config built for one element type cannot serve a problem of another (``<family>.dtype_mismatch``)."""
    if problem.get("dtype") is None:
        return
    want = parse_dtype(problem["dtype"], "problem")
    if want != dtype:
        out.fail(
            f"{family}.dtype_mismatch",
            f"config is built for {dtype.label()} but the problem is {want.label()}",
        )


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


# --------------------------------------------------------------------------------------------------


class GpuVendor:
    """How one vendor's GPUs are found, named and pinned: what the tuner's generic code asks instead of
    hard-coding ``nvidia-smi`` or ``CUDA_VISIBLE_DEVICES``.  Each target model names its vendor.

    Why environment variables pin: a benchmark program is a separate process that takes "device 0";
    the vendor's visibility variable makes device 0 the GPU we chose without touching the program.
    """

    #: the backend name TileKernels of this vendor report (``TileKernel.backend``)
    name: str = ""
    #: the variable that restricts which GPUs a process sees (its value lists physical ids)
    visible_devices_env: str = ""
    #: PyTorch's device type for this vendor's GPUs (``cuda``, ``xpu``): how the optimize pipeline,
    #: which names devices the PyTorch way, finds the vendor
    torch_device: str = ""

    def pin_env(self, device: str) -> dict[str, str]:
        """Environment that makes ``device`` (a physical id or UUID) the only GPU a process sees."""
        return {self.visible_devices_env: device} if self.visible_devices_env else {}

    def probe_gpus(self) -> list[str]:
        """Physical ids of the GPUs on this host (the vendor's tool), or [] when none or no tool."""
        return []

    def device_name(self) -> str | None:
        """The first GPU's name for result keys, or None when it cannot be told."""
        return None


class TargetModel:
    """Base class: subclasses implement parsing, checking, enumeration and the cost model."""

    name: str = ""
    family: str = ""
    default_device: str = ""
    kernels: tuple[str, ...] = ()
    #: whose GPUs run this target's programs (device naming, probing, pinning)
    vendor: GpuVendor = GpuVendor()

    # -- to implement ----------------------------------------------------------------------------
    def parse_config(self, raw: dict[str, Any], where: str = "config") -> TileConfig:
        raise NotImplementedError

    def check(self, config: TileConfig, problem: dict[str, Any] | None = None) -> CheckResult:
        raise NotImplementedError

    def enumerate(
        self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None
    ) -> Iterator[TileConfig]:
        raise NotImplementedError

    def _default_config(self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None) -> TileConfig:
        """The library's untuned default for ``kernel``/``dtype`` (subclasses cite their source)."""
        raise NotImplementedError

    def neighbours(self, config: TileConfig) -> list[TileConfig]:
        raise NotImplementedError

    def estimate_time_s(
        self, config: TileConfig, problem: dict[str, Any], device: Device | None = None
    ) -> float:
        raise NotImplementedError

    def search_axes(self, kernel: str) -> tuple[SearchAxis, ...]:
        """How ``kernel``'s config fields look to the search strategies and space filters: which are
        numbers, which tuples split into one dimension per extent.  Undeclared fields are categorical;
        the default declares nothing."""
        return ()

    # -- shared ------------------------------------------------------------------------------------
    def as_config(self, config: TileConfig | dict[str, Any]) -> TileConfig:
        """``config`` itself, or parsed when it is a plain dict (JSON / YAML callers pass dicts)."""
        return self.parse_config(config) if isinstance(config, dict) else config

    def valid_neighbours(self, origin: TileConfig, candidates: Iterable[TileConfig]) -> list[TileConfig]:
        """The candidates that pass :meth:`check`, in order, each once, ``origin`` left out."""
        out: list[TileConfig] = []
        seen: set[TileConfig] = {origin}
        for cand in candidates:
            if cand in seen:
                continue
            seen.add(cand)
            if self.check(cand).valid:
                out.append(cand)
        return out

    def default_config(self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None) -> TileConfig:
        """The library default, or an :class:`InputError` when the kernel does not take ``dtype`` at all.

        Without this check a tuner would be handed a "default" the library cannot build and report the
        dtype problem as a failed measurement instead of as bad input.
        """
        config = self._default_config(kernel, dtype, problem)
        unsupported = [v for v in self.check(config).violations if "dtype" in v.rule.rsplit(".", 1)[-1]]
        if unsupported:
            raise InputError(f"{self.name} {kernel}: {unsupported[0].message}", field="dtype")
        return config

    def device(self, device: Device | str | None = None) -> Device:
        if isinstance(device, Device):
            return device
        return get_device(device or self.default_device)

    def space_size(self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None) -> int:
        return sum(1 for _ in self.enumerate(kernel, dtype, problem))

    def check_kernel(self, kernel: str, where: str = "config") -> str:
        return choice(kernel, self.kernels, where, "kernel")

    def rank(
        self,
        kernel: str,
        dtype: Any,
        problem: dict[str, Any],
        device: Device | str | None = None,
        top: int | None = None,
    ) -> list[tuple[float, TileConfig]]:
        """Legal configs sorted by the cost model's estimate (fastest first)."""
        dev = self.device(device)
        scored = [(self.estimate_time_s(c, problem, dev), c) for c in self.enumerate(kernel, dtype, problem)]
        scored.sort(key=lambda item: (item[0], item[1].label()))
        return scored[:top] if top else scored

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
