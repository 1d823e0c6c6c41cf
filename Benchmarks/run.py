#!/usr/bin/env python3
"""`make bench`: LoginKit against its peers, interleaved in one run, medians and ratios.

Builds the bench (release) and the C peers, starts nginx on 127.0.0.1, runs every comparison
A B A B … for ROUNDS rounds (each peer in a process of its own, so CPU time and peak RSS are its
own), prints one table and writes it, with the figures, to .build/bench/ (benchmarks.md,
results.json; untracked, so the working tree stays clean). docs/benchmarks.md is regenerated only on
request: LOGINKIT_BENCH_UPDATE_DOCS=1 (`make bench-docs`).

Environment: LOGINKIT_BENCH_ROUNDS (default 3), LOGINKIT_BENCH_SCALE (default 1.0: multiplies
request counts; 0.1 for a quick look).

The scaling curves (the file store at 1 to 10,000 profiles, processes on different profiles, the
fleet store, the storm at 1,000 to 100,000 callers) are drawn by plot.py into
.build/bench/scaling.svg (and docs/benchmarks-scaling.svg with LOGINKIT_BENCH_UPDATE_DOCS=1). The
fleet rows come from fleet.py (`fleet_rows`, once per run, on PostgreSQL's server binaries, which
`make bench` installs); when it cannot run, the table says why and the rest of the run stands.
The storage layout's floors (C/sqlite_commit.c: a profile's durable commit in SQLite against a file
per profile, for docs/storage.md) also run once per run, after the rounds.
"""
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "Benchmarks")
OUTPUT = os.path.join(ROOT, ".build", "bench")  # untracked: `make bench` leaves the working tree clean
ROUNDS = int(os.environ.get("LOGINKIT_BENCH_ROUNDS", "3"))
SCALE = float(os.environ.get("LOGINKIT_BENCH_SCALE", "1.0"))


STARTED = time.monotonic()


def log(message):
    print(f"[{time.monotonic() - STARTED:6.0f} s] {message}", file=sys.stderr, flush=True)


def scaled(count):
    return max(100, int(count * SCALE))


# The file store's scaling rows: one profile's token call, save and login in stores of these many
# profiles (each store prepared once per run, in the first round, and reused), and processes each
# refreshing a profile of its own, with these simulated round trips to the provider.
STORE_SIZES = (1, 100, 1000, 10000)
STORE_CLI_SIZES = (1, 10000)
STORE_PROCESSES = (1, 16)
STORE_NETWORK_MS = (20, 0)
STORE_REFRESHES = 20


# Sequential HTTP is a ping-pong with nginx: each request wakes the server and each response wakes
# the client. On this VM a wake-up across cores costs far more than one on the same core (the C loop:
# ~100 µs a request across, ~19 µs on nginx's core), so an unpinned run measured where the scheduler
# happened to put the client, and the C loop swung between 8,900 and 19,700 req/s from run to run.
# The sequential comparisons therefore pin nginx to one CPU and every client to another (as a server
# on another machine would be), and report the same-core figures beside them (docs/benchmarks.md).
CPUS = sorted(os.sched_getaffinity(0))
SERVER_CPU, CLIENT_CPU = (CPUS[0], CPUS[1]) if len(CPUS) >= 2 else (None, None)


def on_cpu(cpu, command):
    """`command` pinned to `cpu` (as it is when there is no CPU to pin to)."""
    return command if cpu is None else ["taskset", "-c", str(cpu)] + command


# The launcher that measures a child's peak RSS (build() compiles it). Linux counts the memory a
# child had *before* exec in its ru_maxrss (the forked copy of its parent: here this Python
# process, ~17 MB), so a child forked from Python can never report less than that. The launcher
# is a small C program: its own pre-exec size (~1 MB) is all it adds.
RSS_EXEC = os.path.join(BENCH, ".build-c", "rss_exec")


def evict_from_page_cache(command):
    """Drops the page cache of the executables this bench built that `command` runs, so that the
    process reads them from disk as an installed program does. On this kernel a fault maps a whole
    page-cache folio, and the folios' sizes depend on how the file got into the cache: the same
    static executable measured 21.4 MB peak RSS as the linker had written it, 22.6-23.0 MB after `cp`,
    and 21.3-21.6 MB (six runs) read back from disk (docs/benchmarks.md, 2026-11-26 afternoon)."""
    for part in command:
        if os.path.isabs(part) and part.startswith(ROOT + os.sep) and os.path.isfile(part) and os.access(part, os.X_OK):
            descriptor = os.open(part, os.O_RDONLY)
            try:
                os.fsync(descriptor)
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(descriptor)


def run(command, env=None, capture=True, from_disk=False):
    """Runs a command; returns (stdout, wall seconds, peak RSS in MB) of that process alone. With
    `from_disk`, its executable is read from disk, not from what the build left in the page cache
    (`evict_from_page_cache`): for the runs whose peak RSS the table compares."""
    if from_disk:
        evict_from_page_cache(command)
    report = tempfile.NamedTemporaryFile(prefix="loginkit-bench-rss-", delete=False)
    report.close()
    try:
        started = time.perf_counter()
        process = subprocess.Popen([RSS_EXEC, report.name] + command, stdout=subprocess.PIPE if capture else None, env=env, cwd=ROOT)
        output = process.stdout.read().decode() if capture else ""
        _, status, _ = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"bench: {' '.join(command)} failed (exit {os.waitstatus_to_exitcode(status)})")
        with open(report.name) as measured:
            return output, wall, int(measured.read().strip()) / 1024.0
    finally:
        os.unlink(report.name)


def measure(command, env=None, from_disk=False):
    """Runs a bench command that prints one JSON line; that object plus `rss_mb`."""
    output, _, rss = run(command, env=env, from_disk=from_disk)
    result = json.loads(output.strip().splitlines()[-1])
    result["rss_mb"] = rss
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def sources_fingerprint():
    """A hash of every source and manifest of LoginKit and of this bench package."""
    digest = hashlib.sha256()
    for top in (os.path.join(ROOT, "Sources"), os.path.join(BENCH, "Sources")):
        for directory, _, files in sorted(os.walk(top)):
            for name in sorted(files):
                path = os.path.join(directory, name)
                digest.update(path.encode() + b"\0")
                with open(path, "rb") as source:
                    digest.update(source.read())
    for manifest in (os.path.join(ROOT, "Package.swift"), os.path.join(BENCH, "Package.swift")):
        with open(manifest, "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()


def drop_stale_objects(scratch, fingerprint):
    """Drops the release objects of LoginKit's and the bench's own modules in `scratch` when their
    sources changed since the last build there. SwiftPM's incremental build can keep a client
    module compiled against an older layout of a struct (a stored property added to
    `CurlHTTPClient.Configuration` can leave BenchCore reading the old layout: a heap corruption);
    the peers' objects are kept, so the cost is LoginKit's own modules."""
    stamp = os.path.join(scratch, "loginkit-sources.sha256")
    if os.path.exists(stamp):
        with open(stamp) as saved:
            if saved.read().strip() == fingerprint:
                return
    ours = set()
    for top in (os.path.join(ROOT, "Sources"), os.path.join(BENCH, "Sources")):
        if os.path.isdir(top):
            ours.update(name.replace("-", "_") for name in os.listdir(top))
    release = os.path.join(scratch, "release")
    # The build plan names the dropped directories' file maps: drop it too, SwiftPM writes it anew.
    for plan in (os.path.join(scratch, "release.yaml"), os.path.join(release, "description.json")):
        if os.path.exists(plan):
            os.remove(plan)
    for module in ours:
        shutil.rmtree(os.path.join(release, module + ".build"), ignore_errors=True)
        for suffix in (".swiftmodule", ".swiftdoc", ".swiftsourceinfo"):
            stale = os.path.join(release, "Modules", module + suffix)
            if os.path.exists(stale):
                os.remove(stale)


def mark_built(scratch, fingerprint):
    with open(os.path.join(scratch, "loginkit-sources.sha256"), "w") as out:
        out.write(fingerprint + "\n")


def build():
    log("bench: building (release) — the first build compiles the peers too")
    fingerprint = sources_fingerprint()
    scratches = (os.path.join(BENCH, ".build"), os.path.join(BENCH, ".build-static"), os.path.join(ROOT, ".build-release"))
    for scratch in scratches:
        drop_stale_objects(scratch, fingerprint)
    # SwiftPM keeps the build plan of a path dependency (LoginKit, "..") across runs and misses
    # source files added to it since ("cannot find … in scope"): drop the plan, keep the objects.
    # Both scratch paths that build this package (the static one misses added files as well),
    # and the CLI's (SwiftPM also keeps the plan when only -Xswiftc flags change: the release link
    # flags, scripts/release-link-flags.sh).
    for scratch in (os.path.join(BENCH, ".build"), os.path.join(BENCH, ".build-static"), os.path.join(ROOT, ".build-release")):
        for stale in (os.path.join(scratch, "release.yaml"), os.path.join(scratch, "release", "description.json")):
            if os.path.exists(stale):
                os.remove(stale)
    subprocess.run(["swift", "build", "-c", "release", "--package-path", BENCH, "--product", "loginkit-bench"], check=True, cwd=ROOT)
    subprocess.run(["swift", "build", "-c", "release", "--package-path", BENCH, "--product", "loginkit-alone"], check=True, cwd=ROOT)
    # The expiry storm's identity provider in its own process, as `loginkit demo` runs it.
    subprocess.run(["swift", "build", "-c", "release", "--package-path", BENCH, "--product", "loginkit-dev-server"], check=True, cwd=ROOT)
    # The smallest Swift process with the runtime as shared libraries: the floor of the row above.
    subprocess.run(["swift", "build", "-c", "release", "--package-path", BENCH, "--product", "swift-floor"], check=True, cwd=ROOT)
    # The CLI as `make release` builds it (Swift runtime linked statically, its link flags), in that
    # scratch path.
    release = os.path.join(ROOT, ".build-release")
    release_flags = subprocess.run(["sh", os.path.join(ROOT, "scripts", "release-link-flags.sh"), "swift"], check=True, capture_output=True, text=True).stdout.split()
    subprocess.run(["swift", "build", "--enable-all-traits", "-c", "release", "--static-swift-stdlib", *release_flags, "--scratch-path", release, "--product", "loginkit"], check=True, cwd=ROOT)
    cli_path = subprocess.run(["swift", "build", "--enable-all-traits", "-c", "release", "--scratch-path", release, "--show-bin-path"],
                              check=True, cwd=ROOT, capture_output=True, text=True).stdout.strip()
    # LoginKit's HTTP process again, and the smallest Swift process, with the Swift runtime linked
    # statically and the same link flags (as `make release` builds the CLI): the RSS comparison
    # (docs/benchmarks.md).
    static = os.path.join(BENCH, ".build-static")
    for product in ("loginkit-alone", "swift-floor"):
        subprocess.run(["swift", "build", "-c", "release", "--static-swift-stdlib", *release_flags, "--package-path", BENCH, "--scratch-path", static,
                        "--product", product], check=True, cwd=ROOT)
    static_path = subprocess.run(["swift", "build", "-c", "release", "--package-path", BENCH, "--scratch-path", static, "--show-bin-path"],
                                 check=True, cwd=ROOT, capture_output=True, text=True).stdout.strip()
    bin_path = subprocess.run(["swift", "build", "-c", "release", "--package-path", BENCH, "--show-bin-path"],
                              check=True, cwd=ROOT, capture_output=True, text=True).stdout.strip()
    c_dir = os.path.join(BENCH, ".build-c")
    os.makedirs(c_dir, exist_ok=True)
    for scratch in scratches:
        mark_built(scratch, fingerprint)
    subprocess.run(["gcc", "-O2", "-Wall", "-o", os.path.join(c_dir, "curl_bench"), os.path.join(BENCH, "C", "curl_bench.c"), "-lcurl"], check=True)
    subprocess.run(["gcc", "-O2", "-Wall", "-o", os.path.join(c_dir, "sqlite_commit"), os.path.join(BENCH, "C", "sqlite_commit.c"), "-lsqlite3"], check=True)
    subprocess.run(["gcc", "-O2", "-Wall", "-o", RSS_EXEC, os.path.join(BENCH, "C", "rss_exec.c")], check=True)
    with open(os.path.join(c_dir, "c_floor.c"), "w") as source:
        source.write('#include <stdio.h>\nint main(void) { puts("{}"); return 0; }\n')
    subprocess.run(["gcc", "-O2", "-o", os.path.join(c_dir, "c_floor"), os.path.join(c_dir, "c_floor.c")], check=True)
    subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", os.path.join(c_dir, "malloc_count.so"),
                    os.path.join(BENCH, "C", "malloc_count.c"), "-ldl"], check=True)
    return (os.path.join(bin_path, "loginkit-bench"), os.path.join(bin_path, "loginkit-alone"), os.path.join(cli_path, "loginkit"), c_dir,
            os.path.join(static_path, "loginkit-alone"), os.path.join(static_path, "swift-floor"), os.path.join(bin_path, "loginkit-dev-server"),
            os.path.join(bin_path, "swift-floor"))


class Nginx:
    def __init__(self):
        self.prefix = tempfile.mkdtemp(prefix="loginkit-bench-nginx-")
        self.port = free_port()
        with open(os.path.join(BENCH, "nginx.conf")) as template:
            config = template.read().replace("@PREFIX@", self.prefix).replace("@PORT@", str(self.port))
        with open(os.path.join(self.prefix, "nginx.conf"), "w") as out:
            out.write(config)
        # On SERVER_CPU (its worker too); taskset execs nginx, so the process is nginx's master.
        self.process = subprocess.Popen(on_cpu(SERVER_CPU, ["nginx", "-c", os.path.join(self.prefix, "nginx.conf"), "-p", self.prefix]),
                                        stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:  # bounded: nginx listens within milliseconds
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise SystemExit("bench: nginx did not start: " + self.process.stderr.read().decode())
                time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}/oauth/token"

    def stop(self):
        # SIGTERM: nginx's fast shutdown, which stops its worker too (SIGKILL would orphan it).
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.prefix, ignore_errors=True)


def openssl_speed():
    """Verify times (µs) for RSA-2048 and P-256 from `openssl speed`, run now."""
    out = subprocess.run(["openssl", "speed", "-seconds", "1", "rsa2048", "ecdsap256"], capture_output=True, text=True, check=True).stdout
    # From the verify/s column: the seconds columns have four decimals, and a P-256 verify now takes
    # less than 0.00005 s here, which `openssl speed` prints as 0.0000s.
    rsa = re.search(r"rsa\s+2048 bits\s+([\d.]+)s\s+([\d.]+)s\s+([\d.]+)\s+([\d.]+)", out)
    ec = re.search(r"256 bits ecdsa \(nistp256\)\s+([\d.]+)s\s+([\d.]+)s\s+([\d.]+)\s+([\d.]+)", out)
    if not rsa or not ec or float(rsa.group(4)) <= 0 or float(ec.group(4)) <= 0:
        raise SystemExit("bench: could not read `openssl speed` output:\n" + out)
    return 1e6 / float(rsa.group(4)), 1e6 / float(ec.group(4))


def fleet_results(bench, dev_server, work_dir):
    """The fleet store's figures from fleet.py's `fleet_rows` (one run, not one per round), or
    `{"not_run": reason}` when it could not run (no PostgreSQL, fleet.py missing, a failure)."""
    try:
        os.makedirs(work_dir, mode=0o700, exist_ok=True)
        sys.dont_write_bytecode = True  # no __pycache__ left in Benchmarks/
        if BENCH not in sys.path:
            sys.path.insert(0, BENCH)
        from fleet import fleet_rows
        values = fleet_rows(bench, dev_server, work_dir, SCALE)
        if not isinstance(values, dict):
            raise TypeError(f"fleet_rows returned {type(values).__name__}, not a dict")
        return values
    except (Exception, SystemExit) as error:
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        log(f"bench: the fleet rows did not run: {reason}")
        return {"not_run": reason}


# The storage layout's floors (docs/storage.md): a durable commit of one ~1.5 KB profile in SQLite
# (WAL, synchronous=FULL) and as a file of its own (write, fsync, rename, fsync of the directory: the
# floor of the file store's save), at these many profiles, by these many processes each committing
# a profile of its own.
LAYOUT_MODES = ("sqlite", "files")
LAYOUT_SIZES = (1, 10000)
LAYOUT_PROCESSES = (1, 16)


def storage_layout_rows(c_dir, work_dir):
    """sqlite_commit's JSON objects (plus `profiles`, the size asked for), each run in a directory
    of its own; `[{"not_run": reason}]` when one failed."""
    commits = scaled(200)
    runs = []
    try:
        os.makedirs(work_dir, mode=0o700, exist_ok=True)
        for size in LAYOUT_SIZES:
            for processes in LAYOUT_PROCESSES:
                for mode in LAYOUT_MODES:
                    directory = tempfile.mkdtemp(dir=work_dir)
                    try:
                        result = measure([os.path.join(c_dir, "sqlite_commit"), mode, directory, str(size), str(commits), str(processes)])
                    finally:
                        shutil.rmtree(directory, ignore_errors=True)
                    runs.append(dict(result, profiles=size))
        return runs
    except (Exception, SystemExit) as error:
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        log(f"bench: the storage layout rows did not run: {reason}")
        return [{"not_run": reason}]


def main():
    bench, alone, loginkit, c_dir, alone_static, swift_floor, dev_server, swift_floor_shared = build()
    log("bench: built")
    curl_bench = os.path.join(c_dir, "curl_bench")
    malloc_env = dict(os.environ, LD_PRELOAD=os.path.join(c_dir, "malloc_count.so"))
    nginx = Nginx()
    work = tempfile.mkdtemp(prefix="loginkit-bench-")
    os.chmod(work, 0o700)
    results = {}
    try:
        # Sequential runs settle at 10,000 requests; 64 in flight needs 200,000 (URLSession, ten
        # times slower there, gets 10,000 so that the whole run stays within the time budget).
        seq_n, conc_n, urlsession_conc_n = scaled(10000), scaled(200000), scaled(10000)
        rows = {key: [] for key in [
            "c_seq", "lk_seq", "lkg_seq", "ahc_seq", "us_seq", "c_seq_same", "lk_seq_same", "c_conc", "lk_conc", "lk_conc_static", "ahc_conc", "us_conc", "floor",
            "save", "cached", "lk_rs", "jk_rs", "lk_es", "jk_es", "bs_es", "os_es", "openssl", "dpop_proof", "authorized", "authorized_dpop", "storm", "storm_same", "cli",
            "curl_file", "store_scale", "store_cli", "store_procs", "fleet"]}
        cli_store = os.path.join(work, "cli", "tokens.json")
        os.makedirs(os.path.dirname(cli_store), mode=0o700)
        run([bench, "prepare-cli", cli_store])
        # The scaling stores: made by the first round's `store-scale` / `store-procs` (a 10,000-profile
        # single file written and migrated once), reused by the later rounds.
        store_dirs = {size: os.path.join(work, f"store-{size}") for size in STORE_SIZES}
        procs_dir = os.path.join(work, "store-procs")
        store_ops = scaled(200)
        for round_number in range(1, ROUNDS + 1):
            log(f"bench: round {round_number}/{ROUNDS}: HTTP sequential")
            c_out, _, c_rss = run(on_cpu(CLIENT_CPU, [curl_bench, "easy", nginx.url, str(seq_n)]))
            rows["c_seq"].append(dict(json.loads(c_out), rss_mb=c_rss))
            rows["lk_seq"].append(measure(on_cpu(CLIENT_CPU, [alone, "http", "loginkit", "seq", nginx.url, str(seq_n)])))
            rows["lkg_seq"].append(measure(on_cpu(CLIENT_CPU, [alone, "http", "loginkit-global", "seq", nginx.url, str(seq_n)])))
            rows["ahc_seq"].append(measure(on_cpu(CLIENT_CPU, [bench, "http", "ahc", "seq", nginx.url, str(seq_n)])))
            rows["us_seq"].append(measure(on_cpu(CLIENT_CPU, [bench, "http", "urlsession", "seq", nginx.url, str(seq_n)])))
            # The same two on nginx's CPU: no cross-core wake-ups, so the client's CPU per request is
            # most of each request's time (LoginKit's overhead over C shows in full).
            if SERVER_CPU is not None:
                c_out, _, c_rss = run(on_cpu(SERVER_CPU, [curl_bench, "easy", nginx.url, str(seq_n)]))
                rows["c_seq_same"].append(dict(json.loads(c_out), rss_mb=c_rss))
                rows["lk_seq_same"].append(measure(on_cpu(SERVER_CPU, [alone, "http", "loginkit", "seq", nginx.url, str(seq_n)])))
            log(f"bench: round {round_number}/{ROUNDS}: HTTP 64 in flight")
            # The peak RSS compared in the table is measured with each executable read from disk.
            c_out, _, c_rss = run([curl_bench, "multi", nginx.url, str(conc_n), "64"], from_disk=True)
            rows["c_conc"].append(dict(json.loads(c_out), rss_mb=c_rss))
            # 64 in flight: the tasks stay on the global executor (two threads); on the driver thread
            # alone they were slower (docs/benchmarks.md).
            rows["lk_conc"].append(measure([alone, "http", "loginkit-global", "conc", nginx.url, str(conc_n), "64"], from_disk=True))
            rows["lk_conc_static"].append(measure([alone_static, "http", "loginkit-global", "conc", nginx.url, str(conc_n), "64"], from_disk=True))
            _, _, swift_rss = run([swift_floor], from_disk=True)
            _, _, swift_shared_rss = run([swift_floor_shared], from_disk=True)
            _, _, c_rss = run([os.path.join(c_dir, "c_floor")], from_disk=True)
            rows["floor"].append({"swift_rss_mb": swift_rss, "swift_shared_rss_mb": swift_shared_rss, "c_rss_mb": c_rss})
            rows["ahc_conc"].append(measure([bench, "http", "ahc", "conc", nginx.url, str(conc_n), "64"], from_disk=True))
            rows["us_conc"].append(measure([bench, "http", "urlsession", "conc", nginx.url, str(urlsession_conc_n), "64"], from_disk=True))
            log(f"bench: round {round_number}/{ROUNDS}: store, cached token, verification")
            save_dir = tempfile.mkdtemp(dir=work)
            rows["save"].append(measure([bench, "save", save_dir, str(scaled(300))]))
            rows["cached"].append(measure([bench, "cached", save_dir, str(scaled(200000))]))
            rows["lk_rs"].append(measure([bench, "verify", "loginkit", "RS256", str(scaled(20000))], env=malloc_env))
            rows["jk_rs"].append(measure([bench, "verify", "jwtkit", "RS256", str(scaled(20000))], env=malloc_env))
            rows["lk_es"].append(measure([bench, "verify", "loginkit", "ES256", str(scaled(5000))], env=malloc_env))
            rows["jk_es"].append(measure([bench, "verify", "jwtkit", "ES256", str(scaled(5000))], env=malloc_env))
            rows["bs_es"].append(measure([bench, "verify", "boringssl", "ES256", str(scaled(5000))], env=malloc_env))
            rows["os_es"].append(measure([bench, "verify", "openssl", "ES256", str(scaled(5000))], env=malloc_env))
            rows["openssl"].append(openssl_speed())
            log(f"bench: round {round_number}/{ROUNDS}: DPoP proof, authorized requests")
            # One proof and OpenSSL's ES256 signing of a same-size input, interleaved in one process.
            rows["dpop_proof"].append(measure([bench, "dpop-proof", str(scaled(5000))]))
            # AuthService.send vs a plain send of the same requests, 64 in flight, against the dev
            # server in the bench's process: a bearer profile (the request path's own work; the
            # proof is the row above), then a DPoP-bound one (a fresh proof per request; both peers
            # cost the server the same proof check).
            rows["authorized"].append(measure([bench, "authorized", str(scaled(20000)), "64", "bearer"]))
            rows["authorized_dpop"].append(measure([bench, "authorized", str(scaled(20000)), "64", "dpop"]))
            log(f"bench: round {round_number}/{ROUNDS}: expiry storm, CLI start-up")
            # The provider in its own process (the target's figure), then in the bench's process.
            rows["storm"].append(measure([bench, "storm", "3", dev_server], env=malloc_env))
            rows["storm_same"].append(measure([bench, "storm", "3"], env=malloc_env))
            for _ in range(10):
                out, wall, rss = run([loginkit, "token", "--store", cli_store])
                if not out.strip():
                    raise SystemExit("bench: `loginkit token` printed no token")
                rows["cli"].append((wall, rss))
                _, wall, rss = run(["curl", "-s", "-o", "/dev/null", "file://" + cli_store])
                rows["curl_file"].append((wall, rss))
            log(f"bench: round {round_number}/{ROUNDS}: file store at {' / '.join(f'{size:,}' for size in STORE_SIZES)} profiles"
                + (" (writing and migrating the stores)" if round_number == 1 else ""))
            for size in STORE_SIZES:
                rows["store_scale"].append(measure([bench, "store-scale", store_dirs[size], str(size), str(store_ops)]))
            # `loginkit token --access` on one profile of the 1- and the 10,000-profile store, interleaved.
            for _ in range(10):
                for size in STORE_CLI_SIZES:
                    out, wall, rss = run([loginkit, "token", "--store", os.path.join(store_dirs[size], "tokens.json"), "--profile", "p-00000", "--access"])
                    if not out.strip():
                        raise SystemExit(f"bench: `loginkit token` printed no token at {size} profiles")
                    rows["store_cli"].append({"profiles": size, "wall": wall, "rss_mb": rss})
            log(f"bench: round {round_number}/{ROUNDS}: {' and '.join(map(str, STORE_PROCESSES))} processes refreshing a profile each")
            for network_ms in STORE_NETWORK_MS:
                for processes in STORE_PROCESSES:
                    rows["store_procs"].append(measure([bench, "store-procs", procs_dir, str(processes), str(STORE_REFRESHES), str(network_ms)]))
        log("bench: the fleet store under load (fleet.py)")
        rows["fleet"].append(fleet_results(bench, dev_server, os.path.join(work, "fleet")))
        log("bench: the storage layout's floors, SQLite vs a file per profile (sqlite_commit)")
        rows["storage_layout"] = storage_layout_rows(c_dir, os.path.join(work, "layout"))
    finally:
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
    # The raw measurements, so that the report can be redone (`run.py --report`) without measuring.
    with open(os.path.join(c_dir, "raw.json"), "w") as out:
        json.dump({"rows": rows, "counts": [seq_n, conc_n, urlsession_conc_n]}, out)
    report(rows, seq_n, conc_n, urlsession_conc_n)


def ratio(numerator, denominator):
    """numerator / denominator; NaN when either is missing or NaN, or the denominator is 0."""
    if numerator is None or denominator is None or numerator != numerator or denominator != denominator or denominator == 0:
        return float("nan")
    return numerator / denominator


def layout_figure(rows, mode, size, processes, field):
    """`field` of the sqlite_commit run of `mode` at `size` profiles and `processes` processes; NaN
    when there is no such run (raw results from before it was measured, or it did not run)."""
    for run in rows.get("storage_layout") or []:
        if run.get("mode") == mode and run.get("profiles") == size and run.get("procs") == processes:
            return run.get(field, float("nan"))
    return float("nan")


def store_curve(rows):
    """{profiles: {figure: median over the rounds}} of the `store-scale` runs; {} without them."""
    collected = {}
    for row in rows.get("store_scale") or []:
        point = collected.setdefault(str(int(row["profiles"])), {})
        for field, value in row.items():
            if field not in ("profiles", "operations", "rss_mb") and value is not None:
                point.setdefault(field, []).append(value)
    return {size: {field: median(values) for field, values in point.items()}
            for size, point in sorted(collected.items(), key=lambda item: int(item[0]))}


def store_procs_wall(rows):
    """{round trip ms: {processes: median wall ms}} of the `store-procs` runs; {} without them."""
    collected = {}
    for row in rows.get("store_procs") or []:
        collected.setdefault(str(int(row["network_ms"])), {}).setdefault(str(int(row["processes"])), []).append(row["wall_ms"])
    return {network: {processes: median(walls) for processes, walls in by_processes.items()} for network, by_processes in collected.items()}


def store_cli_wall(rows):
    """{profiles: median wall ms of `loginkit token --access`}; {} without those runs."""
    collected = {}
    for row in rows.get("store_cli") or []:
        collected.setdefault(str(int(row["profiles"])), []).append(row["wall"])
    return {size: median(walls) * 1e3 for size, walls in collected.items()}


def storm_curve(rows, storm_single):
    """{callers: {p99_ms, p99_vs_single, memory_bytes_per_caller}} at 1,000 to 100,000 callers, for
    the sizes the storm rows have."""
    curve = {}
    for callers in (1000, 10000, 100000):
        if f"p99_ms_{callers}" not in rows["storm"][0]:
            continue
        p99 = median([row.get(f"p99_ms_{callers}") for row in rows["storm"]])
        curve[str(callers)] = {"p99_ms": p99, "p99_vs_single": ratio(p99, storm_single),
                               "memory_bytes_per_caller": median([row.get(f"memory_bytes_per_caller_{callers}") for row in rows["storm"]])}
    return curve


def number(value):
    """A figure for the table: thousands separated, fewer decimals the larger it is; — when missing."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value or abs(value) == float("inf"):
        return "—"
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3g}"


def cell(text):
    """`text` fit for one cell of a Markdown table."""
    return " ".join(str(text).replace("|", "/").split())[:300]


def report(rows, seq_n, conc_n, urlsession_conc_n):
    def m(key, field):
        return median([row[field] for row in rows[key]])

    def rate(key):
        return median([row["requests"] / row["seconds"] for row in rows[key]])

    openssl_rs = median([r for r, _ in rows["openssl"]])
    openssl_es = median([e for _, e in rows["openssl"]])
    cli_wall = median([w for w, _ in rows["cli"]])
    curl_wall = median([w for w, _ in rows["curl_file"]])
    storm_single = m("storm", "single_ms")
    results = {
        "http_seq_vs_c": rate("lk_seq") / rate("c_seq"),
        "http_seq_vs_ahc": rate("lk_seq") / rate("ahc_seq"),
        "http_seq_vs_urlsession": rate("lk_seq") / rate("us_seq"),
        # Both on nginx's CPU (no target: the client's CPU per request in full); NaN for raw results
        # from before 2026-11-25 19:00, which have no such run.
        "http_seq_same_cpu_vs_c": rate("lk_seq_same") / rate("c_seq_same") if rows.get("lk_seq_same") else float("nan"),
        "http_conc_vs_c": rate("lk_conc") / rate("c_conc"),
        "http_conc_vs_ahc": rate("lk_conc") / rate("ahc_conc"),
        # What a client on libcurl could reach against async-http-client on this machine.
        "http_seq_c_vs_ahc": rate("c_seq") / rate("ahc_seq"),
        "http_seq_c_vs_urlsession": rate("c_seq") / rate("us_seq"),
        "http_conc_c_vs_ahc": rate("c_conc") / rate("ahc_conc"),
        "rss_mb": m("lk_conc", "rss_mb"),
        "rss_static_mb": m("lk_conc_static", "rss_mb"),
        "swift_floor_mb": m("floor", "swift_rss_mb") - m("floor", "c_rss_mb"),
        # Raw results from before 2026-11-26 afternoon have no floor with the shared runtime.
        "swift_shared_floor_mb": (m("floor", "swift_shared_rss_mb") - m("floor", "c_rss_mb")) if "swift_shared_rss_mb" in rows["floor"][0] else float("nan"),
        "save_vs_c": m("save", "loginkit_us") / m("save", "c_us"),
        "cached_token_ns": m("cached", "file_store_ns"),
        "rs256_vs_openssl": m("lk_rs", "us_per_verify") / openssl_rs,
        "es256_vs_openssl": m("lk_es", "us_per_verify") / openssl_es,
        "verify_vs_jwtkit": m("lk_rs", "verifies_per_s") / m("jk_rs", "verifies_per_s"),
        "es256_vs_jwtkit": m("lk_es", "verifies_per_s") / m("jk_es", "verifies_per_s"),
        "es256_openssl_vs_jwtkit": (1e6 / openssl_es) / m("jk_es", "verifies_per_s"),
        # Why: jwt-kit's crypto (BoringSSL) alone against OpenSSL's, both in the bench's process, and
        # what 1x would leave LoginKit for its own work (jwt-kit's whole verify less OpenSSL's bare
        # one; at or below 0: out of reach on OpenSSL). NaN for raw results from before 2026-11-26
        # 05:00, which have neither run.
        "es256_openssl_vs_boringssl": m("os_es", "us_per_verify") / m("bs_es", "us_per_verify") if rows.get("os_es") else float("nan"),
        "es256_budget_us": m("jk_es", "us_per_verify") - m("os_es", "us_per_verify") if rows.get("os_es") else float("nan"),
        "es256_own_us": m("lk_es", "us_per_verify") - m("os_es", "us_per_verify") if rows.get("os_es") else float("nan"),
        "allocs_per_verify": m("lk_rs", "allocs_per_verify"),
        "storm_requests_10": max(row["requests_10"] for row in rows["storm"]),
        "storm_requests_100": max(row["requests_100"] for row in rows["storm"]),
        "storm_requests_1000": max(row["requests_1000"] for row in rows["storm"]),
        # Raw results from before 2026-11-27 17:00 (`run.py --report`) have no 10,000 / 100,000 storm.
        "storm_requests_10000": max(row["requests_10000"] for row in rows["storm"]) if "requests_10000" in rows["storm"][0] else float("nan"),
        "storm_requests_100000": max(row["requests_100000"] for row in rows["storm"]) if "requests_100000" in rows["storm"][0] else float("nan"),
        "storm_p99_10000_vs_single": m("storm", "p99_ms_10000") / storm_single if "p99_ms_10000" in rows["storm"][0] else float("nan"),
        "storm_p99_100000_vs_single": m("storm", "p99_ms_100000") / storm_single if "p99_ms_100000" in rows["storm"][0] else float("nan"),
        "storm_memory_bytes_per_caller_10000": m("storm", "memory_bytes_per_caller_10000") if "memory_bytes_per_caller_10000" in rows["storm"][0] else float("nan"),
        "storm_memory_bytes_per_caller_100000": m("storm", "memory_bytes_per_caller_100000") if "memory_bytes_per_caller_100000" in rows["storm"][0] else float("nan"),
        "storm_p99_vs_single": m("storm", "p99_ms_1000") / storm_single,
        "storm_refresh_floor_p99_vs_single": m("storm", "refresh_floor_p99_ms_1000") / storm_single if rows["storm"][0].get("refresh_floor_p99_ms_1000") is not None else float("nan"),
        # Raw results from before 2026-11-25 (`run.py --report`) have no same-process storm.
        "storm_same_process_p99_vs_single": m("storm_same", "p99_ms_1000") / m("storm_same", "single_ms") if rows.get("storm_same") else float("nan"),
        "cli_vs_curl": cli_wall / curl_wall,
        # Raw results from before DPoP (`run.py --report`) have neither run.
        "dpop_proof_vs_openssl_sign": m("dpop_proof", "loginkit_us") / m("dpop_proof", "openssl_us") if rows.get("dpop_proof") else float("nan"),
        "authorized_request_conc_vs_plain": m("authorized", "authorized_per_s") / m("authorized", "plain_per_s") if rows.get("authorized") else float("nan"),
        "authorized_dpop_request_conc_vs_plain": m("authorized_dpop", "authorized_per_s") / m("authorized_dpop", "plain_per_s") if rows.get("authorized_dpop") else float("nan"),
    }
    # The scaling rows; NaN (and no curve) for raw results from before they were measured.
    curve = store_curve(rows)

    def at(size, field):
        return curve.get(str(size), {}).get(field, float("nan"))

    procs = store_procs_wall(rows)
    cli_store = store_cli_wall(rows)
    results.update({
        "store_token_10000_vs_1": ratio(at(10000, "token_cold_us"), at(1, "token_cold_us")),
        "store_save_10000_vs_1": ratio(at(10000, "save_us"), at(1, "save_us")),
        "store_login_10000_vs_1": ratio(at(10000, "login_us"), at(1, "login_us")),
        "store_cached_10000_vs_1": ratio(at(10000, "cached_ns"), at(1, "cached_ns")),
        "store_save_random_10000_vs_1": ratio(at(10000, "save_random_us"), at(1, "save_us")),
        "store_login_random_10000_vs_1": ratio(at(10000, "login_random_us"), at(1, "login_us")),
        "store_migration_10000_ms": at(10000, "migration_ms"),
        "store_cli_token_10000_vs_1": ratio(cli_store.get("10000"), cli_store.get("1")),
        "store_16_profiles_16_procs_vs_1": ratio(procs.get("20", {}).get("16"), procs.get("20", {}).get("1")),
        "store_16_profiles_16_procs_vs_1_0ms": ratio(procs.get("0", {}).get("16"), procs.get("0", {}).get("1")),
    })
    results.update({
        "sqlite_commit_us_1": layout_figure(rows, "sqlite", 1, 1, "commit_us_p50"),
        "sqlite_commit_us_10000": layout_figure(rows, "sqlite", 10000, 1, "commit_us_p50"),
        "sqlite_16_procs_vs_1": ratio(layout_figure(rows, "sqlite", 10000, 16, "wall_ms"), layout_figure(rows, "sqlite", 10000, 1, "wall_ms")),
        "files_commit_us_1": layout_figure(rows, "files", 1, 1, "commit_us_p50"),
        "files_commit_us_10000": layout_figure(rows, "files", 10000, 1, "commit_us_p50"),
        "files_16_procs_vs_1": ratio(layout_figure(rows, "files", 10000, 16, "wall_ms"), layout_figure(rows, "files", 10000, 1, "wall_ms")),
    })
    if curve:
        results["store_curve"] = curve
    if procs:
        results["store_procs_wall_ms"] = procs
    if cli_store:
        results["store_cli_token_ms"] = cli_store
    storm = storm_curve(rows, storm_single)
    if storm:
        results["storm_curve"] = storm
    # fleet.py's figures as it named them; the key the issue asks for is NaN when they did not run.
    fleet = (rows.get("fleet") or [None])[0]
    if fleet is not None:
        results.update({key: value for key, value in fleet.items() if key != "not_run"})
        results.setdefault("fleet_queries_per_cached_token", float("nan"))
    os.makedirs(OUTPUT, exist_ok=True)
    with open(os.path.join(OUTPUT, "results.json"), "w") as out:
        json.dump(results, out, indent=2, sort_keys=True)
        out.write("\n")

    def http_row(name, key, note=""):
        return (f"| {name} | {rate(key):,.0f} | {m(key, 'p50_us'):,.0f} | {m(key, 'p99_us'):,.0f} | "
                + (f"{m(key, 'cpu_s_per_10k'):.2f}" if "cpu_s_per_10k" in rows[key][0] else "—")
                + f" | {m(key, 'rss_mb'):.1f} |" + (f" {note}" if note else ""))

    def verdict(ok):
        return "met" if ok else "**missed**"

    lines = []
    lines.append(f"Run {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} on {cpu_name()} "
                 f"({os.cpu_count()} cores), {platform.system()} {platform.release()}; {versions()}; "
                 f"{ROUNDS} interleaved rounds, medians; scale {SCALE}.")
    lines.append("")
    lines.append("HTTP POST of a token-sized JSON body to nginx on 127.0.0.1 (keep-alive):")
    lines.append("")
    lines.append("| client | req/s | p50 µs | p99 µs | CPU s / 10k req | peak RSS MB |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    placement = f"nginx on CPU {SERVER_CPU}, each client on CPU {CLIENT_CPU}" if SERVER_CPU is not None else "unpinned: one CPU"
    lines.append(f"| **sequential, one connection** ({seq_n:,} requests; {placement}) | | | | | |")
    lines.append(http_row("C libcurl easy loop", "c_seq"))
    lines.append(http_row("LoginKit CurlHTTPClient (caller prefers its task executor)", "lk_seq"))
    if rows.get("lkg_seq"):
        lines.append(http_row("LoginKit CurlHTTPClient (caller on the global executor)", "lkg_seq"))
    lines.append(http_row("async-http-client", "ahc_seq"))
    lines.append(http_row("URLSession", "us_seq"))
    same_core = bool(rows.get("c_seq_same")) and bool(rows.get("lk_seq_same"))
    if same_core:
        lines.append(f"| **sequential, the client on nginx's CPU** ({seq_n:,} requests; no cross-CPU wake-ups) | | | | | |")
        lines.append(http_row("C libcurl easy loop", "c_seq_same"))
        lines.append(http_row("LoginKit CurlHTTPClient (caller prefers its task executor)", "lk_seq_same"))
    lines.append(f"| **64 in flight** ({conc_n:,} requests; URLSession {urlsession_conc_n:,}) | | | | | |")
    lines.append(http_row("C libcurl multi", "c_conc"))
    lines.append(http_row("LoginKit CurlHTTPClient (tasks on the global executor)", "lk_conc"))
    lines.append(http_row("async-http-client (pool raised to 64 per host)", "ahc_conc"))
    lines.append(http_row("URLSession (httpMaximumConnectionsPerHost 64)", "us_conc"))
    lines.append("")
    lines.append("| comparison | LoginKit | peer | ratio | target | |")
    lines.append("| --- | ---: | ---: | ---: | --- | --- |")
    r = results
    lines.append(f"| HTTP sequential vs C libcurl (req/s) | {rate('lk_seq'):,.0f} | {rate('c_seq'):,.0f} | {r['http_seq_vs_c']:.2f}× | ≥ 0.9× | {verdict(r['http_seq_vs_c'] >= 0.9)} |")
    if same_core:
        lines.append(f"| … the same with both on nginx's CPU (each request's time is then mostly the client's CPU) | {rate('lk_seq_same'):,.0f} | {rate('c_seq_same'):,.0f} | {rate('lk_seq_same') / rate('c_seq_same'):.2f}× | | |")
    lines.append(f"| HTTP sequential vs async-http-client | {rate('lk_seq'):,.0f} | {rate('ahc_seq'):,.0f} | {r['http_seq_vs_ahc']:.2f}× | ≥ 2× | {verdict(r['http_seq_vs_ahc'] >= 2)} |")
    lines.append(f"| … the ceiling here: the C libcurl loop vs async-http-client (LoginKit runs on libcurl) | {rate('c_seq'):,.0f} | {rate('ahc_seq'):,.0f} | {r['http_seq_c_vs_ahc']:.2f}× | | |")
    lines.append(f"| HTTP sequential vs URLSession | {rate('lk_seq'):,.0f} | {rate('us_seq'):,.0f} | {r['http_seq_vs_urlsession']:.2f}× | ≥ 3.5× | {verdict(r['http_seq_vs_urlsession'] >= 3.5)} |")
    lines.append(f"| … the ceiling here: the C libcurl loop vs URLSession (LoginKit runs on libcurl) | {rate('c_seq'):,.0f} | {rate('us_seq'):,.0f} | {r['http_seq_c_vs_urlsession']:.2f}× | | |")
    lines.append(f"| HTTP 64 in flight vs C libcurl multi | {rate('lk_conc'):,.0f} | {rate('c_conc'):,.0f} | {r['http_conc_vs_c']:.2f}× | ≥ 0.85× | {verdict(r['http_conc_vs_c'] >= 0.85)} |")
    lines.append(f"| HTTP 64 in flight vs async-http-client (64 pool) | {rate('lk_conc'):,.0f} | {rate('ahc_conc'):,.0f} | {r['http_conc_vs_ahc']:.2f}× | ≥ 2× | {verdict(r['http_conc_vs_ahc'] >= 2)} |")
    lines.append(f"| … the ceiling here: C libcurl multi vs async-http-client (LoginKit runs on libcurl) | {rate('c_conc'):,.0f} | {rate('ahc_conc'):,.0f} | {r['http_conc_c_vs_ahc']:.2f}× | | |")
    lines.append(f"| peak RSS, LoginKit HTTP 64 in flight (a process linking LoginKit alone) | {r['rss_mb']:.1f} MB | | | < 20 MB | {verdict(r['rss_mb'] < 20)} |")
    if r["swift_shared_floor_mb"] == r["swift_shared_floor_mb"]:  # not NaN
        shared_floor = m("c_conc", "rss_mb") + r["swift_shared_floor_mb"]
        lines.append(f"| … the floor with the Swift runtime as shared libraries, as `swift build` links it: C libcurl multi + the smallest such Swift process less a C one ({m('c_conc', 'rss_mb'):.1f} + {r['swift_shared_floor_mb']:.1f} MB) | {r['rss_mb']:.1f} MB | {shared_floor:.1f} MB | {r['rss_mb'] / shared_floor:.2f}× | | {'the floor itself misses 20 MB' if shared_floor >= 20 else ''} |")
    floor = m("c_conc", "rss_mb") + r["swift_floor_mb"]
    lines.append(f"| … the same, Swift runtime linked statically, vs the floor: C libcurl multi + the smallest Swift process less a C one ({m('c_conc', 'rss_mb'):.1f} + {r['swift_floor_mb']:.1f} MB) | {r['rss_static_mb']:.1f} MB | {floor:.1f} MB | {r['rss_static_mb'] / floor:.2f}× | < 20 MB | {verdict(r['rss_static_mb'] < 20)} |")
    lines.append(f"| durable save vs C write+fsync+rename+dir fsync (µs) | {m('save', 'loginkit_us'):.0f} | {m('save', 'c_us'):.0f} | {r['save_vs_c']:.2f}× | ≤ 1.15× | {verdict(r['save_vs_c'] <= 1.15)} |")
    lines.append(f"| durable save vs Foundation `Data.write(.atomic)` (µs; no fsync) | {m('save', 'loginkit_us'):.0f} | {m('save', 'foundation_atomic_us'):.0f} | {m('save', 'loginkit_us') / m('save', 'foundation_atomic_us'):.2f}× | — | |")
    lines.append(f"| cached `validIDToken()` (file store; ns/call) | {m('cached', 'file_store_ns'):,.0f} | {m('cached', 'bare_actor_ns'):,.0f} (bare actor call) | {m('cached', 'file_store_ns') / m('cached', 'bare_actor_ns'):.1f}× | ≤ 250 ns | {verdict(m('cached', 'file_store_ns') <= 250)} |")
    lines.append(f"| cached `validIDToken()` (memory store; ns/call) | {m('cached', 'memory_store_ns'):,.0f} | {m('cached', 'bare_actor_ns'):,.0f} | {m('cached', 'memory_store_ns') / m('cached', 'bare_actor_ns'):.1f}× | — | |")
    lines.append(f"| RS256 verify vs `openssl speed` (µs) | {m('lk_rs', 'us_per_verify'):.1f} | {openssl_rs:.1f} | {r['rs256_vs_openssl']:.2f}× | ≤ 1.5× | {verdict(r['rs256_vs_openssl'] <= 1.5)} |")
    lines.append(f"| ES256 verify vs `openssl speed` (µs) | {m('lk_es', 'us_per_verify'):.1f} | {openssl_es:.1f} | {r['es256_vs_openssl']:.2f}× | ≤ 1.2× | {verdict(r['es256_vs_openssl'] <= 1.2)} |")
    lines.append(f"| RS256 verifies/s vs jwt-kit | {m('lk_rs', 'verifies_per_s'):,.0f} | {m('jk_rs', 'verifies_per_s'):,.0f} | {r['verify_vs_jwtkit']:.2f}× | > 1× | {verdict(r['verify_vs_jwtkit'] > 1)} |")
    lines.append(f"| ES256 verifies/s vs jwt-kit | {m('lk_es', 'verifies_per_s'):,.0f} | {m('jk_es', 'verifies_per_s'):,.0f} | {r['es256_vs_jwtkit']:.2f}× | > 1× | {verdict(r['es256_vs_jwtkit'] > 1)} |")
    lines.append(f"| … the ceiling here: a bare OpenSSL P-256 verify (`openssl speed`) vs jwt-kit (LoginKit verifies with OpenSSL) | {1e6 / openssl_es:,.0f} | {m('jk_es', 'verifies_per_s'):,.0f} | {r['es256_openssl_vs_jwtkit']:.2f}× | | |")
    if rows.get("os_es"):
        os_es = m("os_es", "us_per_verify")
        lines.append(f"| … the same bound in the bench's process: OpenSSL's P-256 verify alone (a C loop, as `openssl speed` runs it) vs jwt-kit (µs) | {os_es:.1f} | {m('jk_es', 'us_per_verify'):.1f} | {m('jk_es', 'us_per_verify') / os_es:.2f}× | | |")
        lines.append(f"| … why: jwt-kit's crypto, BoringSSL's P-256 verify alone (swift-crypto, the digest computed once), vs OpenSSL's alone (µs) | {m('bs_es', 'us_per_verify'):.1f} | {os_es:.1f} | OpenSSL {r['es256_openssl_vs_boringssl']:.2f}× slower | | |")
        budget = r["es256_budget_us"]
        reach = "out of reach on OpenSSL" if budget <= 0 else (
            "LoginKit's own work fits" if r["es256_own_us"] <= budget else "LoginKit's own work does not fit")
        lines.append(f"| … so 1× leaves LoginKit's own work per verify (jwt-kit less OpenSSL's verify alone) vs what it takes (LoginKit less OpenSSL's verify alone; of which hashing the signing input, {m('bs_es', 'sha256_signing_input_us'):.2f}) (µs) | {r['es256_own_us']:.1f} | {budget:.1f} | | | {reach} |")
    lines.append(f"| allocations per RS256 verify (jwt-kit: {m('jk_rs', 'allocs_per_verify'):.0f}) | {r['allocs_per_verify']:.0f} | {m('jk_rs', 'allocs_per_verify'):.0f} | | ≤ 30 | {verdict(r['allocs_per_verify'] <= 30)} |")
    if rows.get("dpop_proof"):
        lines.append(f"| one DPoP proof (ES256: claims, `jti`, `ath`, signature) vs OpenSSL's ES256 signing of a same-size input, in the same process (µs) | {m('dpop_proof', 'loginkit_us'):.1f} | {m('dpop_proof', 'openssl_us'):.1f} | {r['dpop_proof_vs_openssl_sign']:.2f}× | ≤ 1.3× | {verdict(r['dpop_proof_vs_openssl_sign'] <= 1.3)} |")
    if rows.get("authorized"):
        lines.append(f"| authorized request, 64 in flight: `AuthService.send` (a bearer profile: the token and the header) vs a plain `CurlHTTPClient.send` of the same requests, headers made beforehand (req/s; dev server in the process) | {m('authorized', 'authorized_per_s'):,.0f} | {m('authorized', 'plain_per_s'):,.0f} | {r['authorized_request_conc_vs_plain']:.2f}× | ≥ 0.9× | {verdict(r['authorized_request_conc_vs_plain'] >= 0.9)} |")
    if rows.get("authorized_dpop"):
        lines.append(f"| … the same with a DPoP-bound profile (a fresh ES256 proof per request, the row above it; the server checks the proof for both peers) | {m('authorized_dpop', 'authorized_per_s'):,.0f} | {m('authorized_dpop', 'plain_per_s'):,.0f} | {r['authorized_dpop_request_conc_vs_plain']:.2f}× | ≥ 0.9× | {verdict(r['authorized_dpop_request_conc_vs_plain'] >= 0.9)} |")
    storm_ok = all(r[f"storm_requests_{n}"] == 1 for n in (10, 100, 1000))
    lines.append(f"| expiry storm: upstream requests at 10 / 100 / 1000 callers | {r['storm_requests_10']:.0f} / {r['storm_requests_100']:.0f} / {r['storm_requests_1000']:.0f} | | | 1 each | {verdict(storm_ok)} |")
    lines.append(f"| expiry storm: waiter p99 at 1000 vs one uncontended refresh (ms; the provider in its own process) | {m('storm', 'p99_ms_1000'):.2f} | {storm_single:.2f} | {r['storm_p99_vs_single']:.2f}× | ≤ 2× | {verdict(r['storm_p99_vs_single'] <= 2)} |")
    floor_p99 = m("storm", "floor_p99_ms_1000")
    lines.append(f"| … the floor: 1000 bare tasks waiting for one event that fires after that refresh time (p99 ms; vs the refresh) | {floor_p99:.2f} | {storm_single:.2f} | {floor_p99 / storm_single:.2f}× | | |")
    lines.append(f"| … LoginKit's storm p99 vs that floor | {m('storm', 'p99_ms_1000'):.2f} | {floor_p99:.2f} | {m('storm', 'p99_ms_1000') / floor_p99:.2f}× | | |")
    # Raw results from before 2026-11-26 have no cancellable floor.
    if rows["storm"][0].get("cancellable_floor_p99_ms_1000") is not None:
        cancellable_p99 = m("storm", "cancellable_floor_p99_ms_1000")
        lines.append(f"| … the floor with waits that honour cancellation, as LoginKit's must (a cancellation handler per wait; p99 ms; vs the refresh) | {cancellable_p99:.2f} | {storm_single:.2f} | {cancellable_p99 / storm_single:.2f}× | | |")
        lines.append(f"| … LoginKit's storm p99 vs that floor; CPU µs per caller vs per cancellable task | {m('storm', 'p99_ms_1000'):.2f}; {m('storm', 'cpu_us_per_caller_1000'):.1f} | {cancellable_p99:.2f}; {m('storm', 'cancellable_floor_cpu_us_per_task'):.1f} | {m('storm', 'p99_ms_1000') / cancellable_p99:.2f}×; {m('storm', 'cpu_us_per_caller_1000') / m('storm', 'cancellable_floor_cpu_us_per_task'):.2f}× | | |")
    # Raw results from before 2026-11-26 (03:00) have no refresh floor.
    if rows["storm"][0].get("refresh_floor_p99_ms_1000") is not None:
        refresh_p99 = m("storm", "refresh_floor_p99_ms_1000")
        lines.append(f"| … the floor whose event is fired by the refresh's own work (store read, the provider's refresh, the durable save; on the transport's executor), so that it shares the two cores with the 1000 cancellable waiters and the provider (p99 ms; vs the refresh) | {refresh_p99:.2f} | {storm_single:.2f} | {refresh_p99 / storm_single:.2f}× | | |")
        lines.append(f"| … LoginKit's storm p99 vs that floor | {m('storm', 'p99_ms_1000'):.2f} | {refresh_p99:.2f} | {m('storm', 'p99_ms_1000') / refresh_p99:.2f}× | ≤ 1.25× | {verdict(m('storm', 'p99_ms_1000') / refresh_p99 <= 1.25)} |")
    if rows["storm"][0].get("cpu_us_per_caller_1000") is not None:
        lines.append(f"| … CPU µs per caller at 1000 (this process, the refresh's share included) vs per bare task of the floor | {m('storm', 'cpu_us_per_caller_1000'):.1f} | {m('storm', 'floor_cpu_us_per_task'):.1f} | {m('storm', 'cpu_us_per_caller_1000') / m('storm', 'floor_cpu_us_per_task'):.2f}× | | |")
        lines.append(f"| … allocations per caller at 1000 (the refresh's included) vs per bare task of the floor | {m('storm', 'allocs_per_caller_1000'):.1f} | {m('storm', 'floor_allocs_per_task'):.1f} | | | |")
    if rows.get("storm_same"):
        lines.append(f"| … the same storm with the provider in the bench's process (its handlers queue behind the callers on the same two pool threads; ms) | {m('storm_same', 'p99_ms_1000'):.2f} | {m('storm_same', 'single_ms'):.2f} | {r['storm_same_process_p99_vs_single']:.2f}× | | |")
    if "requests_10000" in rows["storm"][0]:
        big_ok = r["storm_requests_10000"] == 1 and r["storm_requests_100000"] == 1
        lines.append(f"| expiry storm: upstream requests at 10,000 / 100,000 callers | {r['storm_requests_10000']:.0f} / {r['storm_requests_100000']:.0f} | | | 1 each | {verdict(big_ok)} |")
        lines.append(f"| expiry storm: waiter p99 at 10,000 vs one uncontended refresh (ms) | {m('storm', 'p99_ms_10000'):.2f} | {storm_single:.2f} | {r['storm_p99_10000_vs_single']:.2f}× | ≤ 2× | {verdict(r['storm_p99_10000_vs_single'] <= 2)} |")
        if "cancellable_floor_p99_ms_10000" in rows["storm"][0]:
            floor_10000 = m("storm", "cancellable_floor_p99_ms_10000")
            lines.append(f"| … the floor at 10,000: bare tasks each waiting (cancellably) for one event fired after that refresh time (p99 ms; vs the refresh) | {floor_10000:.2f} | {storm_single:.2f} | {floor_10000 / storm_single:.2f}× | | |")
            lines.append(f"| … LoginKit's p99 at 10,000 vs that floor | {m('storm', 'p99_ms_10000'):.2f} | {floor_10000:.2f} | {m('storm', 'p99_ms_10000') / floor_10000:.2f}× | | |")
        lines.append(f"| … at 100,000 (ms) | {m('storm', 'p99_ms_100000'):.2f} | {storm_single:.2f} | {r['storm_p99_100000_vs_single']:.2f}× | | |")
        lines.append(f"| expiry storm: resident memory per waiting caller at 10,000 / 100,000 (bytes, the peak over the resident size before) | {r['storm_memory_bytes_per_caller_10000']:.0f} / {r['storm_memory_bytes_per_caller_100000']:.0f} | | | | |")
        lines.append(f"| … CPU µs and allocations per caller at 10,000 / 100,000 | {m('storm', 'cpu_us_per_caller_10000'):.1f}, {m('storm', 'allocs_per_caller_10000'):.1f} / {m('storm', 'cpu_us_per_caller_100000'):.1f}, {m('storm', 'allocs_per_caller_100000'):.1f} | | | | |")
    lines.append(f"| expiry storm: waiter p50 / p99 at 10 and 100 callers (ms) | {m('storm', 'p50_ms_10'):.2f} / {m('storm', 'p99_ms_10'):.2f}; {m('storm', 'p50_ms_100'):.2f} / {m('storm', 'p99_ms_100'):.2f} | | | | |")
    cli_rss = median([rss for _, rss in rows["cli"]])
    curl_rss = median([rss for _, rss in rows["curl_file"]])
    lines.append(f"| `loginkit token` (cached) vs `curl -s file://…` (ms wall; RSS {cli_rss:.1f} vs {curl_rss:.1f} MB) | {cli_wall * 1e3:.1f} | {curl_wall * 1e3:.1f} | {r['cli_vs_curl']:.2f}× | ≤ 1.8× | {verdict(r['cli_vs_curl'] <= 1.8)} |")
    lines.extend(store_lines(r, curve, at, procs, cli_store, verdict))
    lines.extend(layout_lines(rows, r))
    lines.extend(fleet_lines(fleet, verdict))
    table = "\n".join(lines)
    print(table)
    svg = scaling_plot(results)
    with open(os.path.join(OUTPUT, "benchmarks.md"), "w") as out:
        out.write(table + "\n" + ("\n![scaling](scaling.svg)\n" if svg else ""))
    if os.environ.get("LOGINKIT_BENCH_UPDATE_DOCS") == "1":
        if svg:
            shutil.copyfile(svg, os.path.join(ROOT, "docs", "benchmarks-scaling.svg"))
        write_docs(table + ("\n\n![scaling](benchmarks-scaling.svg)" if svg else ""))
        log("bench: wrote docs/benchmarks.md" + (" and docs/benchmarks-scaling.svg" if svg else ""))
    log(f"bench: wrote {os.path.relpath(OUTPUT, ROOT)}/benchmarks.md, results.json" + (" and scaling.svg" if svg else ""))


def store_lines(r, curve, at, procs, cli_store, verdict):
    """The table's rows for the file store at 1 to 10,000 profiles and for processes on different
    profiles; none for raw results without those runs."""
    lines = []
    if curve:
        lines.append(f"| file store: a token call on one profile as a process start makes it (a new store, one profile read) at 10,000 profiles vs 1 (µs) | {number(at(10000, 'token_cold_us'))} | {number(at(1, 'token_cold_us'))} | {r['store_token_10000_vs_1']:.2f}× | ≤ 1.25× | {verdict(r['store_token_10000_vs_1'] <= 1.25)} |")
        lines.append(f"| file store: a durable save of one profile (a warm store, the same profile each time) at 10,000 profiles vs 1 (µs) | {number(at(10000, 'save_us'))} | {number(at(1, 'save_us'))} | {r['store_save_10000_vs_1']:.2f}× | ≤ 1.25× | {verdict(r['store_save_10000_vs_1'] <= 1.25)} |")
        lines.append(f"| file store: a login on one profile (a new `AuthService`, a provider that answers at once; the same profile each time) at 10,000 profiles vs 1 (µs) | {number(at(10000, 'login_us'))} | {number(at(1, 'login_us'))} | {r['store_login_10000_vs_1']:.2f}× | ≤ 1.25× | {verdict(r['store_login_10000_vs_1'] <= 1.25)} |")
        if r["store_save_random_10000_vs_1"] == r["store_save_random_10000_vs_1"]:
            lines.append(f"| … a save and a login on a random profile of the 10,000 each time (files not in the caches: the working set, not the store's size) vs one profile of a 1-profile store (µs) | {number(at(10000, 'save_random_us'))}; {number(at(10000, 'login_random_us'))} | {number(at(1, 'save_us'))}; {number(at(1, 'login_us'))} | {r['store_save_random_10000_vs_1']:.2f}×; {r['store_login_random_10000_vs_1']:.2f}× | | |")
        lines.append(f"| … cached `validIDToken()` on one profile at 10,000 profiles vs 1 (ns) | {number(at(10000, 'cached_ns'))} | {number(at(1, 'cached_ns'))} | {r['store_cached_10000_vs_1']:.2f}× | | |")
        sizes = [size for size in curve]
        def series(field):
            return " / ".join(number(curve[size].get(field)) for size in sizes)
        lines.append(f"| … at {' / '.join(f'{int(size):,}' for size in sizes)} profiles: token call; save; login (µs); cached token (ns) | {series('token_cold_us')}; {series('save_us')}; {series('login_us')}; {series('cached_ns')} | | | | |")
        if r["store_migration_10000_ms"] == r["store_migration_10000_ms"]:
            lines.append(f"| file store: migrating a 10,000-profile single-file store (format 1) to one file per profile, at its first save (ms) | {number(r['store_migration_10000_ms'])} | | | | |")
    if cli_store:
        lines.append(f"| `loginkit token --access` on one profile at 10,000 profiles vs 1 (ms wall) | {cli_store.get('10000', float('nan')):.1f} | {cli_store.get('1', float('nan')):.1f} | {r['store_cli_token_10000_vs_1']:.2f}× | | |")
    if procs:
        at_20, at_0 = procs.get("20", {}), procs.get("0", {})
        lines.append(f"| 16 processes each refreshing its own profile of one file store vs 1 process ({STORE_REFRESHES} refreshes each, a 20 ms round trip to the provider under the profile's lock; ms wall) | {number(at_20.get('16'))} | {number(at_20.get('1'))} | {r['store_16_profiles_16_procs_vs_1']:.2f}× | ≤ 2× | {verdict(r['store_16_profiles_16_procs_vs_1'] <= 2)} |")
        lines.append(f"| … the same without the round trip (the store's own work alone: read, durable write; ms wall) | {number(at_0.get('16'))} | {number(at_0.get('1'))} | {r['store_16_profiles_16_procs_vs_1_0ms']:.2f}× | | |")
    return lines


def layout_lines(rows, r):
    """The table's rows for the storage layout's floors (information, no target); one "not run" row
    when sqlite_commit failed; none for raw results from before it was measured."""
    runs = rows.get("storage_layout")
    if not runs:
        return []
    if "not_run" in runs[0]:
        return [f"| storage layout floor (C): SQLite vs a file per profile | | | | | not run: {cell(runs[0]['not_run'])} |"]
    return [
        f"| storage layout floor (C): a profile's durable commit, p50 at 1 / 10,000 profiles (µs): a file per profile vs SQLite (WAL, synchronous=FULL) | {number(r['files_commit_us_1'])} / {number(r['files_commit_us_10000'])} | {number(r['sqlite_commit_us_1'])} / {number(r['sqlite_commit_us_10000'])} | | | |",
        f"| … 16 processes on 16 profiles vs 1 process at 10,000 profiles (wall): a file per profile vs SQLite | {number(r['files_16_procs_vs_1'])}× | {number(r['sqlite_16_procs_vs_1'])}× | | | |",
        f"| … there, the longest single commit (ms; SQLite's waiters sleep in its busy handler): a file per profile vs SQLite | {number(layout_figure(rows, 'files', 10000, 16, 'commit_us_max') / 1e3)} | {number(layout_figure(rows, 'sqlite', 10000, 16, 'commit_us_max') / 1e3)} | | | |",
    ]


# fleet.py's keys that fleet_lines() shows in rows of their own; every other number it returns gets
# a row named after its key.
FLEET_NAMED = ("fleet_queries_per_cached_token", "fleet_queries_per_refresh", "fleet_propagation_p50_ms_100", "fleet_propagation_p99_ms_100",
               "fleet_propagation_curve")


def fleet_lines(fleet, verdict):
    """The table's rows for the fleet store under load (fleet.py); one "not run" row when it could
    not run; none for raw results from before it was measured."""
    if fleet is None:
        return []
    if "not_run" in fleet:
        return [f"| fleet store (PostgreSQL): queries per cached token call while listening | | | | 0 | not run: {cell(fleet['not_run'])} |"]
    lines = []
    cached = fleet.get("fleet_queries_per_cached_token")
    lines.append(f"| fleet store (PostgreSQL): queries per cached token call while listening | {number(cached)} | | | 0 | {verdict(cached == 0)} |")
    if "fleet_queries_per_refresh" in fleet:
        lines.append(f"| … queries per refresh | {number(fleet['fleet_queries_per_refresh'])} | | | | |")
    if "fleet_propagation_p50_ms_100" in fleet or "fleet_propagation_p99_ms_100" in fleet:
        lines.append(f"| fleet store: a change's propagation to 100 stores, p50 / p99 (ms) | {number(fleet.get('fleet_propagation_p50_ms_100'))} / {number(fleet.get('fleet_propagation_p99_ms_100'))} | | | | |")
    curve = fleet.get("fleet_propagation_curve")
    if isinstance(curve, dict) and curve:
        hosts = sorted(curve, key=lambda key: float(key))
        def quantile(point, name):
            return point.get(name, point.get(name + "_ms")) if isinstance(point, dict) else None
        figures = "; ".join(f"{number(quantile(curve[host], 'p50'))} / {number(quantile(curve[host], 'p99'))}" for host in hosts)
        lines.append(f"| … at {' / '.join(f'{float(host):,.0f}' for host in hosts)} stores, p50 / p99 (ms) | {figures} | | | | |")
    def figure(key):
        value = fleet.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    rows = [
        ("… statements a listening host sends per minute while idle (its heartbeat)", "fleet_queries_per_host_minute_idle"),
        ("… a cached token call served by a listening store (ns)", "fleet_cached_token_ns"),
        ("… a refresh through the fleet store (ms; statements in it)", "fleet_refresh_ms", "fleet_queries_in_refresh_call"),
        ("… a change's save, and its arrival at a host's `AuthService` at 100 stores, p99 (ms)", "fleet_propagation_save_ms_100", "fleet_propagation_served_p99_ms_100"),
    ]
    for label, *keys in rows:
        values = [figure(key) for key in keys]
        if all(value is not None for value in values):
            lines.append(f"| {label} | {'; '.join(number(value) for value in values)} | | | | |")
    sim = {key[len("fleet_sim_"):]: figure(key) for key in fleet if key.startswith("fleet_sim_") and figure(key) is not None}
    if sim:
        hosts, profiles = sim.get("hosts"), sim.get("profiles")
        size = f"{number(hosts)} hosts × {number(profiles)} profiles" + (" (scaled down)" if sim.get("scaled") else "")
        lines.append(f"| fleet simulation, {size}, one process, {number(sim.get('seconds'))} s, {number(sim.get('calls_per_s'))} token calls/s on random (host, profile), tokens of {number(sim.get('token_lifetime_s'))} s: "
                     f"statements per token call; token call p50 / p99 (ms) | {number(sim.get('statements_per_token_call'))}; {number(sim.get('token_p50_ms'))} / {number(sim.get('token_p99_ms'))} | | | | |")
        lines.append(f"| … PostgreSQL's CPU (% of one core); statements/s; connections per host (max); refreshes; errors | "
                     f"{number(sim.get('server_cpu_percent'))}; {number(sim.get('statements_per_s'))}; {number(sim.get('connections_per_host'))} ({number(sim.get('connections_per_host_max'))}); {number(sim.get('refreshes'))}; {number(sim.get('errors'))} | | | | |")
        lines.append(f"| … the bench process (every host's store and `AuthService`s, {number(sim.get('auth_services'))} of them): CPU % of one core; RSS MB; how late the fixed-rate calls ran, p99 (ms) | "
                     f"{number(sim.get('bench_cpu_percent'))}; {number(sim.get('rss_mb'))}; {number(sim.get('lateness_p99_ms'))} | | | | |")
    if fleet.get("fleet_pg_fsync_off"):
        lines.append("| … PostgreSQL here: the test cluster (`fsync` and `synchronous_commit` off), statements counted by `pg_stat_statements`, sharing the two cores with every host | | | | | |")
    return lines


def scaling_plot(results):
    """Draws the scaling curves (plot.py) into .build/bench/scaling.svg; its path, or None when
    there is nothing to draw or drawing failed (the table is written either way)."""
    try:
        sys.dont_write_bytecode = True  # no __pycache__ left in Benchmarks/
        if BENCH not in sys.path:
            sys.path.insert(0, BENCH)
        import plot
        path = os.path.join(OUTPUT, "scaling.svg")
        return path if plot.write_svg(results, path) else None
    except Exception as error:
        log(f"bench: the scaling plot failed: {type(error).__name__}: {error}")
        return None


def cpu_name():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions():
    def first_line(command):
        try:
            return subprocess.run(command, capture_output=True, text=True).stdout.splitlines()[0].strip()
        except (OSError, IndexError):
            return "?"
    swift = first_line(["swift", "--version"])
    curl = first_line(["curl", "--version"]).split(" ")[1] if first_line(["curl", "--version"]) != "?" else "?"
    nginx = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip().replace("nginx version: ", "")
    openssl = first_line(["openssl", "version"])
    return f"{swift}; libcurl {curl}; {nginx}; {openssl}; async-http-client 1.37.0, jwt-kit 5.8.0"


def write_docs(table):
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    with open(path) as doc:
        text = doc.read()
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    if begin not in text or end not in text:
        raise SystemExit("bench: docs/benchmarks.md lacks the bench:begin/bench:end markers")
    before, rest = text.split(begin, 1)
    _, after = rest.split(end, 1)
    with open(path, "w") as doc:
        doc.write(before + begin + "\n" + table + "\n" + end + after)


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        with open(os.path.join(BENCH, ".build-c", "raw.json")) as raw:
            saved = json.load(raw)
        report(saved["rows"], *saved["counts"])
    else:
        main()
