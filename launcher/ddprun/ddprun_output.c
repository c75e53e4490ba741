/* ddprun_output.c — turns mpirun's --tag-output stream into "[rank R] " lines.
 *
 * mpirun prefixes each rank line with "[JOB,RANK]<stdout>:" or "<stderr>:"; we rewrite that to
 * "[rank RANK] " and send it to our stdout or stderr accordingly, so stdout redirection keeps
 * working; a line the rank tagged itself ("[rank RANK host] ", log.h) keeps its own tag only.
 * mpirun tags each read of a rank's output, so a line its read cut in two arrives as
 * "[J,R]<stdout>:start[J,R]<stdout>:rest": the repeated tag is dropped; where another rank's
 * output comes between the pieces, the start is held until the rank's next text finishes it.
 * Untagged lines are mpirun's own and pass through unchanged, except the boxed
 * "a process failed / the job was aborted" reports: ddprun replaces those with one line of its
 * own, so we parse them (fallback source for the failing rank) and drop them, and mpirun's
 * "Forwarding signal" notice, which ddprun announces itself. Lines our per-rank
 * wrapper writes (DDPRUN_STATUS_MARK) are the primary source and are consumed too.
 * This file only filters text; it never decides exit codes or talks to processes. */
#include "ddprun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm.h"
#include "runtime/cloud/cloud_notice.h"
#include "runtime/base/affix.h"
#include "runtime/base/clock.h"
#include "runtime/ckpt/ckpt.h"
#include "launcher/shared/rank_ends.h"

/* A line longer than this is emitted in pieces rather than buffered without bound. */
#define LINE_MAX_BYTES (1u << 20)
/* mpirun's report boxes are a few lines; anything bigger is not one and is passed through. */
#define BLOCK_MAX_LINES 64

/* The keys that shape mpirun's output: the tags this filter reads (--tag-output), and what would
 * hide them or move the ranks' status lines off stderr, turned off. */
static const char *const format_keys[] = {"orte_tag_output", "orte_timestamp_output", "orte_xml_output",
                                          "iof_base_redirect_app_stderr_to_stdout"};
#define N_FORMAT_KEYS (int)(sizeof format_keys / sizeof format_keys[0])

void output_mpirun_options(argv_list *cmd)
{
    argv_push(cmd, "--tag-output");
    for (int i = 1; i < N_FORMAT_KEYS; i++) { /* all but the tags themselves */
        argv_push(cmd, "--mca");
        argv_push(cmd, format_keys[i]);
        argv_push(cmd, "0");
    }
}

bool output_owns_mca(const char *key)
{
    for (int i = 0; i < N_FORMAT_KEYS; i++)
        if (!strcmp(key, format_keys[i]))
            return true;
    return false;
}

typedef struct line_buf {
    char *data;
    size_t len, cap;
} line_buf;

struct output_filter {
    line_buf partial[2];          /* per stream: bytes after the last newline */
    bool in_block[2];             /* between two dashed lines of an mpirun box */
    bool in_long_block[2];        /* past BLOCK_MAX_LINES of one: its closing line passes through */
    argv_list block[2];           /* the box's lines so far (dashed opener included) */
    rank_failure first;           /* from the wrapper's status line */
    int ranks_started;            /* wrappers' "started" status lines */
    rank_failure from_mpirun;     /* from mpirun's own report */
    deadline_verdict deadline;    /* the first collective deadline's verdict */
    deadline_verdict notice;      /* the hosts whose ranks logged a preemption notice */
    char rank0_host[DDP_HOST_NAME_MAX]; /* from rank 0's wrapper's "started" line; "" before it */
    struct held_line {            /* a rank's line another rank's output cut: its start so far */
        int rank;
        bool is_err;
        char *text;
    } *held;
    int n_held, cap_held;
};

static void buf_append(line_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) { perror("ddprun: out of memory"); exit(1); }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

output_filter *output_filter_new(void)
{
    output_filter *f = calloc(1, sizeof *f);
    if (!f) { perror("ddprun: out of memory"); exit(1); }
    return f;
}

void output_filter_free(output_filter *f)
{
    if (!f) return;
    for (int s = 0; s < 2; s++) {
        free(f->partial[s].data);
        argv_free(&f->block[s]);
    }
    for (int i = 0; i < f->n_held; i++)
        free(f->held[i].text);
    free(f->held);
    free(f);
}

const rank_failure *output_first_failure(const output_filter *f)
{
    return f->first.known ? &f->first : &f->from_mpirun;
}

/* "[1,3]<stderr>:text" -> rank 3, is_err, payload "text". Returns false for untagged lines. */
static bool parse_tag(const char *line, int *rank, bool *is_err, const char **payload)
{
    int job, r, used = 0;
    if (sscanf(line, "[%d,%d]%n", &job, &r, &used) != 2 || used == 0) return false;
    const char *p = line + used;
    if (has_prefix(p, "<stdout>:")) *is_err = false;
    else if (has_prefix(p, "<stderr>:")) *is_err = true;
    else return false;
    *rank = r;
    *payload = p + 9;
    return true;
}

int output_ranks_started(const output_filter *f) { return f->ranks_started; }

/* The wrapper's "ddprun-rank-status: rank=R host=H started|exit=C|signal=S". */
static void parse_status(output_filter *f, const char *text)
{
    rank_failure r = {.known = true};
    int value = 0;
    char kind[16];
    int n = sscanf(text, DDPRUN_STATUS_MARK " rank=%d host=%255s %15[a-z]=%d", &r.rank, r.host, kind, &value);
    if (n == 3 && strcmp(kind, "started") == 0)
        f->ranks_started++;
    if (n == 3 && strcmp(kind, "started") == 0 && r.rank == 0)
        snprintf(f->rank0_host, sizeof f->rank0_host, "%s", r.host);
    if (n != 4)
        return;
    if (strcmp(kind, "signal") == 0) r.signal = value;
    else r.exit_code = value;
    if (!f->first.known) f->first = r;
}

/* A rank's "ddp.timeout_s: ... Not arrived: rank R (host H), rank R2 (host H2) (no answer ...",
 * past twelve ranks "... and N more ranks, on hosts H3, H4 (no answer ...". */
/* Whether line is the NCCL watchdog's last before it ends its rank (comm.h). */
static bool watchdog_aborts(const char *line)
{
    return strstr(line, COMM_WATCHDOG_ABORT) && has_suffix(line, COMM_WATCHDOG_ABORT_END);
}

/* What a rank's error line that ends its rank, and may leave it held (by a stuck checkpoint write,
 * or whatever kept its stop request or its MPI start-up from finishing), was; NULL for another. */
static const char *rank_held_end(const char *line)
{
    if (strstr(line, CKPT_WRITE_GIVEN_UP)) return "a checkpoint write given up";
    if (strstr(line, RANK_END_STOP_UNANSWERED)) return "a rank's stop request left unanswered";
    if (strstr(line, RANK_END_START_UNFINISHED)) return "a rank's MPI start-up left unfinished";
    return NULL;
}

static void parse_deadline(output_filter *f, const char *text)
{
    deadline_verdict *d = &f->deadline;
    const char *p = strstr(text, COMM_DEADLINE_NOT_ARRIVED);
    if (d->seen_s > 0 || !has_prefix(text, COMM_DEADLINE_VERDICT))
        return;
    d->seen_s = monotonic_s();
    d->what = strstr(text, COMM_PHASE_RESUME ")") ? "the resume's collective deadline (checkpoint.resume_timeout_s)"
                                                  : "the collective deadline (ddp.timeout_s)";
    if (!p)
        return;
    p += strlen(COMM_DEADLINE_NOT_ARRIVED);
    const char *end = strstr(p, " (no answer");
    snprintf(d->not_arrived, sizeof d->not_arrived, "%.*s", end ? (int)(end - p) : (int)strlen(p), p);
    int rank, used;
    char host[DDP_HOST_NAME_MAX];
    _Static_assert(DDP_HOST_NAME_MAX == 256, "the width below is DDP_HOST_NAME_MAX - 1");
    while ((used = 0, sscanf(p, "rank %d (host %255[^)])%n", &rank, host, &used)) == 2 && used > 0) {
        verdict_add_host(d, host, strlen(host));
        p += used;
        if (!has_prefix(p, ", ")) break;
        p += 2;
    }
    const char *on = strstr(p, COMM_DEADLINE_ON_HOSTS);
    if (!on || !end || on > end) /* a line cut short names no host in part */
        return;
    for (p = on + strlen(COMM_DEADLINE_ON_HOSTS); p < end;) {
        const char *comma = strstr(p, ", ");
        size_t len = (size_t)((comma && comma < end ? comma : end) - p);
        verdict_add_host(d, p, len);
        p += len + 2;
    }
}

const deadline_verdict *output_deadline(const output_filter *f) { return &f->deadline; }
const deadline_verdict *output_notice(const output_filter *f) { return &f->notice; }

/* The HOST of a rank's own "[rank R HOST] ..." line (*end at its ']'), or NULL. */
static const char *tag_host(const char *line, const char **end)
{
    const char *host = strchr(line, ' ') ? strchr(strchr(line, ' ') + 1, ' ') : NULL;
    if (!has_prefix(line, "[rank ") || !host || !(*end = strchr(++host, ']')))
        return NULL;
    return host;
}

/* A rank's "[rank R HOST] warning: preemption notice: ...": HOST noted. */
static void note_notice(output_filter *f, const char *line)
{
    const char *end, *host = tag_host(line, &end);
    if (!host || !has_prefix(end, "] warning: " CLOUD_NOTICE_STOP))
        return;
    if (f->notice.seen_s <= 0)
        f->notice = (deadline_verdict){.seen_s = monotonic_s(), .what = "a preemption notice"};
    verdict_add_host(&f->notice, host, (size_t)(end - host));
}

const char *output_rank0_host(const output_filter *f) { return f->rank0_host; }

static bool is_dashed_line(const char *line)
{
    size_t n = strspn(line, "-");
    return n >= 20 && line[n] == '\0';
}

/* mpirun's failure boxes: "Process name: [[J,1],R]" + "Exit code: C", or "process rank R with
 * PID P on node H exited on signal S". Returns true when the box is one ddprun replaces. */
static bool parse_mpirun_box(output_filter *f, const argv_list *box)
{
    bool ours = false;
    rank_failure *r = &f->from_mpirun;
    for (int i = 0; i < box->n; i++) {
        const char *l = box->v[i];
        const char *p;
        int job, step, rank, sig, pid, code;
        char host[256];
        if (strstr(l, "Per user-direction, the job has been aborted") ||
            strstr(l, "terminated normally, but") || strstr(l, "mpirun detected that one or more processes"))
            ours = true;
        if ((p = strstr(l, "Process name: [[")) && sscanf(p, "Process name: [[%d,%d],%d]", &job, &step, &rank) == 3 &&
            !r->known) {
            *r = (rank_failure){.known = true, .rank = rank};
            ours = true;
        }
        if ((p = strstr(l, "Exit code:")) && sscanf(p, "Exit code: %d", &code) == 1 && r->known && !r->signal)
            r->exit_code = code;
        if ((p = strstr(l, "process rank ")) &&
            sscanf(p, "process rank %d with PID %d on node %255s exited on signal %d", &rank, &pid, host, &sig) == 4) {
            if (!r->known) *r = (rank_failure){.known = true, .rank = rank, .signal = sig};
            snprintf(r->host, sizeof r->host, "%s", host);
            ours = true;
        }
    }
    return ours;
}

static void emit(bool is_err, const char *text)
{
    FILE *out = is_err ? stderr : stdout;
    fputs(text, out);
    fputc('\n', out);
}

static void flush_block(output_filter *f, int s)
{
    if (!parse_mpirun_box(f, &f->block[s]))
        for (int i = 0; i < f->block[s].n; i++) emit(s == 1, f->block[s].v[i]);
    argv_free(&f->block[s]);
    f->in_block[s] = false;
}

/* The first tag inside a tagged line's payload, or NULL. mpirun tags what it read of a rank's
 * output, and a read that ends inside a line leaves its start tagged on its own: the line's rest
 * comes tagged again, after the start, with no newline between. */
static const char *inner_tag(const char *payload, int *rank, bool *is_err, const char **rest)
{
    for (const char *p = strchr(payload, '['); p; p = strchr(p + 1, '['))
        if (parse_tag(p, rank, is_err, rest))
            return p;
    return NULL;
}

static void handle_line(output_filter *f, int s, const char *line);

/* A line the rank tagged itself (log.h's "[rank R host] warning: ...") names the rank already, and
 * its host: a second tag would only say the rank twice. */
static bool self_tagged(const char *payload, int rank)
{
    char own[32];
    int n = snprintf(own, sizeof own, "[rank %d ", rank);
    return strncmp(payload, own, (size_t)n) == 0 && strchr(payload + n, ']') != NULL;
}

/* The start of rank's line on that stream held so far (malloc'd, taken out of f), or NULL. */
static char *take_held(output_filter *f, int rank, bool is_err)
{
    for (int i = 0; i < f->n_held; i++)
        if (f->held[i].rank == rank && f->held[i].is_err == is_err) {
            char *text = f->held[i].text;
            f->held[i] = f->held[--f->n_held];
            return text;
        }
    return NULL;
}

static void hold(output_filter *f, int rank, bool is_err, char *text)
{
    if (f->n_held == f->cap_held) {
        int cap = f->cap_held ? 2 * f->cap_held : 8;
        struct held_line *grown = realloc(f->held, (size_t)cap * sizeof *grown);
        if (!grown) { perror("ddprun: out of memory"); exit(1); }
        f->held = grown;
        f->cap_held = cap;
    }
    f->held[f->n_held++] = (struct held_line){rank, is_err, text};
}

static void rank_line(output_filter *f, int rank, bool is_err, char *joined);

/* A tagged line: mpirun's tags inside it mark where its reads of a rank's output ended. The same
 * rank's continuation joins the line; where another rank's (or stream's) output starts instead,
 * this rank's line is unfinished: its start is held until the rank's next tagged text, which
 * continues it, on a later line of mpirun's (a status line cut so was not recognised). */
static void handle_tagged(output_filter *f, int s, int rank, bool is_err, const char *payload)
{
    char *held = take_held(f, rank, is_err);
    size_t held_len = held ? strlen(held) : 0;
    char *joined = malloc(held_len + strlen(payload) + 1);
    if (!joined) { perror("ddprun: out of memory"); exit(1); }
    memcpy(joined, held ? held : "", held_len);
    strcpy(joined + held_len, payload);
    free(held);
    int r2;
    bool err2;
    const char *rest, *tag;
    while ((tag = inner_tag(joined, &r2, &err2, &rest)) && r2 == rank && err2 == is_err)
        memmove((char *)tag, rest, strlen(rest) + 1);
    if (tag) { /* another rank's (or stream's) output starts here */
        char *other = strdup(tag);
        if (!other) { perror("ddprun: out of memory"); exit(1); }
        *(char *)tag = '\0';
        if (strlen(joined) >= LINE_MAX_BYTES)
            rank_line(f, rank, is_err, joined);
        else if (*joined)
            hold(f, rank, is_err, joined);
        else
            free(joined);
        handle_line(f, s, other);
        free(other);
        return;
    }
    rank_line(f, rank, is_err, joined);
}

/* One whole line of a rank's (joined, freed here): consumed when it is the wrapper's status
 * line, else printed with the rank's tag and, from its stderr, read for a deadline's verdict (the
 * ranks' warnings and errors go there; stdout carries what a model wrote, a text sample, which
 * may hold any text). */
static void rank_line(output_filter *f, int rank, bool is_err, char *joined)
{
    /* the wrapper's status line; after the worker's last output when that had no newline */
    char *mark = is_err ? strstr(joined, DDPRUN_STATUS_MARK) : NULL;
    if (mark) {
        parse_status(f, mark);
        *mark = '\0';
        if (!*joined) {
            free(joined);
            return;
        }
    }
    FILE *out = is_err ? stderr : stdout;
    if (self_tagged(joined, rank))
        fprintf(out, "%s\n", joined);
    else
        fprintf(out, "[rank %d] %s\n", rank, joined);
    if (!is_err) {
        free(joined);
        return;
    }
    const char *verdict = strstr(joined, COMM_DEADLINE_VERDICT);
    note_notice(f, joined);
    if (verdict)
        parse_deadline(f, verdict);
    else if (f->deadline.seen_s <= 0 && watchdog_aborts(joined)) /* no rank named: NCCL cannot tell which */
        f->deadline = (deadline_verdict){.seen_s = monotonic_s(), .what = "the NCCL watchdog's abort"};
    else if (f->deadline.seen_s <= 0) {
        const char *held_end = rank_held_end(joined); /* its rank ends at once, unless held */
        const char *said = held_end ? strstr(joined, RANK_END_CODE) : NULL;
        if (held_end)
            f->deadline = (deadline_verdict){.seen_s = monotonic_s(), .what = held_end,
                                             .code = said ? atoi(said + strlen(RANK_END_CODE)) : 0};
    }
    free(joined);
}

static void handle_line(output_filter *f, int s, const char *line)
{
    int rank;
    bool is_err;
    const char *payload;
    if (parse_tag(line, &rank, &is_err, &payload)) {
        handle_tagged(f, s, rank, is_err, payload);
        return;
    }
    if (has_prefix(line, "mpirun: Forwarding signal")) return; /* ddprun already said so */
    if (is_dashed_line(line) && f->in_long_block[s]) { /* the closing line opens nothing */
        f->in_long_block[s] = false;
        emit(s == 1, line);
        return;
    }
    if (is_dashed_line(line)) {
        if (f->in_block[s]) {   /* closing line: decide about the whole box */
            argv_push(&f->block[s], line);
            flush_block(f, s);
            return;
        }
        f->in_block[s] = true;
    }
    if (f->in_block[s]) {
        argv_push(&f->block[s], line);
        if (f->block[s].n >= BLOCK_MAX_LINES) {
            flush_block(f, s);
            f->in_long_block[s] = true;
        }
        return;
    }
    emit(s == 1, line);
}

void output_feed(output_filter *f, bool is_stderr, const char *buf, size_t n)
{
    int s = is_stderr ? 1 : 0;
    line_buf *b = &f->partial[s];
    while (n > 0) {
        const char *nl = memchr(buf, '\n', n);
        size_t take = nl ? (size_t)(nl - buf) : n;
        buf_append(b, buf, take);
        if (nl || b->len >= LINE_MAX_BYTES) {
            handle_line(f, s, b->data);
            b->len = 0;
        }
        if (nl) take++;
        buf += take;
        n -= take;
    }
    fflush(stdout);
    fflush(stderr);
}

void output_finish(output_filter *f)
{
    for (int s = 0; s < 2; s++) {
        if (f->partial[s].len > 0) {
            handle_line(f, s, f->partial[s].data);
            f->partial[s].len = 0;
        }
        if (f->in_block[s]) flush_block(f, s);
    }
    while (f->n_held > 0) { /* lines their ranks never finished */
        struct held_line h = f->held[0];
        f->held[0] = f->held[--f->n_held];
        rank_line(f, h.rank, h.is_err, h.text);
    }
    fflush(stdout);
    fflush(stderr);
}
