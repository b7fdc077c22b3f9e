#!/usr/bin/env bash
# The GPU run of docs/benchmarks/gpu.md, for a machine with an NVIDIA GPU and nothing else reachable
# (an image with python3, torch (CUDA), transformers, numpy, scipy, pytest, hypothesis, cmake and g++).
# Brought along, git-ignored: .whl/ (the cmeel-eigen 3.4.1 and pybind11 3.1.0 wheels: pip download
# --no-deps) and the directory PAIR (default gpu-pair/: a trained pair of scripts/train_pair.py in
# bfloat16 with its tokenizer, and next_token_pairs-128.npz, the first 128 held-out contexts of its
# dataset for the tree search, packed by scripts/gpu_pair.py; DRAFT names the draft's directory in it,
# default draft). It builds the core for this machine, then runs the STEPS asked for (VOCABS: the
# vocabulary sizes of the verify step, default 32000,128000; DEPTHS, BUDGETS, REPEATS: the
# inflated-trees step's grid, default 4,5 / 8,16,32 / 3):
#   tests       the device tests on CUDA (the generation loop on the device included)
#   generation  chains against target.generate and assisted generation (python -m multidraft.bench
#               --generation --device cuda)
#   trees       chains, searched trees, top-k trees and tree="auto" by depth and node budget (--trees)
#   threads     two threads against one on the host's CPU (the thread table)
#   verify      one verify per tree level on the device path against the host path
#               (scripts/device_check.py)
#   rdk         RDK's per-token calls on CUDA tensors (python -m multidraft.bench --rdk --tensors cuda)
#   inflated    the generation step with the trained target inflated to Llama 3 8B's shape, built on the
#               GPU itself (--inflate 8b: the same logits, an 8B-sized pass; docs/design/inflated-target.md),
#               with the kernel-launching ops and host reads per round counted on the device (--counts)
#   inflated-trees  the token-tree grid with that inflated target
#   profile     torch.profiler over target.generate and three loop configurations with that inflated
#               target: where a round's time goes, on the host and on the device (scripts/device_profile.py)
# Their time limits sum to more than one 600-second command: run STEPS="tests generation trees" in one,
# then "threads verify rdk profile inflated inflated-trees"; with time for one command only, STEPS="tests
# profile inflated" (steps run in this script's order, whatever STEPS's order).
# Each step writes its output to $OUT (default build/device-check) as it runs, so a command cut at its limit still returns the steps before. DEVICE=cpu makes the same
# run on the CPU (a dry run of the script where no GPU is: every step but the timings means the same).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/device-check}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-tests generation trees verify rdk profile inflated inflated-trees threads}  # the parts to run after the build
DEVICE=${DEVICE:-cuda}
PAIR=${PAIR:-gpu-pair}  # the carried pair (see above) and its draft's directory in it
DRAFT=${DRAFT:-draft}
step() { echo "== $* ($(date +%T))" | tee -a "$OUT/steps.txt"; }
wanted() { [[ " $STEPS " == *" $1 "* ]]; }

step install
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
[[ $DEVICE == cuda ]] && nvidia-smi -L | tee "$OUT/gpu.txt"
step build
PYTHONPATH=/tmp/site cmake -S . -B build/gpu -DMULTIDRAFT_NATIVE=ON -DPython_EXECUTABLE="$(command -v "$PY")" \
    -Dpybind11_DIR="$(PYTHONPATH=/tmp/site $PY -m pybind11 --cmakedir)" \
    -DEigen3_DIR=/tmp/site/cmeel.prefix/share/eigen3/cmake > "$OUT/build.log" 2>&1 \
  && cmake --build build/gpu -j "$(nproc)" >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
mkdir -p python/multidraft/_isa/native && cp build/gpu/native/_core*.so python/multidraft/_isa/native/
export PYTHONPATH=python:/tmp/site

wanted tests && step "device tests on $DEVICE" && MULTIDRAFT_TEST_DEVICE=$DEVICE timeout 300 $PY -m pytest -q -p no:cacheprovider tests/device > "$OUT/tests.log" 2>&1; tail -25 "$OUT/tests.log"
# torch first: a torch built with pybind11 3.0 (torch 2.11) crashes when imported after a module of pybind11
# 3.1 (docs/benchmarks/gpu.md, "Import order")
BENCH=("$PY" -c "import torch, sys; from multidraft.bench.cli import main
sys.exit(main(sys.argv[1:]))")
wanted generation && step "generation" && timeout 200 "${BENCH[@]}" --generation --pair "$PAIR" --draft "$DRAFT" --device "$DEVICE" \
    --dtype bfloat16 --configs sps:1,global_resolution:2,global_resolution:4,otlp:2 --draft-length 4 --new-tokens 64 \
    --repeats 3 --draft-top-k 16 2>&1 | grep -v "Loading weights" | tee "$OUT/generation.md"
# the flat cost curve of a GPU's target pass is where the cost model predicts trees pay (generation.md, "Token trees")
wanted trees && step "token trees" && timeout 240 "${BENCH[@]}" --generation --pair "$PAIR" --draft "$DRAFT" --device "$DEVICE" \
    --dtype bfloat16 --trees --no-chains --dataset "$PAIR/next_token_pairs-128.npz" --depths 4,5 --budgets 4,8,16,32 \
    --new-tokens 64 --repeats 3 2>&1 | grep -v "Loading weights" | tee "$OUT/trees.md"
wanted verify && step "verification: device path against host path" && timeout 200 $PY scripts/device_check.py --device "$DEVICE" --vocab "${VOCABS:-32000,128000}" --out "$OUT/verify.json" | tee "$OUT/verify.md"
# RDK's per-token calls on float32 CUDA tensors beside NumPy's, at V = 32000 (docs/benchmarks/rdk.md)
wanted rdk && step "rdk on tensors" && timeout 120 "${BENCH[@]}" --rdk --quick --tensors "$DEVICE" --out "$OUT" 2>&1 | tail -12 | tee "$OUT/rdk.md"
# the 8B shape in bfloat16 fills 12 GB of the GPU; a CPU dry run inflates to the moderate preset instead
# (INFLATE: a preset or shape of multidraft.bench.inflate; set but empty, none: the large pair's target
# is already wider than the moderate preset)
INFLATE=${INFLATE-$([[ $DEVICE == cuda ]] && echo 8b || echo moderate)}
wanted profile && { step "profile, target inflated to $INFLATE"; timeout 240 $PY scripts/device_profile.py \
    --pair "$PAIR" --draft "$DRAFT" --device "$DEVICE" --inflate "$INFLATE" 2>&1 | grep -v "Loading weights" > "$OUT/profile.md"; head -40 "$OUT/profile.md"; }
wanted inflated && step "generation, target inflated to $INFLATE" && timeout 240 "${BENCH[@]}" --generation --pair "$PAIR" \
    --draft "$DRAFT" --device "$DEVICE" --dtype bfloat16 --inflate "$INFLATE" --configs sps:1,global_resolution:2,otlp:2 \
    --draft-length 4 --new-tokens 64 --repeats 3 --draft-top-k 16 --counts 2>&1 | grep -v "Loading weights" | tee "$OUT/inflated.md"
wanted inflated-trees && step "token trees, target inflated to $INFLATE" && timeout 200 "${BENCH[@]}" --generation \
    --pair "$PAIR" --draft "$DRAFT" --device "$DEVICE" --dtype bfloat16 --inflate "$INFLATE" --trees --no-chains \
    --dataset "$PAIR/next_token_pairs-128.npz" --depths "${DEPTHS:-4,5}" --budgets "${BUDGETS:-8,16,32}" \
    --new-tokens 64 --repeats "${REPEATS:-3}" 2>&1 \
    | grep -v "Loading weights" | tee "$OUT/inflated-trees.md"
# two threads against one on 64 rows of V = 32000 on this host's CPU, whose memory serves several cores
# (docs/benchmarks/first-call.md: the development VM's does not)
wanted threads && step "two threads on 64 rows" && timeout 150 $PY -c "from multidraft.bench.baselines import run_thread_scaling, thread_table
from multidraft.bench.distributions import DEFAULT_SEED
print(thread_table(run_thread_scaling(['peaked', 'flat'], 32000, DEFAULT_SEED, threads=2)))" | tee "$OUT/threads.md"
step done
