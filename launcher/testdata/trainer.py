"""A trainer for datahelix train's tests: it iterates over datahelix.Loader
and does what its flags say (fail, stop early, save or resume a state,
never connect, catch SIGTERM), writing each step's keys to --out."""
import argparse
import hashlib
import json
import os
import signal
import sys
import time

import datahelix

p = argparse.ArgumentParser()
p.add_argument("--out", help="write {step: keys} of this rank to OUT.RANK")
p.add_argument("--stop-after", type=int, default=0, help="stop iterating after N batches")
p.add_argument("--fail-at", type=int, default=-1)
p.add_argument("--fail-rank", type=int, default=-1)
p.add_argument("--save", help="write the loader's state_dict to this file after --save-at batches, then stop")
p.add_argument("--save-at", type=int, default=0)
p.add_argument("--resume", help="load_state_dict from this file first")
p.add_argument("--no-connect", action="store_true", help="never create a loader")
p.add_argument("--step-ms", type=float, default=0, help="compute per step")
p.add_argument("--on-term", help="on SIGTERM, write this file (RANK appended) and exit 0")
p.add_argument("--tag", default="", help="ignored: names the processes for the test")
p.add_argument("--md5", action="store_true", help="also write each sample's shape, pixels' MD5 and whether another rank read it, by id")
a = p.parse_args()
rank = int(os.environ["RANK"])

if a.on_term:
    def term(sig, frame):
        with open(f"{a.on_term}.{rank}", "w") as f:
            f.write("saved\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, term)

if a.no_connect:
    time.sleep(3600)

loader = datahelix.Loader()
if a.resume:
    with open(a.resume) as f:
        loader.load_state_dict(json.load(f))
keys, ids, md5s = {}, {}, {}
n = 0
for batch in loader:
    keys[batch["step"]] = batch["key"]
    ids[batch["step"]] = batch["id"]
    if a.md5:
        for sid, px, owner in zip(batch["id"], batch["pixels"], batch["owner"]):
            md5s[str(sid)] = [list(px.shape), hashlib.md5(px.contiguous().numpy().tobytes()).hexdigest(), owner != rank]
    n += 1
    if batch["step"] == a.fail_at and rank == a.fail_rank:
        raise RuntimeError(f"trainer of rank {rank} fails at step {a.fail_at} on purpose")
    if a.step_ms:
        time.sleep(a.step_ms / 1000)
    if a.save and n == a.save_at:
        if rank == 0:
            with open(a.save, "w") as f:
                json.dump(loader.state_dict(), f)
        break
    if a.stop_after and n == a.stop_after:
        break
loader.close()
if a.out:
    with open(f"{a.out}.{rank}", "w") as f:
        json.dump({"keys": keys, "ids": ids, "md5s": md5s, "stats": loader.stats(),
                   "master_addr": os.environ.get("MASTER_ADDR"), "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME")}, f)
