/* half_mpi.h — MPI reduction functions for 2-byte floats (IEEE half and bfloat16), which MPI
 * lacks: each element is widened to float, combined, and rounded back to nearest-even.
 * Shared by the MPI communicator and the emulated NCCL shim, so both reduce these types the
 * same way, and make and free their MPI objects alike (fp16_mpi_ops_create, the one place that
 * does). Header-only (static functions). */
#ifndef DDP_HALF_MPI_H
#define DDP_HALF_MPI_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "half.h"

enum fp16_mpi_op { FP16_SUM, FP16_PROD, FP16_MIN, FP16_MAX, FP16_NOPS };

static inline float fp16_mpi_combine(float a, float b, enum fp16_mpi_op op)
{
    switch (op) {
    case FP16_PROD: return a * b;
    case FP16_MIN: return b < a ? b : a;
    case FP16_MAX: return b > a ? b : a;
    default: return a + b;
    }
}

#define FP16_MPI_FN(name, to_float, from_float, op)                                    \
    static void name(void *in, void *inout, int *len, MPI_Datatype *dt)                \
    {                                                                                  \
        (void)dt;                                                                      \
        const uint16_t *a = in;                                                        \
        uint16_t *b = inout;                                                           \
        for (int i = 0; i < *len; i++)                                                 \
            b[i] = from_float(fp16_mpi_combine(to_float(b[i]), to_float(a[i]), op));   \
    }
FP16_MPI_FN(fp16_mpi_half_sum, half_to_float, float_to_half, FP16_SUM)
FP16_MPI_FN(fp16_mpi_half_prod, half_to_float, float_to_half, FP16_PROD)
FP16_MPI_FN(fp16_mpi_half_min, half_to_float, float_to_half, FP16_MIN)
FP16_MPI_FN(fp16_mpi_half_max, half_to_float, float_to_half, FP16_MAX)
FP16_MPI_FN(fp16_mpi_bf16_sum, bf16_to_float, float_to_bf16, FP16_SUM)
FP16_MPI_FN(fp16_mpi_bf16_prod, bf16_to_float, float_to_bf16, FP16_PROD)
FP16_MPI_FN(fp16_mpi_bf16_min, bf16_to_float, float_to_bf16, FP16_MIN)
FP16_MPI_FN(fp16_mpi_bf16_max, bf16_to_float, float_to_bf16, FP16_MAX)
#undef FP16_MPI_FN

/* The MPI_User_function for op on half (bf16 = false) or bfloat16 values. */
static inline MPI_User_function *fp16_mpi_function(bool bf16, enum fp16_mpi_op op)
{
    static MPI_User_function *const half[FP16_NOPS] = {fp16_mpi_half_sum, fp16_mpi_half_prod,
                                                       fp16_mpi_half_min, fp16_mpi_half_max};
    static MPI_User_function *const bf[FP16_NOPS] = {fp16_mpi_bf16_sum, fp16_mpi_bf16_prod,
                                                     fp16_mpi_bf16_min, fp16_mpi_bf16_max};
    return bf16 ? bf[op] : half[op];
}

/* The 2-byte MPI type, and for each of the n ops of order (the caller's op numbering) the MPI_Op
 * reducing half values (half[i]) and bfloat16 values (bf16[i]). Every handle starts as the null
 * one, so fp16_mpi_ops_free frees what was made also after a failure. Returns MPI_SUCCESS or the
 * first failing call's code. */
static inline int fp16_mpi_ops_create(const enum fp16_mpi_op *order, int n, MPI_Datatype *two_byte, MPI_Op *half,
                                      MPI_Op *bf16)
{
    *two_byte = MPI_DATATYPE_NULL;
    for (int i = 0; i < n; i++)
        half[i] = bf16[i] = MPI_OP_NULL;
    int rc = MPI_Type_contiguous(2, MPI_BYTE, two_byte);
    if (rc == MPI_SUCCESS)
        rc = MPI_Type_commit(two_byte);
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        rc = MPI_Op_create(fp16_mpi_function(false, order[i]), 1, &half[i]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Op_create(fp16_mpi_function(true, order[i]), 1, &bf16[i]);
    }
    return rc;
}

/* Frees what fp16_mpi_ops_create made (before MPI_Finalize). */
static inline void fp16_mpi_ops_free(int n, MPI_Datatype *two_byte, MPI_Op *half, MPI_Op *bf16)
{
    for (int i = 0; i < n; i++) {
        if (half[i] != MPI_OP_NULL)
            MPI_Op_free(&half[i]);
        if (bf16[i] != MPI_OP_NULL)
            MPI_Op_free(&bf16[i]);
    }
    if (*two_byte != MPI_DATATYPE_NULL)
        MPI_Type_free(two_byte);
}

#endif
