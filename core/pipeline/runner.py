"""The optimization pipeline: baseline -> analysis -> plan -> per-stage optimize/verify loop -> final.

The same code runs every DSL; a DSL differs only in what its plugin hands over (executor, stages,
prompts, knowledge base).  Rules the loop enforces (each one fixes a defect seen in Xe-Forge):

* every candidate is checked against the run's single oracle before its time counts;
* a stage keeps a candidate only if it is correct AND faster than **that stage's input** by more than
  the measured noise (see :mod:`kernelpilot.pipeline.noise`);
* every attempt is a node in the persisted trial tree, written before it is evaluated;
* identical code already evaluated in the tree (an interrupted earlier run) is not measured again;
* the final composite is re-checked on inputs from a seed no earlier check used, and only candidates
  that pass that fresh check are written out.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kernelpilot.errors import InputError, KernelpilotError, ToolMissingError
from kernelpilot.pipeline.contracts import (
    STAGE_ORDER,
    Evaluation,
    Issue,
    StageContext,
    Timing,
    Verdict,
    timing_columns,
)
from kernelpilot.pipeline.noise import estimate_noise, is_faster, not_slower
from kernelpilot.pipeline.planner import PlannedStage, make_plan
from kernelpilot.pipeline.record import RunRecord, StageReport
from kernelpilot.pipeline.static_analysis import static_issues
from kernelpilot.trials.store import TreeIdentity, TrialNode, TrialStore, sha256_text, tolerance_key

FINAL_SEED_OFFSET = 1_000_003  # final checks use seeds no candidate check used
CONFIRM_SEED_OFFSET = 500_009  # side-by-side confirmations of stage acceptances
MAX_FEEDBACK = 6


@dataclass
class PipelineOptions:
    """Per-run choices that are not user settings (paths, selection, seeds)."""

    kernel_path: Path
    spec_path: Path
    variant: str
    dsl: str
    device: str
    engine: str  # resolved: rules | llm
    output: Path | None = None
    stages: list[str] | None = None
    correctness_only_stages: set[str] = field(default_factory=set)
    trial_name: str | None = None
    fresh_trials: bool = False
    seed: int = 20240601
    noise_repeats: int = 3
    record_path: Path | None = None
    profiler: str | None = None  # "ncu" | "vtune": counters of each stage input feed the next prompt


@dataclass
class PipelineResult:
    record: RunRecord
    record_path: Path
    outputs: list[Path]
    improved: bool
    speedup: float | None


class Pipeline:
    def __init__(
        self,
        settings: Any,
        options: PipelineOptions,
        *,
        spec: Any,
        executor: Any,
        stage_impls: dict[str, Any],
        analyzers: list[Any] | None = None,
        prompt_dirs: list[Path] | None = None,
        knowledge_dirs: list[Any] | None = None,
        llm: Any = None,
        log: Any = None,
        profile_fn: Any = None,
    ) -> None:
        self.settings = settings
        self.opt = options
        self.spec = spec
        self.executor = executor
        self.impls = stage_impls
        self.analyzers = analyzers or []
        self.prompt_dirs = prompt_dirs or []
        self.knowledge_dirs = knowledge_dirs or []
        self.llm = llm
        self.log = log or (lambda message: None)
        self.original = Path(options.kernel_path).read_text(encoding="utf-8")
        self.noise = 0.0
        self.trials_used = 0
        self.profiles: dict[str, str] = {}  # code sha -> profile summary (optimize --profile)
        self.profile_fn = profile_fn  # (source) -> ProfileReport; default: the real profiler
        self.store: TrialStore | None = None
        self.record = RunRecord(
            kernel=str(options.kernel_path),
            spec=str(options.spec_path),
            variant=options.variant,
            dsl=options.dsl,
            device=options.device,
            engine=options.engine,
            settings=settings.public_dict(),
            seed=options.seed,
        )
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.record_path = options.record_path or (
            Path(settings.log_dir) / f"run-{stamp}-{os.getpid()}-{Path(options.kernel_path).stem}.json"
        )

    # ------------------------------------------------------------------------------------- run
    def run(self) -> PipelineResult:
        try:
            result = self._run()
        except BaseException as exc:
            self.record.status = "failed"
            self.record.error = f"{type(exc).__name__}: {exc}"
            self._flush()
            raise
        finally:
            if self.store is not None:
                self.store.close()
            self.executor.close()
        return result

    def _run(self) -> PipelineResult:
        reason = self.executor.runnable_on(self.opt.device)
        if reason:
            raise ToolMissingError(
                f"{self.opt.dsl} kernels cannot run on device {self.opt.device!r}: {reason}"
            )
        self.executor.prepare(Path(self.opt.kernel_path), self.spec, self.opt.variant)
        self.store = self._open_store()
        self.record.trial_tree = str(self.store.dir)
        # what `kernelpilot skill trial add` needs to continue this tree (e.g. an agent after the run)
        for key, value in {
            "spec_path": str(Path(self.opt.spec_path).resolve()),
            "rtol": str(self.settings.correctness_rtol),
            "atol": str(self.settings.correctness_atol),
        }.items():
            self.store.set_meta(key, value)

        if self.opt.profiler and self.profile_fn is None:
            from kernelpilot.profiling.collect import check_tool

            check_tool(self.opt.profiler, self.opt.device, self.settings)  # missing ncu: stop now
        baseline_node, baseline = self._baseline()
        self._profile(self.original, baseline_node.id)
        self._flush()

        issues = self._analyze(self.original, None, baseline)
        self.record.issues = [i.as_dict() for i in issues]
        plan = make_plan(issues, self.opt.stages, set(self.impls))
        self.record.plan = [{"stage": p.stage, "reason": p.reason} for p in plan.stages]
        self.record.skipped_stages = plan.skipped
        self.log(f"plan: {', '.join(p.stage for p in plan.stages) or '(nothing to do)'}")
        self._flush()

        current_node, current_ev, current_code = baseline_node, baseline, self.original
        queue: list[PlannedStage] = list(plan.stages)
        done: set[str] = set()
        accepted_nodes: list[TrialNode] = []
        while queue:
            planned = queue.pop(0)
            done.add(planned.stage)
            report = self._run_stage(planned, current_node, current_ev, current_code, baseline)
            self.record.stages.append(report)
            if report.accepted is not None:
                assert self.store is not None
                node = self.store.get(report.accepted)
                assert node is not None
                current_node, current_code = node, self.store.code(node.id)
                current_ev = _evaluation_from_node(node)
                accepted_nodes.append(node)
                if self._target_reached(baseline, current_ev):
                    skipped = [p.stage for p in queue]
                    queue.clear()
                    for name in skipped:
                        self.record.skipped_stages[name] = "TARGET_SPEEDUP reached"
                    self._flush()
                    continue
                self._profile(current_code, node.id)
                new_issues = self._analyze(current_code, planned.stage, current_ev)
                self._extend_queue(queue, done, new_issues)
            self._flush()

        self._finalize(baseline_node, baseline, accepted_nodes)
        self.record.status = "done"
        self.record.finished_at = time.time()
        if self.llm is not None:
            self.record.llm_usage = self.llm.usage.as_dict()
        self._flush()
        final = self.record.final[0] if self.record.final else None
        return PipelineResult(
            record=self.record,
            record_path=self.record_path,
            outputs=[Path(p) for p in self.record.outputs],
            improved=bool(final and final.get("node") != baseline_node.id),
            speedup=final.get("speedup") if final else None,
        )

    # --------------------------------------------------------------------------------- helpers
    def _flush(self) -> None:
        if self.llm is not None:
            self.record.llm_usage = self.llm.usage.as_dict()
        self.record.write(self.record_path)

    def _open_store(self) -> TrialStore:
        spec_text = Path(self.opt.spec_path).read_text(encoding="utf-8")
        identity = TreeIdentity(
            kernel_sha=sha256_text(self.original),
            spec_sha=sha256_text(spec_text),
            variant=self.opt.variant,
            dsl=self.opt.dsl,
            device=self.opt.device,
            kernel_path=str(Path(self.opt.kernel_path).resolve()),
            tolerances=tolerance_key(self.settings.correctness_rtol, self.settings.correctness_atol),
        )
        name = self.opt.trial_name or Path(self.opt.kernel_path).stem
        extension = Path(self.opt.kernel_path).suffix or ".txt"
        root = Path(self.settings.trials_dir)
        try:
            return TrialStore.open(root, name, identity, fresh=self.opt.fresh_trials, extension=extension)
        except InputError as exc:
            if self.opt.trial_name is not None or exc.field != "trial tree identity":
                raise  # a tree the user named is theirs to choose: say so instead of guessing
        # the default name is taken by another variant/spec/tolerance of this kernel: a tree of its own
        key = sha256_text(repr(sorted(identity.key_fields().items())))[:8]
        alt = f"{name}-{self.opt.variant.replace('#', '_')}-{key}"
        self.log(f"trial tree {root / name} belongs to another variant/spec/tolerance; using {root / alt}")
        return TrialStore.open(root, alt, identity, fresh=self.opt.fresh_trials, extension=extension)

    def _baseline(self) -> tuple[TrialNode, Evaluation]:
        """Time the original ``noise_repeats`` times (noise estimate); reuse a stored baseline."""
        assert self.store is not None
        existing = self.store.get("t0")
        if (
            existing is not None
            and existing.status == "evaluated"
            and existing.code_sha == sha256_text(self.original)
        ):
            medians = existing.extra.get("repeat_medians", [])
            self.log(f"baseline reused from trial tree: {existing.median_ms} ms")
            node, ev = existing, _evaluation_from_node(existing)
        else:
            node = (
                existing
                if existing is not None
                else self.store.add_node(self.original, parent=None, stage="baseline")
            )
            evaluations = []
            for i in range(max(1, self.opt.noise_repeats)):
                ev = self._safe_evaluate(self.original, seed=self.opt.seed + i)
                evaluations.append(ev)
                if not ev.correct:
                    break
            first = evaluations[0]
            medians = [e.timing.median_ms for e in evaluations if e.timing is not None]
            timing = None
            if medians and first.timing is not None:
                timing = Timing(
                    median_ms=statistics.median(medians),
                    min_ms=min(e.timing.min_ms for e in evaluations if e.timing),
                    max_ms=max(e.timing.max_ms for e in evaluations if e.timing),
                    repetitions=sum(e.timing.repetitions for e in evaluations if e.timing),
                    interpreter=first.timing.interpreter,
                )
            verdict = (
                "correct"
                if all(e.correct for e in evaluations)
                else next(e.verdict for e in evaluations if not e.correct)
            )
            message = "; ".join(e.message for e in evaluations if e.message)[:4000]
            node = self.store.record_result(
                node.id,
                verdict=verdict,
                message=message,
                seed=self.opt.seed,
                **timing_columns(timing),
                extra={"repeat_medians": medians, **_extra_of(first)},
            )
            ev = Evaluation(verdict=verdict, message=message, timing=timing, extra=first.extra)  # type: ignore[arg-type]
        executor_floor = self.executor.timing_noise()
        self.noise = estimate_noise(medians, executor_floor)
        self.record.noise = self.noise
        self.record.baseline = {
            "node": node.id,
            "verdict": ev.verdict,
            "message": ev.message,
            "median_ms": node.median_ms,
            "repeat_medians": medians,
            "interpreter": node.interpreter,
        }
        if not ev.correct:
            hint = (
                "; fix the kernel, the reference or the tolerances first" if ev.verdict == "incorrect" else ""
            )
            raise KernelpilotError(
                f"the original kernel fails its own check against the oracle ({ev.verdict}): "
                f"{ev.message[:500]}{hint}"
            )
        if node.interpreter:
            warning = (
                "timings come from the CPU interpreter and are not comparable; only stages named in "
                "--correctness-only-stages can accept a candidate"
            )
            self.record.warnings.append(warning)
            self.log(f"warning: {warning}")
        self.log(f"baseline {node.median_ms} ms, noise threshold {self.noise:.1%}")
        return node, ev

    def _analyze(self, source: str, after_stage: str | None, evaluation: Evaluation | None) -> list[Issue]:
        issues = static_issues(source, self.opt.dsl, self.analyzers)
        if self.opt.engine == "llm" and self.llm is not None:
            from kernelpilot.engines.llm_stage import llm_analysis
            from kernelpilot.llm.prompts import find_template

            if find_template(self.prompt_dirs, None) is None:
                self.record.warnings.append("no analysis.md.j2 prompt for this DSL: static analysis only")
            else:
                context = self._context("", source, issues, [], 0, evaluation, evaluation)
                try:
                    issues = issues + llm_analysis(context)
                except Exception as exc:  # an LLM failure degrades to the static analysis ...
                    if getattr(exc, "kind", None) in ("connection", "permanent"):
                        raise _llm_unusable(exc) from exc  # ... unless no later call can succeed
                    self.record.warnings.append(f"LLM analysis failed ({exc}); static analysis only")
        label = "analysis" if after_stage is None else f"re-analysis after {after_stage}"
        self.log(f"{label}: {len(issues)} issue(s)")
        return issues

    def _target_reached(self, baseline: Evaluation, current: Evaluation) -> bool:
        """TARGET_SPEEDUP: stop once the accepted kernel is that much faster than the original."""
        target = getattr(self.settings, "target_speedup", None)
        if not target or baseline.timing is None or current.timing is None:
            return False
        if baseline.timing.interpreter or current.timing.interpreter:
            return False  # interpreter times prove nothing about speed
        speedup = baseline.timing.median_ms / current.timing.median_ms
        if speedup < target:
            return False
        self.record.target_reached = {"target_speedup": target, "speedup": speedup}
        self.log(f"target speedup {target}x reached ({speedup:.3f}x): no further stages")
        return True

    def _extend_queue(self, queue: list[PlannedStage], done: set[str], issues: list[Issue]) -> None:
        """Re-analysis: refresh the issues of queued stages and add newly needed later stages."""
        by_stage: dict[str, list[Issue]] = {}
        for issue in issues:
            by_stage.setdefault(issue.stage, []).append(issue)
        for planned in queue:
            planned.issues = by_stage.get(planned.stage, [])
        queued = {p.stage for p in queue}
        last_done = max((STAGE_ORDER.index(s) for s in done), default=-1)
        for stage, found in by_stage.items():
            if stage in done or stage in queued or stage not in self.impls:
                continue
            if self.opt.stages is not None and stage not in self.opt.stages:
                continue
            if STAGE_ORDER.index(stage) <= last_done:
                continue  # earlier stages already ran; the order is a dependency order
            queue.append(PlannedStage(stage, f"{len(found)} issue(s) found by re-analysis", found))
            self.record.plan.append({"stage": stage, "reason": "added by re-analysis"})
        queue.sort(key=lambda p: STAGE_ORDER.index(p.stage))

    def _context(
        self,
        stage: str,
        current: str,
        issues: list[Issue],
        feedback: list[str],
        attempt: int,
        baseline: Evaluation | None,
        stage_input: Evaluation | None,
    ) -> StageContext:
        knowledge = self._knowledge(stage)
        return StageContext(
            stage=stage,
            dsl=self.opt.dsl,
            device=self.opt.device,
            original_source=self.original,
            current_source=current,
            issues=list(issues),
            spec=self.spec,
            variant=self.opt.variant,
            settings=self.settings,
            feedback=feedback[-MAX_FEEDBACK:],
            knowledge=knowledge,
            llm=self.llm,
            attempt=attempt,
            baseline=baseline,
            stage_input=stage_input,
            prompt_dirs=list(self.prompt_dirs),
            reference_source=self._reference_source(),
            profile_summary=self._profile_summary(current),
        )

    def _profile(self, source: str, node_id: str) -> None:
        """--profile: counters of a stage input; their summary goes into the prompts that see it.

        A profiler failure is a warning, not the end of the run: the counters help, they decide nothing.
        """
        if not self.opt.profiler:
            return
        key = sha256_text(source)
        if key in self.profiles:
            return
        try:
            if self.profile_fn is not None:
                report = self.profile_fn(source)
            else:
                from kernelpilot.profiling.collect import profile

                report = profile(
                    source,
                    original_path=Path(self.opt.kernel_path),
                    variant=self.spec.variant(self.opt.variant),
                    device=self.opt.device,
                    tool=self.opt.profiler,
                    settings=self.settings,
                    suffix=Path(self.opt.kernel_path).suffix or ".py",
                )
        except KernelpilotError as exc:
            self.record.warnings.append(f"{self.opt.profiler} profile of {node_id} failed: {str(exc)[:500]}")
            return
        self.profiles[key] = report.summary()
        self.record.profiles.append({"node": node_id, **report.as_dict()})
        self.log(f"profile {node_id}: {report.summary().splitlines()[0]}")

    def _reference_source(self) -> str:
        """``<kernel>_pytorch.py`` beside the kernel (the oracle convention), for the prompts."""
        kernel = Path(self.opt.kernel_path)
        path = kernel.with_name(f"{kernel.stem}_pytorch.py")
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def _profile_summary(self, source: str) -> str:
        """Counters of ``source`` when profiling is on (filled in by :meth:`_profile`)."""
        return self.profiles.get(sha256_text(source), "")

    def _knowledge(self, stage: str) -> list[str]:
        """KB snippets for ``stage`` (analysis: "" -> the constraints of every stage).

        KNOWLEDGE_BASE_ENABLED=false turns the KB off; KNOWLEDGE_DIR adds the user's folder (same
        layout: ``common/``, ``<device>/``, or flat files) after the plugins' folders.
        """
        if not getattr(self.settings, "knowledge_base_enabled", True):
            return []
        dirs = list(self.knowledge_dirs)
        user_dir = getattr(self.settings, "knowledge_dir", None)
        if user_dir is not None:
            from kernelpilot.llm.knowledge import user_knowledge_dir

            dirs.append(user_knowledge_dir(Path(user_dir), self.opt.dsl))
        if not dirs:
            return []
        from kernelpilot.llm.knowledge import load_knowledge

        return load_knowledge(dirs, self.opt.dsl, self.opt.device, stage or None)

    def _save_intermediate(self, node: TrialNode, code: str, verdict: str) -> None:
        """SAVE_INTERMEDIATE=true: every evaluated candidate beside the run record, named by node/stage."""
        if not getattr(self.settings, "save_intermediate", False):
            return
        folder = self.record_path.with_suffix("")
        folder.mkdir(parents=True, exist_ok=True)
        suffix = Path(self.opt.kernel_path).suffix or ".txt"
        path = folder / f"{node.id}_{node.stage}_{verdict}{suffix}"
        path.write_text(code, encoding="utf-8")
        self.record.intermediates.append(str(path))

    def _prebuild(self, codes: list[str]) -> None:
        """Let the executor compile a batch ahead (``prebuild``: the C++ executors build in parallel; the
        default builds nothing) before the candidates are checked one by one; a speed-up only, so a
        failure here costs nothing."""
        if self.store is None:
            return
        todo = [c for c in codes if self.store.find_evaluated(sha256_text(c)) is None]
        budget = max(0, int(self.settings.max_trials) - self.trials_used)
        if len(todo[:budget]) < 2:
            return
        try:
            self.executor.prebuild(todo[:budget])
        except Exception as exc:  # noqa: BLE001 - evaluation builds whatever is missing
            self.log(f"  parallel prebuild failed ({type(exc).__name__}: {exc}); building one by one")

    def _safe_evaluate(self, code: str, *, seed: int) -> Evaluation:
        try:
            return self.executor.evaluate(code, seed=seed, time_it=True)
        except KernelpilotError:
            raise
        except Exception as exc:  # an executor bug must not kill the run; it is this candidate's verdict
            return Evaluation(verdict="runtime_error", message=f"executor raised {type(exc).__name__}: {exc}")

    def _evaluate_candidate(
        self, code: str, parent: TrialNode, stage: str, engine: str, attempt: int
    ) -> tuple[TrialNode, Evaluation]:
        assert self.store is not None
        previous = self.store.find_evaluated(sha256_text(code))
        node = self.store.add_node(code, parent=parent.id, stage=stage, engine=engine, attempt=attempt)
        self.trials_used += 1
        if previous is not None:
            ev = _evaluation_from_node(previous)
            node = self.store.record_result(
                node.id,
                verdict=ev.verdict,
                message=ev.message,
                seed=previous.seed,
                median_ms=previous.median_ms,
                min_ms=previous.min_ms,
                max_ms=previous.max_ms,
                interpreter=previous.interpreter,
                reused_from=previous.id,
            )
            return node, ev
        problems = self.executor.validate(code)
        if problems:
            ev = Evaluation(verdict="invalid", message="static validation: " + "; ".join(problems))
        else:
            ev = self._safe_evaluate(code, seed=self.opt.seed + node.seq)
        node = self.store.record_result(
            node.id,
            verdict=ev.verdict,
            message=ev.message,
            seed=self.opt.seed + node.seq,
            **timing_columns(ev.timing),
            extra=_extra_of(ev),
        )
        return node, ev

    def _judge(self, ev: Evaluation, reference: Evaluation, stage: str) -> tuple[bool, str]:
        if not ev.correct:
            return False, f"{ev.verdict}: {ev.message[:1500]}"
        correctness_only = stage in self.opt.correctness_only_stages
        if ev.timing is None or reference.timing is None:
            if correctness_only:
                return True, "correct (not timed; correctness-only stage)"
            return False, "correct but not timed, so it cannot be shown to be faster"
        cand, ref = ev.timing.median_ms, reference.timing.median_ms
        interpreter = ev.timing.interpreter or reference.timing.interpreter
        if correctness_only:
            if interpreter or not_slower(cand, ref, self.noise):
                return True, "correct (correctness-only stage)"
            return False, f"correct but slower: {cand:.4g} ms vs stage input {ref:.4g} ms"
        if interpreter:
            return False, "correct, but interpreter timings cannot show a speedup"
        if is_faster(cand, ref, self.noise):
            return True, f"correct and faster: {cand:.4g} ms vs stage input {ref:.4g} ms"
        return False, (
            f"correct but {cand:.4g} ms is not faster than the stage input {ref:.4g} ms by more than the "
            f"noise ({self.noise:.1%})"
        )

    def _confirm_side_by_side(
        self, node: TrialNode, ev: Evaluation, input_code: str, code: str, stage: str, why: str
    ) -> tuple[bool, str]:
        """Re-time [stage input, candidate] interleaved in one process before believing a speedup.

        The stored stage-input time was measured earlier (maybe minutes ago); clocks and thermals
        drift.  Executors that can time side by side (``evaluate_side_by_side``) get the final word,
        on inputs from a seed of their own.  Without that capability the stored times decide.
        """
        if stage in self.opt.correctness_only_stages:
            return True, why
        if ev.timing is None or ev.timing.interpreter:
            return True, why
        assert self.store is not None
        seed = self.opt.seed + CONFIRM_SEED_OFFSET + node.seq
        try:
            pair = self.executor.evaluate_side_by_side([input_code, code], seed=seed)
        except Exception as exc:  # the capability failing is not the candidate's fault, but no proof
            return False, f"side-by-side confirmation failed to run: {type(exc).__name__}: {exc}"
        if pair is None:  # the executor cannot time side by side: the stored times decide
            return True, why
        reference, candidate = pair
        info = {
            "seed": seed,
            "input_verdict": reference.verdict,
            "candidate_verdict": candidate.verdict,
            "input_ms": reference.timing.median_ms if reference.timing else None,
            "candidate_ms": candidate.timing.median_ms if candidate.timing else None,
        }
        self.store.update_extra(node.id, {"side_by_side": info})
        if not candidate.correct:
            return (
                False,
                f"failed the side-by-side check on seed {seed}: {candidate.verdict}: {candidate.message[:1000]}",
            )
        if not reference.correct or info["input_ms"] is None or info["candidate_ms"] is None:
            return False, f"side-by-side confirmation incomplete (stage input {reference.verdict})"
        if is_faster(info["candidate_ms"], info["input_ms"], self.noise):
            return (
                True,
                f"{why}; confirmed side by side: {info['candidate_ms']:.4g} vs {info['input_ms']:.4g} ms",
            )
        return False, (
            f"correct, but side by side {info['candidate_ms']:.4g} ms is not faster than the stage input "
            f"{info['input_ms']:.4g} ms by more than the noise ({self.noise:.1%})"
        )

    def _run_stage(
        self,
        planned: PlannedStage,
        input_node: TrialNode,
        input_ev: Evaluation,
        input_code: str,
        baseline: Evaluation,
    ) -> StageReport:
        impl = self.impls[planned.stage]
        report = StageReport(
            stage=planned.stage,
            engine=getattr(impl, "engine", "?"),
            reason=planned.reason,
            input_ms=input_ev.timing.median_ms if input_ev.timing else None,
        )
        self.log(f"stage {planned.stage} ({report.engine}): {planned.reason}")
        feedback: list[str] = []
        seen = {sha256_text(input_code)}
        max_iterations = int(self.settings.agent_max_iterations)
        for attempt in range(max_iterations):
            if self.trials_used >= int(self.settings.max_trials):
                report.status = "budget_exhausted"
                report.notes.append(f"MAX_TRIALS={self.settings.max_trials} reached")
                break
            report.attempts = attempt + 1
            context = self._context(
                planned.stage, input_code, planned.issues, feedback, attempt, baseline, input_ev
            )
            try:
                candidates = list(impl.propose(context) or [])
            except Exception as exc:
                message = f"attempt {attempt}: no candidate ({type(exc).__name__}: {str(exc)[:500]})"
                report.notes.append(message)
                feedback.append(message)
                if report.engine == "rules" or type(exc).__name__ == "PromptError":
                    break  # a deterministic stage / a missing template fails the same way again
                if getattr(exc, "kind", None) == "connection":
                    raise _llm_unusable(exc) from exc  # unreachable endpoint: no stage can run
                if getattr(exc, "kind", None) == "permanent":
                    break  # e.g. a rejected request: another attempt of this stage cannot help
                continue
            fresh = []
            for code in candidates:
                digest = sha256_text(code)
                if digest not in seen:
                    seen.add(digest)
                    fresh.append(code)
            if not fresh:
                report.notes.append(f"attempt {attempt}: no new candidate")
                break
            self._prebuild(fresh)
            best: tuple[TrialNode, Evaluation] | None = None
            for code in fresh:
                if self.trials_used >= int(self.settings.max_trials):
                    report.notes.append(f"MAX_TRIALS={self.settings.max_trials} reached")
                    break
                node, ev = self._evaluate_candidate(code, input_node, planned.stage, report.engine, attempt)
                self._save_intermediate(node, code, ev.verdict)
                report.nodes.append(node.id)
                report.verdicts[ev.verdict] = report.verdicts.get(ev.verdict, 0) + 1
                accepted, why = self._judge(ev, input_ev, planned.stage)
                if accepted:
                    accepted, why = self._confirm_side_by_side(node, ev, input_code, code, planned.stage, why)
                debug = getattr(self.settings, "log_level", "INFO") == "DEBUG"
                self.log(f"  {node.id}: {why if debug else why.splitlines()[0][:160]}")
                if accepted and (best is None or _faster_than(ev, best[1])):
                    best = (node, ev)
                elif not accepted:
                    feedback.append(f"candidate {node.id} rejected: {why}")
                    report.rejected[node.id] = why[:500]
            if best is not None:
                node, ev = best
                assert self.store is not None
                self.store.mark_accepted(node.id)
                report.accepted = node.id
                report.status = "improved"
                report.output_ms = ev.timing.median_ms if ev.timing else None
                if report.input_ms and report.output_ms:
                    report.speedup_vs_input = report.input_ms / report.output_ms
                break
        if report.status == "pending":
            report.status = "no_improvement" if report.nodes else "no_candidates"
        return report

    def _finalize(self, baseline_node: TrialNode, baseline: Evaluation, accepted: list[TrialNode]) -> None:
        """Fresh correctness check + final timing of the best-k candidates; write the survivors."""
        assert self.store is not None
        # the composite (last accepted) first, then earlier accepted states, fastest first
        candidates: list[TrialNode] = []
        if accepted:
            candidates.append(accepted[-1])
            rest = sorted(accepted[:-1], key=lambda n: (n.median_ms is None, n.median_ms or 0.0))
            candidates += [n for n in rest if n.code_sha != accepted[-1].code_sha]
        best_k = int(self.settings.best_k)
        survivors: list[dict[str, Any]] = []
        codes = [self.store.code(n.id) for n in candidates]
        final_evs, base_ev = self._final_side_by_side(codes)
        for index, node in enumerate(candidates):
            if len(survivors) >= best_k:
                break
            code = codes[index]
            if final_evs is not None:
                seed, ev = self.opt.seed + FINAL_SEED_OFFSET, final_evs[index]
            else:
                seed = self.opt.seed + FINAL_SEED_OFFSET + index
                ev = self._safe_evaluate(code, seed=seed)
            final_node = self.store.add_node(code, parent=node.id, stage="final", engine="check")
            final_node = self.store.record_result(
                final_node.id,
                verdict=ev.verdict,
                message=ev.message,
                seed=seed,
                **timing_columns(ev.timing),
                extra=_extra_of(ev),
            )
            entry: dict[str, Any] = {
                "node": node.id,
                "check_node": final_node.id,
                "stage": node.stage,
                "seed": seed,
                "verdict": ev.verdict,
                "median_ms": final_node.median_ms,
                "speedup": final_node.speedup,
                "side_by_side": False,
                "interpreter": final_node.interpreter,
                "message": ev.message[:500],
            }
            if (
                base_ev is not None
                and base_ev.correct
                and base_ev.timing is not None
                and ev.timing is not None
                and ev.correct
            ):
                entry.update(
                    side_by_side=True,
                    baseline_ms_side_by_side=base_ev.timing.median_ms,
                    speedup_vs_stored_baseline=final_node.speedup,
                    speedup=base_ev.timing.median_ms / ev.timing.median_ms,
                )
            if not ev.correct:
                entry["dropped"] = "failed the fresh correctness check"
                self.record.final.append(entry)
                self.log(f"final: {node.id} FAILED the fresh check ({ev.verdict}); dropped")
                continue
            survivors.append(entry)
            self.record.final.append(entry)
        if not survivors:
            self.record.warnings.append(
                "no stage produced an accepted candidate: the output is the original kernel"
            )
            survivors.append(
                {
                    "node": baseline_node.id,
                    "stage": "baseline",
                    "verdict": baseline.verdict,
                    "median_ms": baseline_node.median_ms,
                    "speedup": 1.0 if baseline_node.median_ms else None,
                    "interpreter": baseline_node.interpreter,
                }
            )
            self.record.final.append(survivors[0])
        self.record.final.sort(key=lambda e: "dropped" in e)
        out = self._output_path()
        for rank, entry in enumerate(survivors, start=1):
            path = out if rank == 1 else out.with_name(f"{out.stem}.rank{rank}{out.suffix}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.store.code(entry["node"]), encoding="utf-8")
            entry["output"] = str(path)
            self.record.outputs.append(str(path))
            if entry.get("interpreter"):
                shown = "interpreter timings: no speedup claimed"
            elif entry.get("speedup"):
                shown = f"{entry['speedup']:.3f}x vs baseline"
            else:
                shown = "not timed"
            self.log(f"wrote {path} ({entry['stage']}, {shown})")

    def _final_side_by_side(self, codes: list[str]) -> tuple[list[Evaluation] | None, Evaluation | None]:
        """[original, candidates...] checked on one fresh seed and timed interleaved, if supported."""
        if not codes:
            return None, None
        try:
            evaluations = self.executor.evaluate_side_by_side(
                [self.original, *codes], seed=self.opt.seed + FINAL_SEED_OFFSET
            )
        except Exception as exc:
            self.record.warnings.append(f"side-by-side final measurement failed ({exc}); measured one by one")
            return None, None
        if evaluations is None:  # the executor cannot time side by side
            return None, None
        if len(evaluations) != len(codes) + 1:
            self.record.warnings.append("side-by-side final measurement returned the wrong count; one by one")
            return None, None
        base = evaluations[0]
        self.record.baseline["final_side_by_side"] = {
            "verdict": base.verdict,
            "median_ms": base.timing.median_ms if base.timing else None,
        }
        if not base.correct:
            self.record.warnings.append(
                f"the original failed the final fresh check ({base.verdict}): tolerances may be too tight"
            )
        return evaluations[1:], base

    def _output_path(self) -> Path:
        if self.opt.output is not None:
            return Path(self.opt.output)
        kernel = Path(self.opt.kernel_path)
        return Path(self.settings.kernel_dir) / f"{kernel.stem}_optimized{kernel.suffix}"


def _llm_unusable(exc: BaseException) -> KernelpilotError:
    return KernelpilotError(
        f"the LLM cannot be used: {exc}. Check LLM_MODEL / OPENAI_API_BASE / OPENAI_API_KEY "
        "(or --model/--api-base/--api-key), or run without an LLM: --engine rules"
    )


def _faster_than(a: Evaluation, b: Evaluation) -> bool:
    if a.timing is None or b.timing is None:
        return False
    return a.timing.median_ms < b.timing.median_ms


def _extra_of(ev: Evaluation) -> dict[str, Any]:
    keep = {}
    for key, value in (ev.extra or {}).items():
        if isinstance(value, str | int | float | bool) or value is None:
            keep[key] = value
    for key in ("max_abs_error", "max_rel_error", "tflops", "gbps"):
        value = getattr(ev, key)
        if value is not None:
            keep[key] = value
    return keep


def _evaluation_from_node(node: TrialNode) -> Evaluation:
    timing = None
    if node.median_ms is not None:
        timing = Timing(
            median_ms=node.median_ms,
            min_ms=node.min_ms if node.min_ms is not None else node.median_ms,
            max_ms=node.max_ms if node.max_ms is not None else node.median_ms,
            repetitions=0,
            interpreter=node.interpreter,
        )
    extra = {k: v for k, v in (node.extra or {}).items() if isinstance(v, str | int | float | bool)}
    verdict = cast(Verdict, node.verdict or "runtime_error")  # the store holds Evaluation verdicts
    return Evaluation(verdict=verdict, message=node.message, timing=timing, extra=extra)


def check_options(options: PipelineOptions) -> None:
    """Input checks that need no plugin: files exist, stage names are known."""
    from kernelpilot.fileio import read_text

    read_text(options.kernel_path, field="--input", what="kernel file")
    read_text(options.spec_path, field="--spec", what="spec file")
    unknown = sorted(set(options.correctness_only_stages) - set(STAGE_ORDER))
    if unknown:
        raise InputError(
            f"unknown stage(s) {', '.join(unknown)}; allowed: {', '.join(STAGE_ORDER)}",
            field="--correctness-only-stages",
        )


__all__ = ["Pipeline", "PipelineOptions", "PipelineResult", "check_options"]
