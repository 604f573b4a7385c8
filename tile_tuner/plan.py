"""Dry runs: plan, validate and render every program and the CMake project; build and run nothing.

Works with no GPU and no compiler (the kernel's ``build_recipe`` is asked with ``dry_run=True`` and
must not require the toolchain).  For each workload the plan is the first thing a real run would
build: the library default plus the proposer's first ``budget_configs - 1`` proposals (all of them
for ``exhaustive``).  Output folder: ``project/`` (CMakeLists.txt, one folder per program, the compile
launcher), ``BUILD.txt`` (the exact cmake / ninja commands) and ``plan.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelpilot.tile_tuner.builder import BuildItem, default_jobs, describe_commands, render_project
from kernelpilot.tile_tuner.proposers import History, make_proposer
from kernelpilot.tile_tuner.space import SearchSpace, config_key, config_label


def dry_run(groups: list[Any], options: Any, device: Any) -> dict[str, Any]:
    out_dir: Path = options.out_dir
    plan_workloads: list[dict[str, Any]] = []
    projects: list[dict[str, Any]] = []
    to_write: list[tuple[list[BuildItem], Any, Path, str]] = []
    for g in groups:
        recipe = g.kernel.build_recipe(g.target, {**options.kernel_options, "dry_run": True})
        items: dict[str, BuildItem] = {}
        for w in g.workloads:
            problem = g.kernel.validate_problem(w.dims, w.dtype, w.source or w.name)
            space = SearchSpace.for_workload(g.model, w, problem, device, options.streamk_twins)
            default = space.default()
            history = History()
            history.pending.add(config_key(default))
            proposer = (
                make_proposer(w.proposer, space, w.seed, device=device, **w.proposer_options)
                if w.proposer not in ("llm", "hybrid")
                else None
            )
            n = max(0, w.budget_configs - 1)
            proposals = proposer.propose(n, history) if proposer is not None else []
            configs = [default, *proposals]
            entries = []
            for cfg in configs:
                check = g.model.check(cfg, problem)
                program = g.kernel.render(cfg, problem, g.target)
                item = BuildItem.create(program, recipe, g.kernel.template_version, config_label(cfg))
                items.setdefault(item.cache_key, item)
                entries.append(
                    {
                        "label": config_label(cfg),
                        "config": cfg.as_dict() if hasattr(cfg, "as_dict") else dict(cfg),
                        "valid": bool(check.valid),
                        "violations": [
                            v.model_dump() if hasattr(v, "model_dump") else v for v in check.violations
                        ],
                        # what the model knows but does not forbid (spill risk, low occupancy, an
                        # element type no library build has run yet)
                        "warnings": [
                            v.model_dump() if hasattr(v, "model_dump") else v
                            for v in getattr(check, "warnings", [])
                        ],
                        "cmake_target": item.target,
                        "cache_key": item.cache_key,
                        "is_default": cfg is default,
                        "estimate_s": space.estimate(cfg),
                        "run_variants": g.kernel.runtime_variants(cfg, problem),
                    }
                )
            plan_workloads.append(
                {
                    "name": w.name,
                    "kernel": w.kernel,
                    "dtype": problem["dtype"],
                    "dims": {k: v for k, v in problem.items() if k != "dtype"},
                    "target": g.target,
                    "proposer": w.proposer,
                    "space_size": len(space),
                    "planned": entries,
                    "baseline": {"source": space.default_source, "note": space.default_note},
                    "experimental": space.experimental_notes(),
                    "note": "llm/hybrid proposals need a live LLM; the plan holds the default only"
                    if proposer is None
                    else "",
                }
            )
        project_dir = out_dir / f"project-{g.kernel_kind}"
        jobs = options.jobs or default_jobs(recipe.memory_gb_per_job)
        commands = describe_commands(project_dir, recipe, jobs)
        to_write.append((list(items.values()), recipe, project_dir, commands))
        projects.append(
            {
                "kernel": g.kernel_kind,
                "project": str(project_dir),
                "programs": len(items),
                "compiler": recipe.compiler,
                "flags": list(recipe.flags),
                "include_dirs": [str(p) for p in recipe.include_dirs],
                "commands": commands.strip().splitlines(),
            }
        )
    doc = {
        "dry_run": True,
        "target": groups[0].target if groups else None,
        "device": getattr(device, "name", None),
        "command": options.command,
        "projects": projects,
        "workloads": plan_workloads,
    }
    # written only now: a group that fails validation leaves no project of an earlier group behind
    for items_list, recipe, project_dir, commands in to_write:
        render_project(items_list, recipe, project_dir, options.build_timeout_s)
        (project_dir / "BUILD.txt").write_text(commands)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "plan.json").write_text(json.dumps(doc, indent=1, default=str))
    return doc
