"""The Loader: this rank's batches from its datahelix, as views on a shared ring."""

import array
import copy
import mmap
import os
import socket
import statistics
import time
import warnings
from collections import deque

import torch

from . import PROTOCOL, __version__
from . import _wire as w
from .errors import DatahelixError, ProtocolError, RefusedError, ServerError
from .errors import TimeoutError as LoaderTimeout

__all__ = ["Loader"]

_HOWTO = ("launch the trainer with `datahelix train -- python ...`, or set DATAHELIX_JOB "
          "(and RANK) to match a running `datahelix serve`")
_BUFSIZE = 4 << 20  # the largest message (internal/bridge MaxMessage)
_ANCSIZE = socket.CMSG_SPACE(4 * array.array("i").itemsize)
_SENDFLAGS = getattr(socket, "MSG_NOSIGNAL", 0)
_HISTORY = 100_000  # per-step timings kept for the medians


def _env_rank() -> int:
    try:
        return int(os.environ.get("RANK") or 0)
    except ValueError:
        raise DatahelixError(f"RANK={os.environ['RANK']!r} is not an integer") from None


def _open_socket() -> socket.socket:
    """This rank's connection: the inherited DATAHELIX_FD, else the abstract socket."""
    fd = os.environ.pop("DATAHELIX_FD", None)  # taken once: no second loader or child reuses the number
    if fd is not None:
        try:
            sock = socket.socket(fileno=int(fd))
        except (ValueError, OSError) as e:
            raise DatahelixError(f"DATAHELIX_FD={fd} is not an open socket ({e}); {_HOWTO}") from None
        if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_SEQPACKET:
            sock.detach()
            raise DatahelixError(f"DATAHELIX_FD={fd} is not a Unix SOCK_SEQPACKET socket; {_HOWTO}")
        sock.set_inheritable(False)
        return sock
    job = os.environ.get("DATAHELIX_JOB")
    if not job:
        raise DatahelixError(f"no datahelix to connect to (neither DATAHELIX_FD nor DATAHELIX_JOB is set): {_HOWTO}")
    name = f"datahelix-{job}-{_env_rank()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(b"\0" + name.encode())
    except OSError as e:
        sock.close()
        raise DatahelixError(f"cannot connect to @{name} ({e.strerror or e}): is `datahelix serve` "
                             f"running for job {job!r}? Otherwise {_HOWTO}") from None
    return sock


def _p50(values):
    return statistics.median(values) if values else None


class Loader:
    """Iterate over this rank's batches, served by its datahelix.

    Each batch is a dict: ``step`` (int); ``key``, ``kind`` ("video", "image",
    "document", "text") and ``text`` (lists of str); ``id``, ``owner`` and ``tokens``
    (lists of int); ``pixels`` (a list of uint8 tensors ``[N, H, W, 3]``, ``[0, S, S, 3]``
    for text); ``dropped`` (list of ``(key, error)``); ``stacked`` (one
    ``[B, N, H, W, 3]`` tensor when every sample has the same shape and their pixels lie
    back to back in the ring, else None).

    With datahelix's audio output on (``--audio-rate``), a batch also has ``audio``:
    one float32 tensor ``[B, C, T]`` when every sample has audio of the same length
    (a view on the ring when the samples' audio lies back to back, else a stacked
    copy), else a list with one ``[C, T_i]`` tensor per sample (None for a sample
    without audio: an image, document or text); ``audio_rate`` (Hz); and
    ``audio_missing`` (list of bool: a clip without an audio track, whose audio is
    silence). A clip's T covers its sampled frames, from the first one's time to the
    end of the last one's display, so clips of equal length and frame rate give equal
    T.

    Without ``device`` the tensors are views on the shared ring, not copies: a batch's
    tensors stay valid for ``keep - 1`` more iterations (``clone()`` them to keep them
    longer). With ``device="cuda"`` the pixels are copied to the GPU on a side stream.

    Args:
        device: None (views on the ring) or a CUDA device to copy the pixels to.
        keep: how many batches the client holds, the newest included (at least 1).
        timeout: seconds to wait for any answer; None waits while the server lives.
        measure_gpu: report the GPU step time (CUDA events) to the server; default
            True exactly when ``device`` is a CUDA device.
        state: a :meth:`state_dict` to resume from (same as :meth:`load_state_dict`).

    The connection is made on first use (iteration, ``len()``, :meth:`stats`,
    :meth:`state_dict`) or by :meth:`connect`.
    """

    def __init__(self, *, device=None, keep=2, timeout=None, measure_gpu=None, state=None):
        self._closed = True  # until constructed: __del__ must do nothing
        if int(keep) < 1:
            raise ValueError(f"keep={keep}: a loader holds at least the batch it returns")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout={timeout!r}: a number of seconds > 0, or None")
        dev = None if device is None else torch.device(device)
        if dev is not None and dev.type == "cpu":
            dev = None
        if dev is not None and dev.type != "cuda":
            raise ValueError(f"device={device!r}: only a CUDA device (or None for views on the ring)")
        if measure_gpu is None:
            measure_gpu = dev is not None
        if (dev is not None or measure_gpu) and not torch.cuda.is_available():
            what = f"device={device!r}" if dev is not None else "measure_gpu=True"
            raise DatahelixError(f"{what} but CUDA is not available to torch")
        self._device, self._keep, self._timeout = dev, int(keep), timeout
        self._measure_gpu = bool(measure_gpu)
        self._sock = self._welcome = self._mm = self._ring = self._resume = None
        self._rank, self._pid = _env_rank(), os.getpid()
        self._next_step = 0
        self._held = deque()  # (step, CUDA event of its copy or None), oldest first
        self._sent_at = None  # time NEXT was sent while its answer is outstanding
        self._failure = None  # the fatal error, raised again on later use
        self._ended = False
        self._buf = bytearray(_BUFSIZE)
        self._wait, self._handover = deque(maxlen=_HISTORY), deque(maxlen=_HISTORY)
        self._steps, self._wait_s = 0, 0.0
        self._gpu_events, self._gpu_ms, self._gpu_step_us = deque(), deque(maxlen=_HISTORY), -1
        self._gpu_begin = None  # the CUDA event the current step's work starts after
        self._side = self._registered = None
        self._h2d_pending, self._h2d_bytes, self._h2d_ms = deque(), 0, 0.0
        self._closed = False
        if state is not None:
            self.load_state_dict(state)

    # -- connection -------------------------------------------------------------------

    def connect(self) -> dict:
        """Connect and handshake now, if not done yet; returns the WELCOME object."""
        if self._welcome is not None:
            return self._welcome
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise DatahelixError("the loader is closed")
        self._sock = _open_socket()
        try:
            self._sock.settimeout(self._timeout)  # also makes an inherited non-blocking fd blocking
            self._handshake()
        except DatahelixError as e:
            self._fail(e)
            raise
        except BaseException:
            self._sock.close()
            self._sock = None
            raise
        return self._welcome

    def _handshake(self):
        hello = {"protocol": PROTOCOL, "client": f"datahelix-python {__version__}",
                 "job": os.environ.get("DATAHELIX_JOB", ""), "rank": self._rank, "pid": os.getpid(),
                 "cuda": self._device is not None or self._measure_gpu, "resume": self._resume}
        self._send(w.pack_json(w.HELLO, hello))
        kind, payload, fds = self._recv("the WELCOME")
        try:
            if kind != w.WELCOME:
                raise self._unexpected(kind, payload, "WELCOME")
            wl = w.parse_json(payload, "WELCOME")
            if wl.get("protocol") != PROTOCOL:
                raise RefusedError(f"datahelix rank {self._rank} speaks protocol {wl.get('protocol')!r} "
                                   f"({wl.get('server', 'unknown server')}); this client, datahelix-python "
                                   f"{__version__}, speaks protocol {PROTOCOL}: use the client of the same release")
            for field in ("steps", "first_step", "slots", "slot_bytes", "ring_bytes"):
                if not isinstance(wl.get(field), int) or wl[field] < 0:
                    raise ProtocolError(f"WELCOME field {field!r} is {wl.get(field)!r}, expected an integer >= 0")
            if not isinstance(wl.get("state"), dict):
                raise ProtocolError("WELCOME has no 'state' object")
            if wl["slots"] * wl["slot_bytes"] > wl["ring_bytes"] or wl["ring_bytes"] == 0:
                raise ProtocolError(f"WELCOME: ring_bytes {wl['ring_bytes']} cannot hold "
                                    f"{wl['slots']} slots of {wl['slot_bytes']} bytes")
            if self._keep >= wl["slots"]:
                raise DatahelixError(f"Loader(keep={self._keep}) needs at least {self._keep + 1} ring slots; "
                                     f"datahelix has {wl['slots']} (raise --ring-slots or lower keep)")
            if self._resume is not None and wl["first_step"] != self._resume["step"]:
                raise ProtocolError(f"asked to resume at step {self._resume['step']}, "
                                    f"but datahelix starts at step {wl['first_step']}")
            if len(fds) != 1:
                raise ProtocolError(f"WELCOME carried {len(fds)} file descriptors, expected the ring's memfd")
            try:
                mm = mmap.mmap(fds[0], wl["ring_bytes"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except (OSError, ValueError) as e:
                raise ProtocolError(f"cannot map the ring ({wl['ring_bytes']} bytes): {e}") from None
        finally:
            for fd in fds:
                os.close(fd)
        self._welcome, self._mm, self._next_step = wl, mm, wl["first_step"]
        self._rank = wl.get("rank", self._rank)
        self._ring = torch.frombuffer(mm, dtype=torch.uint8)
        if self._device is not None:
            self._setup_cuda()

    def _send(self, data: bytes):
        try:
            self._sock.send(data, _SENDFLAGS)
        except socket.timeout:
            raise LoaderTimeout(f"datahelix rank {self._rank} did not take a message within {self._timeout} s") from None
        except (BrokenPipeError, ConnectionResetError):
            raise self._gone() from None

    def _recv(self, what: str):
        """One message: (type, payload, received fds). Raises when the peer is gone."""
        try:
            n, anc, flags, _ = self._sock.recvmsg_into([self._buf], _ANCSIZE)
        except socket.timeout:
            raise LoaderTimeout(f"no answer from datahelix rank {self._rank} within {self._timeout} s "
                                f"while waiting for {what}") from None
        except ConnectionResetError:
            # The server closed with messages of ours unread: Linux says so once,
            # before what the server sent before closing (its ERROR), still to be read.
            try:
                n, anc, flags, _ = self._sock.recvmsg_into([self._buf], _ANCSIZE)
            except (ConnectionResetError, BlockingIOError, socket.timeout):
                n, anc, flags = 0, [], 0
        fds = array.array("i")
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        fds = list(fds)
        try:
            if n == 0:
                raise self._lost(f" while this client waited for {what}")
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise self._fail(ProtocolError(f"a message longer than {_BUFSIZE} bytes (or with too many "
                                               f"file descriptors) was truncated while waiting for {what}"))
            kind, payload = w.unpack(memoryview(self._buf)[:n])
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return kind, payload, fds

    def _lost(self, what: str) -> DatahelixError:
        return self._fail(ServerError(f"datahelix rank {self._rank} ended without a word{what} "
                                      "(it probably failed; see its log)"))

    def _gone(self) -> DatahelixError:
        """The peer closed while we sent: report its last word (ERROR, REFUSE) if it left one,
        behind the batches it sent ahead of our requests."""
        try:
            self._sock.settimeout(0)
            while True:
                kind, payload, fds = self._recv("its last word")
                for fd in fds:
                    os.close(fd)
                if kind in (w.ERROR, w.REFUSE):
                    return self._unexpected(kind, payload, "")
                if kind != w.BATCH:
                    break
        except (DatahelixError, OSError):
            pass
        return self._failure or self._lost("")

    def _unexpected(self, kind, payload, expected) -> DatahelixError:
        if kind == w.REFUSE:
            return self._fail(RefusedError(w.parse_text(payload)))
        if kind == w.ERROR:
            return self._fail(ServerError(f"datahelix rank {self._rank} failed: {w.parse_text(payload)}"))
        return self._fail(ProtocolError(f"expected {expected}, got {w.NAMES[kind]}"))

    def _fail(self, exc: DatahelixError) -> DatahelixError:
        """Remember a fatal error and drop the connection; returns exc for raising."""
        if self._failure is None:
            self._failure = exc
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        return exc

    # -- iteration ----------------------------------------------------------------------

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        self.connect()
        if self._ended:
            raise StopIteration
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise DatahelixError("the loader is closed")
        if os.getpid() != self._pid:
            raise DatahelixError("a Loader cannot be used in a forked child process; create it in the trainer")
        step = self._next_step
        if self._sent_at is None:  # else a timed-out NEXT is still outstanding: wait on
            below = max(self._welcome["first_step"], step - self._keep + 1)
            self._release(below)
            gpu_us = self._measure_gpu_step()
            sent_at = time.perf_counter()
            self._send(w.pack_next(step, gpu_us, below))
            self._sent_at = sent_at
        try:
            kind, payload, fds = self._recv(f"the batch of step {step}")
            for fd in fds:
                os.close(fd)
            received = time.perf_counter()
            if kind == w.END:
                w.parse_i64(payload, "END")
                self._ended, self._sent_at = True, None
                raise StopIteration
            if kind != w.BATCH:
                raise self._unexpected(kind, payload, f"BATCH {step}")
            batch = self._build(w.parse_batch(payload), step)
        except ProtocolError as e:
            raise self._fail(e)
        event = self._to_device(batch) if self._device is not None else None
        self._held.append((step, event))
        self._next_step = step + 1
        done = time.perf_counter()
        self._steps += 1
        self._wait_s += received - self._sent_at
        self._wait.append((received - self._sent_at) * 1e3)
        self._handover.append((done - self._sent_at) * 1e3)
        self._sent_at = None
        self._begin_gpu_step()
        return batch

    def _build(self, b: w.Batch, step: int) -> dict:
        wl, ring = self._welcome, self._ring
        if b.step != step:
            raise ProtocolError(f"asked for step {step}, got the BATCH of step {b.step}")
        lo, hi = b.slot_offset, b.slot_offset + wl["slot_bytes"]
        if b.slot >= wl["slots"] or hi > wl["ring_bytes"]:
            raise ProtocolError(f"BATCH {step}: slot {b.slot} at offset {lo} is outside the ring")
        for s in b.samples:
            for what, off, n in (("pixels", s.pixels_offset, s.pixels_length), ("text", s.text_offset, s.text_length),
                                 ("audio", s.audio_offset, s.audio_length)):
                if n and not lo <= off <= off + n <= hi:
                    raise ProtocolError(f"BATCH {step}: {what} of {s.key!r} ({n} bytes at {off}) "
                                        f"lie outside its slot [{lo}, {hi})")
        pixels = [ring[s.pixels_offset:s.pixels_offset + s.pixels_length].view(s.shape) for s in b.samples]
        stacked = None
        if b.samples and len({s.shape for s in b.samples}) == 1:
            first, size = b.samples[0].pixels_offset, b.samples[0].pixels_length
            if size == 0 or all(s.pixels_offset == first + i * size for i, s in enumerate(b.samples)):
                stacked = ring[first:first + size * len(b.samples)].view(len(b.samples), *b.samples[0].shape)
        try:
            text = [self._mm[s.text_offset:s.text_offset + s.text_length].decode("utf-8") for s in b.samples]
        except UnicodeDecodeError as e:
            raise ProtocolError(f"BATCH {step}: a text is not UTF-8 ({e})") from None
        batch = {"step": b.step, "key": [s.key for s in b.samples], "kind": [s.kind for s in b.samples],
                 "pixels": pixels, "text": text, "id": [s.id for s in b.samples],
                 "owner": [s.owner for s in b.samples], "tokens": [s.tokens for s in b.samples],
                 "dropped": list(b.dropped), "stacked": stacked}
        if b.audio:
            batch.update(self._audio(b, step))
        return batch

    def _audio(self, b: w.Batch, step: int) -> dict:
        """The audio keys of a batch whose BATCH has an audio table (docs/bridge.md)."""
        ring = self._ring
        clips = []
        for s in b.samples:
            if s.audio_channels == 0:
                clips.append(None)  # an image, document or text sample: no audio
                continue
            if s.audio_offset % 4:
                raise ProtocolError(f"BATCH {step}: audio of {s.key!r} at offset {s.audio_offset}, not float32-aligned")
            pcm = ring[s.audio_offset:s.audio_offset + s.audio_length].view(torch.float32)
            clips.append(pcm.view(s.audio_channels, s.audio_samples))
        audio = clips
        shapes = {None if c is None else tuple(c.shape) for c in clips}
        if clips and len(shapes) == 1 and None not in shapes:
            first, size = b.samples[0].audio_offset, b.samples[0].audio_length
            if all(s.audio_offset == first + i * size for i, s in enumerate(b.samples)):
                audio = ring[first:first + size * len(clips)].view(torch.float32).view(len(clips), *clips[0].shape)
            else:
                audio = torch.stack(clips)  # a copy: the samples lie apart in the ring
        return {"audio": audio, "audio_rate": self._welcome.get("audio_rate", 0),
                "audio_missing": [bool(s.audio_flags & w.AUDIO_MISSING) for s in b.samples]}

    def _release(self, below: int):
        """Forget held batches with step < below, once their device copies are done."""
        while self._held and self._held[0][0] < below:
            _, event = self._held.popleft()
            if event is not None:
                event.synchronize()

    # -- CUDA -----------------------------------------------------------------------------

    def _setup_cuda(self):
        if self._device.index is None:
            self._device = torch.device("cuda", torch.cuda.current_device())
        self._side = torch.cuda.Stream(device=self._device)
        ptr, size = self._ring.data_ptr(), self._ring.numel()
        with torch.cuda.device(self._device):
            rc = torch.cuda.cudart().cudaHostRegister(ptr, size, 0)
        if int(rc) != 0:
            warnings.warn(f"datahelix: cudaHostRegister of the ring failed ({rc}); copies will not overlap")
        else:
            self._registered = ptr

    def _to_device(self, batch: dict):
        """Copy the pixels (and audio) on the side stream; returns the event that marks the copies done."""
        main = torch.cuda.current_stream(self._device)
        start, done = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self._side):
            start.record(self._side)
            if batch["stacked"] is not None:
                stacked = batch["stacked"].to(self._device, non_blocking=True)
                pixels, owned = list(stacked.unbind(0)), [stacked]
            else:
                stacked = None
                pixels = [p.to(self._device, non_blocking=True) for p in batch["pixels"]]
                owned = list(pixels)
            audio = batch.get("audio")
            if isinstance(audio, torch.Tensor):
                audio = audio.to(self._device, non_blocking=True)
                owned.append(audio)
            elif audio is not None:
                audio = [None if a is None else a.to(self._device, non_blocking=True) for a in audio]
                owned.extend(a for a in audio if a is not None)
            done.record(self._side)
        main.wait_stream(self._side)
        for t in owned:
            t.record_stream(main)  # allocated on the side stream, used on the main one
        self._h2d_pending.append((start, done, sum(p.numel() for p in batch["pixels"])))
        self._poll_h2d()
        batch["pixels"], batch["stacked"] = pixels, stacked
        if audio is not None:
            batch["audio"] = audio
        return done

    def _poll_h2d(self):
        while self._h2d_pending and self._h2d_pending[0][1].query():
            start, done, n = self._h2d_pending.popleft()
            self._h2d_bytes += n
            self._h2d_ms += start.elapsed_time(done)

    def _begin_gpu_step(self):
        """Mark on the current stream where the step of the batch just handed over begins:
        after the work already queued, so that a GPU that waited for input does not count
        the wait."""
        if self._measure_gpu:
            self._gpu_begin = torch.cuda.Event(enable_timing=True)
            self._gpu_begin.record(torch.cuda.current_stream(self._device))

    def _measure_gpu_step(self) -> int:
        """Close the step begun at the last hand-over with an event on the current stream
        (the trainer queued its work and asks for the next batch); return the last step
        whose two events completed, in us, or -1. Never synchronizes."""
        if not self._measure_gpu:
            return -1
        if self._gpu_begin is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record(torch.cuda.current_stream(self._device))
            self._gpu_events.append((self._gpu_begin, end))
            self._gpu_begin = None
        self._poll_gpu()
        return self._gpu_step_us

    def _poll_gpu(self):
        ev = self._gpu_events
        while ev and ev[0][1].query():
            begin, end = ev.popleft()
            ms = begin.elapsed_time(end)
            self._gpu_ms.append(ms)
            self._gpu_step_us = int(ms * 1000)

    # -- state, length, stats -------------------------------------------------------------

    def state_dict(self) -> dict:
        """``{"datahelix": {...}}``: the stream's identity (WELCOME "state") and the next
        step to deliver. Save it with the trainer's checkpoint."""
        if self._welcome is None and self._resume is not None:
            return {"datahelix": copy.deepcopy(self._resume)}
        state = copy.deepcopy(self.connect()["state"])
        state["step"] = self._next_step
        return {"datahelix": state}

    def load_state_dict(self, state: dict):
        """Resume from a :meth:`state_dict` (or a checkpoint dict holding its "datahelix"
        entry). Must come before the first batch: it is sent in the HELLO."""
        if self._welcome is not None or self._sock is not None:
            raise DatahelixError("load_state_dict() must be called before the loader connects (first batch)")
        inner = state.get("datahelix", state) if isinstance(state, dict) else None
        if not isinstance(inner, dict) or not isinstance(inner.get("step"), int):
            raise ValueError("not a datahelix state: expected {'datahelix': {..., 'step': int}}")
        self._resume = copy.deepcopy(inner)

    def __len__(self) -> int:
        """The steps of this run from its first (resumed) step; TypeError when endless."""
        wl = self.connect()
        if wl["steps"] == 0:
            raise TypeError("this datahelix run is endless (steps=0): it has no len()")
        return wl["steps"] - wl["first_step"]

    def __bool__(self):
        return True  # not len(): an endless loader is still a loader

    def stats(self) -> dict:
        """Timings so far: ``steps``, ``wait_s`` (total time blocked on the server),
        ``wait_ms_p50``, ``handover_ms_p50`` (NEXT sent to batch built; None before the
        first batch), ``gpu_step_ms_p50`` (when measured), ``h2d_gbps`` (when device
        copies completed) and ``ring_bytes``."""
        if self._welcome is None and not self._closed and self._failure is None:
            self.connect()
        wl = self._welcome
        out = {"steps": self._steps, "wait_s": self._wait_s, "wait_ms_p50": _p50(self._wait),
               "handover_ms_p50": _p50(self._handover), "ring_bytes": wl["ring_bytes"] if wl else 0}
        if self._measure_gpu:
            self._poll_gpu()
            if self._gpu_ms:
                out["gpu_step_ms_p50"] = _p50(self._gpu_ms)
        if self._device is not None:
            self._poll_h2d()
            if self._h2d_ms > 0:
                out["h2d_gbps"] = self._h2d_bytes / (self._h2d_ms / 1e3) / 1e9
        return out

    # -- closing --------------------------------------------------------------------------

    def close(self):
        """Release every batch, say BYE and close the connection. Idempotent. Tensors
        already returned stay readable (the ring stays mapped while they live), but the
        server may overwrite them."""
        if self._closed:
            return
        self._closed = True
        mine = os.getpid() == self._pid  # a forked child's copy must not speak for the trainer
        try:
            if mine:
                self._release(w.RELEASE_ALL)
            if self._sock is not None and self._failure is None and mine:
                for msg in (w.pack_release(w.RELEASE_ALL), w.pack(w.BYE)):
                    self._sock.send(msg, _SENDFLAGS | socket.MSG_DONTWAIT)
        except OSError:
            pass  # the server is gone already
        finally:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._registered is not None and mine:
                torch.cuda.cudart().cudaHostUnregister(self._registered)
                self._registered = None
            # Never mm.close(): torch.frombuffer views do not pin the buffer export, so closing
            # would unmap memory under live tensors. They hold the mmap object; it unmaps with them.
            self._ring = self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
