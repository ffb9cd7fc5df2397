"""`python -m torch.distributed.run`, made to work with torch < 2.0 on Python >= 3.11.

  /usr/bin/python3 examples/torchrun.py --standalone --nproc_per_node 2 examples/train.py --loader torch

Debian 12 ships torch 1.13 with Python 3.11, where iterating an IntFlag skips
its zero and multi-bit members, so torch.distributed.run's `Std.from_str`
returns None for the default `--redirects 0` and every launch fails with
"AttributeError: 'NoneType' object has no attribute 'get'" (fixed in torch 2.0).
This replaces `Std.from_str` when it is broken and runs the stock launcher.
"""

import re
import runpy

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    """"0".."3" -> one Std for every local rank; "0:3,1:0" -> one per local rank."""
    if re.fullmatch(r"[0-3]", vm):
        return cls(int(vm))
    return {int(k): cls(int(v)) for k, v in (p.split(":") for p in vm.split(","))}


if api.Std.from_str("0") is None:
    api.Std.from_str = classmethod(_from_str)

if __name__ == "__main__":
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
