# tests/lib_mounts.sh — the mounts and immutable folders a test makes under $TMP, undone at its exit
# together with $TMP itself (source it once TMP is set: it replaces the EXIT trap). Used by the tests
# of folders written in place (runtime/base/replace_dir.h, scripts/out_folder.py).
mounts=() immutable=()
mounts_cleanup() {
    set +e # every step, whatever one of them says
    local m
    for m in ${immutable[@]+"${immutable[@]}"}; do chattr -i "$m"; done
    for m in ${mounts[@]+"${mounts[@]}"}; do umount "$m" || umount -l "$m"; done
    rm -rf "$TMP"
}
trap mounts_cleanup EXIT

# tmpfs_at DIR SIZE: a tmpfs of SIZE mounted at DIR (made first); false where mounting is not allowed
tmpfs_at() { mkdir -p "$1" && mount -t tmpfs -o "size=$2" tmpfs "$1" 2>/dev/null && mounts+=("$1"); }

# in_place_cases TEST WHAT: `TEST DIR "WHAT a bind mount"` on a folder bind-mounted on itself (its
# st_dev is its parent's, yet no rename crosses its edge), and `TEST DIR "WHAT in a folder that takes
# no entry"` in a parent made immutable (as root the one way to refuse an entry there: EPERM); each
# DIR holds notes.txt ("keep"). A case this machine does not allow is skipped with a note.
in_place_cases() {
    local test=$1 what=$2
    mkdir "$TMP/bind" && echo keep >"$TMP/bind/notes.txt"
    if mount --bind "$TMP/bind" "$TMP/bind" 2>/dev/null; then
        mounts+=("$TMP/bind")
        "$test" "$TMP/bind" "$what a bind mount"
    else
        echo "note: bind-mount case skipped (cannot bind-mount here)"
    fi
    mkdir -p "$TMP/imm/out" && echo keep >"$TMP/imm/out/notes.txt"
    if chattr +i "$TMP/imm" 2>/dev/null; then
        immutable+=("$TMP/imm")
        "$test" "$TMP/imm/out" "$what in a folder that takes no entry"
    else
        echo "note: immutable-parent case skipped (chattr +i refused here)"
    fi
}
