/* fuzz_util.c — the fuzz targets' scratch folder and input splitting (fuzz_util.h).
 *
 * Must not be linked into anything but the fuzz targets: it aborts on harness failures. */
#include "fuzz_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char scratch[512];

static void die(const char *what, const char *path)
{
    fprintf(stderr, "fuzz harness: %s %s: %s\n", what, path, strerror(errno));
    abort();
}

static void remove_scratch(void)
{
    if (!scratch[0])
        return;
    fuzz_clear_dir(scratch);
    rmdir(scratch);
}

const char *fuzz_dir(void)
{
    if (scratch[0])
        return scratch;
    const char *base = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/ddprun-fuzz-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(scratch))
        die("cannot make the scratch folder", scratch);
    atexit(remove_scratch);
    return scratch;
}

void fuzz_path(char *out, size_t out_size, const char *name)
{
    if ((size_t)snprintf(out, out_size, "%s/%s", fuzz_dir(), name) >= out_size)
        die("path too long:", name);
}

void fuzz_write_file(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        die("cannot create", path);
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("cannot write", path);
        p += w;
        n -= (size_t)w;
    }
    if (close(fd) != 0)
        die("cannot close", path);
}

void fuzz_write_safetensors(const char *path, const uint8_t *data, size_t n)
{
    fuzz_part piece[2];
    const size_t parts = fuzz_split(data, n, "@@DATA@@", 8, piece, 2);
    const size_t data_n = parts > 1 ? piece[1].n : 0, total = 8 + piece[0].n + data_n;
    uint8_t *file = malloc(total);
    if (!file)
        die("out of memory for", path);
    for (int i = 0; i < 8; i++)
        file[i] = (uint8_t)((uint64_t)piece[0].n >> (8 * i));
    memcpy(file + 8, piece[0].p, piece[0].n);
    if (data_n)
        memcpy(file + 8 + piece[0].n, piece[1].p, data_n);
    fuzz_write_file(path, file, total);
    free(file);
}

static void clear(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (depth > 0)
                clear(path, depth - 1);
            if (rmdir(path) != 0)
                die("cannot remove", path);
        } else if (unlink(path) != 0) {
            die("cannot remove", path);
        }
    }
    closedir(d);
}

void fuzz_clear_dir(const char *dir) { clear(dir, 1); }

size_t fuzz_split(const uint8_t *data, size_t n, const void *sep, size_t sep_len, fuzz_part *parts, size_t max)
{
    size_t count = 0, start = 0;
    if (max == 0)
        return 0;
    for (size_t i = 0; count + 1 < max && sep_len > 0 && i + sep_len <= n;) {
        if (memcmp(data + i, sep, sep_len) == 0) {
            parts[count++] = (fuzz_part){data + start, i - start};
            i += sep_len;
            start = i;
        } else {
            i++;
        }
    }
    parts[count++] = (fuzz_part){data + start, n - start};
    return count;
}
