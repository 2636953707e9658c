"""A small workload for test_capture: each process one kind of sleep.

    python capture_workload.py timer N SLEEP_S     work, then a timed sleep
    python capture_workload.py waker N SLEEP_S FD  work, wake the sibling through pipe FD, timed sleep
    python capture_workload.py waiter N FD         wait for a byte on pipe FD, then work

Work is N iterations of an empty loop: a fixed amount of CPU, whatever the
throttling (a wall-clock spin would ask for more the more it is throttled).
"""

import os
import sys
import time


def work(n: int) -> None:
    for _ in range(n):
        pass


def main() -> None:
    mode, n = sys.argv[1], int(sys.argv[2])
    while True:
        if mode == "waiter":
            os.read(int(sys.argv[3]), 1)
            work(n)
            continue
        work(n)
        if mode == "waker":
            os.write(int(sys.argv[4]), b"x")
        time.sleep(float(sys.argv[3]))


main()
