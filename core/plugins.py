"""Plugin discovery through the ``kernelpilot.plugins`` entry-point group.

Each entry point is loaded on its own; a plugin that fails to import is recorded with its error and
the rest still load, so one broken third-party package never takes the tool down.  After registering a
plugin the registry asks pluggy (``check_pending``) whether it implements a hook nobody specified: a
misspelled hook (``kp_tile_kernel``) would otherwise load "fine" and never be called, so the plugin is
unregistered and its record says which hook is unknown and what it probably meant.
"""

from __future__ import annotations

import difflib
import functools
import traceback
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from kernelpilot import hookspecs
from kernelpilot.plugin_types import PluginInfo


@dataclass
class PluginRecord:
    """One entry point and what became of it."""

    name: str
    target: str
    distribution: str | None
    version: str | None
    hooks: list[str] = field(default_factory=list)
    loaded: bool = False
    error: str | None = None
    info: PluginInfo | None = None

    @property
    def available(self) -> bool:
        return self.loaded and not self.error and (self.info.available if self.info else True)

    @property
    def reason(self) -> str:
        if self.error:
            return self.error
        return self.info.reason if self.info else ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "entry_point": self.target,
            "distribution": self.distribution,
            "version": self.version,
            "loaded": self.loaded,
            "hooks": self.hooks,
            "available": self.available,
            "reason": self.reason,
            "description": self.info.description if self.info else "",
            "dsls": list(self.info.dsls) if self.info else [],
            "capabilities": list(self.info.capabilities) if self.info else [],
        }


class PluginRegistry:
    """The pluggy manager plus the per-entry-point load records."""

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT)
        self.manager.add_hookspecs(hookspecs)
        self.records: list[PluginRecord] = []

    @property
    def hook(self) -> Any:
        return self.manager.hook

    def load_entry_points(self, group: str = hookspecs.ENTRY_POINT_GROUP) -> None:
        for entry_point in sorted(entry_points(group=group), key=lambda ep: ep.name):
            self._load_one(entry_point)

    def register(self, plugin: object, name: str, target: str = "<object>") -> PluginRecord:
        """Register an already imported plugin object (used by tests and embedding applications)."""
        record = PluginRecord(name=name, target=target, distribution=None, version=None)
        self._register(record, plugin)
        return record

    def _load_one(self, entry_point: EntryPoint) -> None:
        dist = getattr(entry_point, "dist", None)
        record = PluginRecord(
            name=entry_point.name,
            target=entry_point.value,
            distribution=dist.metadata["Name"] if dist is not None else None,
            version=dist.version if dist is not None else None,
        )
        if any(r.name == record.name for r in self.records):
            record.error = f"duplicate plugin name {record.name!r}; first registration kept"
            self.records.append(record)
            return
        try:
            plugin = entry_point.load()
        except BaseException as exc:  # noqa: BLE001 - a plugin may raise anything on import
            if isinstance(exc, KeyboardInterrupt):
                raise
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            record.error = f"import failed: {last}"
            self.records.append(record)
            return
        self._register(record, plugin)

    def _register(self, record: PluginRecord, plugin: object) -> None:
        try:
            self.manager.register(plugin, name=record.name)
        except Exception as exc:  # pluggy validation errors (bad hook signature, unknown hook)
            record.error = f"registration failed: {exc}"
            self.records.append(record)
            return
        unknown = self._unknown_hooks(plugin)
        if unknown:
            self.manager.unregister(plugin)
            record.error = unknown
            self.records.append(record)
            return
        record.loaded = True
        record.hooks = sorted(
            impl.name
            for impl in self.manager.get_hookcallers(plugin) or []
            if impl.name in hookspecs.HOOK_NAMES
        )
        info_impl = getattr(plugin, "kp_plugin_info", None)
        if info_impl is not None:
            try:
                record.info = info_impl()
            except Exception as exc:
                record.error = f"kp_plugin_info failed: {exc}"
        self.records.append(record)

    def _unknown_hooks(self, plugin: object) -> str | None:
        """pluggy's ``check_pending`` for the plugin just registered: a sentence naming each hook
        implementation with no specification (and the specified hook it most likely meant), or None.

        Plugins are validated one at a time as they register, so any pending hook belongs to this one.
        """
        try:
            self.manager.check_pending()
        except pluggy.PluginValidationError:
            pass
        else:
            return None
        names = sorted(
            caller.name
            for caller in self.manager.get_hookcallers(plugin) or []
            if caller.spec is None
            and any(not impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin)
        )
        if not names:
            return None
        parts = []
        for name in names:
            guess = difflib.get_close_matches(name, hookspecs.HOOK_NAMES, n=1)
            parts.append(f"{name} (did you mean {guess[0]}?)" if guess else name)
        return (
            f"unknown hook{'s' if len(parts) > 1 else ''} {', '.join(parts)}; "
            f"specified hooks: {', '.join(hookspecs.HOOK_NAMES)}"
        )

    def collect(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call a list-returning hook and flatten the contributions of every plugin."""
        results = getattr(self.manager.hook, hook_name)(**kwargs)
        flat: list[Any] = []
        for contribution in results:
            if contribution is None:
                continue
            if isinstance(contribution, list | tuple):
                flat.extend(contribution)
            else:
                flat.append(contribution)
        return flat


@functools.lru_cache(maxsize=1)
def get_registry() -> PluginRegistry:
    """The process-wide registry, loaded from entry points on first use."""
    registry = PluginRegistry()
    registry.load_entry_points()
    return registry
