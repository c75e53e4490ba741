#!/usr/bin/env python3
"""test_bench.py — ddprun-bench end to end under real mpirun (issue #4).

  test_bench.py sweep NP     every collective x every dtype (and every op) at NP ranks: exit 0,
                             #wrong 0 in every row, table layout, busbw factors, footer, JSON keys
  test_bench.py corrupt      a planted corruption (--corrupt RANK) shows in #wrong, the footer
                             says FAILED, and the exit status is non-zero
  test_bench.py usage        bad flags and --backend nccl give exit 2 and a clear message; topo
                             reports this machine's cores and NUMA nodes

Expected values (column names, busbw factors, footer wording) come from nccl-tests' definitions
written here, never from the program's own output. Environment: DDPRUN_BENCH (the program),
mpirun on PATH with the OMPI_* settings from tests/meson.build."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

BENCH = os.environ.get("DDPRUN_BENCH", "launcher/ddprun-bench")
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


def run(np_, args):
    with tempfile.TemporaryDirectory() as tmp:
        jpath = os.path.join(tmp, "out.json")
        cmd = ["mpirun", "-np", str(np_), BENCH] + args + ["-J", jpath]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        data = None
        if os.path.exists(jpath):
            with open(jpath) as f:
                data = json.load(f)
        return p, data


def parse_table(out):
    """(header columns, rows as lists of fields, footer lines)"""
    header, rows, footer = None, [], []
    for line in out.splitlines():
        if line.startswith("#") and "size(B)" in line:
            header = line[1:].split()
        elif line.startswith("# Out of bounds") or line.startswith("# Avg bus"):
            footer.append(line)
        elif line.strip() and not line.startswith("#"):
            rows.append(line.split())
    return header, rows, footer


def check_layout(tag, coll, np_, p, data, dtypes, ops, root):
    out = p.stdout
    check(p.returncode == 0, "%s: exit %d, stderr: %s" % (tag, p.returncode, p.stderr[-500:]))
    header, rows, footer = parse_table(out)
    check(header == COLUMNS, "%s: header columns %s" % (tag, header))
    for r in range(np_):
        check(re.search(r"^#\s+Rank\s+%d\s+Pid\s+\d+\s+on\s+\S+\s+device\s+cpu\s+backend\s+mpi$" % r, out, re.M),
              "%s: header names rank %d with host, device and backend" % (tag, r))
    check(len(rows) > 0, "%s: no rows" % tag)
    seen_types, seen_ops = set(), set()
    for f in rows:
        if not check(len(f) == 13, "%s: row has %d fields: %s" % (tag, len(f), f)):
            continue
        size, count, dtype, redop, rroot = int(f[0]), int(f[1]), f[2], f[3], int(f[4])
        seen_types.add(dtype)
        seen_ops.add(redop)
        check(size == count * DTYPE_SIZE[dtype], "%s: size %d != count %d x %s" % (tag, size, count, dtype))
        if coll in BLOCKS:
            check(count % np_ == 0, "%s: %d elements not a multiple of %d ranks" % (tag, count, np_))
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
    check_json(tag, coll, np_, data, len(rows), float(m.group(1)) if m else None)


def check_json(tag, coll, np_, data, n_rows, avg_printed):
    if not check(data is not None, "%s: no JSON written" % tag):
        return
    check({"collective", "backend", "nranks", "ranks", "options", "rows", "summary"} <= set(data),
          "%s: JSON top-level keys %s" % (tag, sorted(data)))
    check(data.get("collective") == coll and data.get("nranks") == np_ and data.get("backend") == "mpi",
          "%s: JSON identity" % tag)
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


def sweep(np_):
    for coll in COLLS:
        root = np_ - 1
        args = [coll, "-d", "all", "-o", "all", "-b", "1", "-e", "96K", "-f", "7", "-n", "2", "-w", "1", "-r", str(root)]
        p, data = run(np_, args)
        check_layout("%s np%d" % (coll, np_), coll, np_, p, data, list(DTYPE_SIZE), OPS, root)


def corrupt():
    cases = [(2, ["allreduce", "--corrupt", "1"]), (3, ["reduce", "-r", "2", "--corrupt", "2", "-d", "half"]),
             (3, ["allgather", "--corrupt", "0", "-d", "int8"]), (4, ["sendrecv", "--corrupt", "3", "-d", "bfloat16"])]
    for np_, args in cases:
        tag = "corrupt %s np%d" % (" ".join(args), np_)
        p, data = run(np_, args + ["-b", "64", "-e", "4K", "-f", "4", "-n", "1", "-w", "0"])
        check(p.returncode != 0, "%s: exit status 0" % tag)
        _, rows, footer = parse_table(p.stdout)
        check(len(rows) >= 3, "%s: %d rows" % (tag, len(rows)))
        # one perturbed element per check, both columns, every row
        check(all(len(f) == 13 and f[8] == "1" and f[12] == "1" for f in rows), "%s: #wrong columns %s" % (tag, rows))
        check(footer and footer[0] == "# Out of bounds values : %d FAILED" % (2 * len(rows)), "%s: footer %s" % (tag, footer))
        check(data is not None and data["summary"]["ok"] is False and data["summary"]["out_of_bounds"] == 2 * len(rows),
              "%s: JSON summary" % tag)
        check("wrong result elements" in p.stderr, "%s: stderr %s" % (tag, p.stderr[-300:]))


def usage():
    cases = [(["allreduce", "--backend", "nccl"], "NCCL backend not available in this build"),
             (["allreduce", "-b", "12Q"], "-b"), (["allreduce", "-d", "float7"], "-d"),
             (["allreduce", "-r", "5"], "-r 5"), (["bogus"], "expected a collective"),
             (["allreduce", "-e", "8", "-b", "16"], "-e"), (["allreduce", "-f", "2x"], "-f")]
    for args, needle in cases:
        p = subprocess.run(["mpirun", "-np", "2", BENCH] + args, capture_output=True, text=True, timeout=120)
        check(p.returncode == 2, "%s: exit %d, wanted 2" % (args, p.returncode))
        check(needle in p.stderr, "%s: stderr lacks %r: %s" % (args, needle, p.stderr[-300:]))
        check(p.stderr.count("error: ddprun-bench") == 1, "%s: the usage error printed once" % args)
    p = subprocess.run(["mpirun", "-np", "2", BENCH, "topo"], capture_output=True, text=True, timeout=120)
    nodes = len([d for d in glob.glob("/sys/devices/system/node/node*") if re.search(r"node\d+$", d)])
    m = re.search(r"^#\s+Host (\S+): (\d+) cores, (\d+) NUMA nodes?.*ranks 0 1;", p.stdout, re.M)
    check(p.returncode == 0 and m, "topo: %s %s" % (p.stdout, p.stderr[-300:]))
    if m:
        check(int(m.group(2)) == os.sysconf("SC_NPROCESSORS_ONLN"), "topo: cores %s" % m.group(2))
        check(int(m.group(3)) == nodes, "topo: NUMA nodes %s, /sys has %d" % (m.group(3), nodes))


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "sweep":
        sweep(int(sys.argv[2]))
    elif what == "corrupt":
        corrupt()
    elif what == "usage":
        usage()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print("test_bench %s: %d checks, %d failed" % (" ".join(sys.argv[1:]), checks, failures), file=sys.stderr)
    return 1 if failures or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
