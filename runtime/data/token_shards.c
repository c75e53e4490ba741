/* token_shards.c — finding, mapping and validating a split's llm.c token shards; stream lookups.
 *
 * Owns the directory scan (SPLIT_NNNNNN.bin, numbered without gaps from 000000), the per-shard
 * checks (header size, magic, the magic's version, token count, exact file size for the magic's token
 * size), the rule that a split's shards share one token size, the prefix sums that map a stream
 * position to its shard in O(log shards), window gathering and the vocabulary scan. Shards
 * are mmapped read-only and never copied: a dataset of billions of tokens costs page cache, not heap.
 * Everything is decoded explicitly little-endian, byte by byte, as the checkpoint format is. It must
 * not know about ranks, batching order, models or devices, and must not print. */
#include "token_shards.h"
#include "runtime/base/open_input.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Shard numbers are written with at least 6 digits (%06d): 7 or more from shard 1000000 on; 9 keep
 * them in an int32 */
#define SHARD_DIGITS 6
#define SHARD_DIGITS_MAX 9
#define SPLIT_MAX 64
/* The vocabulary scan takes the maximum of a block first (a loop the compiler vectorizes) and
 * looks for the offending position only in a block that has one. */
#define SCAN_BLOCK 65536

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t le32u(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int32_t le32(const uint8_t *p) { return (int32_t)le32u(p); }

/* ---- finding the shard files ---- */

/* The split becomes part of file names, so it must not be able to leave the directory. */
static int check_split(const char *split, ddp_err *err)
{
    size_t len = split ? strlen(split) : 0;
    if (len == 0 || len >= SPLIT_MAX || strchr(split, '/'))
        return ddp_fail(err, DDP_EUSAGE, "token shards: split \"%s\" must be a non-empty file-name "
                        "prefix such as \"train\" or \"val\"", split ? split : "(null)");
    return DDP_OK;
}

/* The shard number of a name "SPLIT_NNNNNN.bin" as %06d writes it (six digits, more without a leading
 * zero), or -1 for any other name. */
static int32_t shard_number(const char *name, const char *split)
{
    size_t len = strlen(split);
    if (strncmp(name, split, len) != 0 || name[len] != '_')
        return -1;
    const char *digits = name + len + 1;
    int32_t k = 0;
    int n = 0;
    for (; n < SHARD_DIGITS_MAX && digits[n] >= '0' && digits[n] <= '9'; n++)
        k = k * 10 + (digits[n] - '0');
    if (n < SHARD_DIGITS || (n > SHARD_DIGITS && digits[0] == '0'))
        return -1;
    return strcmp(digits + n, ".bin") == 0 ? k : -1;
}

static int push_number(int32_t **list, int64_t *n, int64_t *cap, int32_t k)
{
    if (*n == *cap) {
        int64_t grown_cap = *cap ? 2 * *cap : 64;
        int32_t *grown = realloc(*list, (size_t)grown_cap * sizeof *grown);
        if (!grown)
            return -1;
        *list = grown;
        *cap = grown_cap;
    }
    (*list)[(*n)++] = k;
    return 0;
}

static int compare_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* A missing or unreadable directory is the user's to fix; anything else is the system's. */
static int open_dir_error(void)
{
    return errno == ENOENT || errno == ENOTDIR || errno == EACCES ? DDP_EUSAGE : DDP_ERUNTIME;
}

/* The numbers of every SPLIT_NNNNNN.bin in dir, sorted ascending (*n may be 0). */
static int list_numbers(const char *dir, const char *split, int32_t **out, int64_t *n, ddp_err *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return ddp_fail(err, open_dir_error(), "%s: cannot open the token shard directory: %s "
                        "(scripts/prepare-text makes it)", dir, strerror(errno));
    int64_t cap = 0;
    int rc = DDP_OK;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno)
                rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot list the directory: %s", dir, strerror(errno));
            break;
        }
        int32_t k = shard_number(e->d_name, split);
        if (k >= 0 && push_number(out, n, &cap, k) != 0) {
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory listing %s shards", dir, split);
            break;
        }
    }
    closedir(d);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
        return rc;
    }
    if (*n > 1)
        qsort(*out, (size_t)*n, sizeof **out, compare_i32);
    return DDP_OK;
}

/* Sorted unique numbers are 0..n-1 exactly when numbers[k] == k for every k; the first k where that
 * fails is the missing file, and numbers[k] is a later one that exists. */
static int check_numbering(const char *dir, const char *split, const int32_t *numbers, int64_t n,
                           ddp_err *err)
{
    if (n == 0)
        return ddp_fail(err, DDP_EUSAGE, "%s: no %s token shards: expected files %s_000000.bin, "
                        "%s_000001.bin, ... (scripts/prepare-text makes them)", dir, split, split, split);
    for (int64_t k = 0; k < n; k++)
        if (numbers[k] != k)
            return ddp_fail(err, DDP_EUSAGE, "%s/%s_%06lld.bin is missing but %s_%06d.bin exists "
                            "(shards must be numbered consecutively from %s_000000.bin)", dir, split,
                            (long long)k, split, numbers[k], split);
    return DDP_OK;
}

int token_shard_file_name(char *out, size_t n, const char *dir, const char *split, int64_t k, const char *ext)
{
    return snprintf(out, n, "%s/%s_%06lld.%s", dir, split, (long long)k, ext);
}

static char *shard_path(const char *dir, const char *split, int64_t k)
{
    int len = token_shard_file_name(NULL, 0, dir, split, k, "bin");
    char *path = len < 0 ? NULL : malloc((size_t)len + 1);
    if (path)
        token_shard_file_name(path, (size_t)len + 1, dir, split, k, "bin");
    return path;
}

/* ---- one shard ---- */

static int map_file(token_shard *sh, ddp_err *err)
{
    int fd;
    int orc = open_input(sh->path, &fd, err);
    if (orc != DDP_OK)
        return orc;
    struct stat st;
    int rc = DDP_OK;
    if (fstat(fd, &st) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot stat: %s", sh->path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = ddp_fail(err, DDP_EUSAGE, "%s: not a regular file", sh->path);
    /* checked before mmap, which refuses length 0, so an empty file gets the same message */
    else if (st.st_size < TOKEN_SHARD_HEADER_BYTES)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: %lld bytes is too short for the %d-byte shard header",
                      sh->path, (long long)st.st_size, TOKEN_SHARD_HEADER_BYTES);
    if (!rc) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED)
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot mmap %lld bytes: %s", sh->path,
                          (long long)st.st_size, strerror(errno));
        else
            sh->map = map, sh->map_len = (size_t)st.st_size;
    }
    close(fd); /* the mapping keeps the file alive */
    return rc;
}

static const char *token_type_name(int token_bytes) { return token_bytes == 2 ? "uint16" : "uint32"; }

/* The magic says the token size; each magic has one version. */
static int check_format(token_shard *sh, int32_t magic, int32_t version, ddp_err *err)
{
    int32_t want_version;
    if (magic == TOKEN_SHARD_MAGIC_U16)
        sh->token_bytes = 2, want_version = TOKEN_SHARD_VERSION_U16;
    else if (magic == TOKEN_SHARD_MAGIC_U32)
        sh->token_bytes = 4, want_version = TOKEN_SHARD_VERSION_U32;
    else
        return ddp_fail(err, DDP_EUSAGE, "%s: bad magic %d, expected %d (an llm.c token shard of uint16 "
                        "tokens) or %d (uint32 tokens)", sh->path, magic, TOKEN_SHARD_MAGIC_U16,
                        TOKEN_SHARD_MAGIC_U32);
    if (version != want_version)
        return ddp_fail(err, DDP_EUSAGE, "%s: unsupported shard version %d, expected %d for magic %d (%s "
                        "tokens)", sh->path, version, want_version, magic, token_type_name(sh->token_bytes));
    return DDP_OK;
}

static int check_header(token_shard *sh, ddp_err *err)
{
    int32_t magic = le32(sh->map), version = le32(sh->map + 4), count = le32(sh->map + 8);
    int rc = check_format(sh, magic, version, err);
    if (rc)
        return rc;
    if (count < 1)
        return ddp_fail(err, DDP_EUSAGE, "%s: header declares %d tokens; a shard holds at least 1",
                        sh->path, count);
    /* int64 arithmetic: 4 * INT32_MAX + 1024 does not fit an int32 */
    long long want = TOKEN_SHARD_HEADER_BYTES + sh->token_bytes * (long long)count, have = (long long)sh->map_len;
    if (have < want)
        return ddp_fail(err, DDP_EUSAGE, "%s: truncated: the header declares %d tokens (%lld bytes with "
                        "the header) but the file has %lld bytes", sh->path, count, want, have);
    if (have > want)
        return ddp_fail(err, DDP_EUSAGE, "%s: %lld trailing bytes: the header declares %d tokens (%lld "
                        "bytes with the header) but the file has %lld bytes", sh->path, have - want,
                        count, want, have);
    sh->tokens = sh->map + TOKEN_SHARD_HEADER_BYTES;
    sh->ntokens = count;
    return DDP_OK;
}

static void shard_release(token_shard *sh)
{
    if (sh->map)
        munmap((void *)sh->map, sh->map_len);
    free(sh->path);
    memset(sh, 0, sizeof *sh);
}

/* ---- the split ---- */

/* Shards of two formats come from two preparations with two tokenizers (llm.c and
 * scripts/prepare-text pick the format by the tokenizer), whose ids mean different things. */
static int check_same_format(const token_shard *first, const token_shard *sh, ddp_err *err)
{
    if (sh->token_bytes == first->token_bytes)
        return DDP_OK;
    return ddp_fail(err, DDP_EUSAGE, "%s holds %s tokens but %s holds %s tokens: a dataset's shards, train "
                    "and val, share one format (scripts/prepare-text writes them together)", sh->path,
                    token_type_name(sh->token_bytes), first->path, token_type_name(first->token_bytes));
}

static int open_shards(const char *dir, const char *split, token_shards *s, ddp_err *err)
{
    for (int64_t k = 0; k < s->count; k++) {
        token_shard *sh = &s->shards[k];
        sh->path = shard_path(dir, split, k);
        if (!sh->path)
            return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for shard paths", dir);
        int rc = map_file(sh, err);
        if (!rc)
            rc = check_header(sh, err);
        if (!rc)
            rc = check_same_format(&s->shards[0], sh, err);
        if (rc)
            return rc;
        s->start[k + 1] = s->start[k] + sh->ntokens;
    }
    s->total = s->start[s->count];
    s->token_bytes = s->shards[0].token_bytes;
    return DDP_OK;
}

int token_shards_open(const char *dir, const char *split, token_shards *out, ddp_err *err)
{
    memset(out, 0, sizeof *out);
    int32_t *numbers = NULL;
    int64_t n = 0;
    int rc = check_split(split, err);
    if (!rc)
        rc = list_numbers(dir, split, &numbers, &n, err);
    if (!rc)
        rc = check_numbering(dir, split, numbers, n, err);
    free(numbers);
    if (rc)
        return rc;
    out->count = n;
    out->shards = calloc((size_t)n, sizeof *out->shards);
    out->start = calloc((size_t)n + 1, sizeof *out->start);
    if (!out->shards || !out->start)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %lld shards", dir, (long long)n);
    if (!rc)
        rc = open_shards(dir, split, out, err);
    if (rc)
        token_shards_close(out);
    return rc;
}

int token_shards_check_same_format(const token_shards *a, const token_shards *b, ddp_err *err)
{
    return check_same_format(&a->shards[0], &b->shards[0], err);
}

void token_shards_close(token_shards *s)
{
    if (!s)
        return;
    for (int64_t k = 0; s->shards && k < s->count; k++)
        shard_release(&s->shards[k]);
    free(s->shards);
    free(s->start);
    memset(s, 0, sizeof *s);
}

/* ---- reading the stream ---- */

int64_t token_shards_windows(const token_shards *s, int64_t T)
{
    if (T < 1 || s->total < 2)
        return 0;
    return (s->total - 1) / T;
}

int64_t token_shards_shard_of(const token_shards *s, int64_t pos)
{
    int64_t lo = 0, hi = s->count - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (s->start[mid] <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

void token_shards_copy(const token_shards *s, int64_t pos, int64_t n, int32_t *dst)
{
    assert(pos >= 0 && n >= 0 && pos + n <= s->total);
    int64_t k = token_shards_shard_of(s, pos);
    while (n > 0) {
        const token_shard *sh = &s->shards[k];
        int64_t off = pos - s->start[k], run = sh->ntokens - off;
        run = run < n ? run : n;
        /* one loop per token size, so each stays a plain loop the compiler vectorizes */
        if (sh->token_bytes == 2)
            for (int64_t i = 0; i < run; i++)
                dst[i] = le16(sh->tokens + 2 * (off + i));
        else
            for (int64_t i = 0; i < run; i++)
                dst[i] = (int32_t)le32u(sh->tokens + 4 * (off + i));
        dst += run, pos += run, n -= run, k++;
    }
}

void token_shards_gather(const token_shards *s, int64_t T, const int64_t *window_idx, int64_t count,
                         int32_t *inputs, int32_t *targets)
{
    assert(T >= 1);
    for (int64_t i = 0; i < count; i++) {
        int64_t w = window_idx[i];
        assert(w >= 0 && w < token_shards_windows(s, T));
        token_shards_copy(s, w * T, T, inputs + i * T);
        token_shards_copy(s, w * T + 1, T, targets + i * T);
    }
}

static uint32_t shard_token(const token_shard *sh, int64_t i)
{
    return sh->token_bytes == 2 ? le16(sh->tokens + 2 * i) : le32u(sh->tokens + 4 * i);
}

uint32_t token_shards_at(const token_shards *s, int64_t pos)
{
    assert(pos >= 0 && pos < s->total);
    const token_shard *sh = &s->shards[token_shards_shard_of(s, pos)];
    return shard_token(sh, pos - s->start[sh - s->shards]);
}

/* The largest of tokens [b, e) of sh: one plain loop per token size, which the compiler vectorizes. */
static uint32_t block_max(const token_shard *sh, int64_t b, int64_t e)
{
    uint32_t max = 0;
    if (sh->token_bytes == 2)
        for (int64_t i = b; i < e; i++) {
            uint32_t v = le16(sh->tokens + 2 * i);
            max = v > max ? v : max;
        }
    else
        for (int64_t i = b; i < e; i++) {
            uint32_t v = le32u(sh->tokens + 4 * i);
            max = v > max ? v : max;
        }
    return max;
}

/* Index of the first token >= limit in sh, or -1. */
static int64_t first_at_least(const token_shard *sh, uint32_t limit)
{
    int64_t n = sh->ntokens;
    for (int64_t b = 0; b < n; b += SCAN_BLOCK) {
        int64_t e = n - b < SCAN_BLOCK ? n : b + SCAN_BLOCK;
        if (block_max(sh, b, e) < limit)
            continue;
        for (int64_t i = b; i < e; i++)
            if (shard_token(sh, i) >= limit)
                return i;
    }
    return -1;
}

int token_shards_check_vocab(const token_shards *s, int64_t vocab_size, ddp_err *err)
{
    if (vocab_size < 1)
        return ddp_fail(err, DDP_EUSAGE, "token shards: vocab_size %lld must be >= 1", (long long)vocab_size);
    for (int64_t k = 0; k < s->count; k++) {
        const token_shard *sh = &s->shards[k];
        /* ids of this size are all below 2^16 (2^32): nothing to scan */
        if (vocab_size > (sh->token_bytes == 2 ? (int64_t)UINT16_MAX : (int64_t)UINT32_MAX))
            continue;
        int64_t i = first_at_least(sh, (uint32_t)vocab_size);
        if (i >= 0)
            return ddp_fail(err, DDP_EUSAGE, "token %" PRIu32 " at %s:%lld is >= vocab_size %lld",
                            shard_token(sh, i), sh->path, (long long)i, (long long)vocab_size);
    }
    return DDP_OK;
}
