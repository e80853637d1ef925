#!/usr/bin/env python3
"""A real Prometheus scrapes a 4-rank weft job (docs/observability.md).

`weft run -n 4 --metrics-sd FILE` starts the ranks with metrics endpoints on 127.0.0.1:0 and keeps
FILE a file_sd target list; Prometheus (Debian's `prometheus`, started here on 127.0.0.1:0 with a
1 s scrape interval) discovers the ranks through it. The test asks Prometheus's HTTP API for
weft_collectives_total and expects exactly the allreduces the ranks ran, checks one rank's scrape
with `promtool check metrics`, runs every query of deploy/grafana/weft-dashboard.json against the
job's data (each must be valid PromQL; the main ones must return series), checks deploy/'s
Prometheus configuration and alert rules with promtool, then lets the job end and expects the
target list emptied.

Usage: prometheus_test.py WEFT_TOOL METRICS_JOB SOURCE_DIR
Exit 77 (skipped) when prometheus or promtool is not installed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

RANKS = 4
ITERATIONS = 25


def wait_for(what, fn, timeout=60.0, interval=0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise SystemExit(f"prometheus_test: timed out waiting for {what} (last: {last!r})")


def prometheus_port(log_path):
    with open(log_path) as f:
        m = re.search(r'msg="Listening on" address=127\.0\.0\.1:(\d+)', f.read())
    return int(m.group(1)) if m else None


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise SystemExit(f"prometheus_test: query {expr} failed: {body}")
    return body["data"]["result"]


def scalar(port, expr):
    result = query(port, expr)
    return float(result[0]["value"][1]) if result else None


def main():
    weft, job, source = sys.argv[1], sys.argv[2], sys.argv[3]
    if not shutil.which("prometheus") or not shutil.which("promtool"):
        print("prometheus_test: prometheus/promtool not installed (scripts/setup.sh)")
        return 77
    tmp = tempfile.mkdtemp(prefix="weft-prom-")
    sd = os.path.join(tmp, "targets.json")
    stop = os.path.join(tmp, "stop")
    config = os.path.join(tmp, "prometheus.yml")
    with open(config, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: weft
    file_sd_configs:
      - files: ['{sd}']
        refresh_interval: 1s
""")
    env = dict(os.environ)
    env.pop("WEFT_METRICS_ADDR", None)
    env.setdefault("WEFT_TRANSPORT", "tcp")
    job_proc = subprocess.Popen(
        [weft, "run", "-n", str(RANKS), "--timeout", "150", "--metrics-sd", sd, "--", job,
         str(ITERATIONS), stop], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    prom_log = open(os.path.join(tmp, "prometheus.log"), "w")
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
         "--web.listen-address=127.0.0.1:0"], stdout=prom_log, stderr=subprocess.STDOUT)
    try:
        port = wait_for("prometheus to listen", lambda: prometheus_port(prom_log.name))
        targets = wait_for("4 ranks in the target list", lambda: (
            lambda t: t if sum(len(g["targets"]) for g in t) == RANKS else None)(
                json.load(open(sd))))
        ranks = sorted(int(g["labels"]["weft_rank"]) for g in targets)
        assert ranks == list(range(RANKS)), ranks
        print(f"prometheus on 127.0.0.1:{port}; targets {[g['targets'][0] for g in targets]}")

        up = wait_for("4 targets up", lambda: (
            lambda v: v if v == RANKS else None)(scalar(port, 'sum(up{job="weft"})')))
        print(f"up: {up:.0f}")
        want = RANKS * ITERATIONS
        got = wait_for(f"weft_collectives_total == {want}", lambda: (
            lambda v: v if v == want else None)(
                scalar(port, 'sum(weft_collectives_total{op="allreduce"})')))
        print(f"sum(weft_collectives_total{{op=\"allreduce\"}}) = {got:.0f} (ran {want})")
        per_rank = query(port, 'weft_collectives_total{op="allreduce"}')
        assert len(per_rank) == RANKS, per_rank
        assert all(float(s["value"][1]) == ITERATIONS for s in per_rank), per_rank
        count = scalar(port, 'sum(weft_collective_duration_seconds_count{op="allreduce"})')
        assert count == want, count
        bytes_total = scalar(port, 'sum(weft_collective_bytes_total{op="allreduce"})')
        assert bytes_total == want * 256 * 4, bytes_total
        errors = query(port, "weft_operation_errors_total")
        assert errors == [], errors

        scrape = urllib.request.urlopen(f"http://{targets[0]['targets'][0]}/metrics",
                                        timeout=5).read()
        check = subprocess.run(["promtool", "check", "metrics"], input=scrape,
                               capture_output=True)
        print(f"promtool check metrics: exit {check.returncode} "
              f"{(check.stdout + check.stderr).decode().strip()}")
        assert check.returncode == 0

        # The dashboard's queries over this job's data ($__rate_interval: the whole job so far);
        # rates need two scrapes of every rank.
        wait_for("two scrapes of every rank", lambda: (lambda v: v if v is not None and v >= 2
                                                        else None)(
            scalar(port, 'min(count_over_time(weft_collectives_total{op="allreduce"}[1m]))')))
        with open(os.path.join(source, "deploy/grafana/weft-dashboard.json")) as f:
            dashboard = json.load(f)
        must_have_data = {"Ranks up", "Collectives per second, by op", "Collective payload, by op",
                          "Mean collective time, by op", "Peers lost"}
        checked = 0
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                expr = target["expr"].replace("$__rate_interval", "1m")
                result = query(port, expr)  # exits on a query Prometheus refuses
                checked += 1
                if panel["title"] in must_have_data and not result:
                    raise SystemExit(f"prometheus_test: panel '{panel['title']}' has no data: {expr}")
        print(f"dashboard: {checked} queries valid")
        for what, path in [("config", "deploy/prometheus/prometheus.yml"),
                           ("rules", "deploy/prometheus/weft-alerts.yml")]:
            check = subprocess.run(["promtool", "check", what, os.path.join(source, path)],
                                   capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        print("promtool check config/rules on deploy/prometheus: ok")
    finally:
        open(stop, "w").close()
        try:
            out, _ = job_proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job_proc.kill()
            out, _ = job_proc.communicate()
        prom.terminate()
        prom.wait(timeout=30)
    print(out)
    assert job_proc.returncode == 0, f"weft run exited {job_proc.returncode}"
    assert json.load(open(sd)) == [], open(sd).read()
    shutil.rmtree(tmp, ignore_errors=True)
    print("prometheus_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
