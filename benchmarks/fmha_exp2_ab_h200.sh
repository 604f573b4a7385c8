#!/bin/bash
# benchmarks/fmha_ab_h200.sh with AB=exp2 (the name recorded calls ran).
AB=exp2 exec bash benchmarks/fmha_ab_h200.sh "$@"
