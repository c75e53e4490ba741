/* replace_dir.h — a folder written whole or not at all, as replace_file.h writes a file: the
 * contents go to a temporary folder beside it (".NAME.tmp.XXXXXX", a unique name in the same
 * parent, so the same filesystem), which is renamed into place only when every file in it is written and fsync'd. On any
 * failure before that rename the temporary folder is removed and an existing folder is untouched.
 *
 * An existing folder keeps what the new contents do not replace: each of its entries that the
 * caller's predicate does not claim and the writer did not write is carried into the new folder,
 * files and links as hard links (the old folder unchanged), folders and whatever cannot be linked
 * moved in just before the swap (and moved back if the swap fails). The swap is one
 * renameat2(RENAME_EXCHANGE), so PATH always names a whole folder; where the filesystem cannot
 * exchange (EINVAL, ENOSYS), the old folder is renamed aside (".NAME.old.XXXXXX") and the new one into
 * place, and for that moment PATH does not exist. The old folder is then removed. A symbolic link
 * PATH keeps pointing where it did: the folder it resolves to is replaced. The new folder gets the
 * old one's permission bits (not its owner). A process killed mid-write leaves its temporary
 * folder behind (PATH itself is whole); the next replace of PATH names such leftovers in a warning.
 *
 * In place: a folder that is a mount point (a container's volume, a bind mount: no rename crosses
 * into it from beside it) or whose parent this process may not write takes the temporary inside
 * itself (".NAME.tmp.XXXXXX" in PATH). When every file is written, PATH's own copy of the caller's
 * `last` (an export's config.json) is moved into the temporary, the other files are renamed over
 * their names one by one, PATH's claimed entries the writer did not write are removed, and the new
 * `last` goes in. The folder as a whole is not replaced atomically, as no single rename can swap
 * it: a failure before the first new file is in leaves PATH as it was; one later (or a kill)
 * leaves PATH without `last`, visibly incomplete, never the earlier `last` beside a mix of files.
 * Must not write anything outside PATH and its temporaries. */
#ifndef DDP_REPLACE_DIR_H
#define DDP_REPLACE_DIR_H

#include <stdbool.h>

#include "err.h"

/* Writes the contents, files only, into the empty folder dir; DDP_OK or err filled. */
typedef int (*replace_dir_writer)(const char *dir, void *ctx, ddp_err *err);
/* True for an entry of the old folder the new contents replace (left behind, even when the writer
 * did not write that name: an earlier export's stale shard). */
typedef bool (*replace_dir_claims)(const char *name);

/* DDP_OK once path is a folder holding what write wrote (and the old folder's unclaimed entries),
 * durably. last (may be NULL): the name whose presence makes the folder usable (an export's
 * config.json), one of the writer's files, moved in last when the folder is written in place. DDP_EUSAGE when path exists
 * but is not a folder, or when no temporary can be made (a missing path's parent missing or not
 * writable; an existing one's parent and the folder itself not writable); DDP_ERUNTIME naming the
 * path, the call and strerror for any other failure; the writer's own code when it fails.
 * Removing the old folder after the swap only warns on failure. */
int replace_dir(const char *path, replace_dir_writer write, replace_dir_claims claims, const char *last, void *ctx,
                ddp_err *err);

#endif
