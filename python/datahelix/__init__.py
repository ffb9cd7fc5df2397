"""datahelix: the trainer-side client of the datahelix data plane.

Each trainer rank reads its batches from its datahelix rank over a Unix socket, as
tensors on a shared-memory ring (the wire layout is docs/bridge.md)::

    import datahelix
    with datahelix.Loader() as loader:
        for batch in loader:
            train(batch["pixels"], batch["text"])
"""

__version__ = "0.1.0"
PROTOCOL = 1  # the wire protocol this client speaks (docs/bridge.md)

from .errors import DatahelixError, ProtocolError, RefusedError, ServerError, TimeoutError  # noqa: E402
from .loader import Loader  # noqa: E402

# TimeoutError stays out of __all__ so that `import *` does not shadow the built-in.
__all__ = ["Loader", "DatahelixError", "RefusedError", "ServerError", "ProtocolError",
           "PROTOCOL", "__version__"]
