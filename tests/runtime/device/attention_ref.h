/* attention_ref.h — causal attention computed the plain way in double, for the attention ops'
 * tests (test_attention_cpu.c, test_cuda_attention.c): the whole T x T score matrix per head, an
 * exact softmax, and the textbook gradients; optionally per document (packed rows: a query's
 * scores outside its own document are masked like those past it); plus the shapes the tests cover,
 * the documents they pack, and the layout arithmetic of the ops' token-major, strided tensors
 * (device.h's attn_shape). Header-only and test-only; it must not call device ops. */
#ifndef DDP_TEST_ATTENTION_REF_H
#define DDP_TEST_ATTENTION_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device/device.h"

/* A test shape: sizes, and whether q, k, v are views of one fused [B, T, (NH + 2 NKV)·hs] tensor
 * (as GPT-2's QKV projection writes them) or three tensors with `pad` spare columns per row.
 * docs (NULL: plain causal rows): packed rows, the lengths of their documents (attn_docs_fill). */
typedef struct attn_case {
    int64_t B, T, NH, NKV, hs;
    bool fused;
    int64_t pad;
    const int32_t *docs;
} attn_case;

/* Packed rows' bounds (attn_shape's doc_start, doc_end, [B·T]) from c->docs: documents of those
 * lengths laid one after another along the rows, the list (ended by a 0) read on where the previous
 * row left it and started again when it runs out, so rows of a batch differ; a document that would
 * cross a row's end is cut there (a row starts a new document). */
static inline void attn_docs_fill(const attn_case *c, int32_t *doc_start, int32_t *doc_end)
{
    size_t k = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t t = 0; t < c->T;) {
            if (!c->docs[k])
                k = 0;
            int64_t len = c->docs[k++];
            len = len < c->T - t ? len : c->T - t;
            for (int64_t i = t; i < t + len; i++) {
                doc_start[b * c->T + i] = (int32_t)t;
                doc_end[b * c->T + i] = (int32_t)(t + len);
            }
            t += len;
        }
}

/* Element offsets of q, k, v inside their buffers, and the shape the op takes. */
typedef struct attn_layout {
    attn_shape s;
    size_t q_off, k_off, v_off;   /* in the fused buffer; 0 otherwise */
    size_t qkv_elems, q_elems, kv_elems, o_elems, lse_elems;
} attn_layout;

static inline attn_layout attn_layout_of(const attn_case *c)
{
    attn_layout l;
    memset(&l, 0, sizeof l);
    const int64_t rows = c->B * c->T, qw = c->NH * c->hs, kvw = c->NKV * c->hs;
    l.s = (attn_shape){.B = c->B, .T = c->T, .NH = c->NH, .NKV = c->NKV, .hs = c->hs,
                       .scale = (float)(1.0 / sqrt((double)c->hs))};
    if (c->fused) {
        l.s.ld_q = l.s.ld_kv = qw + 2 * kvw;
        l.k_off = (size_t)qw;
        l.v_off = (size_t)(qw + kvw);
        l.qkv_elems = (size_t)(rows * l.s.ld_q);
    } else {
        l.s.ld_q = qw + c->pad;
        l.s.ld_kv = kvw + c->pad;
        l.q_elems = (size_t)(rows * l.s.ld_q);
        l.kv_elems = (size_t)(rows * l.s.ld_kv);
    }
    l.s.ld_o = qw + c->pad;
    l.o_elems = (size_t)(rows * l.s.ld_o);
    l.lse_elems = (size_t)(c->B * c->NH * c->T);
    return l;
}

static inline size_t attn_at(const attn_shape *s, int64_t b, int64_t t, int64_t ld, int64_t head, int64_t c)
{
    return (size_t)((b * s->T + t) * ld + head * s->hs + c);
}

/* Elements of x and y (n floats: token-major rows of ld elements, or with lse a [B, NH, T]
 * log-sum-exp) outside positions [t0, t1) of row b0 that differ. Compared as numbers where both
 * are zero: a masked term is a zero whose sign follows the values it masks, and a sum of zeros
 * keeps a -0 only while every term is one, so a zero's sign is no sign of leaking; any other
 * difference in bits counts. */
static inline size_t attn_changed_outside(const float *x, const float *y, size_t n, const attn_shape *s, int64_t ld,
                                          bool lse, int64_t b0, int64_t t0, int64_t t1)
{
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t row = lse ? (int64_t)i / (s->NH * s->T) * s->T + (int64_t)i % s->T : (int64_t)(i / (size_t)ld);
        const int64_t b = row / s->T, t = row % s->T;
        if (b == b0 && t >= t0 && t < t1)
            continue;
        changed += memcmp(&x[i], &y[i], sizeof x[i]) != 0 && !(x[i] == 0.0f && y[i] == 0.0f);
    }
    return changed;
}

/* Forward in double: out and lse, plus the probabilities P [B, NH, T, T] (0 above the diagonal,
 * and before the query's document) for the backward. q, k, v, out are float arrays in the op's
 * layout; doc_start: host [B·T] (NULL: plain causal), query i of row b sees keys doc_start[b·T+i]..i.
 * The backward needs no bounds: P's zeros carry them. */
static inline void attn_ref_forward(const attn_shape *s, const int32_t *doc_start, const float *q, const float *k,
                                    const float *v, double *out, double *lse, double *P)
{
    const int64_t T = s->T, hs = s->hs, group = s->NH / s->NKV;
    double *sc = malloc((size_t)T * sizeof *sc);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->NH; h++) {
            const int64_t kvh = h / group;
            for (int64_t i = 0; i < T; i++) {
                const int64_t first = doc_start ? doc_start[b * T + i] : 0;
                double mx = -INFINITY;
                for (int64_t j = first; j <= i; j++) {
                    double acc = 0.0;
                    for (int64_t c = 0; c < hs; c++)
                        acc += (double)q[attn_at(s, b, i, s->ld_q, h, c)] * (double)k[attn_at(s, b, j, s->ld_kv, kvh, c)];
                    sc[j] = acc * (double)s->scale;
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                double sum = 0.0;
                for (int64_t j = first; j <= i; j++)
                    sum += exp(sc[j] - mx);
                const size_t r = (size_t)((b * s->NH + h) * T + i);
                lse[r] = mx + log(sum);
                double *p = P + r * (size_t)T;
                for (int64_t j = 0; j < T; j++)
                    p[j] = j >= first && j <= i ? exp(sc[j] - lse[r]) : 0.0;
                for (int64_t c = 0; c < hs; c++) {
                    double acc = 0.0;
                    for (int64_t j = first; j <= i; j++)
                        acc += p[j] * (double)v[attn_at(s, b, j, s->ld_kv, kvh, c)];
                    out[attn_at(s, b, i, s->ld_o, h, c)] = acc;
                }
            }
        }
    free(sc);
}

/* Backward in double from dout and the forward's P: dq, dk, dv in the op's layout (dk and dv
 * zeroed first; columns outside the heads are left alone). */
static inline void attn_ref_backward(const attn_shape *s, const float *q, const float *k, const float *v,
                                     const float *dout, const double *P, double *dq, double *dk, double *dv)
{
    const int64_t T = s->T, hs = s->hs, group = s->NH / s->NKV;
    double *dp = malloc((size_t)T * sizeof *dp);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t kvh = 0; kvh < s->NKV; kvh++)
                for (int64_t c = 0; c < hs; c++) {
                    dk[attn_at(s, b, t, s->ld_kv, kvh, c)] = 0.0;
                    dv[attn_at(s, b, t, s->ld_kv, kvh, c)] = 0.0;
                }
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->NH; h++) {
            const int64_t kvh = h / group;
            for (int64_t i = 0; i < T; i++) {
                const double *p = P + (size_t)((b * s->NH + h) * T + i) * (size_t)T;
                double D = 0.0;
                for (int64_t j = 0; j <= i; j++) {
                    double acc = 0.0;
                    for (int64_t c = 0; c < hs; c++)
                        acc += (double)dout[attn_at(s, b, i, s->ld_o, h, c)] * (double)v[attn_at(s, b, j, s->ld_kv, kvh, c)];
                    dp[j] = acc;
                    D += p[j] * acc;
                }
                for (int64_t c = 0; c < hs; c++)
                    dq[attn_at(s, b, i, s->ld_q, h, c)] = 0.0;
                for (int64_t j = 0; j <= i; j++) {
                    const double ds = p[j] * (dp[j] - D) * (double)s->scale;
                    for (int64_t c = 0; c < hs; c++) {
                        dq[attn_at(s, b, i, s->ld_q, h, c)] += ds * (double)k[attn_at(s, b, j, s->ld_kv, kvh, c)];
                        dk[attn_at(s, b, j, s->ld_kv, kvh, c)] += ds * (double)q[attn_at(s, b, i, s->ld_q, h, c)];
                        dv[attn_at(s, b, j, s->ld_kv, kvh, c)] += p[j] * (double)dout[attn_at(s, b, i, s->ld_o, h, c)];
                    }
                }
            }
        }
    free(dp);
}

#endif
