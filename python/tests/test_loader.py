"""The Loader against a fake datahelix rank (no GPU, no Go)."""

import os
import tempfile
import time
import unittest
from unittest import mock

import torch

from fakeserver import FakeServer, encode_batch, msg, video

import datahelix


class LoaderTest(unittest.TestCase):
    def setUp(self):
        env = mock.patch.dict(os.environ, {"RANK": "0", "DATAHELIX_JOB": "testjob"})
        env.start()
        self.addCleanup(env.stop)
        os.environ.pop("DATAHELIX_FD", None)

    def serve(self, **kw) -> FakeServer:
        srv = FakeServer(**kw)
        self.addCleanup(srv.stop)
        return srv

    def loader(self, **kw) -> datahelix.Loader:
        kw.setdefault("timeout", 10)  # a hang fails the test instead of blocking it
        loader = datahelix.Loader(**kw)
        self.addCleanup(loader.close)
        return loader

    def test_hello(self):
        os.environ["RANK"] = "3"
        srv = self.serve(rank=3)
        loader = self.loader()
        loader.connect()
        self.assertEqual(srv.hello, {"protocol": 1, "client": "datahelix-python 0.1.0", "job": "testjob",
                                     "rank": 3, "pid": os.getpid(), "cuda": False, "resume": None})
        self.assertNotIn("DATAHELIX_FD", os.environ)  # taken: no second loader or child reuses it

    def test_batch_fields_and_zero_copy(self):
        specs = [video(0, text="a caption"), {"kind": "image", "shape": (1, 4, 4, 3), "text": "", "key": "img"},
                 {"kind": "text", "shape": (0, 4, 4, 3), "text": "héllo wörld", "key": "doc/ü"}]
        srv = self.serve(specs=lambda step: specs, steps=1)
        srv.on_next = lambda s, step: (s.send_batch(step, dropped=[("bad/1", "corrupt frame"), ("ø", "")])
                                       if step == 0 else s.default_next(step))
        loader = self.loader()
        b = next(loader)
        self.assertEqual(b["step"], 0)
        self.assertEqual(b["key"], ["clip0", "img", "doc/ü"])
        self.assertEqual(b["kind"], ["video", "image", "text"])
        self.assertEqual(b["text"], ["a caption", "", "héllo wörld"])
        self.assertEqual(b["tokens"], [10, 11, 12])
        self.assertEqual(b["owner"], [0, 1, 0])
        self.assertEqual(b["id"], [0, 1, 2])
        self.assertEqual(b["dropped"], [("bad/1", "corrupt frame"), ("ø", "")])
        self.assertIsNone(b["stacked"])  # shapes differ
        shapes = [tuple(p.shape) for p in b["pixels"]]
        self.assertEqual(shapes, [(2, 4, 4, 3), (1, 4, 4, 3), (0, 4, 4, 3)])
        self.assertTrue(all(p.dtype == torch.uint8 for p in b["pixels"]))
        self.assertTrue(torch.all(b["pixels"][0] == 0) and torch.all(b["pixels"][1] == 1))
        # The server writes the ring after the batch was built: the tensor sees it (no copy).
        off = 0  # slot 0, sample 0 first
        srv.ring[off:off + 96] = b"\x07" * 96
        self.assertTrue(torch.all(b["pixels"][0] == 7))
        with self.assertRaises(StopIteration):
            next(loader)

    def test_stacked_is_a_view_when_contiguous(self):
        srv = self.serve(steps=1)
        b = next(self.loader())
        st = b["stacked"]
        self.assertEqual(tuple(st.shape), (2, 2, 4, 4, 3))
        self.assertEqual(st.data_ptr(), b["pixels"][0].data_ptr())
        self.assertTrue(torch.equal(st[1], b["pixels"][1]))
        srv.ring[96:192] = b"\x2a" * 96  # sample 1's pixels
        self.assertTrue(torch.all(st[1] == 42) and torch.all(b["pixels"][1] == 42))

    def test_stacked_none_when_not_contiguous(self):
        for layout in ({"gap": 8}, {"reverse": True}):
            with self.subTest(**layout):
                srv = FakeServer(steps=1, on_next=lambda s, step: s.send_batch(step, **layout))
                try:
                    with datahelix.Loader(timeout=10) as loader:
                        b = next(loader)
                        self.assertIsNone(b["stacked"])
                        self.assertTrue(torch.all(b["pixels"][0] == 0) and torch.all(b["pixels"][1] == 1))
                finally:
                    srv.stop()

    def test_text_only_batch_stacks_empty(self):
        texts = [{"kind": "text", "shape": (0, 4, 4, 3), "text": t} for t in ("one", "two")]
        self.serve(steps=1, specs=lambda step: texts)
        b = next(self.loader())
        self.assertEqual(b["text"], ["one", "two"])
        self.assertEqual(tuple(b["stacked"].shape), (2, 0, 4, 4, 3))

    def _audio_batch(self, specs):
        srv = self.serve(steps=1, specs=lambda step: specs)
        srv.on_next = lambda s, step: s.send_batch(step, audio=True) if step == 0 else s.default_next(step)
        return srv, next(self.loader())

    def test_audio_stacked_view(self):
        specs = [dict(video(i), audio=(1, 16, i == 1)) for i in range(2)]  # 64 bytes each: back to back
        srv, b = self._audio_batch(specs)
        a = b["audio"]
        self.assertEqual((tuple(a.shape), a.dtype), ((2, 1, 16), torch.float32))
        self.assertEqual(b["audio_missing"], [False, True])
        self.assertAlmostEqual(a[1, 0, 5].item(), 1.005, places=5)
        srv.ring[192:196] = b"\0\0\x80\x3f"  # 1.0 over sample 0's first (after 2 x 96 pixel bytes): a view, not a copy
        self.assertEqual(a[0, 0, 0].item(), 1.0)

    def test_audio_stacked_copy_when_apart(self):
        specs = [dict(video(i), audio=(2, 3, False)) for i in range(2)]  # 24 bytes, each 64-aligned
        _, b = self._audio_batch(specs)
        a = b["audio"]
        self.assertEqual(tuple(a.shape), (2, 2, 3))
        self.assertAlmostEqual(a[1, 1, 2].item(), 2.002, places=5)  # sample 1, channel 1, k 2

    def test_audio_list_when_lengths_differ(self):
        specs = [dict(video(0), audio=(1, 16, False)), dict(video(1), audio=(1, 8, False)),
                 {"kind": "image", "shape": (1, 4, 4, 3), "text": "", "key": "img"}]
        _, b = self._audio_batch(specs)
        a = b["audio"]
        self.assertIsInstance(a, list)
        self.assertEqual([None if t is None else tuple(t.shape) for t in a], [(1, 16), (1, 8), None])
        self.assertEqual(b["audio_missing"], [False, False, False])

    def test_no_audio_keys_without_the_table(self):
        self.serve(steps=1)
        self.assertNotIn("audio", next(self.loader()))

    def test_release_below_and_end(self):
        for keep, below in ((2, [0, 0, 1, 2, 3]), (3, [0, 0, 0, 1, 2])):
            with self.subTest(keep=keep):
                srv = FakeServer(steps=4, slots=4)
                try:
                    loader = datahelix.Loader(keep=keep, timeout=10)
                    self.assertEqual([b["step"] for b in loader], [0, 1, 2, 3])
                    self.assertEqual(list(loader), [])  # ended: no further NEXT
                    loader.close()
                    srv.thread.join(10)
                    self.assertEqual(srv.nexts(), [(t, -1, r) for t, r in zip(range(5), below)])
                    self.assertEqual(srv.received[-2:], [("RELEASE", 2**63 - 1), ("BYE", None)])
                finally:
                    srv.stop()

    def test_release_below_counts_from_first_step(self):
        srv = self.serve(steps=8, first_step=5)
        loader = self.loader()
        self.assertEqual([b["step"] for b in loader], [5, 6, 7])
        self.assertEqual([r for _, _, r in srv.nexts()], [5, 5, 6, 7])

    def test_keep_needs_a_free_slot(self):
        self.serve(slots=3)
        with self.assertRaisesRegex(datahelix.DatahelixError, "keep=3.*4 ring slots"):
            self.loader(keep=3).connect()

    def test_error(self):
        srv = self.serve(steps=5)
        srv.on_next = lambda s, step: s.send(msg("ERROR", b"decode: shard 3 is gone")) if step == 1 \
            else s.default_next(step)
        loader = self.loader()
        next(loader)
        for _ in range(2):  # raised again on later use
            with self.assertRaisesRegex(datahelix.ServerError, r"^datahelix rank 0 failed: decode: shard 3 is gone$"):
                next(loader)
        loader.close()
        srv.thread.join(10)
        self.assertEqual(srv.names(), ["HELLO", "NEXT", "NEXT"])  # no RELEASE or BYE to a failed rank

    def test_error_then_hangup_before_next(self):
        srv = self.serve(steps=5)

        def on_next(s, step):
            s.send_batch(step)
            s.send(msg("ERROR", b"out of memory"))
            s.sock.close()
        srv.on_next = on_next
        loader = self.loader()
        next(loader)
        srv.thread.join(10)
        with self.assertRaisesRegex(datahelix.ServerError, "out of memory"):
            next(loader)

    def test_eof_without_end(self):
        srv = self.serve(steps=5)
        srv.on_next = lambda s, step: s.hangup() if step == 1 else s.default_next(step)
        loader = self.loader()
        next(loader)
        t0 = time.monotonic()
        with self.assertRaisesRegex(datahelix.ServerError, "ended without a word.*step 1.*see its log"):
            next(loader)
        self.assertLess(time.monotonic() - t0, 2)

    def test_eof_before_welcome(self):
        self.serve(mute=True)
        with self.assertRaisesRegex(datahelix.ServerError, "ended without a word"):
            self.loader().connect()

    def test_refuse(self):
        self.serve(refuse="datahelix rank 0 of job other is not job testjob")
        with self.assertRaisesRegex(datahelix.RefusedError, "job other is not job testjob"):
            next(self.loader())

    def test_protocol_mismatch(self):
        self.serve(welcome={"protocol": 2, "server": "datahelix 0.9.0"})
        with self.assertRaisesRegex(datahelix.RefusedError, r"protocol 2 \(datahelix 0.9.0\).*protocol 1"):
            len(self.loader())

    def test_welcome_without_memfd(self):
        self.serve(send_fd=False)
        with self.assertRaisesRegex(datahelix.ProtocolError, "0 file descriptors"):
            self.loader().connect()

    def test_bad_magic_and_truncated(self):
        cases = [(b"XXXX" + msg("END", b"\0" * 8)[4:], "bad magic"),
                 (msg("END", b"\0" * 8)[:-1], "truncated END"),
                 (b"DHX", "truncated message"),
                 (msg("END", b"\0" * 4), "END payload is 4 bytes")]
        for packet, pattern in cases:
            with self.subTest(pattern):
                srv = FakeServer(on_next=lambda s, step: s.send(packet))
                try:
                    loader = datahelix.Loader(timeout=10)
                    with self.assertRaisesRegex(datahelix.ProtocolError, pattern):
                        next(loader)
                    loader.close()
                finally:
                    srv.stop()

    def test_batch_outside_its_slot(self):
        srv = self.serve()

        def on_next(s, step):
            slot, base, samples = s.layout(step, [video(0)])
            samples[0]["pixels_offset"] = s.slot_bytes - 10
            s.send(encode_batch(step, slot, base, samples))
        srv.on_next = on_next
        with self.assertRaisesRegex(datahelix.ProtocolError, "outside its slot"):
            next(self.loader())

    def test_wrong_step(self):
        srv = self.serve()
        srv.on_next = lambda s, step: s.send_batch(step + 1)
        with self.assertRaisesRegex(datahelix.ProtocolError, "asked for step 0, got the BATCH of step 1"):
            next(self.loader())

    def test_state_dict_round_trip(self):
        srv = self.serve(steps=10)
        loader = self.loader()
        next(loader), next(loader)
        state = loader.state_dict()
        self.assertEqual(state, {"datahelix": dict(srv.welcome["state"], step=2)})
        loader.close()
        srv.stop()
        for how in ("load_state_dict", "state"):
            with self.subTest(how):
                srv2 = FakeServer(steps=10, first_step=2)
                try:
                    if how == "state":
                        loader2 = datahelix.Loader(state=state, timeout=10)
                    else:
                        loader2 = datahelix.Loader(timeout=10)
                        loader2.load_state_dict(state)
                    self.assertEqual(loader2.state_dict(), state)  # before connecting
                    self.assertEqual(next(loader2)["step"], 2)
                    self.assertEqual(srv2.hello["resume"], state["datahelix"])
                    self.assertEqual(loader2.state_dict()["datahelix"]["step"], 3)
                    with self.assertRaisesRegex(datahelix.DatahelixError, "before the loader connects"):
                        loader2.load_state_dict(state)
                    loader2.close()
                finally:
                    srv2.stop()

    def test_resume_at_another_step(self):
        self.serve(first_step=0)
        loader = self.loader(state={"datahelix": {"format": 1, "step": 4}})
        with self.assertRaisesRegex(datahelix.DatahelixError, "resume at step 4.*starts at step 0"):
            loader.connect()

    def test_len(self):
        self.serve(steps=7, first_step=2)
        loader = self.loader()
        self.assertEqual(len(loader), 5)
        self.assertEqual(len(list(loader)), 5)

    def test_len_endless(self):
        srv = self.serve(steps=0)
        srv.on_next = lambda s, step: s.send_batch(step)
        loader = self.loader()
        self.assertTrue(loader)
        with self.assertRaisesRegex(TypeError, "endless"):
            len(loader)
        self.assertEqual([next(loader)["step"] for _ in range(6)], list(range(6)))

    def test_close_sends_release_and_bye(self):
        srv = self.serve(steps=5)
        with self.loader() as loader:
            b = next(loader)
        loader.close()  # idempotent
        srv.thread.join(10)
        self.assertEqual(srv.names(), ["HELLO", "NEXT", "RELEASE", "BYE"])
        self.assertEqual(srv.received[2][1], 2**63 - 1)
        self.assertTrue(torch.all(b["pixels"][0] == 0))  # still mapped while referenced
        with self.assertRaisesRegex(datahelix.DatahelixError, "closed"):
            next(loader)

    def test_close_before_connect_sends_nothing(self):
        srv = self.serve()
        datahelix.Loader().close()
        srv.hangup()
        srv.thread.join(10)
        self.assertEqual(srv.received, [])

    def test_timeout_names_step_and_does_not_ask_twice(self):
        srv = self.serve(steps=5)
        srv.on_next = lambda s, step: None if step == 1 else s.default_next(step)
        loader = self.loader(timeout=0.2)
        next(loader)
        with self.assertRaisesRegex(datahelix.TimeoutError, "within 0.2 s.*step 1") as cm:
            next(loader)
        self.assertIsInstance(cm.exception, TimeoutError)
        srv.send_batch(1)
        self.assertEqual(next(loader)["step"], 1)
        self.assertEqual([t for t, _, _ in srv.nexts()], [0, 1])

    def test_abstract_socket(self):
        os.environ["DATAHELIX_JOB"] = job = f"test{os.getpid()}"
        os.environ["RANK"] = "1"
        srv = self.serve(listen=job, rank=1, steps=2)
        self.assertEqual([b["step"] for b in self.loader()], [0, 1])
        self.assertEqual(srv.hello["job"], job)

    def test_nothing_to_connect_to(self):
        os.environ.pop("DATAHELIX_JOB")
        with self.assertRaisesRegex(datahelix.DatahelixError, "datahelix train -- python"):
            datahelix.Loader().connect()
        os.environ["DATAHELIX_JOB"] = "nosuchjob"
        with self.assertRaisesRegex(datahelix.DatahelixError, "@datahelix-nosuchjob-0.*datahelix serve"):
            len(datahelix.Loader())
        os.environ["DATAHELIX_FD"] = "999"
        with self.assertRaisesRegex(datahelix.DatahelixError, "DATAHELIX_FD=999 is not an open socket"):
            datahelix.Loader().connect()

    def test_creates_no_files(self):
        dirs = ["/dev/shm", tempfile.gettempdir(), os.getcwd()]
        before = {d: set(os.listdir(d)) for d in dirs if os.path.isdir(d)}
        srv = self.serve(steps=3)
        with self.loader() as loader:
            list(loader)
        srv.thread.join(10)
        self.assertEqual({d: set(os.listdir(d)) for d in before}, before)

    def test_stats(self):
        self.serve(steps=3)
        loader = self.loader()
        s = loader.stats()  # connects
        self.assertEqual((s["steps"], s["wait_ms_p50"], s["ring_bytes"]), (0, None, 4 << 14))
        list(loader)
        s = loader.stats()
        self.assertEqual(s["steps"], 3)
        self.assertGreater(s["wait_s"], 0)
        self.assertGreaterEqual(s["handover_ms_p50"], s["wait_ms_p50"])
        self.assertNotIn("gpu_step_ms_p50", s)
        self.assertNotIn("h2d_gbps", s)

    def test_forked_child_does_not_speak_for_the_trainer(self):
        srv = self.serve(steps=3)
        loader = self.loader()
        next(loader)
        pid = os.fork()
        if pid == 0:  # the child: its copy must neither iterate nor say BYE
            try:
                next(loader)
                code = 1
            except datahelix.DatahelixError:
                code = 0
            loader.close()
            os._exit(code)
        self.assertEqual(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), 0)
        self.assertEqual([b["step"] for b in loader], [1, 2])
        loader.close()
        srv.thread.join(10)
        self.assertEqual(srv.names(), ["HELLO"] + ["NEXT"] * 4 + ["RELEASE", "BYE"])

    def test_gpu_step_times_leave_out_input_waits(self):
        """measure_gpu reports, with each NEXT, the last step whose CUDA events completed:
        from the hand-over of its batch to the next request, so that a GPU that idled
        waiting for input does not count the wait. Fake events stand in for CUDA."""
        clock = {"gpu": 0.0}

        class FakeEvent:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self, stream=None):
                # The fake GPU idles 100 ms waiting for each batch (before the event that
                # begins its step), then works 50 ms on it (until the event that ends it):
                # timing from request to request would say 150 ms.
                clock["gpu"] += 50.0 if getattr(self, "end", False) else 100.0
                self.t = clock["gpu"]

            def query(self):
                return self.t is not None

            def elapsed_time(self, other):
                return other.t - self.t

        def event(enable_timing=False):
            e = FakeEvent()
            e.end = event.n % 2 == 1  # begin, end, begin, end...
            event.n += 1
            return e
        event.n = 0
        srv = self.serve(steps=3)
        with mock.patch.object(torch.cuda, "is_available", return_value=True), \
                mock.patch.object(torch.cuda, "Event", side_effect=event), \
                mock.patch.object(torch.cuda, "current_stream", return_value=None):
            loader = self.loader(measure_gpu=True)
            for _ in loader:
                pass
        loader.close()
        srv.thread.join(10)
        self.assertEqual([g for _, g, _ in srv.nexts()], [-1, 50000, 50000, 50000])
        self.assertEqual(loader.stats()["gpu_step_ms_p50"], 50.0)

    @unittest.skipUnless(torch.cuda.is_available(), "needs CUDA")
    def test_cuda_copies(self):
        srv = self.serve(steps=6)
        loader = self.loader(device="cuda")
        for step, b in enumerate(loader):
            self.assertTrue(all(p.is_cuda for p in b["pixels"]) and b["stacked"].is_cuda)
            self.assertTrue(torch.all(b["pixels"][1] == step * 16 + 1))
            torch.cuda._sleep(1_000_000)  # some GPU work per step
        torch.cuda.synchronize()
        s = loader.stats()
        self.assertGreater(s["h2d_gbps"], 0)
        self.assertGreater(s["gpu_step_ms_p50"], 0)
        self.assertTrue(srv.hello["cuda"])

    @unittest.skipUnless(torch.cuda.is_available(), "needs CUDA")
    def test_cuda_copies_audio(self):
        for specs in ([dict(video(i), audio=(1, 16, False)) for i in range(2)],  # stacked
                      [dict(video(0), audio=(2, 3, False)), {"kind": "text", "shape": (0, 4, 4, 3), "text": "t"}]):  # a list
            with self.subTest(n=len(specs)):
                srv = FakeServer(steps=1, specs=lambda step: specs,
                                 on_next=lambda s, step: s.send_batch(step, audio=True) if step == 0 else s.default_next(step))
                try:
                    with datahelix.Loader(timeout=10, device="cuda") as loader:
                        b = next(loader)
                        torch.cuda.synchronize()
                        audio = b["audio"] if isinstance(b["audio"], list) else list(b["audio"].unbind(0))
                        self.assertTrue(all(a is None or a.is_cuda for a in audio))
                        self.assertAlmostEqual(audio[0][0, 2].item(), 0.002, places=5)
                finally:
                    srv.stop()

    @unittest.skipIf(torch.cuda.is_available(), "CUDA is available here")
    def test_cuda_unavailable(self):
        with self.assertRaisesRegex(datahelix.DatahelixError, "CUDA is not available"):
            datahelix.Loader(device="cuda")
        with self.assertRaisesRegex(datahelix.DatahelixError, "measure_gpu=True"):
            datahelix.Loader(measure_gpu=True)

    def test_bad_arguments(self):
        for kw in ({"keep": 0}, {"timeout": 0}, {"device": "meta"}):
            with self.subTest(**kw), self.assertRaises(ValueError):
                datahelix.Loader(**kw)
        with self.assertRaises(ValueError):
            datahelix.Loader(state={"step": "x"})


if __name__ == "__main__":
    unittest.main()
