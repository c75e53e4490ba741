/* lm_generate.h — text generation with any language model (model_io.language_model): repeated
 * forward passes over the last T tokens and one token drawn from the last position's logits.
 *
 * No key/value cache: each new token costs one forward pass of a single T-token sequence, which
 * is what sampling a few dozen tokens during training or from `ddprun generate` needs. The draw
 * is seeded and runs on the host in double, so a seed gives the same text on every backend with
 * the same logits. Logits that are not all finite (a model whose parameters are NaN or overflow)
 * are refused, never drawn from. A stop id (a chat's end of turn, a document's separator) ends the draw early. This
 * module must not read files or know tokenizers: it maps ids to ids. */
#ifndef DDP_LM_GENERATE_H
#define DDP_LM_GENERATE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "model.h"

typedef struct lm_sampling {
    double temperature;   /* > 0 scales the logits; 0 takes the most likely token (greedy) */
    int64_t top_k;        /* draw among the k most likely tokens; 0 = the whole vocabulary */
    double top_p;         /* then among the most likely ones whose chances first add up to top_p
                           * (nucleus sampling); 0 or >= 1: all that top_k leaves */
    uint64_t seed;
    /* NULL, or a flag a signal sets: once it is non-zero no further token is drawn */
    const volatile sig_atomic_t *stop;
    /* stop_ids[0..n_stop_ids): drawing ends once one of them is drawn (it is appended, the last id);
     * a chat's end of turn and the model's other end ids (Llama 3.1's <|eot_id|>, <|eom_id|> and
     * <|end_of_text|>) */
    const int32_t *stop_ids;
    int64_t n_stop_ids;
    /* NULL, or called with token_ctx before each token's forward pass: the caller's sign of life
     * while it generates (a trainer's rank 0 answering the ranks that wait for it) */
    void (*each_token)(void *token_ctx);
    void *token_ctx;
} lm_sampling;

/* Whether id is one of s's stop ids. */
bool lm_is_stop(const lm_sampling *s, int32_t id);

/* One entry of lm_draw_weights' scratch space. */
typedef struct lm_ranked {
    double w;
    int64_t id;
} lm_ranked;

/* The weights a draw from the logits row[0..V) (finite) picks by under s: id i's chance is p[i]
 * over their sum, which is returned. p[i] is exp((row[i] - row[best]) / temperature) for the ids
 * top_k and then top_p keep (temperature first, then top-k, then top-p, as Hugging Face's warpers
 * apply them; ties in the order of their ids), 0 for the others; greedy (temperature 0): 1 for
 * the most likely id alone. *best gets the most likely id (the first of equals). scratch: room
 * for V entries. */
double lm_draw_weights(const float *row, int64_t V, const lm_sampling *s, double *p, lm_ranked *scratch,
                       int64_t *best);

/* tokens holds len >= 1 ids (the prompt) and room for n more; appends up to n drawn ids: n, or
 * fewer when one of s's stop ids was drawn (the last appended). *drawn (when not NULL) gets their count,
 * also on failure. Ids must lie in the model's vocabulary. The model must have been built for at
 * least one row. Returns DDP_ENONFINITE (naming the token, id and value) when a logit is NaN or
 * infinite, and DDP_EPREEMPTED when *s->stop was set before the draw ended. */
int lm_generate(model *m, int32_t *tokens, int64_t len, int64_t n, const lm_sampling *s, int64_t *drawn,
                ddp_err *err);

#endif
