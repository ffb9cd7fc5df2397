"""The wire layout of docs/bridge.md: message headers, fixed payloads and the BATCH
table. Pure Python (struct and json); no sockets and no torch here."""

import json
import struct
from typing import List, NamedTuple, Tuple

from .errors import ProtocolError

MAGIC = 0x31584844  # b"DHX1" little-endian
HELLO, WELCOME, REFUSE, NEXT, BATCH, END, ERROR, RELEASE, BYE = range(1, 10)
NAMES = {1: "HELLO", 2: "WELCOME", 3: "REFUSE", 4: "NEXT", 5: "BATCH", 6: "END",
         7: "ERROR", 8: "RELEASE", 9: "BYE"}
KINDS = {1: "text", 2: "image", 3: "video", 4: "document", 5: "audio"}
RELEASE_ALL = 2**63 - 1

HEADER = struct.Struct("<IHHII")  # magic, type, flags, payload length, reserved
_NEXT = struct.Struct("<qqq")  # step, gpu_step_us, release_below
_I64 = struct.Struct("<q")
_HEAD = struct.Struct("<qIIIIQ")  # step, slot, n, d, flags, slot offset
_SAMPLE = struct.Struct("<QQQIHBB4IIIQ")
_DROP = struct.Struct("<HH")
_AUDIO = struct.Struct("<QQIIII")  # offset, length, channels, samples, rate, flags
BATCH_AUDIO = 1  # BATCH head flag: an audio table follows the dropped list
AUDIO_MISSING = 1  # audio entry flag: the clip has no audio track, its PCM is silence
assert HEADER.size == 16 and _HEAD.size == 32 and _SAMPLE.size == 64 and _AUDIO.size == 32


class Sample(NamedTuple):
    """One entry of a BATCH's sample table (offsets are absolute in the ring)."""
    key: str
    kind: str
    shape: Tuple[int, int, int, int]
    pixels_offset: int
    pixels_length: int
    text_offset: int
    text_length: int
    tokens: int
    owner: int
    id: int
    # The audio table's entry (when the BATCH has one): float32 PCM [channels, samples].
    audio_offset: int = 0
    audio_length: int = 0
    audio_channels: int = 0
    audio_samples: int = 0
    audio_rate: int = 0
    audio_flags: int = 0


class Batch(NamedTuple):
    """A decoded BATCH payload."""
    step: int
    slot: int
    slot_offset: int
    samples: List[Sample]
    dropped: List[Tuple[str, str]]
    audio: bool = False  # the audio output is on: every sample has an audio entry


def pack(kind: int, payload: bytes = b"") -> bytes:
    """One message: the 16-byte header followed by ``payload``."""
    return HEADER.pack(MAGIC, kind, 0, len(payload), 0) + payload


def pack_json(kind: int, obj) -> bytes:
    return pack(kind, json.dumps(obj, separators=(",", ":")).encode())


def pack_next(step: int, gpu_step_us: int, release_below: int) -> bytes:
    return pack(NEXT, _NEXT.pack(step, gpu_step_us, release_below))


def pack_release(release_below: int) -> bytes:
    return pack(RELEASE, _I64.pack(release_below))


def unpack(packet) -> Tuple[int, memoryview]:
    """Split one received packet into (type, payload), checking the header."""
    packet = memoryview(packet)
    if len(packet) < HEADER.size:
        raise ProtocolError(f"truncated message: {len(packet)} bytes, shorter than the 16-byte header")
    magic, kind, flags, length, _ = HEADER.unpack_from(packet)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic 0x{magic:08x} (expected 0x{MAGIC:08x}, 'DHX1'): not a datahelix peer?")
    if kind not in NAMES:
        raise ProtocolError(f"unknown message type {kind}")
    if len(packet) - HEADER.size != length:
        raise ProtocolError(f"truncated {NAMES[kind]}: header says {length} payload bytes, "
                            f"packet has {len(packet) - HEADER.size}")
    return kind, packet[HEADER.size:]


def _fixed(payload, st: struct.Struct, name: str):
    if len(payload) != st.size:
        raise ProtocolError(f"{name} payload is {len(payload)} bytes, expected {st.size}")
    return st.unpack(payload)


def parse_next(payload) -> Tuple[int, int, int]:
    """(step, gpu_step_us, release_below)."""
    return _fixed(payload, _NEXT, "NEXT")


def parse_i64(payload, name: str) -> int:
    """The single i64 of END (steps) or RELEASE (release_below)."""
    return _fixed(payload, _I64, name)[0]


def parse_text(payload) -> str:
    """REFUSE and ERROR messages (UTF-8; undecodable bytes are replaced)."""
    return bytes(payload).decode("utf-8", "replace")


def parse_json(payload, name: str) -> dict:
    try:
        obj = json.loads(bytes(payload))
    except ValueError as e:
        raise ProtocolError(f"{name} is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"{name} is not a JSON object")
    return obj


def parse_batch(payload) -> Batch:
    """Decode a BATCH payload: head, sample table, keys and dropped list."""
    p = memoryview(payload)
    if len(p) < _HEAD.size:
        raise ProtocolError(f"truncated BATCH: {len(p)} bytes, shorter than its 32-byte head")
    step, slot, n, d, flags, slot_offset = _HEAD.unpack_from(p)
    pos = _HEAD.size + n * _SAMPLE.size
    if pos > len(p):
        raise ProtocolError(f"truncated BATCH: {n} samples need {pos} bytes, payload has {len(p)}")

    def take(length: int, what: str) -> str:
        nonlocal pos
        if pos + length > len(p):
            raise ProtocolError(f"truncated BATCH (step {step}): {what} runs past the payload end")
        try:
            s = bytes(p[pos:pos + length]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"BATCH (step {step}): {what} is not UTF-8: {e}") from None
        pos += length
        return s

    rows = [_SAMPLE.unpack_from(p, _HEAD.size + i * _SAMPLE.size) for i in range(n)]
    samples = []
    for i, (po, pl, to, tl, kl, kind, dims, sn, sh, sw, sc, tokens, owner, sid) in enumerate(rows):
        if kind not in KINDS:
            raise ProtocolError(f"BATCH (step {step}) sample {i}: unknown kind {kind}")
        if dims != 4:
            raise ProtocolError(f"BATCH (step {step}) sample {i}: dims {dims}, expected 4")
        if sn * sh * sw * sc != pl:
            raise ProtocolError(f"BATCH (step {step}) sample {i}: shape {[sn, sh, sw, sc]} "
                                f"does not match its {pl} pixel bytes")
        samples.append(Sample(take(kl, f"key {i}"), KINDS[kind], (sn, sh, sw, sc),
                              po, pl, to, tl, tokens, owner, sid))
    dropped = []
    for i in range(d):
        if pos + _DROP.size > len(p):
            raise ProtocolError(f"truncated BATCH (step {step}): dropped entry {i} runs past the payload end")
        kl, el = _DROP.unpack_from(p, pos)
        pos += _DROP.size
        dropped.append((take(kl, f"dropped key {i}"), take(el, f"dropped error {i}")))
    audio = bool(flags & BATCH_AUDIO)
    if audio:
        if pos + n * _AUDIO.size > len(p):
            raise ProtocolError(f"truncated BATCH (step {step}): the audio table runs past the payload end")
        for i in range(n):
            off, length, ch, ns, rate, aflags = _AUDIO.unpack_from(p, pos + i * _AUDIO.size)
            if ch * ns * 4 != length:
                raise ProtocolError(f"BATCH (step {step}) sample {i}: audio of {ch} x {ns} samples "
                                    f"does not match its {length} bytes")
            samples[i] = samples[i]._replace(audio_offset=off, audio_length=length, audio_channels=ch,
                                             audio_samples=ns, audio_rate=rate, audio_flags=aflags)
        pos += n * _AUDIO.size
    if pos != len(p):
        raise ProtocolError(f"BATCH (step {step}): {len(p) - pos} bytes left over after the dropped list")
    return Batch(step, slot, slot_offset, samples, dropped, audio)
