/* store_slurm.c -- the slurm columns of jobs (store.h, backend: slurm). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/xalloc.h"

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

static char *col(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? xstrdup((const char *)t) : NULL;
}

int store_slurm_get(struct store *st, const char *id, struct store_slurm *out,
		    struct tc_err *err)
{
	sqlite3_stmt *q;
	memset(out, 0, sizeof(*out));
	if (sqlite3_prepare_v2(st->db,
			       "SELECT backend, slurm_job, slurm_nodes, slurm_state FROM jobs WHERE id=?",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, id, -1, SQLITE_TRANSIENT);
	int r = sqlite3_step(q);
	int rc = 0;
	if (r == SQLITE_ROW) {
		out->backend = col(q, 0);
		out->job = col(q, 1);
		out->nodes = col(q, 2);
		out->state = col(q, 3);
	} else if (r == SQLITE_DONE) {
		rc = tc_error(err, TC_ENOTFOUND, "no job '%s'", id);
	} else {
		rc = db_fail(st, err, "read the slurm job");
	}
	sqlite3_finalize(q);
	return rc;
}

void store_slurm_release(struct store_slurm *x)
{
	if (!x)
		return;
	free(x->backend);
	free(x->job);
	free(x->nodes);
	free(x->state);
	memset(x, 0, sizeof(*x));
}

bool store_job_is_slurm(struct store *st, const char *id)
{
	struct store_slurm x;
	struct tc_err err = TC_ERR_INIT;
	bool yes = store_slurm_get(st, id, &x, &err) == 0 && x.backend && !strcmp(x.backend, "slurm");
	store_slurm_release(&x);
	tc_err_release(&err);
	return yes;
}
