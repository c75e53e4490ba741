/* cublaslt_check.cpp — what the emulated cuBLASLt refuses, before the GEMM engine's own checks.
 *
 * Emulated is what ddprun's CUDA backend calls (llm.c's GPT-2 GEMMs): compute CUBLAS_COMPUTE_32F
 * (or _FAST_TF32 with fp32 A/B: inputs rounded to TF32, as cuda.tf32 asks) with scale CUDA_R_32F;
 * A, B, C, D all CUDA_R_32F, all CUDA_R_16BF, or bf16 A/B with fp32 C/D; epilogues DEFAULT, BIAS,
 * GELU_AUX_BIAS and DGELU with bias and aux in D's type; host scalars; batch 1; every size and ld
 * within int. Anything else is CUBLAS_STATUS_NOT_SUPPORTED ("not emulated"), layouts that do not
 * fit together are CUBLAS_STATUS_INVALID_VALUE, and each refusal prints one "cudaemu: <fn>:
 * <argument> ..." line. A matmul's operands must keep the alignment promised to the heuristic that
 * chose its algorithm. Beyond what cuBLASLt can see, a matmul's outputs must not overlap its
 * inputs or each other (threads of a GPU kernel would race), and the
 * workspace must be device memory overlapping nothing. Must not queue or compute anything. */
#include "cublaslt_shim.h"
#include "cudaemu_internal.h"
#include "runtime/base/align.h"

#include <initializer_list>
#include <limits.h>
#include <stdint.h>

namespace ddp_cudaemu {

static const char *op_name(int32_t op) { return op == CUBLAS_OP_N ? "N" : op == CUBLAS_OP_T ? "T" : "C"; }

static bool uses_bias(epilogue_kind k) { return k == EPILOGUE_BIAS || k == EPILOGUE_GELU_AUX_BIAS; }
static bool uses_aux(epilogue_kind k) { return k == EPILOGUE_GELU_AUX_BIAS || k == EPILOGUE_DGELU; }

/* NULL or a pointer to something else than a live descriptor of the kind: INVALID_VALUE. */
static cublasStatus_t find_descriptors(lt_problem *p)
{
    if (!p->handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, "%s: lightHandle is NULL", p->fn);
    if (!(p->desc = live<const lt_desc>(p->desc_handle)))
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: computeDesc=%p is not a live cublasLtMatmulDesc_t", p->fn,
                      static_cast<void *>(p->desc_handle));
    const lt_layout **out[4] = {&p->a, &p->b, &p->c, &p->d};
    for (int i = 0; i < 4; i++)
        if (!(*out[i] = live<const lt_layout>(p->layouts[i])))
            return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %cdesc=%p is not a live cublasLtMatrixLayout_t", p->fn,
                          "ABCD"[i], static_cast<void *>(p->layouts[i]));
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t check_desc_modes(const lt_problem &p)
{
    const lt_desc &d = *p.desc;
    if (d.compute_type != CUBLAS_COMPUTE_32F && d.compute_type != CUBLAS_COMPUTE_32F_FAST_TF32)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: computeType %d is not emulated (CUBLAS_COMPUTE_32F and "
                      "CUBLAS_COMPUTE_32F_FAST_TF32 are)", p.fn, (int)d.compute_type);
    if (d.scale_type != CUDA_R_32F)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: scaleType %s (%d) is not emulated (CUDA_R_32F is)", p.fn,
                      type_name((cudaDataType)d.scale_type), (int)d.scale_type);
    if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: CUBLASLT_MATMUL_DESC_POINTER_MODE %d is not emulated "
                      "(CUBLASLT_POINTER_MODE_HOST is)", p.fn, (int)d.pointer_mode);
    const int32_t ops[2] = {d.transa, d.transb};
    for (int i = 0; i < 2; i++)
        if (ops[i] != CUBLAS_OP_N && ops[i] != CUBLAS_OP_T && ops[i] != CUBLAS_OP_C)
            return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: CUBLASLT_MATMUL_DESC_TRANS%c=%d is not CUBLAS_OP_N/T/C",
                          p.fn, "AB"[i], (int)ops[i]);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t check_matrix_types(lt_problem *p)
{
    int32_t at = p->a->type, bt = p->b->type, ct = p->c->type, dt = p->d->type;
    if (at != bt || ct != dt)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A/B/C/D types %s/%s/%s/%s are not emulated (A and B, and C "
                      "and D, must match)", p->fn, type_name((cudaDataType)at), type_name((cudaDataType)bt),
                      type_name((cudaDataType)ct), type_name((cudaDataType)dt));
    bool ab_ok = at == CUDA_R_32F || at == CUDA_R_16BF;
    bool cd_ok = dt == at || (at == CUDA_R_16BF && dt == CUDA_R_32F);
    if (!ab_ok || !cd_ok)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A/B %s with C/D %s is not emulated (all CUDA_R_32F, all "
                      "CUDA_R_16BF, or CUDA_R_16BF A/B with CUDA_R_32F C/D are)", p->fn, type_name((cudaDataType)at),
                      type_name((cudaDataType)dt));
    if (p->desc->compute_type == CUBLAS_COMPUTE_32F_FAST_TF32 && at != CUDA_R_32F)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: CUBLAS_COMPUTE_32F_FAST_TF32 takes CUDA_R_32F A/B only, not %s",
                      p->fn, type_name((cudaDataType)at));
    p->ab_type = (cudaDataType)at;
    p->cd_type = (cudaDataType)dt;
    return CUBLAS_STATUS_SUCCESS;
}

/* An unset (-1) bias or aux type is D's, as cuBLASLt documents; an explicit other one is not emulated. */
static cublasStatus_t resolve_vector_type(const lt_problem &p, int32_t set, const char *attr, cudaDataType *out)
{
    if (set != -1 && set != p.cd_type)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %s %s (%d) differs from D's %s: not emulated", p.fn, attr,
                      type_name((cudaDataType)set), (int)set, type_name(p.cd_type));
    *out = p.cd_type;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t check_epilogue_kind(lt_problem *p)
{
    const lt_desc &d = *p->desc;
    gemm_epilogue &e = p->epilogue;
    switch (d.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: e.kind = EPILOGUE_NONE; break;
    case CUBLASLT_EPILOGUE_BIAS: e.kind = EPILOGUE_BIAS; break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: e.kind = EPILOGUE_GELU_AUX_BIAS; break;
    case CUBLASLT_EPILOGUE_DGELU: e.kind = EPILOGUE_DGELU; break;
    default:
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: CUBLASLT_MATMUL_DESC_EPILOGUE %u is not emulated (DEFAULT, "
                      "BIAS, GELU_AUX_BIAS and DGELU are)", p->fn, (unsigned)d.epilogue);
    }
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (uses_bias(e.kind))
        st = resolve_vector_type(*p, d.bias_type, "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE", &e.bias_type);
    if (st == CUBLAS_STATUS_SUCCESS && uses_aux(e.kind))
        st = resolve_vector_type(*p, d.aux_type, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE", &e.aux_type);
    e.bias = d.bias;
    e.aux = d.aux;
    return st;
}

/* Each layout on its own: sizes the CPU GEMM's int can hold, ld >= max(1, rows). */
static cublasStatus_t check_layout(const lt_problem &p, const lt_layout &l, char name)
{
    if (l.rows > INT_MAX || l.cols > INT_MAX || l.ld > INT_MAX)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %cdesc %llux%llu, ld=%lld: a size above INT_MAX is not "
                      "emulated (the CPU GEMM takes int)", p.fn, name, (unsigned long long)l.rows,
                      (unsigned long long)l.cols, (long long)l.ld);
    if (l.ld < 1 || (uint64_t)l.ld < l.rows)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %cdesc ld=%lld < max(1, rows=%llu)", p.fn, name,
                      (long long)l.ld, (unsigned long long)l.rows);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t mismatch(const lt_problem &p, char name, const lt_layout &l, int32_t op, uint64_t rows,
                               uint64_t cols, const char *what)
{
    return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %cdesc is %llux%llu but trans%c=%s needs %llux%llu (%s)", p.fn,
                  name, (unsigned long long)l.rows, (unsigned long long)l.cols, name - 'A' + 'a', op_name(op),
                  (unsigned long long)rows, (unsigned long long)cols, what);
}

/* D is m x n; C must have D's layout exactly; A is m x k (transposed: k x m), B k x n (n x k). */
static cublasStatus_t check_dimensions(lt_problem *p)
{
    const lt_layout *ls[4] = {p->a, p->b, p->c, p->d};
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = check_layout(*p, *ls[i], "ABCD"[i]);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    const lt_layout &a = *p->a, &b = *p->b, &c = *p->c, &d = *p->d;
    if (c.rows != d.rows || c.cols != d.cols || c.ld != d.ld)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: Cdesc %llux%llu ld=%lld differs from Ddesc %llux%llu "
                      "ld=%lld", p->fn, (unsigned long long)c.rows, (unsigned long long)c.cols, (long long)c.ld,
                      (unsigned long long)d.rows, (unsigned long long)d.cols, (long long)d.ld);
    bool ta = p->desc->transa != CUBLAS_OP_N, tb = p->desc->transb != CUBLAS_OP_N;
    uint64_t m = d.rows, n = d.cols, k = ta ? a.rows : a.cols;
    if ((ta ? a.cols : a.rows) != m)
        return mismatch(*p, 'A', a, p->desc->transa, ta ? k : m, ta ? m : k, "m = D's rows");
    if ((tb ? b.cols : b.rows) != k || (tb ? b.rows : b.cols) != n)
        return mismatch(*p, 'B', b, p->desc->transb, tb ? n : k, tb ? k : n, "k from A, n = D's columns");
    p->m = (int)m;
    p->n = (int)n;
    p->k = (int)k;
    return CUBLAS_STATUS_SUCCESS;
}

/* cuBLASLt: "Must be divisible by 8 and be no less than the number of rows in the output matrix". A
 * heuristic has no algorithm for it; a matmul calls it an invalid value. */
static cublasStatus_t check_aux_ld(lt_problem *p)
{
    int64_t ld = p->desc->aux_ld;
    if (!uses_aux(p->epilogue.kind))
        return CUBLAS_STATUS_SUCCESS;
    if (ld > INT_MAX)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD=%lld above INT_MAX is "
                      "not emulated", p->fn, (long long)ld);
    if (ld % 8 != 0 || ld < p->m || ld < 1)
        return reject(p->at_matmul ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_NOT_SUPPORTED,
                      "%s: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD=%lld must be a positive multiple of 8 and >= D's "
                      "rows (%d)", p->fn, (long long)ld, p->m);
    p->epilogue.aux_ld = (int)ld;
    return CUBLAS_STATUS_SUCCESS;
}

/* A GPU loads whole elements: a pointer off its element size has no kernel. */
static cublasStatus_t check_aligned(const char *fn, const void *ptr, const char *name, cudaDataType type)
{
    if (reinterpret_cast<uintptr_t>(ptr) % elem_bytes(type) == 0)
        return CUBLAS_STATUS_SUCCESS;
    return reject(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %s=%p is not aligned to its %zu-byte %s elements", fn, name, ptr,
                  elem_bytes(type), type_name(type));
}

cublasStatus_t check_problem(lt_problem *p)
{
    cublasStatus_t st = find_descriptors(p);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_desc_modes(*p);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_matrix_types(p);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_epilogue_kind(p);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_dimensions(p);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = check_aux_ld(p);
    /* the heuristic knows the epilogue's pointers (cuBLASLt picks kernels by their alignment) */
    const gemm_epilogue &e = p->epilogue;
    if (st == CUBLAS_STATUS_SUCCESS && uses_bias(e.kind))
        st = check_aligned(p->fn, e.bias, "CUBLASLT_MATMUL_DESC_BIAS_POINTER", e.bias_type);
    if (st == CUBLAS_STATUS_SUCCESS && uses_aux(e.kind))
        st = check_aligned(p->fn, e.aux, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", e.aux_type);
    return st;
}

/* The workspace is scratch the algorithm may use entirely: it must be device memory of its size. */
static cublasStatus_t check_workspace(const char *fn, const void *workspace, size_t bytes)
{
    if (bytes == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (!workspace)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: workspace is NULL with workspaceSizeInBytes=%zu", fn, bytes);
    alloc_kind kind;
    size_t overrun;
    bool found = alloc_lookup(workspace, bytes, &kind, &overrun);
    if (found && kind == ALLOC_DEVICE)
        return CUBLAS_STATUS_SUCCESS;
    if (overrun)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: workspace (%zu bytes) runs %zu bytes past the end of its "
                      "cudaMalloc allocation", fn, bytes, overrun);
    return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: workspace=%p is not device memory from cudaMalloc", fn,
                  workspace);
}

/* An algorithm is chosen for the alignment the preference promised (256 bytes unless set). On an
 * H100 a GELU-epilogue algorithm chosen for 256 but given A with 36-byte rows computed wrong
 * results without any error, so here a broken promise is refused. */
static cublasStatus_t check_promise(const char *fn, const cublasLtMatmulAlgo_t *algo, const gemm_call &g)
{
    const void *ptrs[4] = {g.A, g.B, g.C, g.D};
    const int lds[4] = {g.lda, g.ldb, g.ldc, g.ldc};
    const cudaDataType types[4] = {g.atype, g.btype, g.ctype, g.ctype};
    for (int i = 0; i < 4; i++) {
        uint32_t have = operand_alignment(ptrs[i], static_cast<uint64_t>(lds[i]) * elem_bytes(types[i]),
                                          LT_DEFAULT_ALIGNMENT);
        if (!ptrs[i] || have >= algo->data[1 + i])
            continue;
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: %c=%p with ld %d is aligned to %u bytes, below the %llu "
                      "bytes the algorithm was chosen for (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES): a GPU may "
                      "compute a wrong result", fn, "ABCD"[i], ptrs[i], lds[i], have,
                      static_cast<unsigned long long>(algo->data[1 + i]), "ABCD"[i]);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_matmul_pointers(const lt_problem &p, const gemm_call &g, const cublasLtMatmulAlgo_t *algo,
                                     const void *workspace, size_t workspace_bytes)
{
    if (algo && algo->data[0] != LT_ALGO_MAGIC)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: algo=%p was not returned by cublasLtMatmulAlgoGetHeuristic",
                      p.fn, static_cast<const void *>(algo));
    const gemm_epilogue &e = p.epilogue;
    if (uses_bias(e.kind) && !e.bias)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: the epilogue adds a bias but "
                      "CUBLASLT_MATMUL_DESC_BIAS_POINTER is NULL", p.fn);
    if (uses_aux(e.kind) && !e.aux)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "%s: the epilogue %s aux but CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_"
                      "POINTER is NULL", p.fn, e.kind == EPILOGUE_DGELU ? "reads" : "writes");
    const void *ptrs[4] = {g.A, g.B, g.C, g.D};
    const cudaDataType types[4] = {g.atype, g.btype, g.ctype, g.ctype};
    for (int i = 0; i < 4; i++) {
        const char name[2] = {"ABCD"[i], '\0'};
        cublasStatus_t st = check_aligned(p.fn, ptrs[i], name, types[i]);
        if (st != CUBLAS_STATUS_SUCCESS)
            return st;
    }
    cublasStatus_t st = algo ? check_promise(p.fn, algo, g) : CUBLAS_STATUS_SUCCESS;
    return st != CUBLAS_STATUS_SUCCESS ? st : check_workspace(p.fn, workspace, workspace_bytes);
}

/* ---- overlap ------------------------------------------------------------------------------- */

/* The bytes a column-major matrix touches: cols runs of rows * esize bytes, ld * esize apart. */
struct region {
    const char *name;
    uintptr_t base;
    size_t rows, cols, ld, esize;
};

static region matrix_region(const char *name, const void *p, int rows, int cols, int ld, cudaDataType type)
{
    return region{name, reinterpret_cast<uintptr_t>(p), (size_t)rows, (size_t)cols, (size_t)ld, elem_bytes(type)};
}

/* Whether y has a column with a byte in [s, e): those that could are an index range computed
 * directly, so the test costs O(1) per column. */
static bool hits_column(const region &y, uintptr_t s, uintptr_t e)
{
    size_t step = y.ld * y.esize, len = y.rows * y.esize;
    if (e <= y.base)
        return false;
    size_t last = (size_t)(e - 1 - y.base) / step; /* last column starting before e */
    if (last >= y.cols)
        last = y.cols - 1;
    size_t first = s < y.base + len ? 0 : (size_t)(s - y.base - len) / step + 1; /* first ending after s */
    return first <= last;
}

/* Exact: padding rows between columns (ld > rows) belong to neither matrix, so two matrices may
 * interleave in one buffer without overlapping. */
static bool regions_overlap(region x, region y)
{
    if (!x.base || !y.base || !x.rows || !x.cols || !y.rows || !y.cols)
        return false;
    if (x.cols > y.cols) { /* walk the matrix with fewer columns */
        region t = x;
        x = y;
        y = t;
    }
    for (size_t c = 0; c < x.cols; c++) {
        uintptr_t s = x.base + c * x.ld * x.esize;
        if (hits_column(y, s, s + x.rows * x.esize))
            return true;
    }
    return false;
}

static cublasStatus_t refuse_overlap(const char *fn, const region &out, const region &in)
{
    return reject(CUBLAS_STATUS_EXECUTION_FAILED, "%s: %s (%zux%zu, ld=%zu) overlaps %s (%zux%zu, ld=%zu): the "
                  "threads of a GPU kernel would race", fn, out.name, out.rows, out.cols, out.ld, in.name, in.rows,
                  in.cols, in.ld);
}

/* Each output against every operand the call reads, and aux (an output or not) against D; C is
 * allowed to be D itself (each element is read, then written, by one thread). */
cublasStatus_t check_overlaps(const gemm_call &g, const void *workspace, size_t workspace_bytes)
{
    const gemm_epilogue &e = g.epilogue;
    int rows_a = g.transa == CUBLAS_OP_N ? g.m : g.k, cols_a = g.transa == CUBLAS_OP_N ? g.k : g.m;
    int rows_b = g.transb == CUBLAS_OP_N ? g.k : g.n, cols_b = g.transb == CUBLAS_OP_N ? g.n : g.k;
    bool ab_read = g.k > 0 && g.alpha_value != 0.0f, c_apart = reads_c(g) && g.C != g.D;
    region none = {"", 0, 0, 0, 0, 0};
    region d = matrix_region("D", g.D, g.m, g.n, g.ldc, g.ctype);
    region a = ab_read ? matrix_region("A", g.A, rows_a, cols_a, g.lda, g.atype) : none;
    region b = ab_read ? matrix_region("B", g.B, rows_b, cols_b, g.ldb, g.btype) : none;
    region c = c_apart ? matrix_region("C", g.C, g.m, g.n, g.ldc, g.ctype) : none;
    region bias = uses_bias(e.kind) ? matrix_region("bias", e.bias, g.m, 1, g.m, e.bias_type) : none;
    region aux = uses_aux(e.kind) ? matrix_region("aux", e.aux, g.m, g.n, e.aux_ld, e.aux_type) : none;
    const region reads[5] = {a, b, c, bias, aux};
    for (const region &in : reads)
        if (regions_overlap(d, in))
            return refuse_overlap(g.fn, d, in);
    for (int i = 0; i < 4 && e.kind == EPILOGUE_GELU_AUX_BIAS; i++) /* aux is written too */
        if (regions_overlap(aux, reads[i]))
            return refuse_overlap(g.fn, aux, reads[i]);
    region ws = {"workspace", reinterpret_cast<uintptr_t>(workspace), workspace_bytes, 1, workspace_bytes, 1};
    for (const region &other : {a, b, c, bias, aux, d})
        if (regions_overlap(ws, other))
            return refuse_overlap(g.fn, ws, other);
    return CUBLAS_STATUS_SUCCESS;
}

} /* namespace ddp_cudaemu */
