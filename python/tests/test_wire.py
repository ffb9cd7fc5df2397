"""The wire layout (datahelix._wire) against hand-built bytes and against the golden
messages that the Go side writes under internal/bridge/testdata/."""

import json
import struct
import unittest
from pathlib import Path

from fakeserver import encode_batch, msg

import datahelix
from datahelix import _wire as w

TESTDATA = Path(__file__).resolve().parents[2] / "internal" / "bridge" / "testdata"


def decode(kind: int, payload) -> dict:
    """A message's payload as golden.json's "expect" writes it (the Go side's names:
    BATCH samples have kind as its wire number and pixels_off/len, text_off/len)."""
    if kind in (w.HELLO, w.WELCOME):
        return w.parse_json(payload, w.NAMES[kind])
    if kind in (w.REFUSE, w.ERROR):
        return {"message": w.parse_text(payload)}
    if kind == w.NEXT:
        return dict(zip(("step", "gpu_step_us", "release_below"), w.parse_next(payload)))
    if kind == w.END:
        return {"steps": w.parse_i64(payload, "END")}
    if kind == w.RELEASE:
        return {"release_below": w.parse_i64(payload, "RELEASE")}
    if kind == w.BYE:
        if len(payload):
            raise datahelix.ProtocolError(f"BYE has a {len(payload)}-byte payload")
        return {}
    b = w.parse_batch(payload)
    code = {name: k for k, name in w.KINDS.items()}
    out = {"step": b.step, "slot": b.slot, "slot_offset": b.slot_offset,
           "samples": [{"key": s.key, "kind": code[s.kind], "shape": list(s.shape),
                        "pixels_off": s.pixels_offset, "pixels_len": s.pixels_length,
                        "text_off": s.text_offset, "text_len": s.text_length,
                        "tokens": s.tokens, "owner": s.owner, "id": s.id} for s in b.samples],
           "dropped": [list(d) for d in b.dropped]}
    if b.audio:
        out["audio"] = [{"off": s.audio_offset, "len": s.audio_length, "channels": s.audio_channels,
                         "samples": s.audio_samples, "rate": s.audio_rate, "flags": s.audio_flags}
                        for s in b.samples]
    return out


class WireTest(unittest.TestCase):
    def test_header(self):
        self.assertEqual(w.pack(w.BYE), b"DHX1\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
        self.assertEqual(w.pack_next(5, -1, 4), msg("NEXT", struct.pack("<qqq", 5, -1, 4)))
        self.assertEqual(w.pack_release(2**63 - 1), msg("RELEASE", b"\xff" * 7 + b"\x7f"))
        kind, payload = w.unpack(msg("END", struct.pack("<q", 60)))
        self.assertEqual((kind, w.parse_i64(payload, "END")), (w.END, 60))
        with self.assertRaisesRegex(datahelix.ProtocolError, "unknown message type 99"):
            w.unpack(struct.pack("<IHHII", w.MAGIC, 99, 0, 0, 0))
        with self.assertRaisesRegex(datahelix.ProtocolError, "header says 8 payload bytes, packet has 7"):
            w.unpack(msg("END", b"\0" * 8)[:-1])

    def test_batch(self):
        s = {"key": "k/ü", "kind": "document", "shape": (3, 2, 2, 3), "pixels_offset": 4096,
             "text_offset": 4132, "text_length": 5, "tokens": 7, "owner": 1, "id": 2**63 + 5}
        kind, payload = w.unpack(encode_batch(9, 1, 4096, [s], [("x", "why")]))
        b = w.parse_batch(payload)
        self.assertEqual((kind, b.step, b.slot, b.slot_offset, b.dropped), (w.BATCH, 9, 1, 4096, [("x", "why")]))
        self.assertEqual(b.samples, [w.Sample("k/ü", "document", (3, 2, 2, 3), 4096, 36, 4132, 5, 7, 1, 2**63 + 5)])
        self.assertEqual(len(payload), 108)
        for cut, pattern in ((107, "dropped error 0 runs past"), (100, "dropped entry 0 runs past"),
                             (99, "key 0 runs past"), (90, "1 samples need 96 bytes"), (20, "shorter than its 32-byte head")):
            with self.subTest(cut=cut), self.assertRaisesRegex(datahelix.ProtocolError, pattern):
                w.parse_batch(payload[:cut])
        with self.assertRaisesRegex(datahelix.ProtocolError, "3 bytes left over"):
            w.parse_batch(bytes(payload) + b"abc")
        bad = bytearray(payload)
        bad[32 + 32] = 4  # N: shape no longer matches the pixel bytes
        with self.assertRaisesRegex(datahelix.ProtocolError, "does not match its 36 pixel bytes"):
            w.parse_batch(bad)

    def test_batch_audio_table(self):
        s = {"key": "k", "kind": "video", "shape": (1, 2, 2, 3), "pixels_offset": 4096, "text_offset": 4160,
             "text_length": 0, "tokens": 0, "owner": 0, "id": 1, "audio_offset": 4160, "audio_channels": 2,
             "audio_samples": 3, "audio_rate": 16000, "audio_flags": 1}
        kind, payload = w.unpack(encode_batch(4, 1, 4096, [s], audio=True))
        b = w.parse_batch(payload)
        self.assertTrue(b.audio)
        a = b.samples[0]
        self.assertEqual((a.audio_offset, a.audio_length, a.audio_channels, a.audio_samples, a.audio_rate, a.audio_flags),
                         (4160, 24, 2, 3, 16000, 1))
        with self.assertRaisesRegex(datahelix.ProtocolError, "audio table runs past"):
            w.parse_batch(payload[:-1])
        bad = bytearray(payload)
        bad[-32 + 16] = 5  # channels: no longer matches the audio bytes
        with self.assertRaisesRegex(datahelix.ProtocolError, "does not match its 24 bytes"):
            w.parse_batch(bad)
        # Without the flag the same table is bytes left over.
        bad = bytearray(payload)
        bad[20] = 0
        with self.assertRaisesRegex(datahelix.ProtocolError, "left over"):
            w.parse_batch(bad)

    def test_golden(self):
        """Every message under internal/bridge/testdata/ parses; golden.json's expectations hold."""
        files = sorted(TESTDATA.glob("*.bin"))
        if not files:
            self.skipTest(f"no golden messages in {TESTDATA} yet (`go test ./internal/bridge -rewrite` writes them)")
        index = TESTDATA / "golden.json"
        entries = json.loads(index.read_text()) if index.exists() else []
        listed = {e["file"] for e in entries}
        for f in files:  # every message, listed or not, is well formed
            with self.subTest(file=f.name):
                decode(*w.unpack(f.read_bytes()))
        if not entries:
            self.skipTest(f"{index} does not exist: {len(files)} messages parsed, nothing to compare")
        for e in entries:
            with self.subTest(file=e["file"]):
                data = (TESTDATA / e["file"]).read_bytes()
                kind, payload = w.unpack(data)
                self.assertEqual(w.NAMES[kind], e["type"])
                self.assertEqual(data[6:8] + data[12:16], b"\0" * 6, "flags and reserved are 0")
                got = decode(kind, payload)
                self.assertEqual(got, e["expect"])
                if kind == w.NEXT:  # what this client would send is the same bytes
                    self.assertEqual(w.pack_next(got["step"], got["gpu_step_us"], got["release_below"]), data)
                elif kind == w.RELEASE:
                    self.assertEqual(w.pack_release(got["release_below"]), data)
                elif kind == w.BYE:
                    self.assertEqual(w.pack(w.BYE), data)
                elif kind == w.HELLO:
                    self.assertEqual(set(got), {"protocol", "client", "job", "rank", "pid", "cuda", "resume"})
                elif kind == w.WELCOME:
                    self.assertEqual(got["protocol"], datahelix.PROTOCOL)
                    self.assertLessEqual(got["slots"] * got["slot_bytes"], got["ring_bytes"])
                    self.assertIsInstance(got["state"], dict)
        self.assertLessEqual(listed, {f.name for f in files}, "golden.json names missing files")


if __name__ == "__main__":
    unittest.main()
