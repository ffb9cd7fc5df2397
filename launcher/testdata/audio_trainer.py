"""A trainer for datahelix train's audio test: it iterates over datahelix.Loader
and writes, per step, each sample's kind, key, audio shape, whether its clip had no
audio track, and the RMS of its audio, with the batch's audio type, to --out.RANK."""
import argparse
import json
import os

import torch

import datahelix

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
a = p.parse_args()
rank = int(os.environ["RANK"])

steps = {}
with datahelix.Loader() as loader:
    for batch in loader:
        audio = batch["audio"]
        stacked = isinstance(audio, torch.Tensor)
        per = list(audio.unbind(0)) if stacked else audio
        rows = []
        for i, key in enumerate(batch["key"]):
            t = per[i]
            rows.append({"key": key, "kind": batch["kind"][i], "missing": batch["audio_missing"][i],
                         "shape": None if t is None else list(t.shape),
                         "dtype": None if t is None else str(t.dtype),
                         "rms": None if t is None or t.numel() == 0 else float(t.pow(2).mean().sqrt())})
        steps[batch["step"]] = {"stacked": stacked, "rate": batch["audio_rate"], "samples": rows}
with open(f"{a.out}.{rank}", "w") as f:
    json.dump(steps, f)
