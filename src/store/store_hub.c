/* store_hub.c -- the hub's bookkeeping: hub_jobs and hub_streams (store.h). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/xalloc.h"

#include <sqlite3.h>
#include <stdlib.h>

static void bind_opt(sqlite3_stmt *q, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(q, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(q, i);
}

static char *col_opt(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? xstrdup((const char *)t) : NULL;
}

int store_hub_job_set(struct store *st, const char *job, const char *secret_sha256,
		      const char *url, struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO hub_jobs (job_id, secret_sha256, url) VALUES (?1,?2,?3)"
			       " ON CONFLICT(job_id) DO UPDATE SET secret_sha256=?2, url=?3",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	bind_opt(q, 1, job);
	bind_opt(q, 2, secret_sha256);
	bind_opt(q, 3, url);
	int r = sqlite3_step(q);
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "record the job's hub");
}

int store_hub_job_get(struct store *st, const char *job, char **secret_sha256, char **url,
		      struct tc_err *err)
{
	sqlite3_stmt *q;
	*secret_sha256 = *url = NULL;
	if (sqlite3_prepare_v2(st->db, "SELECT secret_sha256, url FROM hub_jobs WHERE job_id=?", -1,
			       &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	bind_opt(q, 1, job);
	int r = sqlite3_step(q), rc = 0;
	if (r == SQLITE_ROW) {
		*secret_sha256 = col_opt(q, 0);
		*url = col_opt(q, 1);
	} else if (r == SQLITE_DONE) {
		rc = tc_error(err, TC_ENOTFOUND, "job %s reports to no hub", job);
	} else {
		rc = db_fail(st, err, "read the job's hub");
	}
	sqlite3_finalize(q);
	return rc;
}

int store_hub_acked(struct store *st, const char *job, const char *stream, long long *seq,
		    struct tc_err *err)
{
	sqlite3_stmt *q;
	*seq = 0;
	if (sqlite3_prepare_v2(st->db, "SELECT acked FROM hub_streams WHERE job_id=? AND stream=?",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	bind_opt(q, 1, job);
	bind_opt(q, 2, stream);
	int r = sqlite3_step(q);
	if (r == SQLITE_ROW)
		*seq = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : db_fail(st, err, "read acknowledgements");
}

int store_hub_set_acked(struct store *st, const char *job, const char *stream, long long seq,
			struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO hub_streams (job_id, stream, acked) VALUES (?1,?2,?3)"
			       " ON CONFLICT(job_id, stream) DO UPDATE SET acked=?3",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	bind_opt(q, 1, job);
	bind_opt(q, 2, stream);
	sqlite3_bind_int64(q, 3, seq);
	int r = sqlite3_step(q);
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "record an acknowledgement");
}
