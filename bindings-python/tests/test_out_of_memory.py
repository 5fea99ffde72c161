"""A keyed store (or a policy's) out of memory: a new key is refused with
RateLimitMemoryError (code ``out_of_memory``, a MemoryError too), nothing
changes, and the process goes on, where the failed allocation aborted it.

Run in a child process whose address space is limited (RLIMIT_AS) to what it
holds once loaded and 256 MiB more, which the stores' tables then fill: the
process's memory, without exhausting the machine's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHILD = r"""
import json, resource
from ratekeeper import Gcra, KeyedLimiter, Policy, RateLimitError

def loaded():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")

keyed = KeyedLimiter(Gcra(burst=2, emission_interval=1))
policy = Policy({"limits": [
    {"name": "per-user", "algorithm": "gcra", "rate": "1/second", "burst": 2, "by": ["user"]},
    {"name": "all", "algorithm": "fixed_window", "rate": "1000000000/second", "by": []},
]})
limit = loaded() + 256 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

def flood(decide):
    i = 0
    while True:
        try:
            decide(i)
        except MemoryError as error:
            assert isinstance(error, RateLimitError)
            return {"name": type(error).__name__, "code": error.code, "message": str(error), "keys": i}
        i += 1

out = {"keyed": flood(lambda i: keyed.try_acquire(i, now=0))}
out["held"] = [keyed.try_acquire(0, now=0).allowed, keyed.try_acquire(0, now=0).allowed]
out["size"] = len(keyed)
out["policy"] = flood(lambda i: policy.try_acquire({"user": str(i)}, now=0))
counted = lambda: policy.peek({"user": "0"}, 0, now=0).limits[1][1].remaining
out["counted"] = counted()
try:
    policy.try_acquire({"user": "one more"}, now=0)
except MemoryError as error:
    out["again"] = getattr(error, "code", None)
out["counted_after"] = counted()
print(json.dumps(out))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status, limits RLIMIT_AS")
def test_a_store_out_of_memory_refuses_new_keys_and_the_process_goes_on() -> None:
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.returncode, run.stderr)
    answers = json.loads(run.stdout)
    for store in ("keyed", "policy"):
        refused = answers[store]
        assert (refused["name"], refused["code"]) == ("RateLimitMemoryError", "out_of_memory"), refused
        assert "out of memory" in refused["message"]
    assert answers["keyed"]["keys"] > 100_000
    assert answers["size"] == answers["keyed"]["keys"], "the key refused is not held"
    assert answers["held"] == [True, False], "a key held goes on deciding"
    assert answers["again"] == "out_of_memory"
    assert answers["counted_after"] == answers["counted"], "the global limit counted nothing for the request refused"
