#!/usr/bin/env python3
"""tl-measure's watcher: until SIGTERM, every 0.25 s, SIGSTOP every process of the
other sessions (a descendant of another agent's binary_backend, or one whose cwd
or exe is under a worktree, a venv, a merge tree or a fresh clone), except the
holder's ancestors and the measured command's tree; each pid stopped is appended
to STOPPED_FILE (tl-measure continues them on exit).
usage: tl-measure-watch.py HOLDER_PID KEEP_BACKEND_PID|0 STOPPED_FILE"""
import os, signal, sys, time

holder, keep, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
PATTERNS = ("/work/wt/", "/work/venvs/", "/work/merge", "/tmp/fresh")
me = os.getpid()
stopped: set[int] = set()
done = False


def on_term(*_):
    global done
    done = True


signal.signal(signal.SIGTERM, on_term)


def is_backend(pid: int) -> bool:
    """An agent's tool process (init's child; its comm is a memfd's name)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(64).startswith(b"line_io_tools/binary_backend")
    except OSError:
        return False


def table() -> dict[int, tuple[bool, int]]:
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        r = s.rfind(")")
        ppid = int(s[r + 2:].split()[1])
        procs[int(d)] = (ppid == 1 and is_backend(int(d)), ppid)
    return procs


def chain(procs, pid):
    up = []
    while pid in procs and pid > 1 and len(up) < 100:
        up.append(pid)
        pid = procs[pid][1]
    return up


with open(out, "a") as log:
    while not done:
        procs = table()
        holder_up = chain(procs, holder)
        own = keep or next((p for p in holder_up if procs[p][0]), 0)
        for pid in procs:
            if pid in stopped or pid == me or pid in holder_up:
                continue
            up = chain(procs, pid)
            if holder in up or me in up:
                continue
            backend = next((p for p in up if procs[p][0]), 0)
            hit = backend not in (0, own) and backend != pid
            if not hit:
                try:
                    where = os.readlink(f"/proc/{pid}/cwd") + " " + os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    continue
                hit = any(p in where for p in PATTERNS)
            if hit:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except OSError:
                    continue
                stopped.add(pid)
                log.write(f"{pid}\n")
                log.flush()
        time.sleep(0.25)
