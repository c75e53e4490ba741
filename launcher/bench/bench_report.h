/* bench_report.h — what ddprun-bench reports and the facts it reports from (each rank's table
 * line, the measured rows, the run they belong to), the functions that gather, print and write
 * them, and what the reports and the harness (bench_main.c) share besides:
 *   bench_report.c  the rank table, the host topology, the results table, footer and JSON
 *   bench_gpu.c     the local GPUs: names, PCI bus ids, peer-to-peer matrix, CUDA/NCCL versions
 *                   (bench_gpu_absent.c in builds without CUDA)
 *   bench_abort.c   a failure of one rank alone: its message, then MPI_Abort
 * Bookkeeping between ranks (rank table, topology, times, wrong counts) goes over MPI_COMM_WORLD,
 * never through the communicator under test. */
#ifndef DDP_BENCH_REPORT_H
#define DDP_BENCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "bench_colls.h"
#include "bench_opts.h"
#include "collectives/mpi_identity.h"
#include "runtime/device/device.h"

/* One rank's line of the header table; gathered to every rank. */
typedef struct rank_info {
    int pid, cores, numa_nodes, local_rank;
    char host[DDP_HOST_NAME_MAX], device[128], numa[160];
} rank_info;

typedef struct placement {
    double time_us, algbw, busbw;
    long long wrong; /* -1: not checked */
} placement;

typedef struct row_result {
    size_t bytes; /* the whole message: all ranks' blocks for all-gather, reduce-scatter and all-to-all */
    size_t count; /* the count each rank passes (one rank's block there), as nccl-tests prints it */
    comm_dtype dt;
    int op;   /* -1: not a reduction */
    int root; /* -1: no root */
    placement p[2]; /* out of place, in place */
} row_result;

/* What the rows were measured with, for the header and the JSON file. */
typedef struct bench_run {
    const mpi_identity *id;  /* this process in MPI_COMM_WORLD */
    const bench_opts *o;
    const bench_coll *coll;
    const char *backend;     /* "mpi" or "nccl" */
    const rank_info *ranks;  /* id->size entries */
    const row_result *rows;
    size_t n_rows;
} bench_run;

/* ---- bench_abort.c ---- */
/* A failure on this rank alone (the others may be waiting inside a collective): prints
 * "[rank N host] error: ddprun-bench: MSG" and ends the whole job with MPI_Abort(exit_code). */
__attribute__((noreturn)) void bench_abort(int exit_code, const char *msg);
/* malloc that takes the job down (bench_abort) rather than return NULL; never NULL for 0 bytes. */
void *bench_xalloc(size_t bytes);

/* ---- bench_report.c ---- */
/* Every rank's table line (device: what this rank's buffers live on). Collective. */
rank_info *bench_gather_ranks(const mpi_identity *id, const char *device);
/* "# Topology": one line per host (cores, NUMA nodes, ranks, GPUs), then each host's GPU lines
 * (bench_gpu_describe on its first rank). Collective. */
void bench_print_topology(const mpi_identity *id, const rank_info *all);
/* The opening line and the rank table; the column headings. */
void bench_print_header(const bench_run *run);
void bench_print_columns(void);
void bench_print_row(const row_result *x);
/* Footer lines; *wrong = all wrong elements, *avg_busbw = plain mean of every busbw value. */
void bench_print_footer(const bench_run *run, long long *wrong, double *avg_busbw);
/* -J's file, written whole or not at all (runtime/base/replace_file.h): a failed write leaves the
 * file that was there as it was; a path that is no regular file (/dev/stdout, a FIFO) is written
 * in place. DDP_ERUNTIME on any failure. */
int bench_write_json(const bench_run *run, long long wrong, double avg_busbw, ddp_err *err);

/* ---- bench_gpu.c / bench_gpu_absent.c ---- */
/* This host's GPUs as "# "-prefixed lines (name and PCI bus id each, the P2P matrix, CUDA and
 * NCCL versions), or one line "no CUDA devices (reason)". Returns the GPU count. */
int bench_gpu_describe(char *out, size_t len);
/* "cuda:1 [0000:01:00.0] NVIDIA H100 80GB HBM3" for the header's device column. */
void bench_gpu_label(const device *dev, char *out, size_t len);

#endif
