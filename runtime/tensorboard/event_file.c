/* event_file.c — event_file.h's writer. Two small parts are written by hand, each for a reason:
 * CRC-32C, as a 256-entry table, because zlib computes only CRC-32 (another polynomial) and
 * Debian has no C library for it; and the protocol-buffer encoding of the few fields used
 * (Event: wall_time 1, step 2, file_version 3, summary 5; Summary: value 1; Summary.Value: tag 1,
 * simple_value 2, tensor 8, metadata 9; TensorProto: dtype 1, string_val 8; SummaryMetadata:
 * plugin_data 1; PluginData: plugin_name 1), because libprotobuf-c would need the .proto files and
 * generated code for four messages whose encoding is a varint, a fixed-width number or a length
 * before bytes. Must not decide what is written (the caller does) nor keep a partial record. */
#include "runtime/tensorboard/event_file.h"
#include "runtime/base/utf8.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/dirs.h"

/* ---- CRC-32C ------------------------------------------------------------------------------ */

static uint32_t crc_table[256];

static void crc_table_fill(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1; /* Castagnoli's polynomial, reflected */
        crc_table[i] = c;
    }
}

uint32_t crc32c(const void *data, size_t n)
{
    if (crc_table[1] == 0)
        crc_table_fill(); /* idempotent: a race fills the same values */
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t crc32c_masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- protocol-buffer encoding into growable buffers --------------------------------------- */

typedef struct pb {
    unsigned char *b;
    size_t n, cap;
    bool failed;   /* out of memory at some append */
} pb;

static void pb_bytes(pb *p, const void *data, size_t n)
{
    if (p->failed)
        return;
    if (p->n + n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->n + n)
            cap *= 2;
        unsigned char *b = realloc(p->b, cap);
        if (!b) {
            p->failed = true;
            return;
        }
        p->b = b;
        p->cap = cap;
    }
    memcpy(p->b + p->n, data, n);
    p->n += n;
}

static void pb_varint(pb *p, uint64_t v)
{
    unsigned char out[10];
    size_t n = 0;
    do {
        out[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_bytes(p, out, n);
}

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

static void pb_key(pb *p, int field, int wire) { pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire); }

static void pb_len_field(pb *p, int field, const void *data, size_t n)
{
    pb_key(p, field, WIRE_LEN);
    pb_varint(p, n);
    pb_bytes(p, data, n);
}

static void pb_message(pb *p, int field, pb *inner)
{
    p->failed |= inner->failed;
    pb_len_field(p, field, inner->b, inner->n);
    inner->n = 0;
    inner->failed = false;
}

static void pb_fixed(pb *p, int field, const void *little_endian, int wire)
{
    pb_key(p, field, wire);
    pb_bytes(p, little_endian, wire == WIRE_FIXED64 ? 8 : 4);
}

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "protocol buffers and TFRecord are little-endian");

/* ---- the file ------------------------------------------------------------------------------ */

struct event_file {
    FILE *f;
    char path[4096];
    long long bytes;     /* the file's size after the last whole record */
    pb summary, value, inner, event, record;
    int64_t step;
    double wall_time;
};

const char *event_file_path(const event_file *f) { return f->path; }

void event_file_begin(event_file *f, int64_t step, double wall_time)
{
    f->summary.n = 0;
    f->summary.failed = false;
    f->step = step;
    f->wall_time = wall_time;
}

void event_file_add_scalar(event_file *f, const char *tag, float value)
{
    pb_len_field(&f->value, 1, tag, strlen(tag));
    pb_fixed(&f->value, 2, &value, WIRE_FIXED32);
    pb_message(&f->summary, 1, &f->value);
}

/* The text plugin's form: a DT_STRING (7) scalar tensor, metadata naming the plugin "text". The
 * text must be UTF-8 there: the plugin decodes every step's text of a tag strictly, and one that
 * fails hides the whole tag. */
void event_file_add_text(event_file *f, const char *tag, const char *text, size_t len)
{
    pb plugin = {0};
    uint8_t *utf8 = malloc(3 * len + 1);
    size_t n = utf8 ? utf8_replace_invalid((const uint8_t *)text, len, utf8) : 0;
    f->inner.failed |= !utf8;
    pb_len_field(&plugin, 1, "text", 4);
    pb_len_field(&f->value, 1, tag, strlen(tag));
    pb_key(&f->inner, 1, WIRE_VARINT);
    pb_varint(&f->inner, 7);
    pb_len_field(&f->inner, 8, utf8, n);
    pb_message(&f->value, 8, &f->inner);
    pb_message(&f->inner, 1, &plugin);
    pb_message(&f->value, 9, &f->inner);
    pb_message(&f->summary, 1, &f->value);
    free(plugin.b);
    free(utf8);
}

/* The record of the serialized event e: length, its masked CRC, e, e's masked CRC. */
static void frame_record(pb *r, const pb *e)
{
    uint64_t len = e->n;
    uint32_t len_crc = crc32c_masked(crc32c(&len, sizeof len)), data_crc = crc32c_masked(crc32c(e->b, e->n));
    r->n = 0;
    pb_bytes(r, &len, sizeof len);
    pb_bytes(r, &len_crc, sizeof len_crc);
    pb_bytes(r, e->b, e->n);
    pb_bytes(r, &data_crc, sizeof data_crc);
}

/* Writes and flushes one record; a failed write is cut back to the last whole record. */
static int write_record(event_file *f, ddp_err *err)
{
    frame_record(&f->record, &f->event);
    if (f->event.failed || f->record.failed)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for an event", f->path);
    if (fwrite(f->record.b, 1, f->record.n, f->f) == f->record.n && fflush(f->f) == 0) {
        f->bytes += (long long)f->record.n;
        return DDP_OK;
    }
    int e = errno;
    fclose(f->f); /* nothing buffered may reach the file after the cut */
    f->f = NULL;
    bool cut = truncate(f->path, (off_t)f->bytes) == 0;
    return ddp_fail(err, DDP_ERUNTIME, "%s: write failed: %s%s", f->path, strerror(e),
                    cut ? "" : "; its partial last record could not be cut off");
}

static void event_header(event_file *f)
{
    f->event.n = 0;
    f->event.failed = false;
    pb_fixed(&f->event, 1, &f->wall_time, WIRE_FIXED64);
}

/* An event's wall time and step, for the fields that follow; refused once the file has failed. */
static int begin_event(event_file *f, int64_t step, ddp_err *err)
{
    if (!f->f)
        return ddp_fail(err, DDP_ERUNTIME, "%s: closed after an earlier failure", f->path);
    event_header(f);
    pb_key(&f->event, 2, WIRE_VARINT);
    pb_varint(&f->event, (uint64_t)step);
    return DDP_OK;
}

int event_file_commit(event_file *f, ddp_err *err)
{
    int rc = begin_event(f, f->step, err);
    if (rc != DDP_OK)
        return rc;
    pb_message(&f->event, 5, &f->summary);
    return write_record(f, err);
}

int event_file_session_start(event_file *f, int64_t step, double wall_time, ddp_err *err)
{
    f->wall_time = wall_time;
    int rc = begin_event(f, step, err);
    if (rc != DDP_OK)
        return rc;
    pb_key(&f->inner, 1, WIRE_VARINT); /* SessionLog.status: START (1) */
    pb_varint(&f->inner, 1);
    pb_message(&f->event, 7, &f->inner); /* Event.session_log */
    return write_record(f, err);
}

int event_file_open(const char *dir, const char *host, event_file **out, ddp_err *err)
{
    *out = NULL;
    int rc = make_dirs(dir, err);
    if (rc != DDP_OK)
        return rc;
    event_file *f = calloc(1, sizeof *f);
    if (!f)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for an event file");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    static atomic_uint opened; /* as TensorFlow names them: a restart's process, or a second file, in the same
                                  second gets a name of its own */
    snprintf(f->path, sizeof f->path, "%s/events.out.tfevents.%lld.%s.%ld.%u", dir, (long long)now.tv_sec, host,
             (long)getpid(), atomic_fetch_add(&opened, 1));
    f->f = fopen(f->path, "wxe"); /* a new file, never appended to another's; not a command's to inherit */
    if (!f->f) {
        rc = ddp_fail(err, DDP_ERUNTIME, "cannot create %s: %s", f->path, strerror(errno));
        free(f);
        return rc;
    }
    f->wall_time = (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
    event_header(f);
    pb_len_field(&f->event, 3, "brain.Event:2", 13);
    if ((rc = write_record(f, err)) != DDP_OK) {
        event_file_close(f, NULL);
        return rc;
    }
    *out = f;
    return DDP_OK;
}

int event_file_close(event_file *f, ddp_err *err)
{
    if (!f)
        return DDP_OK;
    int rc = DDP_OK;
    if (f->f) {
        if (fflush(f->f) != 0 || (fsync(fileno(f->f)) != 0 && errno != EINVAL))
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: %s", f->path, strerror(errno));
        if (fclose(f->f) != 0 && rc == DDP_OK)
            rc = ddp_fail(err, DDP_ERUNTIME, "%s: close: %s", f->path, strerror(errno));
    }
    pb *bufs[] = {&f->summary, &f->value, &f->inner, &f->event, &f->record};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]->b);
    free(f);
    return rc;
}
