/* test_doc_packing.c — runtime/data/doc_packing.c on hand-made shards, .docs and .mask files:
 * best-fit decreasing on lengths whose packing is known by hand; every token of every document in
 * exactly one row, in order, no row over T; a document longer than T cut into pieces of T, the
 * target across a cut taken from the document; each position's target (the next token of its
 * document where the mask says, else DOC_NO_TARGET), its document bounds, the padding; documents
 * never cross shards, several shards; the rows' target counts; every malformed file refused
 * with its name and nothing left allocated (ASan); a split of one token refused as packing's. */
#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/data/dataset.h"
#include "runtime/data/doc_packing.h"

static char dir[] = "/tmp/test_doc_packing.XXXXXX";

static void put32(FILE *f, int32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    fwrite(b, 1, 4, f);
}

static void header(FILE *f, int32_t magic, int32_t version, int32_t count)
{
    put32(f, magic), put32(f, version), put32(f, count);
    for (int i = 3; i < 256; i++)
        put32(f, 0);
}

/* Shard k of split "train": tokens (token i of the stream is (i * 7 + 3) % 250 + 1, never 0, so
 * padding's 0 is told apart), its documents' lengths and mask (trainable when mask[i]). */
static void write_shard(int k, int64_t first, const int32_t *lens, int n_docs, const uint8_t *mask)
{
    int64_t n = 0;
    for (int i = 0; i < n_docs; i++)
        n += lens[i];
    char path[300];
    snprintf(path, sizeof path, "%s/train_%06d.bin", dir, k);
    FILE *f = fopen(path, "wb");
    header(f, TOKEN_SHARD_MAGIC_U16, TOKEN_SHARD_VERSION_U16, (int32_t)n);
    for (int64_t i = 0; i < n; i++) {
        uint16_t t = (uint16_t)(((first + i) * 7 + 3) % 250 + 1);
        fwrite(&t, 2, 1, f);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/train_%06d.docs", dir, k);
    f = fopen(path, "wb");
    header(f, DOC_LENGTHS_MAGIC, DOC_LENGTHS_VERSION, n_docs);
    for (int i = 0; i < n_docs; i++)
        put32(f, lens[i]);
    fclose(f);
    snprintf(path, sizeof path, "%s/train_%06d.mask", dir, k);
    f = fopen(path, "wb");
    header(f, DOC_MASK_MAGIC, DOC_MASK_VERSION, (int32_t)n);
    fwrite(mask, 1, (size_t)n, f);
    fclose(f);
}

static int32_t token_at(int64_t i) { return (int32_t)((i * 7 + 3) % 250 + 1); }

static int open_packing(int64_t T, token_shards *s, doc_packing *p, ddp_err *err)
{
    int rc = token_shards_open(dir, "train", s, err);
    if (rc)
        return rc;
    rc = doc_packing_open(dir, "train", s, T, p, err);
    if (rc)
        token_shards_close(s);
    return rc;
}

/* Lengths 5 5 3 3 2 2 in rows of 10: best fit decreasing puts both 5s in row 0 and the rest in
 * row 1, whole, in that order (ties in stream order). */
static void test_best_fit(void)
{
    const int32_t lens[] = {3, 5, 2, 5, 3, 2};
    uint8_t mask[20];
    for (int i = 0; i < 20; i++)
        mask[i] = (uint8_t)(i % 3 != 0);
    mask[9] = 1; /* the 2 at 8..9 gets its target (a document without one is left out) */
    write_shard(0, 0, lens, 6, mask);
    token_shards s;
    doc_packing p;
    ddp_err err = {0};
    CHECK(open_packing(10, &s, &p, &err) == DDP_OK, "open: %s", err.msg);
    CHECK_EQ_INT(p.n_rows, 2);
    CHECK_EQ_INT(p.docs, 6);
    CHECK_EQ_INT(p.split_docs, 0);
    CHECK_EQ_INT(p.tokens, 20);
    /* row 0: the two 5s (stream 3..7, 10..14); row 1: 3s (0..2, 15..17), then 2s (8..9, 18..19) */
    const int64_t want_at[] = {3, 10, 0, 15, 8, 18};
    for (int i = 0; i < 6 && p.n_rows == 2; i++)
        CHECK(p.piece_at[i] == want_at[i], "piece %d starts at %lld, expected %lld", i, (long long)p.piece_at[i],
              (long long)want_at[i]);
    CHECK(p.row_first[1] == 2 && p.row_first[2] == 6, "row 0 holds two pieces, row 1 four");
    int32_t tok[20], tgt[20], docs[40];
    int64_t idx[2] = {0, 1}, counted = 0;
    doc_packing_gather(&p, &s, idx, 2, tok, tgt, docs);
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < 10; t++) {
            const int i = r * 10 + t;
            /* find the stream position of (r, t) from the pieces */
            int64_t at = -1, start = 0, end = 10;
            for (int64_t k = p.row_first[r], pos = 0; k < p.row_first[r + 1]; pos += p.piece_len[k], k++)
                if (t >= pos && t < pos + p.piece_len[k])
                    at = p.piece_at[k] + (t - pos), start = pos, end = pos + p.piece_len[k];
            CHECK(at >= 0, "row %d position %d is not a piece's (no padding in full rows)", r, t);
            CHECK(tok[i] == token_at(at), "row %d position %d: token %d, expected stream[%lld] %d", r, t, tok[i],
                  (long long)at, token_at(at));
            const bool has = t + 1 < end && mask[at + 1];
            CHECK(tgt[i] == (has ? token_at(at + 1) : DOC_NO_TARGET), "row %d position %d: target %d", r, t, tgt[i]);
            CHECK(docs[i] == start && docs[20 + i] == end, "row %d position %d: bounds [%d, %d), expected [%lld, %lld)",
                  r, t, docs[i], docs[20 + i], (long long)start, (long long)end);
            counted += tgt[i] != DOC_NO_TARGET;
        }
    CHECK_EQ_INT(doc_packing_targets(&p, idx, 2), counted);
    CHECK_EQ_INT(p.targets, counted);
    doc_packing_close(&p);
    token_shards_close(&s);
}

/* Two shards: a document of 25 in rows of 10 is cut into 10, 10, 5 (the targets across the cuts
 * come from the document), a short one fills a row's end, the last row is padded. */
static void test_long_and_padding(void)
{
    const int32_t a[] = {25}, b[] = {4};
    uint8_t ma[25], mb[4];
    memset(ma, 1, sizeof ma), memset(mb, 1, sizeof mb);
    ma[0] = mb[0] = 0;
    write_shard(0, 0, a, 1, ma);
    write_shard(1, 25, b, 1, mb);
    token_shards s;
    doc_packing p;
    ddp_err err = {0};
    CHECK(open_packing(10, &s, &p, &err) == DDP_OK, "open: %s", err.msg);
    CHECK_EQ_INT(p.split_docs, 1);
    CHECK_EQ_INT(p.docs, 2);
    CHECK_EQ_INT(p.n_rows, 3); /* 10 | 10 | 5 + 4 + padding 1 */
    int32_t tok[30], tgt[30], docs[60];
    int64_t idx[3] = {0, 1, 2};
    doc_packing_gather(&p, &s, idx, 3, tok, tgt, docs);
    /* row 0 (the first piece): its last position's target is stream[10], the next piece's first */
    CHECK(tgt[9] == token_at(10), "the target across a cut: %d, expected %d", tgt[9], token_at(10));
    /* the piece of 5 (stream 20..24) and the 4 (25..28): the 5's last token has no target */
    int64_t five = -1;
    for (int t = 0; t < 10; t++)
        if (tok[20 + t] == token_at(20))
            five = t;
    CHECK(five == 0, "the piece of 5 opens row 2 (longer first)");
    CHECK(tgt[24] == DOC_NO_TARGET, "a document's last token has no target");
    CHECK(tgt[25] == token_at(26) && tgt[27] == token_at(28) && tgt[28] == DOC_NO_TARGET,
          "the 4's positions predict its next tokens, its last none");
    CHECK(tok[29] == 0 && tgt[29] == DOC_NO_TARGET && docs[29] == 9 && docs[30 + 29] == 10,
          "padding: token 0, no target, a document of its own [9, 10)");
    CHECK_EQ_INT(p.targets, 24 + 3); /* the 25's 24 successors (mask 1 past its first token), the 4's 3 */
    CHECK_EQ_INT(doc_packing_tokens(&p, idx + 2, 1), 9); /* the padding position holds none */
    CHECK_EQ_INT(doc_packing_tokens(&p, idx, 3), 29);
    doc_packing_close(&p);
    token_shards_close(&s);
    for (int k = 0; k < 2; k++)
        for (const char *ext = "bin\0docs\0mask\0"; *ext; ext += strlen(ext) + 1) {
            char path[300];
            snprintf(path, sizeof path, "%s/train_%06d.%s", dir, k, ext);
            unlink(path);
        }
}

/* A document of 25 cut into pieces of 10, 10 and 5 with targets only from stream position `first`
 * on: the pieces whose positions predict none are left out. A piece's last position predicts the
 * next piece's first token, so first = 10 keeps piece 0 (one target) and first = 11 leaves it out. */
static void test_untrained_left_out(void)
{
    for (int first = 10; first <= 11; first++) {
        const int32_t len[] = {25};
        uint8_t mask[25];
        for (int i = 0; i < 25; i++)
            mask[i] = i >= first;
        write_shard(0, 0, len, 1, mask);
        token_shards s;
        doc_packing p;
        ddp_err err = {0};
        CHECK(open_packing(10, &s, &p, &err) == DDP_OK, "open: %s", err.msg);
        const int64_t dropped = first == 11;
        CHECK(p.untrained_pieces == dropped && p.untrained_tokens == 10 * dropped && p.tokens == 25 - 10 * dropped,
              "first target %d: %lld pieces (%lld tokens) left out, %lld tokens kept", first,
              (long long)p.untrained_pieces, (long long)p.untrained_tokens, (long long)p.tokens);
        CHECK_EQ_INT(p.targets, 24 - (first - 1));
        CHECK_EQ_INT(p.n_rows, 3 - dropped);
        for (int64_t k = 0; k < p.row_first[p.n_rows]; k++)
            CHECK(p.piece_at[k] >= 10 * dropped, "piece at %lld kept", (long long)p.piece_at[k]);
        doc_packing_close(&p);
        token_shards_close(&s);
    }
}

/* file `name` of shard 0 rewritten with byte `at` set to v: refused, the message naming want. */
static void refused(const char *name, long at, uint8_t v, const char *want)
{
    const int32_t lens[] = {4, 6};
    uint8_t mask[10] = {0, 1, 1, 1, 0, 1, 1, 1, 1, 1};
    write_shard(0, 0, lens, 2, mask);
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (at >= 0) {
        FILE *f = fopen(path, "r+b");
        fseek(f, at, SEEK_SET);
        fputc(v, f);
        fclose(f);
    } else {
        unlink(path);
    }
    token_shards s;
    doc_packing p;
    ddp_err err = {0};
    int rc = open_packing(8, &s, &p, &err);
    CHECK(rc == DDP_EUSAGE, "%s byte %ld = %d: rc %d", name, at, v, rc);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK_STR_CONTAINS(err.msg, name);
    if (rc == DDP_OK) {
        doc_packing_close(&p);
        token_shards_close(&s);
    }
}

static void test_refusals(void)
{
    refused("train_000000.docs", -1, 0, "prepare-chat");
    refused("train_000000.mask", -1, 0, "prepare-chat");
    refused("train_000000.docs", 0, 0x13, "magic");
    refused("train_000000.mask", 4, 9, "version");
    refused("train_000000.mask", 1024 + 3, 2, "token 3's mask byte is 2");
    refused("train_000000.mask", 8, 11, "a mask of 11 tokens");
    refused("train_000000.docs", 8, 3, "bytes for 3 documents");
    refused("train_000000.docs", 1024, 3, "documents of 9 tokens in all");
    refused("train_000000.docs", 1024, 5, "document 1 of 6 tokens overruns");
    refused("train_000000.docs", 1024 + 4, 0, "document 1 has no tokens");
    refused("train_000000.docs", 8, 0, "its header says 0 documents");
    refused("train_000000.docs", 1024 + 4, 9, "document 1 of 9 tokens overruns");

    /* only each document's first token marked: a split without a target, named */
    const int32_t lens[] = {4, 6};
    uint8_t mask[10] = {1, 0, 0, 0, 1, 0, 0, 0, 0, 0};
    write_shard(0, 0, lens, 2, mask);
    token_shards s;
    doc_packing p;
    ddp_err err = {0};
    CHECK_EQ_INT(open_packing(8, &s, &p, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "/train_*.mask: no target among the split's 10 tokens");
    mask[9] = 1; /* one target: the last document's last token */
    write_shard(0, 0, lens, 2, mask);
    int rc = open_packing(8, &s, &p, &err);
    CHECK(rc == DDP_OK && p.targets == 1, "one target: %s", err.msg);
    /* the first document (4 tokens) has none: left out, the row holds the second alone */
    CHECK(rc == DDP_OK && p.untrained_pieces == 1 && p.untrained_tokens == 4 && p.n_rows == 1 && p.tokens == 6,
          "the document without a target left out");
    if (rc == DDP_OK) {
        doc_packing_close(&p);
        token_shards_close(&s);
    }
}

/* dataset_load_packed: rows as samples, the layout seq_len -> seq_len, targets counted. */
static void test_dataset(void)
{
    const int32_t lens[] = {3, 5, 2, 5, 3, 2};
    uint8_t mask[20];
    memset(mask, 1, sizeof mask);
    write_shard(0, 0, lens, 6, mask);
    char path[300];
    snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
    FILE *f = fopen(path, "wb"); /* llm.c tokenizer version 2: magic, version, vocab, eot; 256 one-byte tokens */
    put32(f, 20240328), put32(f, 2), put32(f, 256), put32(f, 0);
    for (int i = 4; i < 256; i++)
        put32(f, 0);
    for (int i = 0; i < 256; i++)
        fputc(1, f), fputc(i, f);
    fclose(f);
    dataset d;
    ddp_err err = {0};
    CHECK(dataset_load_packed(dir, "train", 10, &d, &err) == DDP_OK, "dataset_load_packed: %s", err.msg);
    if (!err.msg[0]) {
        CHECK(d.n == 2 && d.layout.input.count == 10 && d.layout.target.count == 10, "2 rows of 10");
        int64_t idx[2] = {1, 0};
        CHECK_EQ_INT(dataset_targets(&d, idx, 2), 20 - 6); /* every successor within its document */
        dataset_free(&d);
    }
    const int32_t one[] = {1}; /* a split of one token: refused as packing needs it, not as data.seq_len's */
    write_shard(0, 0, one, 1, mask);
    CHECK(dataset_load_packed(dir, "train", 10, &d, &err) == DDP_EUSAGE, "a one-token split packed");
    CHECK_STR_CONTAINS(err.msg, "train_*.bin: 1 token(s); packing needs at least 2");
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    test_best_fit();
    test_long_and_padding();
    test_untrained_left_out();
    test_refusals();
    test_dataset();
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    return check_done("test_doc_packing");
}
