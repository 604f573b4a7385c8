"""Hardware models: device catalogue, tile-configuration constraint models and cost models.

Public entry points (import the submodules; this package imports nothing heavy):

- :mod:`kernelpilot.hw_models.catalogue` — ``Device``, ``load_catalogue()``, ``get_device()``,
  ``detect_device()``;
- :mod:`kernelpilot.hw_models.types` — ``Violation``, ``CheckResult``, ``TileConfig``;
- :mod:`kernelpilot.hw_models.sm90` — ``Sm90Model`` (target ``sm90``; GEMM kinds here, the Hopper FMHA
  in :mod:`kernelpilot.hw_models.sm90_fmha`);
- :mod:`kernelpilot.hw_models.xe` — ``XeModel`` (targets ``bmg``, ``pvc``, ``xe2_igpu``);
- :mod:`kernelpilot.hw_models.cost` — the analytical cost models; :mod:`kernelpilot.hw_models.calibration`
  fits per-schedule corrections from measurements;
- target lookup by name: ``kernelpilot.targets.get_target_model(name)``.

Rules, schemas and citations: ``docs/hw_models.md``.
"""
