"""Running candidate kernels: the subprocess job executor DSL plugins subclass.

:class:`JobExecutor` owns the job files, the worker process and its timeout, tolerances and the
conversion of a worker's result into an :class:`~kernelpilot.pipeline.contracts.Evaluation`; the
worker side is :mod:`kernelpilot.worker_kit`.
"""

from kernelpilot.execution.job_executor import JobExecutor, classify_bound, reference_path

__all__ = ["JobExecutor", "classify_bound", "reference_path"]
