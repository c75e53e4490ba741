/* test_reducer_bf16.c — the reducer's bfloat16 gradients (reducer_use_bf16) under real mpirun:
 * argv[1] "cpu" runs the CPU device over the MPI communicator, "cuda" the CUDA device (emulated in
 * the emulated build) over NCCL.
 *
 * Every rank holds the same gradients, each a bfloat16 value of at most 5 significant bits, so
 * every partial sum over up to 8 ranks is exact in bfloat16 whatever the order, and the average the reducer
 * leaves in the fp32 gradients must be the value itself up to fp32's rounding of the scale 1/size
 * and of the product (2^-23 relative). NCCL's own ncclAvg would not be: it multiplies by 1/size
 * rounded to bfloat16 (0.333984375 at 3 ranks) before the sum, leaving a bfloat16 ulp (2^-7 of the
 * value) off on many elements. Checked all-reduced (every gradient) and under ZeRO-1
 * (reduce-scattered: this rank's blocks), over buckets small enough to be many. */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/reducer.h"
#include "runtime/base/half.h"
#include "runtime/base/mpi_thread.h"
#include "tests/check.h"

static int g_rank, g_size;

/* Gradient i, the same on every rank: ±(16..31)·2^(-14..-4), exact in bfloat16 with 3 bits spare. */
static float grad_of(size_t i)
{
    float v = ldexpf((float)(16 + (i * 7) % 16), (int)(i % 11) - 14);
    return i % 3 == 1 ? -v : v;
}

/* Tensors of 1, 4, 12, ... elements, the last one taking the rest: up to four, the first at 0. */
static int make_tensors(size_t n, size_t *offs)
{
    int k = 1;
    offs[0] = 0;
    for (size_t at = 1; at < n && k < 4; at = at * 3 + 2)
        offs[k++] = at;
    return k;
}

static void backward(reducer *r, const size_t *offs, int n_tensors, size_t n)
{
    reducer_begin(r, false);
    for (int t = n_tensors - 1; t >= 0; t--)
        reducer_grad_ready(r, offs[t], (t + 1 < n_tensors ? offs[t + 1] : n) - offs[t]);
}

/* Whether gradient i is this rank's to check: all of them, or under ZeRO-1 its blocks. */
static bool mine(const reducer *r, bool zero, size_t i)
{
    if (!zero)
        return true;
    for (int b = 0; b < r->n_buckets; b++) {
        size_t p, s, c;
        reducer_zero_part(r, b, g_rank, &p, &s, &c);
        if (i >= p && i < p + c)
            return true;
    }
    return false;
}

static void one_case(comm *c, device *d, size_t n, bool zero)
{
    const char *mode = zero ? "ZeRO-1" : "all-reduce";
    size_t tail = zero ? (size_t)g_size - 1 : 0, offs[8], bytes = (n + tail) * sizeof(float);
    int n_tensors = make_tensors(n, offs);
    float *host = calloc(n + tail, sizeof *host), *grads = NULL, *params = NULL;
    CHECK(host != NULL, "host buffer");
    for (size_t i = 0; i < n; i++)
        host[i] = grad_of(i);
    ddp_err err = {0};
    reducer *r = NULL;
    int rc = d->ops->alloc(d, bytes, (void **)&grads, &err);
    if (rc == DDP_OK)
        rc = d->ops->alloc(d, bytes, (void **)&params, &err);
    if (rc == DDP_OK)
        rc = d->ops->upload(d, grads, host, bytes, &err);
    if (rc == DDP_OK)
        rc = d->ops->fill(d, TENSOR_F32, params, n + tail, 0.0f, &err);
    /* buckets of 64 floats after a first of 16 */
    if (rc == DDP_OK)
        rc = reducer_create(c, grads, n, offs, n_tensors, 256.0 / (1 << 20), 64.0 / (1 << 20), &r, &err);
    if (rc == DDP_OK && zero)
        rc = reducer_use_zero(r, params, tail, &err);
    if (rc == DDP_OK)
        rc = reducer_use_bf16(r, d, &err);
    if (rc == DDP_OK) {
        backward(r, offs, n_tensors, n);
        rc = reducer_finish(r, &err);
    }
    if (rc == DDP_OK)
        rc = d->ops->download(d, host, grads, n * sizeof(float), &err);
    CHECK(rc == DDP_OK, "%s n=%zu: %s", mode, n, err.msg);
    size_t bad = 0, first = 0, checked = 0;
    for (size_t i = 0; rc == DDP_OK && i < n; i++) {
        if (!mine(r, zero, i))
            continue;
        checked++;
        if (!(fabsf(host[i] - grad_of(i)) <= ldexpf(fabsf(grad_of(i)), -23)) && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "%s n=%zu at %d ranks: %zu of %zu averages of equal bf16 gradients are not the gradient "
          "(first at %zu: %.9g, expected %.9g)", mode, n, g_size, bad, checked, first, rc == DDP_OK ? host[first] : 0.0,
          grad_of(first));
    CHECK(rc != DDP_OK || checked > 0, "%s n=%zu: this rank checked nothing", mode, n);
    reducer_destroy(r);
    if (grads)
        d->ops->free(d, grads);
    if (params)
        d->ops->free(d, params);
    free(host);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, DDP_MPI_THREAD_LEVEL, &provided);
    bool cuda = argc > 1 && strcmp(argv[1], "cuda") == 0;
    ddp_err err = {0};
    comm *mpi = NULL, *c = NULL;
    device *d = NULL;
    int rc = comm_mpi_create(&mpi, &err);
    if (rc == DDP_OK) {
        g_rank = mpi->rank;
        g_size = mpi->size;
        const device_opts o = {.kind = cuda ? DEVICE_CUDA : DEVICE_CPU};
        rc = device_open(&o, mpi->local_rank, &d, &err);
    }
    if (rc == DDP_OK && cuda) {
        comm_nccl_opts no = {.compute_stream = d->stream, .device = d->index, .timeout_s = 60};
        rc = comm_nccl_create(&no, &c, &err);
    } else if (rc == DDP_OK) {
        c = mpi;
    }
    CHECK(rc == DDP_OK, "setup: %s", err.msg);
    const size_t counts[] = {1, 5, 333, 4099};
    for (size_t i = 0; rc == DDP_OK && i < sizeof counts / sizeof counts[0]; i++) {
        one_case(c, d, counts[i], false);
        if (counts[i] >= (size_t)g_size)
            one_case(c, d, counts[i], true);
    }
    if (c && c != mpi)
        c->ops->destroy(c);
    if (d)
        d->ops->destroy(d);
    if (mpi)
        mpi->ops->destroy(mpi);
    int failed = check_done(g_rank == 0 ? "test_reducer_bf16" : "test_reducer_bf16 (other rank)");
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
