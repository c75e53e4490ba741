/* bench_ckpt.c — checkpoint save cost: the training-loop stall (snapshot copy in
 * ckpt_writer_submit) and the background write throughput (write + fsync + rename + dir fsync),
 * for states of a given size, with the pruning of the previous save (keep_last 1) timed apart, as
 * `dd if=/dev/zero of=X bs=1M count=100 conv=fsync`, its anchor, deletes nothing.
 *
 * usage: bench_ckpt DIR [MB...]   (default 10 100). Prints one line per save; never asserts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/ckpt/ckpt.h"

/* baseline: the same tensor bytes written raw (4 MiB writes + fsync), no CRC, no rename */
static void raw_write(const char *dir, const ckpt_tensor *t, int n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw.bin", dir);
    double t0 = monotonic_s();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    uint64_t total = 0;
    for (int i = 0; i < n && fd >= 0; i++) {
        const char *p = t[i].data;
        uint64_t left = ckpt_tensor_numel(&t[i]) * 4;
        while (left > 0) {
            ssize_t w = write(fd, p, left > (4u << 20) ? (4u << 20) : left);
            if (w <= 0)
                break;
            p += w;
            left -= (uint64_t)w;
            total += (uint64_t)w;
        }
    }
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    double dt = monotonic_s() - t0;
    unlink(path);
    printf("baseline raw write+fsync of the same %.1f MB: %7.1f ms = %6.0f MB/s\n", (double)total / 1e6,
           dt * 1e3, (double)total / 1e6 / dt);
}

static int bench(const char *dir, double mb)
{
    enum { N = 8 };
    ckpt_tensor t[N];
    size_t per = (size_t)(mb * 1e6 / N / 4);
    for (int i = 0; i < N; i++) {
        memset(&t[i], 0, sizeof t[i]);
        snprintf(t[i].name, sizeof t[i].name, "param/layer%d.weight", i);
        t[i].dtype = CKPT_F32;
        t[i].ndim = 1;
        t[i].shape[0] = (int64_t)per;
        float *p = malloc(per * 4);
        for (size_t k = 0; k < per; k++)
            p[k] = (float)(k % 1000) * 1e-3f;
        t[i].data = p;
    }
    ckpt_state s = {0};
    s.n_tensors = N;
    s.tensors = t;
    snprintf(s.hdr.model, sizeof s.hdr.model, "bench");
    ckpt_writer *w;
    ddp_err err = {0};
    if (ckpt_writer_create(dir, 1, &w, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (int rep = 0; rep < 3; rep++) {
        s.hdr.step = rep + 1;
        ckpt_write_stats st;
        if (ckpt_writer_submit(w, &s, &err) || ckpt_writer_wait(w, &st, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        printf("state %6.1f MB  save %d: stall (snapshot copy) %7.2f ms  background write %7.1f ms  "
               "= %6.0f MB/s  then pruning %7.1f ms\n", (double)st.bytes / 1e6, rep + 1, st.snapshot_s * 1e3,
               st.write_s * 1e3, (double)st.bytes / 1e6 / st.write_s, st.prune_s * 1e3);
    }
    ckpt_writer_destroy(w);
    raw_write(dir, t, N);
    raw_write(dir, t, N);
    for (int i = 0; i < N; i++)
        free((void *)t[i].data);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_ckpt DIR [MB...]\n");
        return 2;
    }
    int rc = 0;
    if (argc == 2)
        rc = bench(argv[1], 10) || bench(argv[1], 100);
    for (int i = 2; i < argc && !rc; i++)
        rc = bench(argv[1], atof(argv[i]));
    return rc;
}
