"""What redis-py raises that ``on_error`` answers (the store out of reach), and what it does not."""

from __future__ import annotations

import re


try:
    from redis.exceptions import NoPermissionError, RedisClusterException, RedisError, ResponseError
except ImportError as _missing:  # redis-py is an optional dependency
    raise ModuleNotFoundError("ratekeeper.redis needs redis-py: pip install 'ratekeeper[redis]'", name="redis") from _missing

# What "Redis cannot be reached" raises: redis-py's errors and the socket's,
# and RedisCluster's own when no node answers, which derives from neither.
# The script's own errors are raised as ScriptError, which is none of these.
_FAULTS = (RedisError, RedisClusterException, OSError)
# An error reply that no retry mends, and that on_error must not hide: the
# script's own (PROTOCOL.md, "Errors"), which Redis may prefix with ERR; a
# key of the limiter's that holds another type (WRONGTYPE); the script
# failing on a key's value that it did not write (user_script:<line>:); the
# ACL user may not run a command the script calls (Redis 7.0 words it "can't
# run this command", 7.2 on "ACL failure in script", both after ERR: no
# NOPERM). NoPermissionError (NOPERM: the ACL user may not run the script)
# is one too.
_NOT_A_FAULT = re.compile(r"^(ERR .*)?ratekeeper:|WRONGTYPE|user_script:\d+:|can't run this command|ACL failure in script|NOPERM")


class ScriptError(RuntimeError):
    """An error reply that no retry mends, raised as it is rather than
    answered by ``on_error``: the ratekeeper script's own (a client and script
    that disagree: a bug), a NOPERM (the client's ACL user may not run the
    script), a WRONGTYPE (a key of the limiter's holds another type), or the
    script failing on a key's value it did not write. Never a fault of the
    store's reach, which ``on_error`` answers. The redis-py error is its
    ``__cause__``."""


# A NOPERM that refuses the ACL user the `EVAL` command itself ("this user
# has no permissions to run the 'eval' command"; Redis 7.2 on: "User <name>
# has no permissions to run the 'eval' command"), as the Node client reads
# it (evaluate, wire.cjs). redis-py strips the NOPERM from the message.
_EVAL_DENIED = re.compile(r"'eval' command", re.IGNORECASE)


def _denies_eval(error: NoPermissionError) -> bool:
    """Whether ``error``, an ``EVAL``'s NOPERM, refuses the ``EVAL`` command
    itself: the ``NOSCRIPT`` that made the client send it then stands, an
    outage ``on_error`` answers (a user allowed ``EVALSHA`` and ``SCRIPT
    LOAD`` only, whose script was flushed again after its reload). Any other
    NOPERM there (a key of the call's, refused since its ``EVALSHA``) is
    the misconfiguration it says, raised as from ``EVALSHA``."""
    return _EVAL_DENIED.search(str(error)) is not None


def _script_errors(error: ResponseError) -> None:
    """Raises ``error`` as a ``ScriptError`` when it is not a fault of the store's reach."""
    if isinstance(error, NoPermissionError) or _NOT_A_FAULT.search(str(error)):
        raise ScriptError(str(error)) from error
