#!/bin/bash
# benchmarks/fmha_ab_h200.sh with AB=ftz (the name recorded calls ran).
AB=ftz exec bash benchmarks/fmha_ab_h200.sh "$@"
