"""Repro of grpc/grpc#43055 as this package's tests meet it.

Spawns /bin/true 300 times while four threads open and close gRPC
channels, and counts the children that did not exit 0 (grpcio's fork
handler aborts some with "Epoll1Poller ... epoll_wait error: Bad file
descriptor", exit -6).

    .venv/bin/python scripts/fork_repro.py on preexec   # fork support on, Popen with a preexec_fn
    .venv/bin/python scripts/fork_repro.py off preexec  # GRPC_ENABLE_FORK_SUPPORT=false
    .venv/bin/python scripts/fork_repro.py on vfork     # no preexec_fn: Popen may vfork
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading

if len(sys.argv) > 1 and sys.argv[1] == "off":
    os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
MODE = sys.argv[2] if len(sys.argv) > 2 else "preexec"

import grpc  # noqa: E402


def _pdeathsig() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def main() -> None:
    """Spawn 300 children under channel churn and count the failed ones."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            ch = grpc.insecure_channel("127.0.0.1:1")
            with contextlib.suppress(grpc.FutureTimeoutError):
                grpc.channel_ready_future(ch).result(timeout=0.01)
            ch.close()

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    bad = 0
    for _ in range(300):
        kw = {"preexec_fn": _pdeathsig} if MODE == "preexec" else {}
        p = subprocess.Popen(["/bin/true"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
        _, err = p.communicate()
        if p.returncode != 0:
            bad += 1
            if bad == 1:
                print("exit", p.returncode, err[:200])
    stop.set()
    for t in threads:
        t.join()
    print(sys.argv[1:], "bad", bad, "of 300")


if __name__ == "__main__":
    main()
