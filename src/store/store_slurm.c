/* store_slurm.c -- the slurm columns of jobs (store.h, backend: slurm). */
#include "store/store.h"
#include "store/store_int.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static void bind_opt(sqlite3_stmt *q, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(q, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(q, i);
}

int store_slurm_set(struct store *st, const char *id, const char *job, const char *nodes,
		    const char *state, struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "UPDATE jobs SET backend='slurm', slurm_job=COALESCE(?1, slurm_job),"
			       " slurm_nodes=COALESCE(?2, slurm_nodes),"
			       " slurm_state=COALESCE(?3, slurm_state) WHERE id=?4",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	bind_opt(q, 1, job);
	bind_opt(q, 2, nodes);
	bind_opt(q, 3, state);
	sqlite3_bind_text(q, 4, id, -1, SQLITE_TRANSIENT);
	int r = sqlite3_step(q);
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "record the slurm job");
}
