#!/usr/bin/env python3
"""`weft diag --serve`: the live page and its WebSocket against a stuck 4-rank job.

Rank 2 of a `weft run -n 4` job sleeps instead of entering its fourth allreduce while the others
wait in it. The test starts `weft diag --serve 127.0.0.1:0`, and:
- a WebSocket client (python3-websockets) receives a state naming rank 2 as the one that has not
  entered the allreduce (the time it took is printed);
- the commands work: "dump" makes every rank write its flight record to its diag_dir, and
  "log_level" reaches rank 2 only;
- bad input gets an error and leaves the job as it was: not JSON, unknown commands, tracing
  (not built yet), a binary message and a 1 MiB message (both also close the socket), and more
  sockets than the server takes (refused);
- headless Chromium loads the page: its DOM shows the stuck rank in red (class "stuck") and a
  screenshot is written.

Usage: diag_page_test.py WEFT_TOOL CHILD [SCREENSHOT.png]
Exit 77 (skipped) when python3-websockets is missing.
"""
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import websockets
except ImportError:
    print("diag_page_test: python3-websockets is not installed (scripts/setup.sh)")
    sys.exit(77)

STUCK = "rank 2 has not entered allreduce"


def fail(what):
    raise SystemExit(f"diag_page_test: {what}")


def read_line_matching(proc, pattern, timeout, what):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m
    fail(f"no {what} in the output: {''.join(seen)[-2000:]}")


async def next_of(ws, kind, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            fail(f"no {kind} message within {timeout} s")
        m = json.loads(await asyncio.wait_for(ws.recv(), left))
        if m.get("type") == kind:
            return m


def stuck_line(state):
    for c in state.get("communicators", []):
        for line in c["report"]:
            if STUCK in line:
                return line
    return None


async def exercise(url, diag_dir):
    async with websockets.connect(url, max_size=None) as ws:
        start = time.monotonic()
        while True:
            state = await next_of(ws, "state", timeout=20)
            if stuck_line(state):
                break
        print(f"websocket: '{stuck_line(state)}' after {time.monotonic() - start:.1f} s "
              f"({state['answered']} ranks answered)")
        # Each rank's answer carries its metrics in brief: 3 allreduces done everywhere.
        done = [r["metrics"]["by_op"].get("allreduce", 0) for r in state["communicators"][0]["ranks"]]
        if done != [3, 3, 3, 3]:
            fail(f"metrics in the state: allreduces done {done}")

        await ws.send(json.dumps({"cmd": "dump"}))
        reply = await next_of(ws, "reply")
        results = reply["results"]
        if len(results) != 4 or not all(r.get("ok") for r in results.values()):
            fail(f"dump: {reply}")
        files = sorted(os.listdir(diag_dir))
        if len(files) != 4:
            fail(f"dump wrote {files}")
        print(f"dump: {len(files)} flight records in diag_dir")

        await ws.send(json.dumps({"cmd": "log_level", "rank": 2, "level": "debug"}))
        reply = await next_of(ws, "reply")
        if list(k.split("/")[1] for k in reply["results"]) != ["rank2"]:
            fail(f"log_level: {reply}")
        print(f"log_level: {reply['results']}")

        for bad, expect in [("garbage{", "not JSON"),
                            (json.dumps({"cmd": "format_disk"}), "unknown command"),
                            (json.dumps({"cmd": "log_level", "rank": "two"}), "rank number"),
                            (json.dumps([1, 2]), "JSON object"),
                            (json.dumps({"cmd": "trace_start"}), "not available yet")]:
            await ws.send(bad)
            err = await next_of(ws, "error")
            if expect not in err["error"]:
                fail(f"{bad!r} -> {err}")
        print("bad commands: each answered with an error, socket open")

    for payload, expect in [(b"\x00\x01binary", "JSON text"), ("x" * (1 << 20), "at most")]:
        async with websockets.connect(url, max_size=None) as ws:
            await next_of(ws, "state")
            await ws.send(payload)
            err = await next_of(ws, "error")
            if expect not in err["error"]:
                fail(f"{payload[:8]!r}... -> {err}")
            try:
                await asyncio.wait_for(ws.recv(), 5)
                fail("the socket stayed open after a refused message")
            except websockets.ConnectionClosed:
                pass
    print("binary and 1 MiB messages: error, then closed")

    opened, refused = [], 0
    for _ in range(24):
        ws = await websockets.connect(url, max_size=None, open_timeout=10)
        opened.append(ws)
        first = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if first.get("type") == "error":
            if "too many sockets" not in first["error"]:
                fail(f"socket refused with {first}")
            refused += 1
    for ws in opened:
        await ws.close()
    if refused != 24 - 16:
        fail(f"24 sockets: {refused} refused (16 should be served)")
    print(f"24 sockets at once: {24 - refused} served, {refused} told 'too many sockets' and closed")

    async with websockets.connect(url, max_size=None) as ws:
        state = await next_of(ws, "state")
        state = await next_of(ws, "state")
        if state["answered"] != 4 or not stuck_line(state):
            fail(f"the job changed after the bad input: {state}")
    print("after the bad input: all 4 ranks answer, rank 2 still named")


def main():
    weft, child = sys.argv[1], sys.argv[2]
    screenshot = sys.argv[3] if len(sys.argv) > 3 else None
    tmp = tempfile.mkdtemp(prefix="weft-diag-page-")
    key = os.path.join(tmp, "job.key")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    diag_dir = os.path.join(tmp, "diag")
    # Rank 2 stays away longer than the test runs; the others wait for it as long.
    env = dict(os.environ, WEFT_AUTH_KEY_FILE=key, WEFT_DIAG_DIR=diag_dir, WEFT_TIMEOUT="280s",
               CHILD_ABSENT_SECONDS="270")
    job = subprocess.Popen([weft, "run", "-n", "4", "--timeout", "290", "--grace", "1", "--",
                            child, "2", "6", "absent"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    serve = None
    try:
        store = read_line_matching(job, r"rank 0: store (\S+)", 60, "store address").group(1)
        serve = subprocess.Popen([weft, "diag", "--serve", "127.0.0.1:0", "--store", store],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
        port = read_line_matching(serve, r"serving http://127\.0\.0\.1:(\d+)/", 30,
                                  "serving line").group(1)
        asyncio.run(exercise(f"ws://127.0.0.1:{port}/ws", diag_dir))

        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            fail("chromium is not installed (scripts/setup.sh)")
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--user-data-dir={tmp}/chromium", "--virtual-time-budget=4000"]
        dom = subprocess.run(args + ["--dump-dom", f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True, timeout=120).stdout
        m = re.search(r'<li class="stuck">([^<]*)</li>', dom)
        if not m or STUCK not in m.group(1):
            fail(f"the page does not show the stuck rank: {dom[-3000:]}")
        print(f"chromium: the page shows '{m.group(1)}' as stuck")
        if screenshot:
            subprocess.run(args + ["--window-size=1100,700", f"--screenshot={screenshot}",
                                   f"http://127.0.0.1:{port}/"],
                           capture_output=True, timeout=120)
            if not os.path.exists(screenshot) or os.path.getsize(screenshot) < 1000:
                fail(f"no screenshot at {screenshot}")
            print(f"chromium: screenshot {screenshot}")
    finally:
        if serve:
            serve.terminate()
            serve.wait(timeout=30)
        job.terminate()
        try:
            job.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            job.communicate()
    shutil.rmtree(tmp, ignore_errors=True)
    print("diag_page_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
