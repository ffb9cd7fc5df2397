"""A fake datahelix rank for the client tests: the wire written out independently of
datahelix._wire (struct by hand, from docs/bridge.md), a memfd ring and a server thread."""

import json
import mmap
import os
import socket
import struct
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # python/, for `import datahelix`

MAGIC = 0x31584844
HDR = struct.Struct("<IHHII")
T = dict(HELLO=1, WELCOME=2, REFUSE=3, NEXT=4, BATCH=5, END=6, ERROR=7, RELEASE=8, BYE=9)
NAME = {v: k for k, v in T.items()}
KIND = {"text": 1, "image": 2, "video": 3, "document": 4, "audio": 5}


def msg(kind: str, payload: bytes = b"") -> bytes:
    return HDR.pack(MAGIC, T[kind], 0, len(payload), 0) + payload


def decode(packet: bytes):
    """A client message as (name, value)."""
    magic, kind, flags, length, reserved = HDR.unpack_from(packet)
    assert (magic, flags, reserved, length) == (MAGIC, 0, 0, len(packet) - 16), packet[:16]
    payload, name = packet[16:], NAME[kind]
    if name == "HELLO":
        return name, json.loads(payload)
    if name == "NEXT":
        return name, struct.unpack("<qqq", payload)
    if name == "RELEASE":
        return name, struct.unpack("<q", payload)[0]
    assert name == "BYE" and payload == b"", (name, payload)
    return name, None


def encode_batch(step, slot, slot_offset, samples, dropped=(), audio=False):
    """samples: dicts with key, kind, shape, pixels_offset, text_offset, text_length,
    tokens, owner, id; with audio, the audio table from their audio_offset, audio_channels,
    audio_samples, audio_rate and audio_flags (0 when absent)."""
    out = [struct.pack("<qIIIIQ", step, slot, len(samples), len(dropped), 1 if audio else 0, slot_offset)]
    for s in samples:
        n, h, w, c = s["shape"]
        out.append(struct.pack("<QQQIHBB4IIIQ", s["pixels_offset"], n * h * w * c, s["text_offset"],
                               s["text_length"], len(s["key"].encode()), KIND[s["kind"]], 4,
                               n, h, w, c, s["tokens"], s["owner"], s["id"]))
    out += [s["key"].encode() for s in samples]
    for key, err in dropped:
        out.append(struct.pack("<HH", len(key.encode()), len(err.encode())) + key.encode() + err.encode())
    if audio:
        for s in samples:
            ch, ns = s.get("audio_channels", 0), s.get("audio_samples", 0)
            out.append(struct.pack("<QQIIII", s.get("audio_offset", 0), 4 * ch * ns, ch, ns,
                                   s.get("audio_rate", 0), s.get("audio_flags", 0)))
    return msg("BATCH", b"".join(out))


def video(i, frames=2, size=4, text=""):
    return {"kind": "video", "shape": (frames, size, size, 3), "text": text, "key": f"clip{i}"}


class FakeServer:
    """Serves one client: HELLO, WELCOME (with the memfd), then NEXT → on_next(self, step).
    With refuse=MESSAGE it answers the HELLO with REFUSE; with mute=True it hangs up.

    By default it inherits the client end through DATAHELIX_FD; with listen=JOB it
    listens on the abstract socket @datahelix-JOB-RANK instead.
    """

    def __init__(self, *, steps=3, first_step=0, slots=4, slot_bytes=1 << 14, rank=0, on_next=None,
                 specs=None, welcome=None, refuse=None, send_fd=True, listen=None, mute=False):
        self.steps, self.first_step, self.slots, self.slot_bytes = steps, first_step, slots, slot_bytes
        self.rank, self.refuse, self.send_fd, self.mute = rank, refuse, send_fd, mute
        self.on_next = on_next or FakeServer.default_next
        self.specs = specs or (lambda step: [video(0), video(1)])
        self.welcome = {"protocol": 1, "server": "fake 0.0.0", "job": "testjob", "rank": rank,
                        "world_size": 1, "batch": 2, "steps": steps, "first_step": first_step,
                        "frames": 2, "size": 4, "slots": slots, "slot_bytes": slot_bytes,
                        "ring_bytes": slots * slot_bytes,
                        "state": {"format": 1, "seed": 7, "batch": 2, "world_size": 1, "loader": "helix",
                                  "dataset": "feedface", "shards": 4}}
        self.welcome.update(welcome or {})
        self.memfd = os.memfd_create("datahelix-test-ring", os.MFD_CLOEXEC)
        os.ftruncate(self.memfd, slots * slot_bytes)
        self.ring = mmap.mmap(self.memfd, slots * slot_bytes)
        self.received, self.hello, self.listener, self.sock = [], None, None, None
        if listen is None:
            self.sock, client = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            os.environ["DATAHELIX_FD"] = str(client.detach())
        else:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.listener.bind(f"\0datahelix-{listen}-{rank}".encode())
            self.listener.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def send(self, data: bytes):
        self.sock.send(data)

    def hangup(self):
        self.sock.shutdown(socket.SHUT_RDWR)

    def default_next(self, step):
        if step < self.steps:
            self.send_batch(step)
        else:
            self.send(msg("END", struct.pack("<q", self.steps - self.first_step)))

    def layout(self, step, specs, gap=0, reverse=False):
        """Write the samples of `specs` into slot step % slots: pixels back to back (gap
        bytes apart; reversed order when asked), then texts. Returns the sample dicts."""
        slot = step % self.slots
        base = pos = slot * self.slot_bytes
        samples = []
        for i, sp in enumerate(specs):
            n, h, w, c = sp["shape"]
            samples.append(dict(sp, tokens=10 + i, owner=i % 2, id=(step << 20) | i,
                                key=sp.get("key", f"s{step}-{i}")))
        for i in (reversed(range(len(samples))) if reverse else range(len(samples))):
            s = samples[i]
            size = s["shape"][0] * s["shape"][1] * s["shape"][2] * s["shape"][3]
            s["pixels_offset"] = pos if size else 0
            self.ring[pos:pos + size] = bytes([(step * 16 + i) % 256]) * size
            pos += size + gap
        for i, s in enumerate(samples):
            if "audio" not in s:
                continue
            ch, ns, missing = s["audio"]  # sample k of channel c holds the value i + c + k/1000
            pos = (pos + 63) // 64 * 64
            pcm = [i + c + k / 1000 for c in range(ch) for k in range(ns)]
            self.ring[pos:pos + 4 * ch * ns] = struct.pack(f"<{ch * ns}f", *pcm)
            s.update(audio_offset=pos, audio_channels=ch, audio_samples=ns, audio_rate=16000,
                     audio_flags=1 if missing else 0)
            pos += 4 * ch * ns
        for s in samples:
            t = s["text"].encode()
            s["text_offset"], s["text_length"] = pos, len(t)
            self.ring[pos:pos + len(t)] = t
            pos += len(t)
        assert pos <= base + self.slot_bytes
        return slot, base, samples

    def send_batch(self, step, specs=None, dropped=(), audio=False, **layout):
        slot, base, samples = self.layout(step, specs or self.specs(step), **layout)
        self.send(encode_batch(step, slot, base, samples, dropped, audio))

    def _recv(self):
        data = self.sock.recv(1 << 16)
        if not data:
            return None
        m = decode(data)
        self.received.append(m)
        return m

    def _serve(self):
        try:
            if self.listener is not None:
                self.listener.settimeout(10)
                self.sock, _ = self.listener.accept()
            self.sock.settimeout(10)
            hello = self._recv()
            if hello is None:
                return
            self.hello = hello[1]
            if self.refuse is not None:
                self.send(msg("REFUSE", self.refuse.encode()))
            if self.refuse is not None or self.mute:
                return self.sock.close()
            welcome = msg("WELCOME", json.dumps(self.welcome).encode())
            socket.send_fds(self.sock, [welcome], [self.memfd] if self.send_fd else [])
            while True:
                m = self._recv()
                if m is None or m[0] == "BYE":
                    break
                if m[0] == "NEXT":
                    self.on_next(self, m[1][0])
        except OSError:
            pass  # the test hung up, or the client went away

    def names(self):
        return [name for name, _ in self.received]

    def nexts(self):
        return [v for name, v in self.received if name == "NEXT"]

    def stop(self):
        if self.memfd is None:
            return
        self.thread.join(10)
        assert not self.thread.is_alive(), "fake server still running"
        for s in (self.sock, self.listener):
            if s is not None:
                s.close()
        os.environ.pop("DATAHELIX_FD", None)
        os.close(self.memfd)
        self.ring.close()
        self.memfd = None
