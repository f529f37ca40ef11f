#!/usr/bin/env python3
"""Runs the test programs of a `cargo test --no-run --message-format=json` listing, several
at a time, as `cargo test --no-fail-fast` would one after another: each from its package's
directory with cargo's variables, every one of them even when one fails.

Most multi-PE test programs spend much of their time waiting (for a peer, a deadline, a
launcher), so on 2 cores two of them side by side take little longer than one. Programs
that time something against a bound run after the others, alone.

Usage: run-tests.py LISTING [--lanes N] [--first NAME...] [--alone NAME...] [--only NAME...]
  --first: start these first, longest first (the rest follow in listing order);
  --alone: run these one at a time after the others;
  --only:  run only these (by target name).
Prints each program's output whole when it ends, then the time of each; exits 1 if any
failed.
"""

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def programs(listing):
    """The test programs of the listing: (name, package directory, executable)."""
    found = []
    with open(listing) as f:
        for line in f:
            m = json.loads(line)
            if m.get("reason") != "compiler-artifact" or not m.get("executable"):
                continue
            if not m["profile"]["test"]:
                continue
            found.append((m["target"]["name"], os.path.dirname(m["manifest_path"]), m["executable"]))
    return found


@functools.cache
def rust_sysroot():
    """The toolchain's sysroot (asked once)."""
    return subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True).stdout.strip()


def environment(package_dir, target_deps):
    """What cargo sets for a test program it runs."""
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = package_dir
    env["CARGO_MANIFEST_PATH"] = os.path.join(package_dir, "Cargo.toml")
    env["CARGO"] = shutil.which("cargo") or "cargo"
    sysroot = rust_sysroot()
    # As cargo: the build's deps and output directories, then the toolchain's libraries.
    paths = [target_deps, os.path.dirname(target_deps), os.path.join(sysroot, "lib")]
    if env.get("LD_LIBRARY_PATH"):
        paths.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = ":".join(paths)
    return env


def run_one(prog, out_lock, results):
    name, package_dir, exe = prog
    started = time.monotonic()
    try:
        env = environment(package_dir, os.path.dirname(exe))
        with tempfile.TemporaryFile() as log:
            rc = subprocess.call([exe], cwd=package_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
            log.seek(0)
            text = log.read().decode("utf-8", errors="replace")
    except Exception as e:  # a program that could not even run has failed
        rc, text = -1, f"run-tests.py: could not run {exe}: {e!r}\n"
    secs = time.monotonic() - started
    with out_lock:
        status = "ok" if rc == 0 else f"FAILED (exit {rc})"
        rel = os.path.relpath(exe)
        sys.stdout.write(f"\n== {name} ({rel}): {status} in {secs:.1f} s\n{text}")
        sys.stdout.flush()
        results.append((name, rel, rc, secs))


def run_lanes(queue, lanes, out_lock, results):
    queue = list(queue)
    queue_lock = threading.Lock()

    def lane():
        while True:
            with queue_lock:
                if not queue:
                    return
                prog = queue.pop(0)
            run_one(prog, out_lock, results)

    threads = [threading.Thread(target=lane) for _ in range(max(1, lanes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("listing")
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--first", nargs="*", default=[])
    ap.add_argument("--alone", nargs="*", default=[])
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()

    progs = programs(args.listing)
    names = {p[0] for p in progs}
    for option, listed in (("--only", args.only or []), ("--first", args.first), ("--alone", args.alone)):
        missing = set(listed) - names
        if missing:
            sys.exit(f"run-tests.py: {option} names no test program {', '.join(sorted(missing))} in {args.listing}")
    if args.only is not None:
        progs = [p for p in progs if p[0] in args.only]
    rank = {name: i for i, name in enumerate(args.first)}
    together = [p for p in progs if p[0] not in args.alone]
    together.sort(key=lambda p: rank.get(p[0], len(rank)))
    alone = [p for p in progs if p[0] in args.alone]

    out_lock = threading.Lock()
    results = []
    started = time.monotonic()
    run_lanes(together, args.lanes, out_lock, results)
    run_lanes(alone, 1, out_lock, results)
    total = time.monotonic() - started

    print(f"\n== {len(results)} test programs in {total:.0f} s ({args.lanes} at a time, {len(alone)} alone after)")
    for name, rel, rc, secs in sorted(results, key=lambda r: -r[3]):
        print(f"{secs:7.1f} s  {'ok    ' if rc == 0 else 'FAILED'}  {name}  {rel}")
    if len(results) != len(progs):
        print(f"\nrun-tests.py: {len(progs)} test programs, but {len(results)} results")
        sys.exit(1)
    failed = [r for r in results if r[2] != 0]
    if failed:
        print(f"\n{len(failed)} test programs failed: {', '.join(r[0] for r in failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
