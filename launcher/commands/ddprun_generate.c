/* ddprun_generate.c — `ddprun generate CHECKPOINT [options]`: text from a trained language model's
 * checkpoint (a file, or a sharded set's directory, read whole), in-process on the CPU device (no
 * mpirun), printed to stdout as the prompt followed by the drawn continuation; with `--chat`, the
 * assistant's answer to the prompt alone.
 *
 * Owns the command line, finding the tokenizer (--tokenizer, else data.path/tokenizer.bin of the
 * run's config.resolved.yaml, the run directory being CHECKPOINT's folder's parent), encoding the
 * prompt (runtime/data/tokenizer_encode.h), building the model the checkpoint's description names
 * (model_opts_from_description: any model that can be rebuilt from it) and loading its parameters.
 * With --chat the prompt's ids are wrapped in chat.json's (generate_chat.h: the user turn's prefix
 * and suffix scripts/prepare-chat captured from the chat template) and the draw ends at its stop id
 * or one of its also_stop ids (the model's other end ids), which is not printed; without it, at the
 * data's document separator (unless --no-stop), not printed either. The draw itself is
 * models/lm_generate.c's. `--encode-only` prints the prompt's token ids instead, wrapped with --chat
 * (for tests and for checking a prompt). Must not write files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "generate_chat.h"
#include "models/lm_generate.h"
#include "models/model.h"
#include "config/config.h"
#include "runtime/base/read_whole.h"
#include "runtime/ckpt/ckpt_set.h"
#include "runtime/data/tokenizer_encode.h"
#include "runtime/device/device.h"

#define MAX_NEW_TOKENS (1 << 20)

/* --prompt-file: far more than any model's context takes; a larger file is the wrong file */
#define PROMPT_MAX_BYTES ((size_t)64 << 20)

static const char generate_usage[] =
    "usage: ddprun generate CHECKPOINT [--prompt TEXT | --prompt-file FILE] [--tokens N]\n"
    "                       [--temperature T] [--top-k K] [--top-p P] [--seed S] [--tokenizer PATH]\n"
    "                       [--no-stop] [--chat [--chat-file PATH]]\n"
    "       ddprun generate --encode-only [CHECKPOINT] [--tokenizer PATH] [--chat [--chat-file PATH]]\n"
    "                       [--prompt TEXT | --prompt-file FILE]\n"
    "  Prints the prompt and N tokens drawn from the language model in CHECKPOINT (runs on the\n"
    "  CPU).\n"
    "  --tokens N        tokens to draw (default 64)\n"
    "  --temperature T   >= 0; 0 takes the most likely token (default 1.0)\n"
    "  --top-k K         draw among the K most likely tokens; 0 = all (default 40)\n"
    "  --top-p P         in (0, 1]: then among the most likely of those whose chances first add\n"
    "                    up to P (nucleus sampling); 1 = all of them (default 1)\n"
    "  --seed S          seed of the draw (default 1337)\n"
    "  --tokenizer PATH  tokenizer.bin (default: data.path/tokenizer.bin of the run's\n"
    "                    config.resolved.yaml, the run directory being CHECKPOINT/../..)\n"
    "  --no-stop         draw all N tokens, past the document separator (below)\n"
    "  --chat            the prompt is a user message to a chat model: wrapped in chat.json's\n"
    "                    ids (the chat template's user turn, as scripts/prepare-chat wrote them),\n"
    "                    drawing stops at its end-of-turn id or the model's other end ids\n"
    "                    (chat.json's also_stop); prints the answer alone\n"
    "  --chat-file PATH  chat.json (default: chat.json beside the tokenizer)\n"
    "  --encode-only     print the prompt's token ids (with --chat: wrapped) and exit\n"
    "  The prompt follows the data's document separator (the end-of-text token or BOS that\n"
    "  prepare-text put before every document), which is not printed; drawing it ends the\n"
    "  document and the draw (unless --no-stop), and it is not printed either. Without one and\n"
    "  without a prompt, the context is the newline token. With --chat: chat.json's ids alone\n"
    "  (an empty prompt: an empty user message).\n";

typedef struct gen_opts {
    const char *ckpt, *prompt, *prompt_file, *tokenizer, *chat_file;
    int64_t tokens;
    lm_sampling s;
    bool encode_only, chat, no_stop;
} gen_opts;

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddprun generate: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(ddprun generate --help for usage)\n");
    return DDP_EUSAGE;
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Whether flag a is one of those that take a value (parse_args reads them). */
static bool takes_value(const char *a)
{
    static const char *const valued[] = {"--prompt", "--prompt-file", "--tokenizer", "--chat-file", "--tokens",
                                         "--top-k", "--top-p", "--seed", "--temperature"};
    for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
        if (!strcmp(a, valued[k]))
            return true;
    return false;
}

static int parse_args(int argc, char **argv, gen_opts *o)
{
    *o = (gen_opts){.tokens = 64, .s = {.temperature = 1.0, .top_k = 40, .top_p = 1.0, .seed = 1337}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(generate_usage, stdout);
            return -1;
        }
        if (!strcmp(a, "--encode-only")) {
            o->encode_only = true;
            continue;
        }
        if (!strcmp(a, "--chat")) {
            o->chat = true;
            continue;
        }
        if (!strcmp(a, "--no-stop")) {
            o->no_stop = true;
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            if (o->ckpt)
                return usage("unexpected argument %s", a);
            o->ckpt = a;
            continue;
        }
        if (!takes_value(a))
            return usage("unknown flag %s", a);
        if (!v)
            return usage("%s needs a value", a);
        i++;
        char *end;
        if (!strcmp(a, "--prompt")) {
            o->prompt = v;
        } else if (!strcmp(a, "--prompt-file")) {
            o->prompt_file = v;
        } else if (!strcmp(a, "--tokenizer")) {
            o->tokenizer = v;
        } else if (!strcmp(a, "--chat-file")) {
            o->chat_file = v;
        } else if (!strcmp(a, "--tokens")) {
            if (!parse_i64(v, 0, MAX_NEW_TOKENS, &o->tokens))
                return usage("--tokens: expected an integer in [0, 1048576], got \"%s\"", v);
        } else if (!strcmp(a, "--top-k")) {
            if (!parse_i64(v, 0, INT64_MAX, &o->s.top_k))
                return usage("--top-k: expected an integer >= 0, got \"%s\"", v);
        } else if (!strcmp(a, "--top-p")) {
            o->s.top_p = strtod(v, &end);
            if (!*v || *end || !(o->s.top_p > 0 && o->s.top_p <= 1))
                return usage("--top-p: expected a number in (0, 1], got \"%s\"", v);
        } else if (!strcmp(a, "--seed")) {
            errno = 0;
            o->s.seed = strtoull(v, &end, 10);
            if (!*v || *end || errno || v[0] == '-')
                return usage("--seed: expected an integer in [0, 2^64), got \"%s\"", v);
        } else if (!strcmp(a, "--temperature")) {
            o->s.temperature = strtod(v, &end);
            if (!*v || *end || !isfinite(o->s.temperature) || o->s.temperature < 0)
                return usage("--temperature: expected a number >= 0, got \"%s\"", v);
        }
    }
    if (o->prompt && o->prompt_file)
        return usage("%s", "--prompt and --prompt-file are exclusive");
    if (o->chat_file && !o->chat)
        return usage("%s", "--chat-file needs --chat");
    if (o->no_stop && o->chat)
        return usage("%s", "--no-stop and --chat are exclusive (a chat's answer ends at its end of turn)");
    if (!o->ckpt && !(o->encode_only && o->tokenizer))
        return usage("%s", "needs CHECKPOINT (or --encode-only with --tokenizer PATH)");
    return 0;
}

/* data.path/tokenizer.bin of the config.resolved.yaml in the run directory of ckpt_path
 * (RUN/checkpoints/ckpt-N.ddp). */
static int tokenizer_of_run(const char *ckpt_path, char *out, size_t size, ddp_err *err)
{
    char yaml[CFG_PATH_MAX + 64];
    static config cfg;
    bool found;
    if (ckpt_run_config(ckpt_path, yaml, sizeof yaml, &found, &cfg, err))
        return ddp_prefix(err, "reading the run's data.path (or give --tokenizer PATH)");
    if (!found)
        return ddp_fail(err, DDP_EUSAGE, "no --tokenizer given and %s is missing (%s), so the run's data.path is "
                        "unknown; give --tokenizer PATH", yaml, strerror(errno));
    if (cfg.data.kind != DATA_TOKENS)
        return ddp_fail(err, DDP_EUSAGE, "%s: data.kind is not tokens, so it names no tokenizer; give --tokenizer "
                        "PATH", yaml);
    if (snprintf(out, size, "%s/tokenizer.bin", cfg.data.path) >= (int)size)
        return ddp_fail(err, DDP_EUSAGE, "%s: data.path is too long", yaml);
    return DDP_OK;
}

/* The prompt's bytes (--prompt, or --prompt-file read whole); *text is malloc'd or NULL. */
static int read_prompt(const gen_opts *o, char **text, size_t *len, ddp_err *err)
{
    *text = NULL;
    *len = 0;
    if (o->prompt) {
        *len = strlen(o->prompt);
        *text = malloc(*len + 1);
        if (*text)
            memcpy(*text, o->prompt, *len + 1);
    } else if (o->prompt_file) {
        FILE *f = fopen(o->prompt_file, "rb"); /* not open_input: --prompt-file /dev/stdin is welcome */
        if (!f)
            return ddp_fail(err, DDP_EUSAGE, "--prompt-file %s: %s", o->prompt_file, strerror(errno));
        int rc = read_whole(f, o->prompt_file, PROMPT_MAX_BYTES, text, len, err);
        fclose(f);
        if (rc != DDP_OK)
            ddp_prefix(err, "--prompt-file");
        return rc;
    } else {
        return DDP_OK;
    }
    return *text ? DDP_OK : ddp_fail(err, DDP_ERUNTIME, "out of memory for the prompt");
}

/* The prompt's ids (*ids malloc'd with room for extra more), wrapped in chat's when it is not NULL;
 * else after the document separator, as prepare-text put it before every training document (the
 * end-of-text token, or a Llama's BOS, which Hugging Face's tokenizer adds), or when the tokenizer
 * has none and no id is left the newline token: tokenizer_context_start. *started says
 * whether that start token was put first; --encode-only never adds it. */
static int encode_prompt(const gen_opts *o, const tokenizer *tok, const chat_wrap *chat, int64_t extra,
                         int32_t **ids, int64_t *n, bool *started, ddp_err *err)
{
    char *text;
    size_t len;
    int rc = read_prompt(o, &text, &len, err);
    tokenizer_encoder *enc = NULL;
    int32_t *got = NULL;
    if (!rc)
        rc = tokenizer_encoder_create(tok, &enc, err);
    if (!rc && (rc = tokenizer_encode(enc, text, len, &got, n, err)) != DDP_OK)
        ddp_prefix(err, "%s", o->prompt_file ? o->prompt_file : "--prompt");
    if (!rc && len > 0 && tok->split == TOKENIZER_SPLIT_OTHER)
        fprintf(stderr, "generate: note: the tokenizer's pre-tokenizer is not one ddprun reproduces (GPT-2's, "
                "Llama 3's, Qwen2's, sentencepiece's): the prompt is split as GPT-2's, which spells the same text "
                "but may give other ids than the tokenizer would\n");
    tokenizer_encoder_free(enc);
    free(text);
    if (!rc && chat) {
        int32_t *message = got;
        rc = chat_wrap_ids(chat, message, *n, 0, &got, n, err);
        free(message);
    }
    if (rc)
        return rc;
    bool start = *started = !o->encode_only && (*n == 0 || (!chat && tok->eot >= 0));
    *ids = malloc((size_t)(*n + start + extra + 1) * sizeof **ids);
    if (!*ids) {
        free(got);
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %lld tokens", (long long)(*n + extra));
    }
    if (start)
        (*ids)[0] = tokenizer_context_start(tok);
    if (*n)
        memcpy(*ids + start, got, (size_t)*n * sizeof **ids);
    *n += start;
    free(got);
    return DDP_OK;
}

/* Reads and verifies the checkpoint at path, and the model its description names. */
static int open_checkpoint(const char *path, ckpt_loaded *ck, model_opts *opts, int64_t *seq_len, ddp_err *err)
{
    int rc = ckpt_read_any(path, ck, false, err); /* a file, or a sharded set assembled whole */
    if (rc)
        return rc;
    if (model_opts_from_description(ck->hdr.model, opts, seq_len, err)) {
        ddp_fail(err, DDP_EUSAGE, "%s: checkpoint of %s; only language models' checkpoints can be generated from",
                 path, ck->hdr.model);
        ckpt_loaded_free(ck);
        return DDP_EUSAGE;
    }
    return DDP_OK;
}

/* A model of the checkpoint's shape on dev, with its parameters. */
static int build_model(const ckpt_loaded *ck, const model_opts *opts, int64_t seq_len, device *dev, model **out,
                       ddp_err *err)
{
    sample_layout layout = {.input = {SAMPLE_I32, seq_len}, .target = {SAMPLE_I32, seq_len}};
    int rc = model_create(opts, dev, &layout, 1, MODEL_BUFFERS_WHOLE, out, err);
    if (rc)
        return rc;
    model *m = *out;
    float *host = malloc(m->n_params * sizeof *host);
    if (!host)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %zu parameters", m->n_params);
    for (int i = 0; !rc && i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        const float *p = ckpt_param_f32(ck, t->name, t->numel);
        if (!p)
            rc = ddp_fail(err, DDP_EUSAGE, "the checkpoint has no parameter %s of %zu float32 values", t->name,
                          t->numel);
        else
            memcpy(host + t->offset, p, t->numel * sizeof *host);
    }
    if (!rc)
        rc = dev->ops->upload(dev, m->params, host, m->n_params * sizeof *host, err);
    free(host);
    return rc;
}

static void print_ids(const int32_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", ids[i]);
    putchar('\n');
}

/* The text of ids; for sentencepiece with a dummy prefix without the one space the text begins
 * with, as transformers' decoder strips it (Llama 2's, Mistral's: the prompt as typed, an answer
 * without the space its first word's piece holds). */
static void print_text(const tokenizer *tok, const int32_t *ids, int64_t n)
{
    char buf[64 * 1024];
    bool strip = tok->split == TOKENIZER_SPLIT_SENTENCEPIECE || tok->split == TOKENIZER_SPLIT_SENTENCEPIECE_PREFIXED;
    while (n > 0) {
        size_t written;
        int64_t done = tokenizer_decode(tok, ids, n, buf, sizeof buf, &written);
        size_t skip = strip && written > 0 && buf[0] == ' ';
        strip &= written == 0;
        fwrite(buf + skip, 1, written - skip, stdout);
        ids += done;
        n -= done;
    }
}

/* Everything after the tokenizer (and chat.json, with --chat) is known: encode, then (unless
 * --encode-only) build and draw. */
static int run(const gen_opts *o, const ckpt_loaded *ck, const model_opts *opts, int64_t seq_len,
               const tokenizer *tok, const chat_wrap *chat, ddp_err *err)
{
    int32_t *ids = NULL;
    int64_t n = 0, drawn = 0;
    bool started = false;
    int rc = encode_prompt(o, tok, chat, o->tokens, &ids, &n, &started, err);
    if (!rc && o->encode_only) {
        print_ids(ids, n);
        free(ids);
        return DDP_OK;
    }
    /* the window keeps the last seq_len ids: a longer turn would lose chat.json's start, the system
     * prompt and the turn's header, and the model would answer text out of its template; so the
     * prompt must fit, and the answer ends where the context does (its last id is drawn, not read) */
    if (!rc && chat && n > seq_len)
        rc = ddp_fail(err, DDP_EUSAGE, "--chat: the wrapped prompt is %lld tokens, more than the model's context "
                      "of %lld: shorten the message", (long long)n, (long long)seq_len);
    int64_t to_draw = chat && o->tokens > seq_len - n + 1 ? seq_len - n + 1 : o->tokens;
    device *dev = NULL;
    model *m = NULL;
    if (!rc)
        rc = device_cpu_create(&dev, err);
    if (!rc)
        rc = build_model(ck, opts, seq_len, dev, &m, err);
    if (!rc && tok->vocab_size > m->io.sample.n_classes)
        rc = ddp_fail(err, DDP_EUSAGE, "the tokenizer has %d tokens, more than the model's vocabulary of %lld",
                      tok->vocab_size, (long long)m->io.sample.n_classes);
    lm_sampling s = o->s;
    if (chat) {
        s.stop_ids = chat->stops;
        s.n_stop_ids = chat->n_stops;
    } else if (tok->eot >= 0 && !o->no_stop) { /* the document ends where the next one would start */
        s.stop_ids = &tok->eot;
        s.n_stop_ids = 1;
    }
    if (!rc) {
        fprintf(stderr, "generate: %s, step %lld of %s; %lld prompt tokens", m->description, (long long)ck->hdr.step,
                o->ckpt, (long long)n);
        if (started)
            fprintf(stderr, " (the first the start token %d)", ids[0]);
        fprintf(stderr, ", %s%lld to draw%s (temperature %g, top-k %lld, top-p %g, seed %llu)", s.n_stop_ids ? "up to " : "",
                (long long)to_draw, to_draw < o->tokens ? ", what the context leaves" : "", s.temperature,
                (long long)s.top_k, s.top_p, (unsigned long long)s.seed);
        if (!chat && s.n_stop_ids)
            fprintf(stderr, "; stop at the document separator, id %d", tok->eot);
        if (chat)
            fprintf(stderr, "; chat: %lld + %lld + %lld ids from %s, stop at id %d", (long long)chat->n_prefix,
                    (long long)(n - chat->n_prefix - chat->n_suffix), (long long)chat->n_suffix, chat->path,
                    chat->stop);
        for (int64_t i = 1; chat && i < chat->n_stops; i++)
            fprintf(stderr, "%s%d", i == 1 ? " (also at " : ", ", chat->stops[i]);
        fputs(chat && chat->n_stops > 1 ? ")\n" : "\n", stderr);
        rc = lm_generate(m, ids, n, to_draw, &s, &drawn, err);
    }
    bool stopped = !rc && drawn > 0 && lm_is_stop(&s, ids[n + drawn - 1]); /* not printed */
    if (!rc && chat) { /* the answer alone */
        print_text(tok, ids + n, drawn - stopped);
        putchar('\n');
    } else if (!rc) { /* the start token is not part of the text */
        print_text(tok, ids + started, n - started + drawn - stopped);
        putchar('\n');
    }
    if (m)
        m->ops->destroy(m);
    if (dev)
        dev->ops->destroy(dev);
    free(ids);
    return rc;
}

int generate_main(int argc, char **argv)
{
    gen_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    ddp_err err = {0};
    ckpt_loaded ck = {0};
    model_opts opts = {0};
    int64_t seq_len = 0;
    bool have_ckpt = o.ckpt && !o.encode_only;
    char tok_path[CFG_PATH_MAX + 32];
    if (have_ckpt)
        rc = open_checkpoint(o.ckpt, &ck, &opts, &seq_len, &err);
    if (!rc && o.tokenizer)
        snprintf(tok_path, sizeof tok_path, "%s", o.tokenizer);
    else if (!rc)
        rc = tokenizer_of_run(o.ckpt, tok_path, sizeof tok_path, &err);
    tokenizer tok = {0};
    if (!rc)
        rc = tokenizer_load(tok_path, &tok, &err);
    chat_wrap chat = {0};
    char chat_path[sizeof tok_path + 16];
    if (!rc && o.chat)
        rc = chat_wrap_path(o.chat_file, tok_path, chat_path, sizeof chat_path, &err);
    if (!rc && o.chat)
        rc = chat_wrap_load(chat_path, tok.vocab_size, &chat, &err);
    if (!rc)
        rc = run(&o, have_ckpt ? &ck : NULL, &opts, seq_len, &tok, o.chat ? &chat : NULL, &err);
    if (rc)
        fprintf(stderr, "ddprun generate: %s\n", err.msg);
    chat_wrap_free(&chat);
    tokenizer_free(&tok);
    if (have_ckpt)
        ckpt_loaded_free(&ck);
    fflush(stdout);
    return rc;
}
