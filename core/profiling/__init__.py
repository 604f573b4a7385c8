"""Hardware counters from vendor profilers (Nsight Compute on NVIDIA, VTune on Intel) in one schema.

``skill profile --profiler ncu|vtune`` shows them; ``optimize --profile`` collects them for each
stage's input and puts :meth:`~kernelpilot.profiling.schema.ProfileReport.summary` into the next
prompt.  Parsing is separate from running so it is tested on recorded report formats without a GPU.
"""
