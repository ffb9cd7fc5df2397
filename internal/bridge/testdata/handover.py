"""The trainer's side of BenchmarkHandover: iterate over datahelix.Loader
with STEP_MS of 'compute' per step and print the client's hand-over
times (stats()) as JSON."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
import datahelix  # noqa: E402

step_ms = float(os.environ.get("STEP_MS", "2"))
loader = datahelix.Loader()
took = []
for batch in loader:
    time.sleep(step_ms / 1000)
loader.close()
print(json.dumps(loader.stats()))
