"""scripts/out_folder.py — a folder of outputs written whole or not at all, for scripts/prepare-text
(and scripts/prepare-chat through it): the Python twin of runtime/base/replace_dir.c, which the
same rules hold for (runtime/base/replace_dir.h says them).

Beside the folder: every file into a temporary folder .NAME.tmp.XXXXXXXX (a unique name: a
pid-based one collides with a killed run's leftover in containers, where every run has the same
pid; a leftover is named in a warning), renamed into place only when complete (an atomic exchange
with an existing folder through renameat2, or where the system cannot exchange, the old folder
renamed aside first and the folder missing for that moment), then the old folder removed; a
failure on the way (SIGTERM and SIGHUP included) leaves an existing folder as it was and removes
the temporary; the old folder's unclaimed entries are carried into the new one (hard links;
folders moved), a symbolic link stays one. In place, for a folder that is a mount point (a
container's volume, a bind mount: no rename crosses into it from beside it) or whose parent this
process may not write: the temporary inside it, then the folder's own `last` moved into that, each
other file renamed over its name, the claimed entries not written anew removed, and the new `last`
put in; a failure before the first file is in leaves the folder as it was, one later (or a kill)
leaves it without `last`, never the old one beside a mix of files.
Must not know what the files are: the caller's write, claimed and last say it."""
import ctypes
import errno
import os
import re
import signal
import stat
import sys
import tempfile


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def exchange(a, b):
    """Swaps the names a and b at once (Linux renameat2 RENAME_EXCHANGE); False where the system
    cannot (another OS, an old kernel, a filesystem without it)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    e = ctypes.get_errno()
    if e in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(e, os.strerror(e), b)


def remove_flat(path):
    """Removes a folder holding files only (its folders were moved out)."""
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))
    os.rmdir(path)


def carry(old, new, moved, claimed):
    """The old folder's entries that are not claimed (an output's) into the new one: hard links
    first (the old folder unchanged), then moves for the rest (folders, what cannot be linked), each
    name moved appended to moved."""
    def carried(name):
        return not (claimed(name) or os.path.lexists(os.path.join(new, name)))
    for name in filter(carried, os.listdir(old)):
        src = os.path.join(old, name)
        if not stat.S_ISDIR(os.lstat(src).st_mode):
            try:
                os.link(src, os.path.join(new, name), follow_symlinks=False)
            except OSError:
                pass
    for name in filter(carried, os.listdir(old)):
        os.rename(os.path.join(old, name), os.path.join(new, name))
        moved.append(name)


def warn_leftovers(where, base, inside, prog):
    """Names each temporary or aside folder of base's in where that a killed run left, and what it
    may hold; where unreadable (a parent of mode 0711) is not looked in."""
    try:
        names = sorted(os.listdir(where))
    except OSError:
        return
    holds = ("it holds that write's new files (and maybe the folder's earlier .previous.*)" if inside
             else "it may hold entries moved out of the folder before its swap")
    for name in names:
        if name.startswith((f".{base}.tmp.", f".{base}.old.")):
            print(f"{prog}: warning: {os.path.join(where, name)} was left by an earlier write of {base} that did not "
                  f"finish; {holds}: remove it once nothing in it is needed", file=sys.stderr)


def temp_folder(where, base):
    """An empty folder of a unique name in where (mkdtemp's; 0700 until chmod)."""
    return tempfile.mkdtemp(prefix=f".{base}.tmp.", dir=where)


def mount_point(path):
    """Whether something is mounted at path: a bind mount of a folder of the same filesystem keeps
    its parent's st_dev, yet no rename crosses its edge either (/proc/self/mountinfo's fifth field,
    octal escapes undone)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            points = {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in f}
    except (OSError, IndexError):
        return False
    return path in points


def move_in(tmp, target, claimed, last, prog):
    """In place: tmp's files renamed over their names in target one by one. target's own last (one
    of the written files: prepare-text's tokenizer.bin) goes first, into tmp (as .previous.LAST, back
    if nothing else moved yet), so a folder cut off part-way lacks it rather than pairing it with a
    mix of old and new files; then the other files, then target's claimed entries not written anew
    removed, then the new last. An OSError names the file in target and what target is left as; one
    with keep_tmp set: tmp holds the earlier last, which could not be put back."""
    names = sorted(os.listdir(tmp), key=lambda n: (n == last, n))
    has_last = bool(names) and names[-1] == last
    stash, at_last, moved, stashed = os.path.join(tmp, f".previous.{last}"), os.path.join(target, last), 0, False
    try:
        if has_last:
            try:
                os.rename(at_last, stash)
                stashed = True
            except FileNotFoundError:
                pass
            except OSError as e:
                e.filename, e.filename2 = at_last, None
                raise
        try:
            for name in names[:-1] if has_last else names:
                os.rename(os.path.join(tmp, name), os.path.join(target, name))
                moved += 1
        except OSError as e:
            if moved == 0 and stashed:  # nothing of the new outputs is in: OUT_DIR as it was
                try:
                    os.rename(stash, at_last)
                    stashed = False
                except OSError as back:
                    e.keep_tmp = True
                    print(f"{prog}: warning: cannot put the earlier {last} back from {stash}: {back.strerror}",
                          file=sys.stderr)
            raise
        for name in os.listdir(target):
            if claimed(name) and name not in names:
                os.unlink(os.path.join(target, name))
        if has_last:
            os.rename(os.path.join(tmp, last), at_last)
    except OSError as e:
        e.filename = e.filename2 or e.filename  # a rename's: the name in OUT_DIR, not the temporary's
        if has_last and (moved or stashed):
            e.strerror = f"{e.strerror} ({target} is left without {last}{', with part of the new outputs' if moved else ''})"
        elif moved:
            e.strerror = f"{e.strerror} ({target} holds part of the new outputs)"
        raise


def replace_folder(out_dir, write, claimed, last, prog):
    """write(tmp) fills an empty temporary folder beside out_dir, which then becomes out_dir, or
    inside it where no folder beside it can take its place (see the module's description); claimed:
    the names of out_dir the new contents replace (not carried); last: the written file moved in
    last in place; prog: the warnings' prefix. OSErrors of the folder steps propagate, and
    whatever write raises."""
    exists = os.path.isdir(out_dir)
    target = os.path.realpath(out_dir) if exists else os.path.abspath(out_dir)
    parent, base = os.path.split(target)
    if base in ("", ".", ".."):
        raise OSError(errno.EINVAL, "cannot replace this folder (name one by its own name)", out_dir)
    os.makedirs(parent, exist_ok=True)

    def stopped(signum, _frame):  # a timeout's or a CI cancel's SIGTERM undoes the folder too
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, stopped)
    warn_leftovers(parent, base, False, prog)
    if exists:
        warn_leftovers(target, base, True, prog)
    in_place = exists and (os.stat(parent).st_dev != os.stat(target).st_dev or mount_point(target))
    try:
        tmp = None if in_place else temp_folder(parent, base)
    except OSError as e:
        if not (exists and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)):
            raise
        in_place = True
    if in_place:
        tmp, keep = temp_folder(target, base), False
        try:
            write(tmp)
            move_in(tmp, target, claimed, last, prog)
        except BaseException as e:
            keep = getattr(e, "keep_tmp", False)
            raise
        finally:
            if keep:
                print(f"{prog}: warning: the temporary folder {tmp} is left as it is", file=sys.stderr)
            else:
                try:
                    remove_flat(tmp)  # empty, the earlier tokenizer.bin, or what a failure left
                except OSError as e:
                    print(f"{prog}: warning: cannot remove the temporary folder {tmp}: {e.filename}: {e.strerror}",
                          file=sys.stderr)
        fsync_dir(target)
        return
    moved, old = [], None
    try:
        mask = os.umask(0o22)
        os.umask(mask)
        os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode) if exists else 0o777 & ~mask)
        write(tmp)
        if exists:
            carry(target, tmp, moved, claimed)
        fsync_dir(tmp)
        if not exists:
            os.rename(tmp, target)
        elif exchange(tmp, target):
            old = tmp
        else:
            aside = tempfile.mkdtemp(prefix=f".{base}.old.", dir=parent)  # empty: the rename replaces it
            try:
                os.rename(target, aside)
            except OSError:
                os.rmdir(aside)
                raise
            try:
                os.rename(tmp, target)
            except OSError:
                os.rename(aside, target)
                raise
            old = aside
    except BaseException:
        try:
            for name in moved:
                os.rename(os.path.join(tmp, name), os.path.join(target, name))
            remove_flat(tmp)
        except OSError as e:
            print(f"{prog}: warning: cannot undo the partial {tmp}: {e.filename}: {e.strerror}", file=sys.stderr)
        raise
    fsync_dir(parent)
    if old:
        try:
            remove_flat(old)
        except OSError as e:
            print(f"{prog}: warning: {out_dir} replaced; the old folder, now {old}, could not be removed: "
                  f"{e.strerror}", file=sys.stderr)
