#!/usr/bin/env python3
"""check_device_checks.py — a device op's argument contract is where its family's name says: for
every op family FAMILY of runtime/device/device.h (DEVICE_FAMILIES, each naming its X-macro
block), the checked_NAME function of each of the block's ops is defined exactly once, in
device_check_FAMILY.c of runtime/device/, and every runtime/device/device_check_*.c file is named
for a family.

Exits 1 and lists every op whose contract is missing, defined twice or in another file, and every
stray file. Takes the source root as its argument."""
import glob
import os
import re
import sys

FAMILY = re.compile(r'F\("(\w+)",\s*(DEVICE_\w+_OPS)\)')
OP = re.compile(r"\bOP\((\w+),")
DEFINITION = re.compile(r"^(?:static )?(?:int|void) (checked_\w+)\(", re.M)


def family_ops(header):
    """{family: [op, ...]} from DEVICE_FAMILIES and the blocks it names."""
    families = {}
    for family, block in FAMILY.findall(header):
        m = re.search(r"#define %s\(OP\)((?:[^\n]*\\\n)*[^\n]*)" % block, header)
        if not m:
            sys.exit("check_device_checks: device.h names %s in DEVICE_FAMILIES but defines no such block" % block)
        families[family] = OP.findall(m.group(1))
    return families


def main():
    root = sys.argv[1]
    device = os.path.join(root, "runtime", "device")
    with open(os.path.join(device, "device.h")) as f:
        families = family_ops(f.read())
    if not families:
        sys.exit("check_device_checks: no DEVICE_FAMILIES in runtime/device/device.h")
    defined = {}  # checked_NAME -> [file, ...]
    for path in sorted(glob.glob(os.path.join(device, "*.c"))):
        with open(path) as f:
            for name in DEFINITION.findall(f.read()):
                defined.setdefault(name, []).append(os.path.basename(path))
    problems = []
    for family, ops in families.items():
        want = "device_check_%s.c" % family
        for op in ops:
            where = defined.get("checked_" + op, [])
            if where != [want]:
                problems.append("op %s (family %s): checked_%s is defined in %s, expected %s only" %
                                (op, family, op, ", ".join(where) or "no file", want))
    for path in sorted(glob.glob(os.path.join(device, "device_check_*.c"))):
        family = os.path.basename(path)[len("device_check_"):-len(".c")]
        if family not in families:
            problems.append("runtime/device/%s is named for no op family of DEVICE_FAMILIES" % os.path.basename(path))
    for p in problems:
        print("check_device_checks: " + p)
    print("check_device_checks: %d families, %d ops, %d problems" %
          (len(families), sum(len(o) for o in families.values()), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
