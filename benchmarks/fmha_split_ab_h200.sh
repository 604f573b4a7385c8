#!/bin/bash
# benchmarks/fmha_ab_h200.sh with AB=split (the name recorded calls ran).
AB=split exec bash benchmarks/fmha_ab_h200.sh "$@"
