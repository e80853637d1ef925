#!/usr/bin/env bash
# Sparse all_reduce of an embedding gradient: weft vs gloo vs weft's dense allreduce of the same
# table, and (--crossover) weft's two sparse algorithms against each other.
#   bench/sparse_compare.sh [-n RANKS] [--no-setup] [ARGS for bench/sparse_compare.py ...]
# bench/torch_compare.sh's set-up and launch with bench/sparse_compare.py (see it for the columns).
exec "$(dirname "${BASH_SOURCE[0]}")/torch_compare.sh" --script bench/sparse_compare.py "$@"
