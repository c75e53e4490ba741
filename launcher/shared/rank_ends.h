/* rank_ends.h — the openings of the errors with which ddprun-worker's signal thread ends its own
 * rank when one of its deadlines passed (a stop request the ranks did not answer, MPI's start-up
 * not finished), named once for the worker that prints them and for ddprun's output filter. The
 * filter takes either as it takes a collective deadline's verdict: the rank may be held in the
 * kernel by what it waited on (a mount that stopped answering), which can hold mpirun's end of
 * the job too, so ddprun bounds that end. */
#ifndef DDPRUN_RANK_ENDS_H
#define DDPRUN_RANK_ENDS_H

#define RANK_END_STOP_UNANSWERED "the stop request was not answered within "
#define RANK_END_START_UNFINISHED "MPI's start-up (MPI_Init, the first collectives) did not finish within "
/* where the unanswered stop's line says the exit code its rank ends with */
#define RANK_END_CODE "; ending the job (exit "

#endif
