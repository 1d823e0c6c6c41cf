#!/usr/bin/env python3
"""The fleet store (PostgresTokenStore) under load: `fleet_rows` for Benchmarks/run.py.

Starts a PostgreSQL cluster the way `make test` does (scripts/pg-cluster.sh: Debian's server
binaries, a temporary directory, a free loopback port, fsync off), with pg_stat_statements loaded so
that the server counts the statements the simulated hosts run, and enough connections for 100 hosts;
runs the bench's fleet commands against it (Benchmarks/Sources/loginkit-bench/Fleet.swift) and
removes the cluster in all cases.

By hand: python3 Benchmarks/fleet.py BENCH_EXECUTABLE DEV_SERVER_EXECUTABLE [SCALE]
"""
import glob
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_CLUSTER = os.path.join(ROOT, "scripts", "pg-cluster.sh")

# 100 hosts of at most 4 connections each (PostgresTokenStore.connection(url:)'s pool), the writer,
# the seeder and the bench's own client.
MAX_CONNECTIONS = 600
HOSTS = 100
PROPAGATION_HOSTS = (1, 10, 100)


def _log(message):
    print(f"fleet: {message}", file=sys.stderr, flush=True)


def _server_version_dir():
    """The newest /usr/lib/postgresql/<version> with server binaries (as pg-cluster.sh picks it)."""
    found = [os.path.dirname(os.path.dirname(path)) for path in glob.glob("/usr/lib/postgresql/*/bin/initdb") if os.access(path, os.X_OK)]

    def version(path):
        return [int(part) if part.isdigit() else 0 for part in re.split(r"[.]", os.path.basename(path))]
    return max(found, key=version) if found else None


def _settings(conf_path):
    """The last value of each setting in postgresql.conf (comments dropped)."""
    values = {}
    with open(conf_path) as conf:
        for line in conf:
            match = re.match(r"\s*([A-Za-z_.]+)\s*=\s*('[^']*'|[^\s#]+)", line.split("#", 1)[0] if not line.strip().startswith("#") else "")
            if match:
                values[match.group(1).lower()] = match.group(2).strip("'").lower()
    return values


def _number(value):
    return float("nan") if value is None else float(value)


def _run_json(command, timeout):
    """Runs a bench command; the JSON object on its last line of output."""
    environment = {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
    _log(" ".join(command[1:2] + command[3:]))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, cwd=ROOT)
        output, errors, status = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        # The figures are printed before the hosts are stopped: a stop that hangs loses nothing.
        output = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        errors = expired.stderr.decode() if isinstance(expired.stderr, bytes) else (expired.stderr or "")
        status = None
        if not output.strip():
            raise RuntimeError(f"{command[1]} did not finish within {timeout} s: {errors.strip()[-500:]}")
    lines = [line for line in output.strip().splitlines() if line.startswith("{")]
    if (status not in (0, None)) or not lines:
        raise RuntimeError(f"{command[1]} failed (exit {status}): {errors.strip()[-800:]}")
    return json.loads(lines[-1])


class _DevServer:
    """`loginkit-dev-server serve` in a child process, stopped when its standard input closes."""

    def __init__(self, binary, work_dir):
        self.log = open(os.path.join(work_dir, "dev-server.log"), "wb")
        environment = {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
        self.process = subprocess.Popen([binary, "serve", "--quiet", "--exit-on-stdin-eof"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=environment)
        line = b""
        deadline = time.monotonic() + 30
        while b"\n" not in line:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("the dev server did not print its issuer")
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 4096)
                if not chunk:
                    continue
                line += chunk
        text = line.split(b"\n", 1)[0].decode().strip()
        if not text.startswith("issuer: "):
            self.stop()
            raise RuntimeError(f"the dev server printed {text!r}, not its issuer")
        self.issuer = text[len("issuer: "):]

    def stop(self):
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.log.close()


def fleet_rows(bench_binary: str, dev_server_binary: str, work_dir: str, scale: float) -> dict:
    """The fleet rows of `make bench`, each a number (`fleet_propagation_curve`: hosts → p50/p99 ms).

    Raises RuntimeError when PostgreSQL's server binaries are not installed or a step fails.
    """
    version_dir = _server_version_dir()
    if version_dir is None:
        raise RuntimeError("PostgreSQL's server binaries are not installed (apt-get install postgresql; `make bench` and `make test` install it)")
    has_statements = os.path.exists(os.path.join(version_dir, "lib", "pg_stat_statements.so"))
    extra = [f"max_connections = {MAX_CONNECTIONS}"]
    if has_statements:
        extra += ["shared_preload_libraries = 'pg_stat_statements'", "pg_stat_statements.track = top", "pg_stat_statements.track_utility = on",
                  "pg_stat_statements.max = 10000"]
    else:
        _log("pg_stat_statements.so not found: statements are counted as transactions (pg_stat_database)")

    changes = max(5, int(30 * scale))
    profiles = 1000 if scale >= 1 else max(100, int(1000 * scale))
    duration = max(10, int(40 * scale))
    rate = max(1000, int(10_000 * min(1.0, scale)))

    os.makedirs(work_dir, mode=0o700, exist_ok=True)
    environment = dict(os.environ, LOGINKIT_PG_EXTRA_CONF="\n".join(extra))
    created = subprocess.run([PG_CLUSTER, "create"], capture_output=True, text=True, env=environment, timeout=180)
    if created.returncode != 0:
        raise RuntimeError(f"scripts/pg-cluster.sh create failed: {created.stderr.strip()[-800:]}")
    directory, port = created.stdout.strip().splitlines()[-1].split()
    _log(f"PostgreSQL ({os.path.basename(version_dir)}) on port {port}")
    try:
        settings = _settings(os.path.join(directory, "data", "postgresql.conf"))
        url = f"postgres://loginkit@127.0.0.1:{port}/postgres"
        values = {
            "fleet_pg_fsync_off": 1 if settings.get("fsync") in ("off", "false", "0", "no") else 0,
            "fleet_pg_synchronous_commit_off": 1 if settings.get("synchronous_commit") in ("off", "false", "0", "no") else 0,
        }

        issuer = "-"
        server = None
        if dev_server_binary and os.access(dev_server_binary, os.X_OK):
            server = _DevServer(dev_server_binary, work_dir)
            issuer = server.issuer
        try:
            queries = _run_json([bench_binary, "fleet-queries", url, issuer], timeout=300)
        finally:
            if server is not None:
                server.stop()
        values["fleet_counter_pg_stat_statements"] = 1 if str(queries.get("counter", "")).startswith("pg_stat_statements") else 0
        values["fleet_queries_provider_dev_server"] = 1 if queries.get("provider") == "dev server" else 0
        values["fleet_queries_per_cached_token"] = _number(queries.get("queries_per_cached_token"))
        values["fleet_cached_token_ns"] = _number(queries.get("cached_token_ns"))
        values["fleet_queries_per_refresh"] = _number(queries.get("queries_per_refresh"))
        values["fleet_queries_in_refresh_call"] = _number(queries.get("queries_in_refresh_call"))
        values["fleet_refresh_ms"] = _number(queries.get("refresh_ms"))
        values["fleet_queries_per_host_minute_idle"] = _number(queries.get("queries_per_host_minute_idle"))

        curve = {}
        for hosts in PROPAGATION_HOSTS:
            result = _run_json([bench_binary, "fleet-propagation", url, str(hosts), str(changes)], timeout=240)
            curve[str(hosts)] = {
                "p50": _number(result.get("p50_ms")), "p99": _number(result.get("p99_ms")),
                "served_p50": _number(result.get("served_p50_ms")), "served_p99": _number(result.get("served_p99_ms")),
                "save_ms": _number(result.get("save_ms")),
            }
        values["fleet_propagation_curve"] = curve
        widest = curve[str(PROPAGATION_HOSTS[-1])]
        values["fleet_propagation_p50_ms_100"] = widest["p50"]
        values["fleet_propagation_p99_ms_100"] = widest["p99"]
        values["fleet_propagation_served_p99_ms_100"] = widest["served_p99"]
        values["fleet_propagation_save_ms_100"] = widest["save_ms"]

        sim = _run_json([bench_binary, "fleet-sim", url, str(HOSTS), str(profiles), str(duration), str(rate)], timeout=duration + 240)
        for key in ("hosts", "profiles", "seconds", "calls_per_s", "token_lifetime_s", "refreshes", "errors", "auth_services",
                    "server_cpu_percent", "connections_per_host", "connections_per_host_max", "statements_per_token_call",
                    "statements_per_s", "token_p50_ms", "token_p99_ms", "lateness_p99_ms", "bench_cpu_percent", "rss_mb"):
            values[f"fleet_sim_{key}"] = _number(sim.get(key))
        values["fleet_sim_scaled"] = 1 if (sim.get("hosts", 0) < 100 or sim.get("profiles", 0) < 1000) else 0
        return values
    finally:
        subprocess.run([PG_CLUSTER, "destroy", directory], capture_output=True, timeout=120)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit("usage: fleet.py BENCH_EXECUTABLE DEV_SERVER_EXECUTABLE [SCALE]")
    scratch = tempfile.mkdtemp(prefix="loginkit-fleet-")
    try:
        print(json.dumps(fleet_rows(sys.argv[1], sys.argv[2], scratch, float(sys.argv[3]) if len(sys.argv) == 4 else 1.0), indent=2, sort_keys=True))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
