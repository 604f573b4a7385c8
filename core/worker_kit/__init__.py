"""The DSL-neutral half of every kernel worker process.

A worker is started by :class:`kernelpilot.execution.JobExecutor` with one JSON job file; it checks
candidate kernels against the oracle and times them, then always writes a result file.  Everything that
does not depend on how a DSL builds or launches its kernel lives here, so every DSL is judged by one
protocol and a third-party plugin writes only its build/launch step:

* :mod:`.model` -- loading kernel files, seeded inputs, building ``Model`` objects, copying weights;
* :mod:`.poison` -- poisoned allocations and free caching-allocator blocks (unwritten outputs show);
* :mod:`.compare` -- element-wise comparison against the oracle;
* :mod:`.timing` -- ``do_bench`` / wall-clock timing and the ``timing`` record;
* :mod:`.serve` -- the entry point that reads the job, classifies errors and writes the verdict;
* :mod:`.model_worker` -- the whole protocol for DSLs whose kernel file is a Python ``Model``.

Nothing here imports torch at module level: the parent process imports these modules too.
"""
