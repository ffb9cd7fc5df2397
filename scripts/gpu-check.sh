#!/usr/bin/env bash
# gpu-check.sh — run on a GPU machine (after scripts/gpu-bundle.sh here, with .gpu
# carried): the trainer bridge's CUDA paths, unchanged from the CPU ones.
# examples/train.py --device cuda trains under datahelix train (one rank) on the
# default dataset, generated there; the client pins the ring (cudaHostRegister),
# copies each batch on a side stream, and times the GPU's steps with CUDA events.
# Writes to ${OUT:-/tmp/gpu-check}: server.json (datahelix's summary), train.json
# (the trainer's: gpu_step_ms_p50 from CUDA events, h2d_gbps from the pinned ring,
# input wait, throughput) and log.txt.
#
#   OUT=/tmp/x scripts/gpu-check.sh [STEPS]      # default 200 steps
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-/tmp/gpu-check}
steps=${1:-200}
mkdir -p "$out" /tmp/dh
tar -C /tmp/dh -xJf .gpu/lib.tar.xz
xz -dc .gpu/datahelix.xz >/tmp/dh/datahelix && chmod +x /tmp/dh/datahelix
export LD_LIBRARY_PATH=/tmp/dh/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
py=$(command -v python3)
"$py" -c 'import torch; assert torch.cuda.is_available(); print("torch", torch.__version__, torch.cuda.get_device_name())'
/tmp/dh/datahelix gen --default --out /tmp/dh/data --quiet 2>&1 | tee "$out/log.txt"
workers=$(( $(nproc) - 2 ))
/tmp/dh/datahelix train --ranks 1 --data /tmp/dh/data --steps "$steps" --batch 8 --workers "$workers" \
	--json "$out/server.json" --quiet -- \
	"$py" examples/train.py --loader datahelix --device cuda --steps "$steps" --width 2048 --depth 4 \
	--json "$out/train.json" 2>&1 | tee -a "$out/log.txt"
"$py" - "$out/train.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("gpu-check:", {k: d.get(k) for k in ("gpu_step_ms_p50", "step_ms_p50", "h2d_gbps", "wait_frac", "throughput_sps", "loss_first", "loss_last")})
PY
