/* stop_signals.h — the signals a rank program takes as "checkpoint and stop": SIGTERM, SIGINT,
 * SIGUSR1, SIGUSR2 (README "Using ddprun"), named once for the programs that handle them:
 * ddprun's rank wrapper blocks them before it starts a rank program, which inherits the mask, so
 * one that arrives while the program loads waits for it instead of killing it; ddprun-worker takes
 * them on a thread of its own; ddprun-bench, with nothing to save, lets them end it. */
#ifndef DDPRUN_STOP_SIGNALS_H
#define DDPRUN_STOP_SIGNALS_H

#include <signal.h>

static inline void stop_signals_fill(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR1);
    sigaddset(set, SIGUSR2);
}

#endif
