"""The exceptions the datahelix client raises."""

import builtins

__all__ = ["DatahelixError", "RefusedError", "ServerError", "ProtocolError", "TimeoutError"]


class DatahelixError(RuntimeError):
    """Base class of every error the datahelix client raises."""


class RefusedError(DatahelixError):
    """The server refused this client (REFUSE), or the client refused the server's
    WELCOME (another protocol version). The message names both sides."""


class ServerError(DatahelixError):
    """This rank's datahelix failed: it sent ERROR, or it ended the connection
    without END (it probably crashed; see its log)."""


class ProtocolError(DatahelixError):
    """A message broke the wire layout of docs/bridge.md (bad magic, truncated
    message, an offset outside the ring, ...); the message says what was wrong."""


class TimeoutError(DatahelixError, builtins.TimeoutError):
    """No answer within the Loader's ``timeout``; the message names the step.

    It is also a built-in :class:`TimeoutError`. The loader stays usable: the next
    ``next()`` keeps waiting for the same batch without asking for it again.
    """
