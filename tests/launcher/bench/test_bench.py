#!/usr/bin/env python3
"""test_bench.py — ddprun-bench end to end under real mpirun.

MPI backend (suite 'bench', every build):
  test_bench.py sweep NP     every collective x every dtype (and every op) at NP ranks: exit 0,
                             #wrong 0 in every row, table layout, busbw factors, footer, JSON keys
  test_bench.py corrupt      a planted corruption (--corrupt RANK) shows in #wrong, the footer
                             says FAILED, and the exit status is non-zero
  test_bench.py usage        bad flags give exit 2 and a clear message printed once; --backend
                             nccl without a usable GPU fails clearly (exit 2 in a build without
                             CUDA); topo reports this machine's cores, NUMA nodes and GPUs
  test_bench.py abort        a rank failing mid-sweep (--fail RANK) ends the whole job promptly,
                             non-zero, naming the rank, while the other ranks wait in a collective
NCCL backend on emulated GPUs (suite 'nccl', emulated build only):
  test_bench.py nccl-sweep NP    as sweep, with --backend nccl and DDP_CUDA_EMU_DEVICES=NP; the
                                 rank table names each rank's emulated GPU and backend nccl
  test_bench.py nccl-corrupt     as corrupt, with --backend nccl
  test_bench.py nccl-topo        topo lists the GPUs, a P2P matrix, the CUDA and NCCL versions
  test_bench.py nccl-errors      no GPU / fewer GPUs than ranks fail clearly; auto picks nccl when
                                 every rank has a GPU; a stalled rank ends the job within -T; a
                                 failing rank (--fail) ends the job; so does one whose own part
                                 of the communicator's set-up fails (no rank waits for it)

Expected values (column names, busbw factors, footer wording, versions from the installed CUDA
and NCCL headers, the emulator's documented P2P attributes) come from sources written here or
outside the program, never from the program's own output. Environment: DDPRUN_BENCH (the
program), DDP_BENCH_GPU_BUILD (none, nvcc or emulated), mpirun on PATH with the OMPI_* settings
from tests/meson.build."""
import concurrent.futures
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

BENCH = os.environ.get("DDPRUN_BENCH", "launcher/ddprun-bench")
GPU_BUILD = os.environ.get("DDP_BENCH_GPU_BUILD", "none")
CUDA_INCLUDE = "/usr/local/cuda/include"
EMU_GPU_NAME = "CUDA emulator (CPU)"  # tests/cudaemu/cudart_device.cpp
ROW = re.compile(r"^\s+\d+\s")  # table rows; libraries (NCCL) may print other lines to stdout
COLLS = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"]
REDUCTIONS = {"allreduce", "reducescatter", "reduce"}
BLOCKS = {"allgather", "reducescatter", "alltoall"}
ROOTED = {"broadcast", "reduce"}
DTYPE_SIZE = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "int32": 4, "int8": 1, "uint8": 1,
              "int64": 8, "uint64": 8}
OPS = ["sum", "prod", "min", "max", "avg"]
COLUMNS = ["size(B)", "count(elements)", "type", "redop", "root"] + \
    ["time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"] * 2

failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def busbw_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in BLOCKS:
        return (n - 1) / n
    return 1.0


def mpirun(np_, args, env=None, timeout=300, rank_env=None):
    """(returncode, stdout, stderr); a run that outlives timeout counts as a hang (rc None) and is
    ended with SIGTERM, which mpirun passes on to the ranks (SIGKILL would orphan them).
    rank_env: {rank: {VAR: value}}, set for those ranks alone (mpirun's MPMD form)."""
    cmd = ["mpirun", "-np", str(np_), BENCH] + args
    if rank_env:
        cmd = ["mpirun"]
        for r in range(np_):
            cmd += ["-np", "1"] + [x for k, v in rank_env.get(r, {}).items() for x in ("-x", "%s=%s" % (k, v))]
            cmd += [BENCH] + args + ([":"] if r < np_ - 1 else [])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **(env or {})))
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        return None, out, err


def run(np_, args, env=None):
    with tempfile.TemporaryDirectory() as tmp:
        jpath = os.path.join(tmp, "out.json")
        rc, out, err = mpirun(np_, args + ["-J", jpath], env)
        data = None
        if os.path.exists(jpath):
            with open(jpath) as f:
                data = json.load(f)
        return subprocess.CompletedProcess(args, rc, out, err), data


def emu_env(gpus):
    return {"DDP_CUDA_EMU_DEVICES": str(gpus)}


def backend_args(backend, np_):
    """Flags and environment that make --backend auto land on `backend`: nccl on NP emulated GPUs;
    mpi everywhere (the emulated build then hides its GPUs, so auto is what is exercised)."""
    if backend == "nccl":
        return ["--backend", "nccl"], emu_env(np_)
    return [], emu_env(0) if GPU_BUILD == "emulated" else None


def parse_table(out):
    """(header columns, rows as lists of fields, footer lines)"""
    header, rows, footer = None, [], []
    for line in out.splitlines():
        if line.startswith("#") and "size(B)" in line:
            header = line[1:].split()
        elif line.startswith("# Out of bounds") or line.startswith("# Avg bus"):
            footer.append(line)
        elif ROW.match(line):
            rows.append(line.split())
    return header, rows, footer


def device_pattern(backend, rank):
    """What the rank table says a rank's buffers live on: the host, or (one host, one GPU per
    rank) the emulated GPU whose index is the rank's, with its PCI bus id."""
    if backend == "mpi":
        return "cpu"
    return r"cuda:%d \[[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.0\] %s" % (rank, re.escape(EMU_GPU_NAME))


def check_layout(tag, coll, np_, p, data, dtypes, ops, root, backend="mpi"):
    out = p.stdout
    check(p.returncode == 0, "%s: exit %s, stderr: %s" % (tag, p.returncode, p.stderr[-500:]))
    header, rows, footer = parse_table(out)
    check(header == COLUMNS, "%s: header columns %s" % (tag, header))
    check(re.search(r"^# ddprun-bench %s .* backend: %s$" % (coll, backend), out, re.M), "%s: first line" % tag)
    for r in range(np_):
        check(re.search(r"^#\s+Rank\s+%d\s+Pid\s+\d+\s+on\s+\S+\s+device\s+%s\s+backend\s+%s$"
                        % (r, device_pattern(backend, r), backend), out, re.M),
              "%s: header names rank %d with host, device and backend %s" % (tag, r, backend))
    check(len(rows) > 0, "%s: no rows" % tag)
    seen_types, seen_ops = set(), set()
    for f in rows:
        if not check(len(f) == 13, "%s: row has %d fields: %s" % (tag, len(f), f)):
            continue
        size, count, dtype, redop, rroot = int(f[0]), int(f[1]), f[2], f[3], int(f[4])
        seen_types.add(dtype)
        seen_ops.add(redop)
        blocks = np_ if coll in BLOCKS else 1  # the count is one rank's block there, as nccl-tests prints it
        check(size == count * blocks * DTYPE_SIZE[dtype],
              "%s: size %d != count %d x %d x %s" % (tag, size, count, blocks, dtype))
        check(redop == ("none" if coll not in REDUCTIONS else redop) and (coll not in REDUCTIONS or redop in OPS),
              "%s: redop %s" % (tag, redop))
        check(rroot == (root if coll in ROOTED else -1), "%s: root column %d" % (tag, rroot))
        check(f[8] == "0" and f[12] == "0", "%s: #wrong %s/%s in row %s" % (tag, f[8], f[12], f))
    check(seen_types == set(dtypes), "%s: types %s, wanted %s" % (tag, seen_types, dtypes))
    if coll in REDUCTIONS:
        check(seen_ops == set(ops), "%s: ops %s, wanted %s" % (tag, seen_ops, ops))
    check(len(footer) == 2 and footer[0] == "# Out of bounds values : 0 OK", "%s: footer %s" % (tag, footer))
    m = re.match(r"^# Avg bus bandwidth : ([0-9.eE+-]+)$", footer[1] if len(footer) > 1 else "")
    check(m, "%s: avg bus bandwidth line %s" % (tag, footer))
    check_json(tag, coll, np_, data, len(rows), float(m.group(1)) if m else None, backend)


def check_json(tag, coll, np_, data, n_rows, avg_printed, backend):
    if not check(data is not None, "%s: no JSON written" % tag):
        return
    check({"collective", "backend", "nranks", "ranks", "options", "rows", "summary"} <= set(data),
          "%s: JSON top-level keys %s" % (tag, sorted(data)))
    check(data.get("collective") == coll and data.get("nranks") == np_ and data.get("backend") == backend,
          "%s: JSON identity" % tag)
    check(all(re.fullmatch(device_pattern(backend, i), r.get("device", "")) for i, r in enumerate(data.get("ranks", []))),
          "%s: JSON devices %s" % (tag, [r.get("device") for r in data.get("ranks", [])]))
    check(len(data.get("ranks", [])) == np_ and all({"rank", "host", "pid", "device"} <= set(r) for r in data["ranks"]),
          "%s: JSON ranks" % tag)
    rows = data.get("rows", [])
    check(len(rows) == n_rows, "%s: JSON has %d rows, table %d" % (tag, len(rows), n_rows))
    busbws = []
    for r in rows:
        check({"size_bytes", "count", "type", "redop", "root", "out_of_place", "in_place"} <= set(r),
              "%s: JSON row keys %s" % (tag, sorted(r)))
        for k in ("out_of_place", "in_place"):
            pl = r.get(k, {})
            check({"time_us", "algbw_gbs", "busbw_gbs", "wrong"} <= set(pl), "%s: JSON %s keys" % (tag, k))
            check(pl.get("wrong") == 0, "%s: JSON wrong %s" % (tag, pl.get("wrong")))
            alg, bus, t = pl.get("algbw_gbs", 0), pl.get("busbw_gbs", 0), pl.get("time_us", 0)
            if t > 0:  # algbw = bytes / time, busbw = algbw x the collective's factor
                check(abs(alg - r["size_bytes"] / (t * 1e3)) <= 1e-6 * alg, "%s: algbw %g for %d B in %g us"
                      % (tag, alg, r["size_bytes"], t))
            check(abs(bus - alg * busbw_factor(coll, np_)) <= 1e-6 * bus,
                  "%s: busbw %g vs algbw %g x factor %g" % (tag, bus, alg, busbw_factor(coll, np_)))
            busbws.append(bus)
    s = data.get("summary", {})
    check({"out_of_bounds", "ok", "avg_busbw_gbs"} <= set(s), "%s: JSON summary keys %s" % (tag, sorted(s)))
    check(s.get("out_of_bounds") == 0 and s.get("ok") is True, "%s: JSON summary %s" % (tag, s))
    if busbws and avg_printed is not None:  # plain mean of every busbw value, both columns
        mean = sum(busbws) / len(busbws)
        check(abs(avg_printed - mean) <= 1e-3 + 1e-3 * mean, "%s: avg busbw %g, mean of rows %g" % (tag, avg_printed, mean))


def sweep(np_, backend="mpi", colls=COLLS):
    extra, env = backend_args(backend, np_)
    for coll in colls:
        root = np_ - 1
        args = [coll, "-d", "all", "-o", "all", "-b", "1", "-e", "96K", "-f", "7", "-n", "2", "-w", "1", "-r", str(root)]
        p, data = run(np_, args + extra, env)
        check_layout("%s %s np%d" % (backend, coll, np_), coll, np_, p, data, list(DTYPE_SIZE), OPS, root, backend)


def corrupt(backend="mpi"):
    cases = [(2, ["allreduce", "--corrupt", "1"]), (3, ["reduce", "-r", "2", "--corrupt", "2", "-d", "half"]),
             (3, ["allgather", "--corrupt", "0", "-d", "int8"]), (4, ["sendrecv", "--corrupt", "3", "-d", "bfloat16"])]
    if backend == "nccl":
        cases += [(2, ["reducescatter", "--corrupt", "0", "-d", "bfloat16", "-o", "avg"]),
                  (2, ["alltoall", "--corrupt", "1", "-d", "uint8"])]
    for np_, args in cases:
        tag = "%s corrupt %s np%d" % (backend, " ".join(args), np_)
        extra, env = backend_args(backend, np_)
        p, data = run(np_, args + extra + ["-b", "64", "-e", "4K", "-f", "4", "-n", "1", "-w", "0"], env)
        check(p.returncode not in (0, None), "%s: exit status %s" % (tag, p.returncode))
        check(re.search(r"^#\s+Rank\s+0 .* backend %s$" % backend, p.stdout, re.M), "%s: backend" % tag)
        _, rows, footer = parse_table(p.stdout)
        check(len(rows) >= 3, "%s: %d rows" % (tag, len(rows)))
        # one perturbed element per check, both columns, every row
        check(all(len(f) == 13 and f[8] == "1" and f[12] == "1" for f in rows), "%s: #wrong columns %s" % (tag, rows))
        check(footer and footer[0] == "# Out of bounds values : %d FAILED" % (2 * len(rows)), "%s: footer %s" % (tag, footer))
        check(data is not None and data["summary"]["ok"] is False and data["summary"]["out_of_bounds"] == 2 * len(rows),
              "%s: JSON summary" % tag)
        check(p.stderr.count("wrong result elements") == 1, "%s: verdict once on stderr: %s" % (tag, p.stderr[-300:]))


def header_version(path, names):
    """Dotted version from #define lines of an installed header, e.g. NCCL_MAJOR/MINOR/PATCH."""
    text = open(os.path.join(CUDA_INCLUDE, path)).read()
    return [int(re.search(r"^#define %s\s+(\d+)" % n, text, re.M).group(1)) for n in names]


def check_error_once(tag, rc, err, want_rc, needle):
    check(rc == want_rc, "%s: exit %s, wanted %s; stderr %s" % (tag, rc, want_rc, err[-400:]))
    check(err.count(needle) == 1 and err.count("error: ddprun-bench") == 1,
          "%s: stderr says %r exactly once: %s" % (tag, needle, err[-400:]))


def topo_host_line(tag, out, np_):
    """(cores, numa nodes, GPUs text) of the one host, checked against the ranks it lists."""
    m = re.search(r"^#\s+Host (\S+): (\d+) cores, (\d+) NUMA nodes? \(.*\); ranks %s; GPUs: (.+)$"
                  % " ".join(str(r) for r in range(np_)), out, re.M)
    check(m, "%s: host line in %s" % (tag, out))
    return (int(m.group(2)), int(m.group(3)), m.group(4)) if m else (0, 0, "")


def nccl_unavailable():
    """--backend nccl where it cannot run: a build without CUDA (exit 2), a machine without a GPU
    (exit 1). A real GPU machine running this suite skips the case."""
    env = emu_env(0) if GPU_BUILD == "emulated" else None
    rc, out, err = mpirun(2, ["allreduce", "--backend", "nccl", "-e", "64"], env, timeout=120)
    tag = "--backend nccl in a %s build" % GPU_BUILD
    if GPU_BUILD == "none":
        check_error_once(tag, rc, err, 2, "--backend nccl: no CUDA devices (this build of ddprun has no CUDA backend")
    elif rc == 0 and GPU_BUILD == "nvcc":
        print("note: %s: this machine has a GPU; the no-GPU error is not exercised" % tag, file=sys.stderr)
    else:
        check_error_once(tag, rc, err, 1, "--backend nccl: no CUDA devices (")


def usage():
    cases = [(["allreduce", "-b", "12Q"], "-b"), (["allreduce", "-d", "float7"], "-d"),
             (["allreduce", "-r", "5"], "-r 5"), (["bogus"], "expected a collective"),
             (["allreduce", "-e", "8", "-b", "16"], "-e"), (["allreduce", "-f", "2x"], "-f"),
             (["allreduce", "-T", "0"], "-T"), (["allreduce", "--backend", "gloo"], "--backend"),
             (["allreduce", "--fail", "2"], "--fail 2"), (["allreduce", "-b", "nan"], "-b: expected a byte count"),
             (["allreduce", "-f", "inf"], "-f: expected a factor"),
             (["allreduce", "-f", "1.000001"], "with -f 1.000001 makes more than 10000 sizes"),
             (["allreduce", "-i", "1"], "-b 8 to -e 33554432 with -i 1 makes more than")]
    # each failing mpirun spends ~1.5 s ending the job, mostly idle: run them side by side
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda args: mpirun(2, args, timeout=120), [c[0] for c in cases]))
    for (args, needle), (rc, out, err) in zip(cases, results):
        check(rc == 2, "%s: exit %s, wanted 2" % (args, rc))
        check(needle in err, "%s: stderr lacks %r: %s" % (args, needle, err[-300:]))
        check(err.count("error: ddprun-bench") == 1, "%s: the usage error printed once" % args)
    nccl_unavailable()
    json_whole()
    rc, out, err = mpirun(2, ["topo"], timeout=120)
    check(rc == 0, "topo: exit %s: %s" % (rc, err[-300:]))
    nodes = len([d for d in glob.glob("/sys/devices/system/node/node*") if re.search(r"node\d+$", d)])
    cores, numa, gpus = topo_host_line("topo", out, 2)
    check(cores == os.sysconf("SC_NPROCESSORS_ONLN"), "topo: cores %d" % cores)
    check(numa == nodes, "topo: NUMA nodes %d, /sys has %d" % (numa, nodes))
    if GPU_BUILD == "none":
        check(gpus.startswith("no CUDA devices (this build of ddprun has no CUDA backend"), "topo: GPUs %s" % gpus)
    else:
        check(re.match(r"no CUDA devices \(.+\)$|\d+ \(CUDA driver", gpus), "topo: GPUs %s" % gpus)


def json_whole():
    """-J's file is written whole or not at all: on a filesystem with no room for the new one, the
    job fails (exit 1, the cause named) and leaves the file already there as it was, with no
    temporary beside it (writing in place truncated it and left part of the new one). Into a
    missing folder: exit 1 too; to /dev/stdout (no regular file): the JSON on stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small")
        os.mkdir(small)
        # two pages: the old file's and the filler's; the new file (~4.5 KB) needs two of its own
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", small], capture_output=True).returncode:
            print("note: -J on a full filesystem skipped (cannot mount a tmpfs here)", file=sys.stderr)
            return
        try:
            path, old = os.path.join(small, "out.json"), '{"earlier": "run"}\n'
            with open(path, "w") as f:
                f.write(old)
            fill = os.open(os.path.join(small, "fill"), os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fill, b"x" * 512) > 0:
                    pass
            except OSError:
                pass
            os.close(fill)
            rc, out, err = mpirun(2, ["allreduce", "-b", "8", "-e", "1M", "-n", "1", "-w", "0", "-J", path],
                                  backend_args("mpi", 2)[1], timeout=120)
            check(rc == 1, "-J full: exit %s, wanted 1: %s" % (rc, err[-300:]))
            check(re.search(r"error: ddprun-bench: -J: \S*small/\.out\.json\.tmp\.\d+: .*No space left", err),
                  "-J full: the failed write named: %s" % err[-300:])
            with open(path) as f:
                check(f.read() == old, "-J full: the earlier file kept as it was")
            check(sorted(os.listdir(small)) == ["fill", "out.json"], "-J full: left %s" % os.listdir(small))
            rc, out, err = mpirun(2, ["allreduce", "-b", "8", "-e", "64", "-n", "1", "-w", "0", "-J",
                                      os.path.join(small, "no", "such.json")], backend_args("mpi", 2)[1], timeout=120)
            check(rc == 1 and "-J: " in err, "-J into a missing folder: exit %s, wanted 1: %s" % (rc, err[-300:]))
            rc, out, err = mpirun(2, ["allreduce", "-b", "8", "-e", "64", "-n", "1", "-w", "0", "-J", "/dev/stdout"],
                                  backend_args("mpi", 2)[1], timeout=120)
            check(rc == 0 and '"collective": "allreduce"' in out, "-J /dev/stdout: exit %s, the JSON in stdout" % rc)
        finally:
            if subprocess.run(["umount", small]).returncode:
                subprocess.run(["umount", "-l", small])


def abort():
    """A rank that fails after the sweep started (the others are inside a collective or the
    bookkeeping) ends the job: non-zero exit well before the hang timeout, the rank named."""
    for np_, fail, args in [(2, 1, ["allreduce"]), (3, 0, ["alltoall", "-d", "int32"])]:
        tag = "abort np%d --fail %d" % (np_, fail)
        rc, out, err = mpirun(np_, args + ["--fail", str(fail), "-b", "8", "-e", "4K", "-n", "1", "-w", "0"],
                              backend_args("mpi", np_)[1], timeout=60)
        check(rc is not None, "%s: the job hung" % tag)
        check(rc not in (0, None), "%s: exit %s" % (tag, rc))
        check(re.search(r"^\[rank %d \S+\] error: ddprun-bench: .*planted failure" % fail, err, re.M),
              "%s: stderr names the rank: %s" % (tag, err[-400:]))
        check(len(parse_table(out)[1]) == 1, "%s: the first row completed before the failure" % tag)


def nccl_topo():
    nccl = "%d.%d.%d" % tuple(header_version("nccl.h", ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"]))
    cudart = header_version("cuda_runtime_api.h", ["CUDART_VERSION"])[0]
    runtime = "%d.%d" % (cudart // 1000, cudart % 1000 // 10)
    for gpus in (2, 3):
        tag = "nccl topo %d GPUs" % gpus
        rc, out, err = mpirun(2, ["topo"], emu_env(gpus), timeout=120)
        check(rc == 0, "%s: exit %s: %s" % (tag, rc, err[-300:]))
        _, _, summary = topo_host_line(tag, out, 2)
        check(summary == "%d (CUDA driver %s, runtime %s; NCCL %s; CUDA-on-CPU emulation)" % (gpus, runtime, runtime, nccl),
              "%s: GPU summary %r (the emulator reports its runtime version as the driver's)" % (tag, summary))
        buses = re.findall(r"^#\s+GPU(\d+)\s+([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.0)\s+(.+)$", out, re.M)
        check([int(b[0]) for b in buses] == list(range(gpus)) and len({b[1] for b in buses}) == gpus
              and all(b[2] == EMU_GPU_NAME for b in buses), "%s: GPU lines %s" % (tag, buses))
        check(re.search(r"^#\s+P2P\s+%s$" % r"\s+".join("GPU%d" % j for j in range(gpus)), out, re.M),
              "%s: P2P header" % tag)
        for i in range(gpus):
            # the emulator reports peer access with native atomics, performance rank 0, between
            # distinct devices (tests/cudaemu/cudart_device.cpp): NV0 in the legend's terms
            cells = ["X" if j == i else "NV0" for j in range(gpus)]
            check(re.search(r"^#\s+GPU%d\s+%s$" % (i, r"\s+".join(cells)), out, re.M), "%s: P2P row %d" % (tag, i))
        check(re.search(r"^#\s+Legend: X self; NV<r> .* PCI<r> .* SYS ", out, re.M), "%s: legend" % tag)
    rc, out, err = mpirun(2, ["topo"], emu_env(0), timeout=120)
    check(rc == 0 and topo_host_line("nccl topo 0 GPUs", out, 2)[2].startswith("no CUDA devices ("),
          "topo without emulated GPUs: %s" % out)


def nccl_errors():
    small = ["-b", "8", "-e", "1K", "-n", "1", "-w", "0"]
    rc, out, err = mpirun(2, ["allreduce", "--backend", "nccl"] + small, emu_env(0), timeout=120)
    check_error_once("nccl with no GPU", rc, err, 1, "--backend nccl: no CUDA devices (")
    share = ("2 ranks on host %s but only 1 GPU visible: ranks 0 and 1 would both use GPU 0 (bus id 0000:00:00.0), "
             "and NCCL refuses two ranks on one GPU" % socket.gethostname())
    fix = "; run at most 1 rank on %s (one per GPU), or use --backend mpi" % socket.gethostname()
    rc, out, err = mpirun(2, ["allreduce", "--backend", "nccl"] + small, emu_env(1), timeout=120)
    check_error_once("nccl with 2 ranks, 1 GPU", rc, err, 2, "--backend nccl: " + share + fix)
    # NCCL refuses two ranks on one GPU, so DDPRUN_ALLOW_GPU_SHARING=1 cannot make it run
    rc, out, err = mpirun(2, ["allreduce", "--backend", "nccl"] + small,
                          dict(emu_env(1), DDPRUN_ALLOW_GPU_SHARING="1"), timeout=120)
    check_error_once("nccl with 2 ranks, 1 GPU, DDPRUN_ALLOW_GPU_SHARING=1", rc, err, 2,
                     "--backend nccl: " + share + " (DDPRUN_ALLOW_GPU_SHARING=1 cannot change that)" + fix)
    for gpus, backend, env in [(2, "nccl", {}), (1, "mpi", {}), (0, "mpi", {}),
                               (1, "mpi", {"DDPRUN_ALLOW_GPU_SHARING": "1"})]:
        rc, out, err = mpirun(2, ["allreduce"] + small, dict(emu_env(gpus), **env), timeout=120)
        check(rc == 0 and "# Out of bounds values : 0 OK" in out
              and re.search(r"^#\s+Rank\s+1 .*backend %s$" % backend, out, re.M),
              "auto with %d GPUs for 2 ranks %s picks %s: exit %s" % (gpus, env, backend, rc))
        check((backend == "mpi") == ("# backend auto: mpi (" in out), "auto with %d GPUs says why it is mpi" % gpus)
        if gpus == 1:
            check("# backend auto: mpi (%s" % share in out, "auto with 1 GPU for 2 ranks %s says why: %s" % (env, out[:600]))
    # rank 1 stops participating before its 5th collective: rank 0's watchdog ends the job
    rc, out, err = mpirun(2, ["allreduce", "--backend", "nccl", "-T", "1"] + small,
                          dict(emu_env(2), DDP_TEST_NCCL_STALL="1:5"), timeout=60)
    check(rc not in (0, None) and "NCCL watchdog" in err and "ddprun-bench row" in err,
          "stalled rank under -T 1: exit %s, stderr %s" % (rc, err[-400:]))
    rc, out, err = mpirun(2, ["reducescatter", "--backend", "nccl", "--fail", "1"] + small, emu_env(2), timeout=60)
    check(rc not in (0, None) and re.search(r"^\[rank 1 \S+\] error: ddprun-bench: .*planted failure", err, re.M),
          "nccl --fail 1: exit %s, stderr %s" % (rc, err[-400:]))
    # rank 1 fails its own part of the communicator's set-up (a malformed test switch, for a GPU
    # that cannot be set up): rank 0 must not wait in ncclCommInitRank for it (a hang, before)
    rc, out, err = mpirun(2, ["allreduce", "--backend", "nccl"] + small, emu_env(2), timeout=60,
                          rank_env={1: {"DDP_TEST_NCCL_STALL": "soon"}})
    check(rc not in (0, None) and "DDP_TEST_NCCL_STALL=soon: expected RANK:SEQ" in err
          and "rank 1 failed its own part of the NCCL communicator's set-up" in err,
          "rank 1's set-up failing before the communicator: exit %s, stderr %s" % (rc, err[-600:]))


def nccl_timed():
    """Inside the timed loops only the collectives run, on one stream, as in nccl-tests: the traced
    ddprun-bench (tests/launcher/bench/bench_trace.c) counts, per rank, what happened between the barrier
    that starts each timed loop and the all-reduce that combines its time."""
    global BENCH
    BENCH = os.environ["DDPRUN_BENCH_TRACED"]
    trace = re.compile(r"^# trace rank (\d+): regions (\d+) nccl (\d+) streams (\d+\+?) allocs (\d+) copies (\d+) "
                       r"frees (\d+) waits (\d+)$", re.M)
    iters = 3
    for coll in COLLS:
        rc, out, err = mpirun(2, [coll, "--backend", "nccl", "-b", "1K", "-e", "4K", "-n", str(iters), "-w", "1"],
                              emu_env(2), timeout=120)
        _, rows, _ = parse_table(out)
        lines = trace.findall(err)
        check(rc == 0 and len(rows) == 3 and len(lines) == 2, "%s traced: exit %s, %d rows, %d trace lines: %s"
              % (coll, rc, len(rows), len(lines), err[-400:]))
        for rank, regions, nccl, streams, allocs, copies, frees, waits in lines:
            # alltoall is one ncclSend and one ncclRecv per rank, sendrecv one of each
            per_call = {"alltoall": 4, "sendrecv": 2}.get(coll, 1)
            check(int(regions) == 2 * len(rows) and int(nccl) == 2 * len(rows) * iters * per_call,
                  "%s rank %s: %s timed loops with %s NCCL calls, wanted %d with %d"
                  % (coll, rank, regions, nccl, 2 * len(rows), 2 * len(rows) * iters * per_call))
            check(streams == "1", "%s rank %s: the timed loops used %s streams, wanted 1" % (coll, rank, streams))
            check((allocs, copies, frees, waits) == ("0", "0", "0", "0"),
                  "%s rank %s: inside the timed loops %s allocations, %s copies, %s frees, %s cross-stream waits"
                  % (coll, rank, allocs, copies, frees, waits))


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    modes = {"corrupt": corrupt, "usage": usage, "abort": abort, "nccl-topo": nccl_topo, "nccl-errors": nccl_errors,
             "nccl-corrupt": lambda: corrupt("nccl"), "nccl-timed": nccl_timed}
    if what == "sweep":
        sweep(int(sys.argv[2]))
    elif what == "nccl-sweep":
        sweep(int(sys.argv[2]), "nccl", sys.argv[3].split(",") if len(sys.argv) > 3 else COLLS)
    elif what in modes:
        modes[what]()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print("test_bench %s: %d checks, %d failed" % (" ".join(sys.argv[1:]), checks, failures), file=sys.stderr)
    return 1 if failures or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
