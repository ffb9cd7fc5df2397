"""Train a tiny multimodal classifier with DistributedDataParallel, fed by
datahelix or by the stock PyTorch DataLoader, and report input wait and
throughput per rank.

  # datahelix: every MPI rank starts this program, the data plane feeds it
  ./mpirun.sh -np 2 datahelix train --steps 60 --batch 4 -- \\
      /usr/bin/python3 examples/train.py --loader datahelix --json dh.json
  # the baseline: DataLoader over a WebDataset-style IterableDataset
  /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
      examples/train.py --loader torch --workers 2 --steps 60 --batch 4 --json torch.json
  # (with torch < 2.0 on Python 3.11, where that launcher is broken: examples/torchrun.py)

The model pools each sampled frame (or image) to 16 x 16, embeds it with an MLP,
takes the mean and the standard deviation of the embeddings over the sample's
frames (zeros for text) and classifies the sample's kind (video, image,
document, text) from them and the length of its text. `--width`/`--depth` make
the per-frame MLP heavier. Times: `wait` is the time blocked getting the next
batch, `step` the forward, backward and optimizer step (on CUDA, also timed with
CUDA events read at the end, without a synchronize per step). Rank 0 prints a
summary and writes `--json` with every rank's figures and per-step keys.

With datahelix, `--save-state FILE --save-at K` stops after K steps with the
loader's state in FILE (JSON) and the model and optimizer in FILE.model.pt, and
`--resume-state FILE` continues from there with the same batches; with
`--save-state` alone the trainer saves and stops on SIGTERM (Slurm's time limit).
`--fail-at STEP --fail-rank R` makes rank R raise at STEP (testing).
"""

import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

KINDS = ["video", "image", "document", "text"]
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=["datahelix", "torch"], default="datahelix")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--steps", type=int, default=60, help="last step + 1 (datahelix: also ends when the server does)")
    p.add_argument("--batch", type=int, default=4, help="samples per rank per step (torch loader; datahelix train --batch sets it for datahelix)")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank (torch loader)")
    p.add_argument("--frames", type=int, default=8, help="frames per clip (torch loader)")
    p.add_argument("--size", type=int, default=224, help="frame side in pixels (torch loader)")
    p.add_argument("--data", default=None, help="shard directory, glob or .tar (torch loader; default: the default dataset)")
    p.add_argument("--shuffle-buffer", type=int, default=32, help="samples in each worker's shuffle buffer (torch loader)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--width", type=int, default=512, help="per-frame MLP width")
    p.add_argument("--depth", type=int, default=2, help="per-frame MLP hidden layers")
    p.add_argument("--compute-ms", type=float, default=0, help="extra matmul work per step, in ms, as a bigger model would add")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: $OMP_NUM_THREADS, else cores / local ranks)")
    p.add_argument("--warmup", type=int, default=8, help="steps left out of the steady throughput")
    p.add_argument("--json", default=None, help="rank 0 writes the job's figures here")
    p.add_argument("--log-every", type=int, default=10, help="rank 0 prints the loss every N steps (0: never)")
    p.add_argument("--save-state", default=None, help="datahelix: write the loader state here (at --save-at, or on SIGTERM) and exit 0")
    p.add_argument("--save-at", type=int, default=None, help="datahelix: save after this many steps")
    p.add_argument("--resume-state", default=None, help="datahelix: continue from a state --save-state wrote")
    p.add_argument("--fail-at", type=int, default=None, help="raise at this step (testing)")
    p.add_argument("--fail-rank", type=int, default=0)
    a = p.parse_args(argv)
    if a.loader == "torch" and (a.save_state or a.resume_state):
        p.error("--save-state/--resume-state need --loader datahelix")
    if a.save_at is not None and not a.save_state:
        p.error("--save-at needs --save-state")
    return a


class KindClassifier(nn.Module):
    """Per-frame MLP over 16x16 pooled RGB; mean and std over each sample's
    frames; a linear head that also sees log(1 + text length)."""

    def __init__(self, width=512, depth=2, pool=16):
        super().__init__()
        self.pool = pool
        layers, d = [], 3 * pool * pool
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.frame = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(2 * d + 1, width), nn.ReLU(), nn.Linear(width, len(KINDS)))

    def forward(self, pixels, text_len):
        """pixels: list of uint8 [N_i,H,W,3] (N_i may be 0); text_len: float [B]."""
        dev, b = text_len.device, len(pixels)
        counts = torch.tensor([p.shape[0] for p in pixels])  # on the CPU: no GPU sync for the sizes
        seg = torch.repeat_interleave(torch.arange(b), counts).to(dev, non_blocking=True)
        n = counts.clamp(min=1).unsqueeze(1).float().to(dev, non_blocking=True)
        x = torch.cat([p.to(dev, non_blocking=True) for p in pixels])  # [sum N, H, W, 3]
        x = x.permute(0, 3, 1, 2).float().div_(255).sub_(0.5)
        x = F.adaptive_avg_pool2d(x, self.pool).flatten(1)
        e = self.frame(x)  # [sum N, width]; empty when no sample has frames
        mean = torch.zeros(b, e.shape[1], device=dev).index_add(0, seg, e) / n
        sq = torch.zeros(b, e.shape[1], device=dev).index_add(0, seg, e * e) / n
        std = (sq - mean * mean).clamp(min=0).add(1e-6).sqrt()
        return self.head(torch.cat([mean, std, text_len.log1p().unsqueeze(1) / 8], 1))


class Burner:
    """Extra device work per step (--compute-ms): n square matmuls, n calibrated once."""

    def __init__(self, ms, device):
        self.n, side = 0, 4096 if device.type == "cuda" else 256
        if ms > 0:
            self.a = torch.randn(side, side, device=device) / side ** 0.5
            self.b = torch.empty_like(self.a)
            self.run(3)
            sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
            sync()
            t = time.perf_counter()
            self.run(10)
            sync()
            self.n = max(1, round(ms / (100 * (time.perf_counter() - t))))

    def run(self, n=None):
        for _ in range(self.n if n is None else n):
            torch.mm(self.a, self.a, out=self.b)


def setup_distributed(args):
    """Joins the process group from the env (torch.distributed.run and
    `datahelix train` both set it; alone, a world of one)."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", "0")) or max(1, (os.cpu_count() or 1) // local_world)
    torch.set_num_threads(threads)
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo", init_method="env://")
    return dist.get_rank(), dist.get_world_size(), device


def import_datahelix():
    """The datahelix client (on PYTHONPATH under `datahelix train`, else from the repo)."""
    try:
        import datahelix
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
        import datahelix
    return datahelix


def state_path(path, rank):
    """FILE, or FILE with {rank} filled in (one file per rank)."""
    return path.format(rank=rank) if "{rank}" in path else path


def save_state(args, loader, model, opt, rank):
    """Writes the loader state (JSON) and, beside it, the model and optimizer (FILE.model.pt)."""
    path = state_path(args.save_state, rank)
    if rank == 0 or "{rank}" in args.save_state:
        with open(path + ".tmp", "w") as f:
            json.dump(loader.state_dict(), f)
        os.replace(path + ".tmp", path)
        torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict()}, path + ".model.pt")
    dist.barrier()
    print(f"rank {rank}: saved state to {path}", flush=True)


def build_loader(args, rank, world, device):
    """The batch source: the datahelix client or the stock DataLoader."""
    if args.loader == "datahelix":
        loader = import_datahelix().Loader(device="cuda" if device.type == "cuda" else None)
        if args.resume_state:
            with open(state_path(args.resume_state, rank)) as f:
                loader.load_state_dict(json.load(f))
        return loader
    sys.path.insert(0, HERE)
    from torch_loader import make_loader
    return make_loader(args.data, rank, world, args.batch, args.workers, args.frames,
                       args.size, args.seed, args.shuffle_buffer, pin_memory=device.type == "cuda")


def percentile(xs, q):
    """The q-quantile of xs (nearest rank), None when empty."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def train(args, rank, world, device):
    """Runs the steps; returns this rank's figures."""
    torch.manual_seed(args.seed)
    model = KindClassifier(args.width, args.depth).to(device)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    ckpt = args.resume_state and state_path(args.resume_state, rank) + ".model.pt"
    if ckpt and os.path.exists(ckpt):
        state = torch.load(ckpt, map_location=device)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
    loader = build_loader(args, rank, world, device)
    stop = {"sigterm": False, "group": None}
    if args.save_state:  # Slurm's time limit: datahelix forwards SIGTERM here first
        signal.signal(signal.SIGTERM, lambda *_: stop.update(sigterm=True))
        stop["group"] = dist.new_group(backend="gloo")  # agree on the CPU, without a GPU sync
    cuda = device.type == "cuda"
    burn = Burner(args.compute_ms, device)
    rec = dict(steps=[], keys=[], ids=[], samples=[], dropped=0, loss=[], wait=[], step=[], start=[], events=[])

    dist.barrier()
    t0, cpu0 = time.perf_counter(), time.process_time()
    it, step, saved = iter(loader), None, False
    while step is None or step + 1 < args.steps:  # no batch is fetched past the last step
        t = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        wait = time.perf_counter() - t
        step = batch["step"] if args.loader == "datahelix" else len(rec["steps"])
        if step >= args.steps:
            break
        if args.fail_at is not None and step == args.fail_at and rank == args.fail_rank:
            raise RuntimeError(f"rank {rank}: failing at step {step} as asked (--fail-at)")
        ts = time.perf_counter()
        if cuda:
            ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            ev[0].record()
        labels = torch.tensor([KINDS.index(k) for k in batch["kind"]], device=device)
        text_len = torch.tensor([float(len(s)) for s in batch["text"]], device=device)
        loss = F.cross_entropy(model(batch["pixels"], text_len), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        burn.run()
        if cuda:
            ev[1].record()
            rec["events"].append(ev)
        rec["loss"].append(loss.detach())
        rec["step"].append(time.perf_counter() - ts)
        rec["wait"].append(wait)
        rec["start"].append(t - t0)
        rec["steps"].append(step)
        rec["keys"].append(list(batch["key"]))
        rec["ids"].append([int(i) for i in batch["id"]])  # keys repeat across epochs, ids do not
        rec["samples"].append(len(batch["key"]))
        rec["dropped"] += len(batch["dropped"])
        del batch
        if rank == 0 and args.log_every and len(rec["steps"]) % args.log_every == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
        done = len(rec["steps"])
        if args.save_state and (args.save_at is not None and done == args.save_at or sigterm_agreed(stop)):
            save_state(args, loader, model, opt, rank)
            saved = True
            break
    if cuda:
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    del it  # the torch loader's workers stop here
    gpu_ms = [a.elapsed_time(b) for a, b in rec["events"]]
    stats = dict(loader.stats()) if hasattr(loader, "stats") else {}
    if hasattr(loader, "close"):
        loader.close()
    losses = [float(x) for x in rec["loss"]]
    return dict(rank=rank, steps=rec["steps"], keys=rec["keys"], ids=rec["ids"], samples=sum(rec["samples"]),
                step_samples=rec["samples"], dropped=rec["dropped"], wall_s=wall, cpu_s=cpu, wait_s=sum(rec["wait"]),
                wait_per_step_s=rec["wait"], step_start_s=rec["start"], step_s=rec["step"],
                step_ms_p50=1e3 * (percentile(rec["step"], 0.5) or 0),
                gpu_step_ms_p50=percentile(gpu_ms, 0.5), h2d_gbps=stats.get("h2d_gbps"), loader_stats=stats,
                loss=losses, loss_first=losses[0] if losses else None, loss_last=losses[-1] if losses else None,
                saved=saved)


def sigterm_agreed(stop):
    """Whether any rank got SIGTERM (one tiny allreduce, so all stop at the same step)."""
    flag = torch.tensor([1.0 if stop["sigterm"] else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=stop["group"])
    return flag.item() > 0


def summarize(args, ranks):
    """The job's figures from every rank's (rank 0)."""
    world = len(ranks)
    wall = max(r["wall_s"] for r in ranks)
    samples = sum(r["samples"] for r in ranks)
    n = min(len(r["steps"]) for r in ranks)
    steady = None
    if n > args.warmup:
        t_start = min(r["step_start_s"][args.warmup] for r in ranks)
        s_samples = sum(sum(r["step_samples"][args.warmup:]) for r in ranks)
        s_wait = sum(sum(r["wait_per_step_s"][args.warmup:]) for r in ranks)
        s_wall = wall - t_start
        # The job's stall: a lockstep step waits for its slowest rank's batch.
        s_stall = sum(max(r["wait_per_step_s"][i] for r in ranks) for i in range(args.warmup, n))
        s_step = percentile([percentile(r["step_s"][args.warmup:n], 0.5) for r in ranks], 0.5)
        steady = dict(steps=n - args.warmup, wall_s=s_wall, throughput_sps=s_samples / s_wall,
                      wait_s=s_wait / world, wait_frac=s_wait / (world * s_wall), job_stall_frac=s_stall / s_wall,
                      step_ms_p50=1e3 * s_step)
    per_rank = []
    for r in ranks:
        d = {k: v for k, v in r.items() if k not in ("wait_per_step_s", "step_start_s", "step_s", "loss", "step_samples")}
        d["wait_frac"] = r["wait_s"] / wall if wall > 0 else 0.0
        d["throughput_sps"] = r["samples"] / wall if wall > 0 else 0.0
        per_rank.append(d)
    curve = [sum(r["loss"][i] for r in ranks) / world for i in range(n)]
    gpu = [r["gpu_step_ms_p50"] for r in ranks if r["gpu_step_ms_p50"] is not None]
    h2d = [r["h2d_gbps"] for r in ranks if r["h2d_gbps"] is not None]
    return dict(loader=args.loader, device=args.device, ranks=world, steps=n,
                first_step=ranks[0]["steps"][0] if n else None, batch=args.batch, warmup=args.warmup,
                width=args.width, depth=args.depth, workers=args.workers if args.loader == "torch" else None,
                wall_s=wall, cpu_s=sum(r["cpu_s"] for r in ranks), samples=samples,
                throughput_sps=samples / wall if wall > 0 else 0.0,
                steady_throughput_sps=steady and steady["throughput_sps"], steady=steady,
                wait_s=sum(r["wait_s"] for r in ranks) / world,
                wait_frac=sum(r["wait_s"] for r in ranks) / (world * wall) if wall > 0 else 0.0,
                step_ms_p50=percentile([r["step_ms_p50"] for r in ranks], 0.5),
                gpu_step_ms_p50=percentile(gpu, 0.5) if gpu else None,
                h2d_gbps=sum(h2d) / len(h2d) if h2d else None,
                loss_first=curve[0] if curve else None, loss_last=curve[-1] if curve else None,
                loss_first_avg5=sum(curve[:5]) / len(curve[:5]) if curve else None,
                loss_last_avg5=sum(curve[-5:]) / len(curve[-5:]) if curve else None,
                loss_curve=curve, saved=any(r["saved"] for r in ranks), per_rank=per_rank)


def main(argv=None):
    args = parse_args(argv)
    rank, world, device = setup_distributed(args)
    r = train(args, rank, world, device)
    tput = r["samples"] / r["wall_s"] if r["wall_s"] > 0 else 0.0
    fmt = lambda x: "n/a" if x is None else f"{x:.4f}"
    print(f"rank {rank}/{world} [{args.loader}]: {len(r['steps'])} steps, input wait {r['wait_s']:.2f} s "
          f"({100 * r['wait_s'] / max(r['wall_s'], 1e-9):.1f}%), step p50 {r['step_ms_p50']:.1f} ms"
          + (f" (gpu {r['gpu_step_ms_p50']:.1f} ms)" if r["gpu_step_ms_p50"] is not None else "")
          + f", {tput:.1f} samples/s, loss {fmt(r['loss_first'])} -> {fmt(r['loss_last'])}", flush=True)
    ranks = [None] * world
    dist.all_gather_object(ranks, r)
    if rank == 0:
        s = summarize(args, ranks)
        st = s["steady"]
        print(f"summary [{args.loader}, {world} ranks, batch {args.batch}]: {s['steps']} steps in {s['wall_s']:.2f} s, "
              f"{s['throughput_sps']:.1f} samples/s"
              + (f" (steady {st['throughput_sps']:.1f} after {args.warmup} steps)" if st else "")
              + f", input wait {s['wait_s']:.2f} s per rank ({100 * s['wait_frac']:.1f}%), "
              f"loss {fmt(s['loss_first'])} -> {fmt(s['loss_last'])}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(s, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
