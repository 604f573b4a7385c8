"""Hardware models: device catalogue, tile-configuration constraint models and cost models.

Public entry points (import the submodules; this package imports nothing heavy):

- :mod:`kernelpilot.hw_models.catalogue` — ``Device``, ``load_catalogue()``, ``get_device()``,
  ``detect_device()``;
- :mod:`kernelpilot.hw_models.types` — ``Violation``, ``CheckResult``, ``TileConfig``;
- :mod:`kernelpilot.hw_models.base` — ``TargetModel`` and the parsing helpers every target shares;
- :mod:`kernelpilot.hw_models.sm90` — one package for target ``sm90``: ``model.Sm90Model``, GEMM config
  and shared-memory accounting in ``gemm``, the Hopper FMHA in ``fmha``, the cost models in ``cost`` and
  ``fmha_cost``;
- :mod:`kernelpilot.hw_models.xe` — one package for targets ``bmg``, ``pvc``, ``xe2_igpu``:
  ``model.XeModel``, rules in ``gemm``, ``fa``, ``fa_legacy``, DPAS atoms in ``dpas``, the cost model in
  ``cost``; :mod:`kernelpilot.hw_models.calibration`
  fits per-schedule corrections from measurements;
- target lookup by name: ``kernelpilot.targets.get_target_model(name)``.

Rules, schemas and citations: ``docs/hw_models.md``.
"""
