/*
 * store_usage.c -- usage accounting (store_usage.h): intervals written by
 * the state change itself, and the report that sums them over a window.
 */
#include "store/store_int.h"
#include "store/store_usage.h"
#include "core/xalloc.h"

#include <stdlib.h>

/* The states in which a job holds its devices: an interval stays open through them. */
static bool holds_devices(enum job_state s)
{
	return s == JOB_STARTING || s == JOB_RUNNING || s == JOB_RESTARTING;
}

int store_usage_edge(struct store *st, const char *id, enum job_state to, double now,
		     struct tc_err *err)
{
	if (to == JOB_RUNNING)
		/*
		 * A restart keeps the interval open; the first interval of a
		 * job carries its queue wait (created -> first running).
		 * team: the one the job was submitted for (NULL: none).
		 */
		return run_stmt(st, err,
				"INSERT INTO usage (job_id, user, team, device_type, device_count,"
				" opened, queue_wait)"
				" SELECT id, user, team, device_type, device_count, ?1,"
				"  CASE WHEN EXISTS (SELECT 1 FROM usage WHERE job_id = ?2) THEN NULL"
				"  ELSE MAX(0, ?1 - created) END"
				" FROM jobs WHERE id = ?2 AND NOT EXISTS"
				"  (SELECT 1 FROM usage WHERE job_id = ?2 AND closed IS NULL)",
				"ds", now, id);
	if (holds_devices(to))
		return 0;
	return run_stmt(st, err,
			"UPDATE usage SET closed = ?, outcome = ? WHERE job_id = ? AND closed IS NULL",
			"dss", now, job_state_name(to), id);
}

int store_usage_report(struct store *st, const struct usage_query *uq, struct usage_row **out,
		       size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	/*
	 * end: an open interval stops at its job's recorded end (a server
	 * killed before it could close it), else now; a job row gone (gc)
	 * leaves only closed intervals.  Each interval is clipped to the window.
	 */
	int rc = prep_stmt(
		st, &q, err,
		"WITH iv AS (SELECT u.job_id, COALESCE(CASE ?5 WHEN 1 THEN u.team ELSE u.user END, '')"
		"   AS grp, u.device_type, u.device_count, u.opened, u.queue_wait,"
		"   COALESCE(u.closed, NULLIF(j.ended, 0), ?3) AS stop"
		"  FROM usage u LEFT JOIN jobs j ON j.id = u.job_id"
		"  WHERE (?4 IS NULL OR u.user = ?4)"
		"   AND NOT (?6 AND COALESCE(j.backend, '') = 'slurm' AND COALESCE(j.slurm_job, '') != ''))"
		" SELECT grp, device_type,"
		"  SUM(device_count * MAX(0, MIN(stop, ?2) - MAX(opened, ?1))),"
		"  COUNT(DISTINCT job_id), COUNT(queue_wait), AVG(queue_wait), MAX(queue_wait)"
		" FROM iv WHERE opened < ?2 AND stop > ?1"
		" GROUP BY grp, device_type ORDER BY grp, device_type",
		"dddsii", uq->since, uq->until, uq->now, uq->user, (long long)(uq->by == USAGE_BY_TEAM),
		(long long)uq->slurm_apart);
	if (rc)
		return rc;
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct usage_row *u = &(*out)[(*nr)++];
		u->group = col_dup(q, 0);
		u->device_type = col_dup(q, 1);
		u->device_seconds = sqlite3_column_double(q, 2);
		u->jobs = (long)sqlite3_column_int64(q, 3);
		u->waited = (long)sqlite3_column_int64(q, 4);
		u->wait_mean = sqlite3_column_double(q, 5);
		u->wait_max = sqlite3_column_double(q, 6);
	}
	if (r != SQLITE_DONE)
		rc = db_fail(st, err, "read usage");
	sqlite3_finalize(q);
	if (rc) {
		usage_rows_free(*out, *nr);
		*out = NULL;
		*nr = 0;
	}
	return rc;
}

void usage_rows_free(struct usage_row *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].group);
		free(v[i].device_type);
	}
	free(v);
}

int store_usage_intervals(struct store *st, double since, double now, struct usage_interval **out,
			  size_t *n, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	*out = NULL;
	*n = 0;
	int rc = prep_stmt(st, &q, err,
			   "SELECT team, user, device_type, device_count, opened, stop FROM"
			   " (SELECT u.team, u.user, u.device_type, u.device_count, u.opened,"
			   "   COALESCE(u.closed, NULLIF(j.ended, 0), ?2) AS stop"
			   "  FROM usage u LEFT JOIN jobs j ON j.id = u.job_id"
			   /* a Slurm job held none of this machine's devices: Slurm shares its own */
			   "  WHERE NOT (COALESCE(j.backend, '') = 'slurm' AND COALESCE(j.slurm_job, '') != ''))"
			   " WHERE stop > ?1 ORDER BY opened",
			   "dd", since, now);
	if (rc)
		return rc;
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *n + 1, alloc);
		struct usage_interval *u = &(*out)[(*n)++];
		u->team = sqlite3_column_type(q, 0) == SQLITE_NULL ? NULL : col_dup(q, 0);
		u->user = col_dup(q, 1);
		u->device_type = col_dup(q, 2);
		u->device_count = sqlite3_column_int(q, 3);
		u->opened = sqlite3_column_double(q, 4);
		u->stop = sqlite3_column_double(q, 5);
	}
	if (r != SQLITE_DONE)
		rc = db_fail(st, err, "read usage");
	sqlite3_finalize(q);
	if (rc) {
		usage_intervals_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

void usage_intervals_free(struct usage_interval *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].team);
		free(v[i].user);
		free(v[i].device_type);
	}
	free(v);
}

int store_usage_slurm_jobs(struct store *st, const struct usage_query *uq,
			   struct usage_slurm_job **out, size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	int rc = prep_stmt(st, &q, err,
			   "SELECT id, slurm_job, COALESCE(CASE ?4 WHEN 1 THEN team ELSE user END, ''),"
			   " device_type, device_count, created FROM jobs"
			   " WHERE backend = 'slurm' AND COALESCE(slurm_job, '') != ''"
			   "  AND created < ?2 AND (COALESCE(ended, 0) = 0 OR ended > ?1)"
			   "  AND (?3 IS NULL OR user = ?3) ORDER BY created, id",
			   "ddsi", uq->since, uq->until, uq->user, (long long)(uq->by == USAGE_BY_TEAM));
	if (rc)
		return rc;
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct usage_slurm_job *u = &(*out)[(*nr)++];
		u->job_id = col_dup(q, 0);
		u->slurm_id = col_dup(q, 1);
		u->group = col_dup(q, 2);
		u->device_type = col_dup(q, 3);
		u->per_node = sqlite3_column_int(q, 4);
		u->created = sqlite3_column_double(q, 5);
	}
	if (r != SQLITE_DONE)
		rc = db_fail(st, err, "read the Slurm jobs of usage");
	sqlite3_finalize(q);
	if (rc) {
		usage_slurm_jobs_free(*out, *nr);
		*out = NULL;
		*nr = 0;
	}
	return rc;
}

void usage_slurm_jobs_free(struct usage_slurm_job *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].job_id);
		free(v[i].slurm_id);
		free(v[i].group);
		free(v[i].device_type);
	}
	free(v);
}

int store_jobs_ended_before(struct store *st, double before, struct job_row **out, size_t *nr,
			    struct tc_err *err)
{
	struct sbuf sql = SBUF_INIT;
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	sbuf_adds(&sql, "SELECT " STORE_JOB_COLS " FROM jobs WHERE ended > 0 AND ended < ?"
			" AND state IN ");
	store_states_sql(&sql, store_terminal_states());
	sbuf_adds(&sql, " ORDER BY ended, id");
	int rc = prep_stmt(st, &q, err, sql.buf, "d", before);
	sbuf_release(&sql);
	if (rc)
		return rc;
	rc = store_query_jobs(st, q, out, nr, err);
	sqlite3_finalize(q);
	return rc;
}
