"""The kernel optimization pipeline: baseline, analysis, plan, per-stage optimize/verify loops."""
