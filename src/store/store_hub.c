/* store_hub.c -- the hub's bookkeeping: hub_jobs, hub_streams and hub_rdzv (store.h). */
#include "store/store.h"
#include "store/store_int.h"

#include <sqlite3.h>
#include <stdlib.h>

int store_hub_job_set(struct store *st, const char *job, const char *secret_sha256,
		      const char *url, struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT INTO hub_jobs (job_id, secret_sha256, url) VALUES (?1,?2,?3)"
			" ON CONFLICT(job_id) DO UPDATE SET secret_sha256=?2, url=?3",
			"sss", job, secret_sha256, url);
}

int store_hub_job_get(struct store *st, const char *job, char **secret_sha256, char **url,
		      struct tc_err *err)
{
	sqlite3_stmt *q;
	*secret_sha256 = *url = NULL;
	int rc = prep_stmt(st, &q, err, "SELECT secret_sha256, url FROM hub_jobs WHERE job_id=?",
			   "s", job);
	if (rc)
		return rc;
	int r = sqlite3_step(q);
	if (r == SQLITE_ROW) {
		*secret_sha256 = col_dup(q, 0);
		*url = col_dup(q, 1);
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
	int r = prep_stmt(st, &q, err, "SELECT acked FROM hub_streams WHERE job_id=? AND stream=?",
			  "ss", job, stream);
	if (r)
		return r;
	r = sqlite3_step(q);
	if (r == SQLITE_ROW)
		*seq = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : db_fail(st, err, "read acknowledgements");
}

int store_hub_set_acked(struct store *st, const char *job, const char *stream, long long seq,
			struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT INTO hub_streams (job_id, stream, acked) VALUES (?1,?2,?3)"
			" ON CONFLICT(job_id, stream) DO UPDATE SET acked=?3",
			"ssi", job, stream, seq);
}

int store_hub_rdzv_set(struct store *st, const char *job, const char *round_json,
		       struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT INTO hub_rdzv (job_id, round) VALUES (?1,?2)"
			" ON CONFLICT(job_id) DO UPDATE SET round=?2",
			"ss", job, round_json);
}

int store_hub_rdzv_get(struct store *st, const char *job, char **round_json, struct tc_err *err)
{
	sqlite3_stmt *q;
	*round_json = NULL;
	int rc = prep_stmt(st, &q, err, "SELECT round FROM hub_rdzv WHERE job_id=?", "s", job);
	if (rc)
		return rc;
	int r = sqlite3_step(q);
	if (r == SQLITE_ROW)
		*round_json = col_dup(q, 0);
	else if (r != SQLITE_DONE)
		rc = db_fail(st, err, "read the job's rendezvous round");
	sqlite3_finalize(q);
	return rc;
}
