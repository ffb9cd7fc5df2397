"""The stock PyTorch baseline: a WebDataset-style IterableDataset under DataLoader.

This is what a rank-local loader usually looks like (webdataset's
split_by_node / split_by_worker / shuffle / decode / batched, written out with
the standard library, PyAV and PIL so that it needs nothing else):

- shard i goes to rank i % world; each epoch the rank shuffles its shards
  with a seed shared by its workers, and worker w takes every W-th of them.
  When a rank holds fewer shards than workers, every worker reads all of the
  rank's shards and keeps every W-th sample instead, so that no worker idles
  (webdataset would leave the surplus workers without data);
- samples pass through a seeded shuffle buffer, epochs repeat without end;
- a clip becomes F frames sampled uniformly over its presentation timeline
  (the centre of each of F equal segments, as datahelix and decord-style
  loaders pick them; a clip of fewer frames repeats frames to fill F), each
  resized (squashed) to S x S RGB by swscale; an image is squashed to S x S
  with PIL's bilinear filter; text stays a string;
- batches are dicts of lists, in the layout of the datahelix client's batches.
"""

import glob
import io
import json
import os
import random
import sys
import tarfile

import av
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

VIDEO = {"mp4", "mov", "m4v", "webm", "mkv"}
IMAGE = {"jpg", "jpeg", "png", "webp"}
TEXT = {"txt", "text", "caption"}


def default_data_dir():
    """The default dataset's directory, found as datahelix finds it."""
    cache = os.environ.get("DATAHELIX_CACHE") or os.path.expanduser("~/.cache/datahelix")
    return os.path.join(cache, "default-seed1-fmt2")


def list_shards(data):
    """The shards of DIR (its *.tar), of a glob, or a single .tar, sorted."""
    if os.path.isdir(data):
        shards = glob.glob(os.path.join(data, "*.tar"))
    elif any(c in data for c in "*?["):
        shards = glob.glob(data)
    else:
        shards = [data] if os.path.isfile(data) else []
    if not shards:
        raise SystemExit(f"torch loader: no *.tar shards in {data!r}")
    return sorted(shards)


def iter_samples(path, keep=lambda index: True):
    """Yields (index, key, {ext: bytes}) for the samples of one tar shard.

    Members sharing a key (the name up to the first dot of its basename) are
    consecutive in a WebDataset shard. Samples whose index `keep` rejects are
    skipped without reading their bytes.
    """
    index, key, members = -1, None, {}
    with tarfile.open(path, "r:") as tar:
        for m in tar:
            if not m.isfile():
                continue
            d, base = os.path.split(m.name)
            stem, _, ext = base.partition(".")
            k = os.path.join(d, stem)
            if k != key:
                if key is not None and keep(index):
                    yield index, key, members
                index, key, members = index + 1, k, {}
            if keep(index):
                members[ext.lower()] = tar.extractfile(m).read()
    if key is not None and keep(index):
        yield index, key, members


def pick_times(pts, n):
    """The presentation times of n frames spread uniformly over sorted pts."""
    start, last = pts[0], pts[-1]
    step = (last - start) // (len(pts) - 1) if len(pts) > 1 else 1
    end = last + max(step, 1)
    out, j = [], 0
    for k in range(n):
        t = start + (end - start) * (2 * k + 1) // (2 * n)
        while j + 1 < len(pts) and pts[j + 1] <= t:
            j += 1
        if not out or out[-1] != pts[j]:
            out.append(pts[j])
    return out


def decode_video(data, frames, size):
    """[F,S,S,3] uint8: F frames sampled uniformly over the clip (two passes:
    demux for the timeline, then decode converting only the picked frames)."""
    with av.open(io.BytesIO(data)) as c:
        s = c.streams.video[0]
        pts = sorted(p.pts for p in c.demux(s) if p.pts is not None)
    shown = [t for t in pts if t >= 0] or pts  # an MP4 cut's pre-roll is not shown
    want = set(pick_times(shown, frames)) if shown else set()
    got = []
    with av.open(io.BytesIO(data)) as c:
        s = c.streams.video[0]
        for f in c.decode(s):
            if f.pts in want or not want:
                got.append(f.to_ndarray(width=size, height=size, format="rgb24"))
                if want and len(got) == len(want):
                    break
    if not got:
        raise ValueError("no video frames")
    idx = [i * len(got) // frames for i in range(frames)]  # repeat to fill F
    return torch.from_numpy(np.stack([got[i] for i in idx]))


def decode_image(data, size):
    """[1,S,S,3] uint8: the image squashed to S x S (bilinear)."""
    with Image.open(io.BytesIO(data)) as im:
        im = im.convert("RGB").resize((size, size), Image.BILINEAR)
        return torch.from_numpy(np.asarray(im).copy()).unsqueeze(0)


def json_text(v):
    """The string values of a JSON document, in order."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, list):
        return [s for x in v for s in json_text(x)]
    return []


def position(ext):
    """Sort key of a member: its position (the number starting an interleaved
    sample's extension, as in KEY.3.jpg; -1 for none), then its name."""
    head = ext.split(".")[0]
    return (int(head) if head.isdigit() and "." in ext else -1, ext)


def decode_sample(key, members, frames, size):
    """One sample dict: key, kind, pixels [N,S,S,3] uint8, text, tokens."""
    exts = sorted(members, key=position)
    text = "\n".join(members[e].decode("utf-8", "replace") for e in exts if e.split(".")[-1] in TEXT)
    if not text and "json" in members and not any(e.split(".")[-1] in VIDEO | IMAGE for e in exts):
        text = "\n".join(json_text(json.loads(members["json"])))
    clips = [e for e in exts if e.split(".")[-1] in VIDEO]
    images = [e for e in exts if e.split(".")[-1] in IMAGE]
    if clips:
        kind, pixels = "video", decode_video(members[clips[0]], frames, size)
    elif images:
        kind = "document" if len(images) > 1 or position(images[0])[0] >= 0 else "image"
        pixels = torch.cat([decode_image(members[e], size) for e in images])
    else:
        kind, pixels = "text", torch.zeros((0, size, size, 3), dtype=torch.uint8)
    return {"key": key, "kind": kind, "pixels": pixels, "text": text, "tokens": len(text.split())}


class ShardDataset(IterableDataset):
    """Endless, rank- and worker-split, shuffled stream of decoded samples."""

    def __init__(self, shards, rank, world, frames=8, size=224, seed=1, buffer=32):
        self.shards = [(i, s) for i, s in enumerate(shards) if i % world == rank]
        if not self.shards:
            raise SystemExit(f"torch loader: rank {rank} gets none of the {len(shards)} shards (world {world})")
        self.rank, self.frames, self.size, self.seed, self.buffer = rank, frames, size, seed, buffer

    def _stream(self, worker, workers):
        """Decoded samples of this worker, epoch after epoch."""
        epoch, dropped = 0, []
        while True:
            shards = list(self.shards)
            random.Random(self.seed * 1_000_003 + epoch).shuffle(shards)
            if len(shards) >= workers:
                mine, keep = shards[worker::workers], (lambda i: True)
            else:
                mine, keep = shards, (lambda i: i % workers == worker)
            for si, path in mine:
                for index, key, members in iter_samples(path, keep):
                    try:
                        s = decode_sample(key, members, self.frames, self.size)
                    except Exception as e:  # a corrupt sample is dropped, not fatal
                        print(f"torch loader: dropped {key}: {e}", file=sys.stderr)
                        dropped.append(key)
                        continue
                    s.update(id=(epoch << 48) | (si << 24) | index, owner=self.rank, dropped=dropped)
                    dropped = []
                    yield s
            epoch += 1

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        rng = random.Random((self.seed * 7919 + self.rank) * 104_729 + worker)
        if self.buffer <= 1:
            yield from self._stream(worker, workers)
            return
        buf = []
        for s in self._stream(worker, workers):
            if len(buf) < self.buffer:
                buf.append(s)
                continue
            i = rng.randrange(len(buf))
            buf[i], s = s, buf[i]
            yield s


def collate(samples):
    """A batch in the datahelix client's layout: a dict of lists, plus
    `stacked` [B,N,H,W,3] when every sample has the same N > 0 (then the
    `pixels` entries are views of it, so the bytes cross from the worker once)."""
    pixels = [s["pixels"] for s in samples]
    stacked = None
    if pixels and pixels[0].shape[0] > 0 and all(p.shape == pixels[0].shape for p in pixels):
        stacked = torch.stack(pixels)
        pixels = list(stacked.unbind(0))
    batch = {k: [s[k] for s in samples] for k in ("key", "kind", "text", "id", "owner", "tokens")}
    batch.update(pixels=pixels, stacked=stacked, dropped=[k for s in samples for k in s["dropped"]])
    return batch


def make_loader(data, rank, world, batch, workers, frames, size, seed, buffer=32, pin_memory=False):
    """The stock DataLoader over the rank's shards (endless)."""
    ds = ShardDataset(list_shards(data or default_data_dir()), rank, world, frames, size, seed, buffer)
    kw = dict(prefetch_factor=2) if workers > 0 else {}
    return DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=collate,
                      pin_memory=pin_memory, **kw)
