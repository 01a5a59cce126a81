/* store_slurm.c -- the slurm columns of jobs (store.h, backend: slurm). */
#include "store/store.h"
#include "store/store_int.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

int store_slurm_set(struct store *st, const char *id, const char *job, const char *nodes,
		    const char *state, struct tc_err *err)
{
	return run_stmt(st, err,
			"UPDATE jobs SET backend='slurm', slurm_job=COALESCE(?1, slurm_job),"
			" slurm_nodes=COALESCE(?2, slurm_nodes),"
			" slurm_state=COALESCE(?3, slurm_state) WHERE id=?4",
			"ssss", job, nodes, state, id);
}
