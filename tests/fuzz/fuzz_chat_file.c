/* fuzz_chat_file.c — libFuzzer target for `ddprun generate --chat`'s chat.json reader
 * (launcher/commands/generate_chat.c).
 *
 * The input is written as chat.json and read for a vocabulary of 300 ids. What the reader accepts
 * must hold what generate relies on: every id below the vocabulary, at least one end-of-turn id,
 * stop equal to the first; and a message wrapped with it must be prefix, message, suffix. A refusal
 * must name the file and the flag. The harness aborts otherwise. Reading only: nothing is drawn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/commands/generate_chat.h"
#include "tests/fuzz/fuzz_util.h"

#define VOCAB 300

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ids_below_vocab(const int32_t *ids, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= VOCAB) {
            fprintf(stderr, "%s[%lld] = %d accepted for %d ids\n", what, (long long)i, ids[i], VOCAB);
            abort();
        }
}

static void check_wrap(const chat_wrap *c)
{
    const int32_t message[3] = {7, 8, 9};
    int32_t *out;
    int64_t n;
    ddp_err err = {0};
    if (chat_wrap_ids(c, message, 3, 2, &out, &n, &err) != DDP_OK) abort();
    if (n != c->n_prefix + 3 + c->n_suffix ||
        (c->n_prefix && memcmp(out, c->prefix, (size_t)c->n_prefix * sizeof *out)) ||
        memcmp(out + c->n_prefix, message, sizeof message) ||
        (c->n_suffix && memcmp(out + c->n_prefix + 3, c->suffix, (size_t)c->n_suffix * sizeof *out))) {
        fprintf(stderr, "a message wrapped is not prefix, message, suffix\n");
        abort();
    }
    out[n + 1] = 0; /* the room asked for (ASan reports a buffer short of it) */
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    char path[4096];
    fuzz_path(path, sizeof path, "chat.json");
    fuzz_write_file(path, data, size);
    chat_wrap c;
    ddp_err err = {0};
    if (chat_wrap_load(path, VOCAB, &c, &err) == DDP_OK) {
        ids_below_vocab(c.prefix, c.n_prefix, "user_prefix");
        ids_below_vocab(c.suffix, c.n_suffix, "user_suffix");
        ids_below_vocab(c.end_of_turn, c.n_end, "end_of_turn");
        if (c.n_end < 1 || c.stop != c.end_of_turn[0]) {
            fprintf(stderr, "accepted without an end of turn, or with stop %d not its first id\n", c.stop);
            abort();
        }
        check_wrap(&c);
    } else if (!strstr(err.msg, path) || strncmp(err.msg, "--chat", 6)) {
        fprintf(stderr, "a refusal that does not name the file and --chat: %s\n", err.msg);
        abort();
    }
    chat_wrap_free(&c);
    return 0;
}
