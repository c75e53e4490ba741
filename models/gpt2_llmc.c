/* gpt2_llmc.c — reading and writing llm.c's GPT-2 model file (see gpt2_llmc.h for the layout).
 *
 * Owns the llm.c parameter order (the table below, llm.c's fill_in_parameter_sizes order) and its
 * mapping onto our per-block tensor names, header encoding and validation, the exact-size rule,
 * and the file written whole (runtime/base/replace_file.h). Values are converted to and from
 * little-endian bytes explicitly, in chunks. Must not know where tensors live (callers' src/dst), checkpoints or configs. */
#include "gpt2_llmc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/replace_file.h"
#include "runtime/base/open_input.h"

#define LLMC_BF16_VERSION 5
#define MAX_EMBD (1 << 20)
#define MAX_POSITIONS (1 << 24)
#define MAX_VOCAB (1 << 24)
#define CHUNK 65536 /* floats converted per I/O call */

/* llm.c's parameter tensors in file order: our tensor name (per block: after "h.L.") and shape. */
enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB,
       N_KINDS };
static const struct { const char *name; bool per_block; } kinds[N_KINDS] = {
    {"wte.weight", false}, {"wpe.weight", false}, {"ln_1.weight", true}, {"ln_1.bias", true},
    {"attn.c_attn.weight", true}, {"attn.c_attn.bias", true}, {"attn.c_proj.weight", true},
    {"attn.c_proj.bias", true}, {"ln_2.weight", true}, {"ln_2.bias", true}, {"mlp.c_fc.weight", true},
    {"mlp.c_fc.bias", true}, {"mlp.c_proj.weight", true}, {"mlp.c_proj.bias", true}, {"ln_f.weight", false},
    {"ln_f.bias", false}};

/* Elements of one of our tensors of this kind (one block's, for per-block kinds). */
static size_t kind_numel(const gpt2_shape *s, int k)
{
    size_t C = (size_t)s->n_embd;
    switch (k) {
    case WTE: return (size_t)gpt2_vocab_padded(s->vocab_size) * C;
    case WPE: return (size_t)s->block_size * C;
    case QKVW: return 3 * C * C;
    case QKVB: return 3 * C;
    case ATTPROJW: return C * C;
    case FCW: case FCPROJW: return 4 * C * C;
    case FCB: return 4 * C;
    default: return C; /* LayerNorm weights and biases, the C-wide biases */
    }
}

/* Tensor i of the file order (kinds, each over the blocks): its name and element count. */
static int tensor_count(const gpt2_shape *s)
{
    int n = 0;
    for (int k = 0; k < N_KINDS; k++)
        n += kinds[k].per_block ? (int)s->n_layer : 1;
    return n;
}

static size_t tensor_at(const gpt2_shape *s, int i, char *name, size_t size)
{
    for (int k = 0; k < N_KINDS; k++) {
        int n = kinds[k].per_block ? (int)s->n_layer : 1;
        if (i < n) {
            if (kinds[k].per_block)
                snprintf(name, size, "h.%d.%s", i, kinds[k].name);
            else
                snprintf(name, size, "%s", kinds[k].name);
            return kind_numel(s, k);
        }
        i -= n;
    }
    return 0;
}

static uint64_t file_bytes_for(const gpt2_shape *s)
{
    uint64_t n = 0;
    for (int k = 0; k < N_KINDS; k++)
        n += (uint64_t)kind_numel(s, k) * (kinds[k].per_block ? (uint64_t)s->n_layer : 1);
    return GPT2_LLMC_HEADER_BYTES + 4 * n;
}

/* ---- little-endian conversion --------------------------------------------------------------- */

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- header ------------------------------------------------------------------------------- */

static void encode_header(const gpt2_shape *s, uint8_t *h)
{
    memset(h, 0, GPT2_LLMC_HEADER_BYTES);
    int64_t f[8] = {GPT2_LLMC_MAGIC, GPT2_LLMC_VERSION, s->block_size, s->vocab_size, s->n_layer, s->n_head,
                    s->n_embd, gpt2_vocab_padded(s->vocab_size)};
    for (int i = 0; i < 8; i++)
        put_le32(h + 4 * i, (uint32_t)f[i]);
}

/* Magic, version and a shape our GPT-2 can hold; *s gets the shape. */
static int decode_header(const char *path, const uint8_t *h, gpt2_shape *s, ddp_err *err)
{
    int32_t f[8];
    for (int i = 0; i < 8; i++)
        f[i] = (int32_t)get_le32(h + 4 * i);
    if (f[0] != GPT2_LLMC_MAGIC)
        return ddp_fail(err, DDP_EUSAGE, "%s: bad magic %d, expected %d (an llm.c GPT-2 model file)", path, f[0],
                        GPT2_LLMC_MAGIC);
    if (f[1] == LLMC_BF16_VERSION)
        return ddp_fail(err, DDP_EUSAGE, "%s: version %d (bfloat16 parameters) is not supported; ddprun reads "
                        "llm.c's float32 model files (version %d)", path, f[1], GPT2_LLMC_VERSION);
    if (f[1] != GPT2_LLMC_VERSION)
        return ddp_fail(err, DDP_EUSAGE, "%s: unsupported version %d, expected %d (float32 parameters)", path, f[1],
                        GPT2_LLMC_VERSION);
    const struct { const char *what; int32_t v, max; } fields[] = {
        {"block_size", f[2], MAX_POSITIONS}, {"vocab_size", f[3], MAX_VOCAB}, {"n_layer", f[4], GPT2_MAX_LAYERS},
        {"n_head", f[5], MAX_EMBD}, {"n_embd", f[6], MAX_EMBD}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].v < 1 || fields[i].v > fields[i].max)
            return ddp_fail(err, DDP_EUSAGE, "%s: header field %s is %d, expected 1..%d", path, fields[i].what,
                            fields[i].v, fields[i].max);
    *s = (gpt2_shape){.block_size = f[2], .vocab_size = f[3], .n_layer = f[4], .n_head = f[5], .n_embd = f[6]};
    if (s->n_embd % s->n_head)
        return ddp_fail(err, DDP_EUSAGE, "%s: n_embd %d is not divisible by n_head %d", path, f[6], f[5]);
    if (f[7] != gpt2_vocab_padded(s->vocab_size))
        return ddp_fail(err, DDP_EUSAGE, "%s: padded vocabulary %d, expected %lld (vocab_size %d rounded up to a "
                        "multiple of %d)", path, f[7], (long long)gpt2_vocab_padded(s->vocab_size), f[3],
                        GPT2_VOCAB_ALIGN);
    return DDP_OK;
}

/* Opens path and validates its header and size; *f is open on success (positioned after the
 * header). */
static int open_checked(const char *path, FILE **f, gpt2_shape *s, ddp_err *err)
{
    int orc = fopen_input(path, f, err);
    if (orc != DDP_OK)
        return orc;
    struct stat st;
    uint8_t h[GPT2_LLMC_HEADER_BYTES];
    int rc = DDP_OK;
    if (fstat(fileno(*f), &st) != 0)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = ddp_fail(err, DDP_EUSAGE, "%s: not a regular file", path);
    else if (st.st_size < GPT2_LLMC_HEADER_BYTES)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: %lld bytes is too short for llm.c's %d-byte header", path,
                      (long long)st.st_size, GPT2_LLMC_HEADER_BYTES);
    else if (fread(h, 1, sizeof h, *f) != sizeof h)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot read the header: %s", path,
                      ferror(*f) ? strerror(errno) : "file shrank");
    if (!rc)
        rc = decode_header(path, h, s, err);
    if (!rc) {
        uint64_t want = file_bytes_for(s), have = (uint64_t)st.st_size;
        char shape[MODEL_DESCRIPTION_MAX];
        gpt2_format_shape(s, shape, sizeof shape);
        if (have < want)
            rc = ddp_fail(err, DDP_EUSAGE, "%s: truncated: its header's %s needs %llu bytes, the file has %llu",
                          path, shape, (unsigned long long)want, (unsigned long long)have);
        else if (have > want)
            rc = ddp_fail(err, DDP_EUSAGE, "%s: %llu trailing bytes after the parameters of the header's %s "
                          "(%llu bytes expected)", path, (unsigned long long)(have - want), shape,
                          (unsigned long long)want);
    }
    if (rc) {
        fclose(*f);
        *f = NULL;
    }
    return rc;
}

int gpt2_llmc_read_shape(const char *path, gpt2_shape *shape, ddp_err *err)
{
    FILE *f;
    int rc = open_checked(path, &f, shape, err);
    if (!rc)
        fclose(f);
    return rc;
}

static bool same_shape(const gpt2_shape *a, const gpt2_shape *b)
{
    return a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_embd == b->n_embd &&
           a->block_size == b->block_size && a->vocab_size == b->vocab_size;
}

/* ---- reading ------------------------------------------------------------------------------ */

static int read_floats(FILE *f, const char *path, float *dst, size_t n, uint8_t *buf, ddp_err *err)
{
    for (size_t done = 0; done < n;) {
        size_t k = n - done < CHUNK ? n - done : CHUNK;
        if (fread(buf, 4, k, f) != k)
            return ddp_fail(err, DDP_ERUNTIME, "%s: read failed: %s", path, ferror(f) ? strerror(errno) : "file shrank");
        for (size_t i = 0; i < k; i++) {
            uint32_t bits = get_le32(buf + 4 * i);
            memcpy(dst + done + i, &bits, 4);
        }
        done += k;
    }
    return DDP_OK;
}

int gpt2_llmc_read(const char *path, const gpt2_shape *want, gpt2_llmc_dst dst, void *ctx, ddp_err *err)
{
    FILE *f;
    gpt2_shape s;
    int rc = open_checked(path, &f, &s, err);
    if (rc)
        return rc;
    if (!same_shape(&s, want)) {
        char have_txt[MODEL_DESCRIPTION_MAX], want_txt[MODEL_DESCRIPTION_MAX];
        gpt2_format_shape(&s, have_txt, sizeof have_txt);
        gpt2_format_shape(want, want_txt, sizeof want_txt);
        fclose(f);
        return ddp_fail(err, DDP_EUSAGE, "%s holds %s, the model is %s", path, have_txt, want_txt);
    }
    int n = tensor_count(&s);
    float **where = calloc((size_t)n, sizeof *where);
    uint8_t *buf = malloc(4 * CHUNK);
    if (!where || !buf)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", path);
    char name[MODEL_TENSOR_NAME_MAX];
    for (int i = 0; !rc && i < n; i++) { /* every destination first: a mismatch writes nothing */
        size_t numel = tensor_at(&s, i, name, sizeof name);
        where[i] = dst(ctx, name, numel);
        if (!where[i])
            rc = ddp_fail(err, DDP_EUSAGE, "%s: the model has no tensor %s of %zu values", path, name, numel);
    }
    for (int i = 0; !rc && i < n; i++)
        rc = read_floats(f, path, where[i], tensor_at(&s, i, name, sizeof name), buf, err);
    free(where);
    free(buf);
    fclose(f);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------------ */

static int write_floats(int fd, const char *tmp, const float *src, size_t n, uint8_t *buf, ddp_err *err)
{
    int rc = DDP_OK;
    for (size_t done = 0; !rc && done < n;) {
        size_t k = n - done < CHUNK ? n - done : CHUNK;
        for (size_t i = 0; i < k; i++) {
            uint32_t bits;
            memcpy(&bits, src + done + i, 4);
            put_le32(buf + 4 * i, bits);
        }
        rc = replace_file_write(fd, tmp, buf, 4 * k, err);
        done += k;
    }
    return rc;
}

typedef struct body {
    const gpt2_shape *s;
    const float *const *from;  /* each tensor's values, in the file's order */
} body;

/* Writes the header and every tensor to an open temporary file (replace_file_fd's writer). */
static int write_body(int fd, const char *tmp, void *ctx, ddp_err *err)
{
    const gpt2_shape *s = ((const body *)ctx)->s;
    const float *const *from = ((const body *)ctx)->from;
    uint8_t *buf = malloc(4 * CHUNK);
    if (!buf)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", tmp);
    encode_header(s, buf);
    int rc = replace_file_write(fd, tmp, buf, GPT2_LLMC_HEADER_BYTES, err);
    char name[MODEL_TENSOR_NAME_MAX];
    for (int i = 0; !rc && i < tensor_count(s); i++)
        rc = write_floats(fd, tmp, from[i], tensor_at(s, i, name, sizeof name), buf, err);
    free(buf);
    return rc;
}

int gpt2_llmc_write(const char *path, const gpt2_shape *s, gpt2_llmc_src src, void *ctx, ddp_err *err)
{
    int n = tensor_count(s);
    const float **from = calloc((size_t)n, sizeof *from);
    if (!from)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", path);
    char name[MODEL_TENSOR_NAME_MAX];
    int rc = DDP_OK;
    for (int i = 0; !rc && i < n; i++) { /* every source first: nothing is created when one is missing */
        size_t numel = tensor_at(s, i, name, sizeof name);
        from[i] = src(ctx, name, numel);
        if (!from[i])
            rc = ddp_fail(err, DDP_EUSAGE, "%s: no tensor %s of %zu float32 values to write", path, name, numel);
    }
    if (!rc)
        rc = replace_file_fd(path, write_body, &(body){.s = s, .from = from}, err);
    free(from);
    return rc;
}

/* ---- a model's parameters ----------------------------------------------------------------- */

typedef struct host_params {
    const model *m;
    float *host;    /* m->n_params floats in the model's layout */
} host_params;

static float *host_tensor(void *ctx, const char *name, size_t numel)
{
    const host_params *h = ctx;
    const param_tensor *t = model_find_tensor(h->m, name);
    return t && t->numel == numel ? h->host + t->offset : NULL;
}

static const float *host_tensor_src(void *ctx, const char *name, size_t numel)
{
    return host_tensor(ctx, name, numel);
}

/* m's shape, or a usage error for another model kind. */
static int model_shape(const model *m, const char *path, gpt2_shape *s, ddp_err *err)
{
    int64_t seq_len;
    if (gpt2_parse_description(m->description, s, &seq_len, err))
        return ddp_fail(err, DDP_EUSAGE, "%s: llm.c model files hold GPT-2 parameters; this model is %s", path,
                        m->description);
    return DDP_OK;
}

int gpt2_llmc_save_model(model *m, const char *path, ddp_err *err)
{
    gpt2_shape s;
    int rc = model_shape(m, path, &s, err);
    if (rc)
        return rc;
    host_params h = {m, malloc(m->n_params * sizeof(float))};
    if (!h.host)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu parameters", path, m->n_params);
    rc = m->dev->ops->download(m->dev, h.host, m->params, m->n_params * sizeof(float), err);
    if (!rc)
        rc = gpt2_llmc_write(path, &s, host_tensor_src, &h, err);
    free(h.host);
    return rc;
}

int gpt2_llmc_load_model(model *m, const char *path, ddp_err *err)
{
    gpt2_shape s;
    int rc = model_shape(m, path, &s, err);
    if (rc)
        return rc;
    host_params h = {m, calloc(m->n_params, sizeof(float))};
    if (!h.host)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu parameters", path, m->n_params);
    rc = gpt2_llmc_read(path, &s, host_tensor, &h, err);
    if (!rc)
        rc = m->dev->ops->upload(m->dev, m->params, h.host, m->n_params * sizeof(float), err);
    free(h.host);
    return rc;
}
