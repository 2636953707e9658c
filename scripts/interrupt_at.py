#!/usr/bin/env python3
"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) of a command when its progress
line reaches 10, 50 and 90 % of its runs: exit code, stderr, what is left."""
import os, re, signal, subprocess, sys, time
args = sys.argv[1:]
for frac in (0.1, 0.5, 0.9):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err, at = b"", None
    while at is None:
        c = p.stderr.read1(4096)
        if not c:
            break
        err += c
        m = re.findall(rb": (\d+)/(\d+) \(", err)
        if m and int(m[-1][0]) >= frac * int(m[-1][1]):
            at = m[-1]
            os.killpg(p.pid, signal.SIGINT)
    rest_out, rest_err = p.communicate()
    err += rest_err
    time.sleep(1)
    left = subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True).stdout.split()
    lines = [l for l in re.split(rb"[\r\n]", err) if l.strip() and not re.search(rb": \d+/\d+ \(", l)]
    print(f"{frac:.0%} (at {at[0].decode()}/{at[1].decode() if at else '?'}): exit {p.returncode}, stderr {[l.decode() for l in lines]}, stdout {len(rest_out)} bytes, left in session {left}")
