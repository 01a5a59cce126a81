/*
 * store_slurm.h -- the slurm columns of jobs (store_slurm.c);
 * store.h includes it.
 */
#ifndef TC_STORE_SLURM_H
#define TC_STORE_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

/* ---- backend: slurm (store_slurm.c) ----
 *
 * Columns of jobs: backend ('local' or 'slurm'), slurm_job (the Slurm job
 * id), slurm_nodes (its node list, "n[1-2]"), slurm_state (the Slurm state
 * last seen, e.g. RUNNING); struct job_row carries them.
 * store_job_reconcile leaves slurm jobs alone: their supervisors are not
 * processes of this machine.
 */
/* Mark id as a slurm job; job, nodes, state: NULL leaves the column as is. */
int store_slurm_set(struct store *st, const char *id, const char *job, const char *nodes,
		    const char *state, struct tc_err *err);

#endif
