/* store_server.c -- the queries of `trainctl server`; see the server section of store.h. */
#include "store/store.h"
#include "store/store_int.h"
#include "core/json.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int begin(struct store *st, struct tc_err *err)
{
	if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(st, err, "begin");
	return 0;
}

static int end(struct store *st, int rc, struct tc_err *err)
{
	if (rc) {
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "commit");
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	}
	return rc;
}

static int add_event(struct store *st, const char *id, double t, const char *state,
		     const char *reason, struct tc_err *err)
{
	return run_stmt(st, err, "INSERT INTO events (job_id, time, state, reason) VALUES (?,?,?,?)",
			"sdss", id, t, state, reason ? reason : "");
}

int store_job_submit(struct store *st, const struct job_row *j, struct tc_err *err)
{
	int rc = begin(st, err);
	if (rc)
		return rc;
	const char *queued = job_state_name(JOB_QUEUED);
	rc = run_stmt(st, err,
		      "INSERT INTO jobs (id, name, state, run_dir, spec_json, created, world_size,"
		      " user, priority, preemptible, device_type, device_count, device_want,"
		      " backend, team, managed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,1)",
		      "sssssdisiisisss", j->id, j->name, queued, j->run_dir, j->spec_json, j->created,
		      (long long)j->world_size, j->user, (long long)j->priority,
		      (long long)j->preemptible, j->device_type, (long long)j->device_count,
		      j->device_want, j->backend, j->team);
	if (!rc)
		rc = add_event(st, j->id, j->created, queued, "submitted", err);
	return end(st, rc, err);
}

int store_job_active_managed(struct store *st, struct job_row **out, size_t *nr,
			     struct tc_err *err)
{
	struct sbuf sql = SBUF_INIT;
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	sbuf_adds(&sql, "SELECT " STORE_JOB_COLS " FROM jobs WHERE managed = 1 AND state NOT IN ");
	store_states_sql(&sql, store_terminal_states());
	sbuf_adds(&sql, " ORDER BY created, id");
	int rc = prep_stmt(st, &q, err, sql.buf, "");
	sbuf_release(&sql);
	if (rc)
		return rc;
	rc = store_query_jobs(st, q, out, nr, err);
	sqlite3_finalize(q);
	return rc;
}

int store_job_launch(struct store *st, const char *id, const char *devices, pid_t pid,
		     unsigned long long ticks, const char *reason, struct tc_err *err)
{
	int rc = begin(st, err);
	if (rc)
		return rc;
	/* an end recorded stays (below); any other state must have the edge (state.h) */
	bool ended;
	if ((rc = store_job_edge(st, id, JOB_STARTING, &ended, err)) || ended)
		return end(st, rc, err);
	const char *starting = job_state_name(JOB_STARTING);
	rc = run_stmt(st, err,
		      "UPDATE jobs SET state=?, devices=?, sup_pid=?, sup_ticks=?,"
		      " stop_reason=NULL, exit_code=-1, ended=NULL, root_cause=NULL"
		      " WHERE id=? AND ended IS NULL",
		      "ssiis", starting, devices, (long long)pid, (long long)ticks, id);
	/*
	 * A supervisor that failed at once (input staging, say) may have
	 * recorded its end before the server gets here: that end stays, and
	 * nothing of the launch is written over it.
	 */
	if (!rc && sqlite3_changes(st->db) == 0)
		return end(st, 0, err);
	/* its leases (the server took them) are the supervisor's from now on */
	if (!rc)
		rc = run_stmt(st, err, "UPDATE leases SET pid=?, ticks=? WHERE job_id=?", "iis",
			      (long long)pid, (long long)ticks, id);
	if (!rc)
		rc = add_event(st, id, now_wall(), starting, reason, err);
	return end(st, rc, err);
}

int store_job_requeue(struct store *st, const char *id, enum job_state state, bool count_restart,
		      const char *reason, struct tc_err *err)
{
	int rc = begin(st, err);
	if (rc)
		return rc;
	if ((rc = store_job_edge(st, id, state, NULL, err)))
		return end(st, rc, err);
	const char *name = job_state_name(state);
	rc = run_stmt(st, err,
		      count_restart ? "UPDATE jobs SET state=?, devices=NULL, stop_reason=NULL,"
				      " sup_pid=0, sup_ticks=0, exit_code=-1, ended=NULL,"
				      " restarts=restarts+1 WHERE id=?"
				    : "UPDATE jobs SET state=?, devices=NULL, stop_reason=NULL,"
				      " sup_pid=0, sup_ticks=0, exit_code=-1, ended=NULL WHERE id=?",
		      "ss", name, id);
	if (!rc)
		rc = add_event(st, id, now_wall(), name, reason, err);
	return end(st, rc, err);
}

int store_job_set_devices(struct store *st, const char *id, const char *devices,
			  struct tc_err *err)
{
	return run_stmt(st, err, "UPDATE jobs SET devices=? WHERE id=?", "ss", devices, id);
}

int store_job_set_stop_reason(struct store *st, const char *id, enum job_stop why,
			      struct tc_err *err)
{
	return run_stmt(st, err, "UPDATE jobs SET stop_reason=? WHERE id=?", "ss", job_stop_name(why),
			id);
}

int store_job_stop_reason(struct store *st, const char *id, enum job_stop *out,
			  struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = JOB_STOP_NONE;
	int rc = prep_stmt(st, &q, err, "SELECT stop_reason FROM jobs WHERE id=?", "s", id);
	if (rc)
		return rc;
	int r = sqlite3_step(q);
	if (r == SQLITE_ROW)
		*out = job_stop_parse((const char *)sqlite3_column_text(q, 0));
	else if (r != SQLITE_DONE)
		rc = db_fail(st, err, "read stop reason");
	sqlite3_finalize(q);
	return rc;
}

int store_job_team(struct store *st, const char *id, char **team, struct tc_err *err)
{
	sqlite3_stmt *q;
	*team = NULL;
	int rc = prep_stmt(st, &q, err, "SELECT team FROM jobs WHERE id=?", "s", id);
	if (rc)
		return rc;
	int r = sqlite3_step(q);
	if (r == SQLITE_ROW && sqlite3_column_text(q, 0))
		*team = xstrdup((const char *)sqlite3_column_text(q, 0));
	else if (r != SQLITE_ROW && r != SQLITE_DONE)
		rc = db_fail(st, err, "read a job's team");
	sqlite3_finalize(q);
	return rc;
}

int store_job_delete(struct store *st, const char *id, struct tc_err *err)
{
	int rc = run_stmt(st, err, "DELETE FROM jobs WHERE id=?", "s", id);
	return rc ? rc : store_lease_drop(st, id, err);
}

/* ---- events ---- */

int store_events_after(struct store *st, long long after, int limit, struct store_event **out,
		       size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	int r = prep_stmt(st, &q, err,
			  "SELECT e.id, e.job_id, e.time, e.state, e.reason, COALESCE(j.user, '')"
			  " FROM events e LEFT JOIN jobs j ON j.id = e.job_id WHERE e.id > ?"
			  " ORDER BY e.id LIMIT ?",
			  "ii", after, (long long)limit);
	if (r)
		return r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_event *e = &(*out)[(*nr)++];
		e->id = sqlite3_column_int64(q, 0);
		e->job_id = col_dup(q, 1);
		e->time = sqlite3_column_double(q, 2);
		const char *word = (const char *)sqlite3_column_text(q, 3);
		/* history: a word this trainctl does not know reads as lost */
		if (!word || !job_state_parse(word, strlen(word), &e->state))
			e->state = JOB_LOST;
		e->reason = col_dup(q, 4);
		e->user = col_dup(q, 5);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_events_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read events");
	}
	return 0;
}

int store_events_last(struct store *st, long long *last, struct tc_err *err)
{
	sqlite3_stmt *q;
	*last = 0;
	int rc = prep_stmt(st, &q, err, "SELECT COALESCE(MAX(id), 0) FROM events", "");
	if (rc)
		return rc;
	if (sqlite3_step(q) == SQLITE_ROW)
		*last = sqlite3_column_int64(q, 0);
	else
		rc = db_fail(st, err, "read events");
	sqlite3_finalize(q);
	return rc;
}

void store_events_free(struct store_event *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].job_id);
		free(v[i].reason);
		free(v[i].user);
	}
	free(v);
}

/* ---- listing as JSON ---- */

static void json_num(struct sbuf *sb, double v)
{
	if (isfinite(v))
		sbuf_addf(sb, "%.17g", v);
	else
		sbuf_adds(sb, "null");
}

/* Filter clause and its bound values; none at all without a filter, so that
 * SQLite counts the whole table from its b-tree (1 ms less on 10,000 jobs
 * than stepping through "WHERE 1"). */
static void filter_sql(const struct store_jfilter *f, struct sbuf *where, struct strvec *args)
{
	if (f->user) {
		sbuf_adds(where, where->len ? " AND user = ?" : " WHERE user = ?");
		strvec_push(args, f->user);
	}
	if (f->name) {
		sbuf_adds(where, where->len ? " AND name = ?" : " WHERE name = ?");
		strvec_push(args, f->name);
	}
	if (f->states) {
		sbuf_adds(where, where->len ? " AND state IN " : " WHERE state IN ");
		store_states_sql(where, f->states);
	}
}

/* prep_stmt of sql with filter_sql's texts bound in order: user, name, either or none. */
static int prep_filtered(struct store *st, sqlite3_stmt **q, struct tc_err *err, const char *sql,
			 const struct strvec *args)
{
	static const char *const fmt[] = { "", "s", "ss" };
	return prep_stmt(st, q, err, sql, fmt[args->nr], args->nr > 0 ? args->v[0] : NULL,
			 args->nr > 1 ? args->v[1] : NULL);
}

int store_job_query(struct store *st, const struct store_jfilter *f, struct job_row **out,
		    size_t *nr, long long *total, struct tc_err *err)
{
	struct sbuf where = SBUF_INIT, sql = SBUF_INIT;
	struct strvec args = STRVEC_INIT;
	sqlite3_stmt *q = NULL;
	int rc = 0;
	*out = NULL;
	*nr = 0;
	filter_sql(f, &where, &args);
	sbuf_addf(&sql, "SELECT COUNT(*) FROM jobs%s", where.buf);
	if ((rc = prep_filtered(st, &q, err, sql.buf, &args)))
		goto out;
	if (sqlite3_step(q) != SQLITE_ROW) {
		rc = db_fail(st, err, "count jobs");
		goto out;
	}
	*total = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	q = NULL;
	sbuf_reset(&sql);
	sbuf_addf(&sql, "SELECT " STORE_JOB_COLS " FROM jobs%s ORDER BY id DESC LIMIT %ld OFFSET %ld",
		  where.buf, f->limit, f->offset);
	if ((rc = prep_filtered(st, &q, err, sql.buf, &args)))
		goto out;
	rc = store_query_jobs(st, q, out, nr, err);
out:
	sqlite3_finalize(q);
	sbuf_release(&where);
	sbuf_release(&sql);
	strvec_clear(&args);
	return rc;
}

int store_job_each(struct store *st, const struct store_jfilter *f,
		   int (*fn)(void *arg, const struct job_row *j), void *arg, long long *total,
		   struct tc_err *err)
{
	struct sbuf where = SBUF_INIT, sql = SBUF_INIT;
	struct strvec args = STRVEC_INIT;
	sqlite3_stmt *q = NULL;
	int rc = 0, r = SQLITE_DONE;
	filter_sql(f, &where, &args);
	sbuf_addf(&sql, "SELECT COUNT(*) FROM jobs%s", where.buf);
	if ((rc = prep_filtered(st, &q, err, sql.buf, &args)))
		goto out;
	if (sqlite3_step(q) != SQLITE_ROW) {
		rc = db_fail(st, err, "count jobs");
		goto out;
	}
	*total = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	q = NULL;
	sbuf_reset(&sql);
	sbuf_addf(&sql, "SELECT " STORE_JOB_COLS_BRIEF " FROM jobs%s ORDER BY id DESC LIMIT %ld"
		  " OFFSET %ld", where.buf, f->limit, f->offset);
	if ((rc = prep_filtered(st, &q, err, sql.buf, &args)))
		goto out;
	/* rows are handed over as SQLite holds them (no copy of their strings):
	 * 10,000 rows are 110,000 strings */
	/* and under the connection's mutex held once: each column read takes it
	 * again, which is then a recursive count, not an atomic operation (a
	 * connection opened by store_open_unlocked has none: the server's
	 * listings use one) */
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	sqlite3_mutex_enter(mu);
	while (!rc && (r = sqlite3_step(q)) == SQLITE_ROW) {
		struct job_row j;
		if (store_view_job(q, &j))
			rc = tc_error(err, TC_ESTORE, "database: job %s has state '%s', which this"
				      " trainctl does not know", j.id, sqlite3_column_text(q, 2));
		else
			rc = fn(arg, &j);
	}
	sqlite3_mutex_leave(mu);
	if (!rc && r != SQLITE_DONE)
		rc = db_fail(st, err, "list jobs");
out:
	sqlite3_finalize(q);
	sbuf_release(&where);
	sbuf_release(&sql);
	strvec_clear(&args);
	return rc;
}

/* ---- tokens ---- */

int store_token_add(struct store *st, const char *hash, const char *user, bool admin,
		    struct tc_err *err)
{
	return run_stmt(st, err, "INSERT INTO tokens (hash, user, admin, created) VALUES (?,?,?,?)",
			"ssid", hash, user, (long long)admin, now_wall());
}

int store_token_find(struct store *st, const char *hash, char **user, bool *admin,
		     struct tc_err *err)
{
	sqlite3_stmt *q;
	*user = NULL;
	*admin = false;
	int rc = prep_stmt(st, &q, err, "SELECT user, admin FROM tokens WHERE hash = ?", "s", hash);
	if (rc)
		return rc;
	int r = sqlite3_step(q);
	if (r == SQLITE_ROW) {
		*user = col_dup(q, 0);
		*admin = sqlite3_column_int(q, 1) != 0;
	} else if (r == SQLITE_DONE) {
		rc = tc_error(err, TC_ENOTFOUND, "unknown token");
	} else {
		rc = db_fail(st, err, "read tokens");
	}
	sqlite3_finalize(q);
	return rc;
}

int store_token_count(struct store *st, long long *n, struct tc_err *err)
{
	sqlite3_stmt *q;
	*n = 0;
	int rc = prep_stmt(st, &q, err, "SELECT COUNT(*) FROM tokens", "");
	if (rc)
		return rc;
	if (sqlite3_step(q) == SQLITE_ROW)
		*n = sqlite3_column_int64(q, 0);
	else
		rc = db_fail(st, err, "read tokens");
	sqlite3_finalize(q);
	return rc;
}

int store_token_each(struct store *st,
		     int (*fn)(void *arg, const char *hash, const char *user, bool admin,
			       double created),
		     void *arg, struct tc_err *err)
{
	sqlite3_stmt *q;
	int r, rc = prep_stmt(st, &q, err,
			      "SELECT hash, user, admin, created FROM tokens ORDER BY created, hash", "");
	if (rc)
		return rc;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		const char *h = (const char *)sqlite3_column_text(q, 0);
		const char *u = (const char *)sqlite3_column_text(q, 1);
		if ((rc = fn(arg, h ? h : "", u ? u : "", sqlite3_column_int(q, 2) != 0,
			     sqlite3_column_double(q, 3))))
			break;
	}
	if (!rc && r != SQLITE_DONE)
		rc = db_fail(st, err, "read tokens");
	sqlite3_finalize(q);
	return rc;
}

int store_token_revoke(struct store *st, const char *prefix, const char *user, long long *n,
		       struct tc_err *err)
{
	*n = 0;
	int rc = run_stmt(st, err,
			  prefix ? "DELETE FROM tokens WHERE substr(hash, 1, length(?1)) = ?1"
				 : "DELETE FROM tokens WHERE user = ?1",
			  "s", prefix ? prefix : user);
	/* the connection's count of the statement just finalized (SQLite keeps it) */
	if (!rc)
		*n = sqlite3_changes(st->db);
	return rc;
}

/* ---- resource telemetry ---- */

int store_usage_add(struct store *st, const char *id, double t, double cpu, double mem,
		    const char *dev_json, struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT INTO job_usage (job_id, time, cpu, mem, dev) VALUES (?,?,?,?,?)",
			"sddds", id, t, cpu, mem, dev_json);
}

int store_usage_json(struct store *st, const char *id, double since, struct sbuf *out,
		     struct tc_err *err)
{
	sqlite3_stmt *q;
	int r = prep_stmt(st, &q, err,
			  "SELECT time, cpu, mem, dev FROM job_usage WHERE job_id = ? AND time > ?"
			  " ORDER BY time",
			  "sd", id, since);
	if (r)
		return r;
	sbuf_addch(out, '[');
	int n = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		sbuf_adds(out, n++ ? ",{\"time\":" : "{\"time\":");
		json_num(out, sqlite3_column_double(q, 0));
		sbuf_adds(out, ",\"cpu\":");
		json_num(out, sqlite3_column_double(q, 1));
		sbuf_adds(out, ",\"mem\":");
		json_num(out, sqlite3_column_double(q, 2));
		const unsigned char *d = sqlite3_column_text(q, 3);
		/* dev is JSON the server wrote itself */
		sbuf_addf(out, ",\"devices\":%s}", d && *d ? (const char *)d : "[]");
	}
	sbuf_addch(out, ']');
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "read usage");
}

/* ---- counts and names for the API ---- */

int store_state_counts(struct store *st, long long counts[JOB_NSTATES], struct tc_err *err)
{
	sqlite3_stmt *q;
	for (int i = 0; i < JOB_NSTATES; i++)
		counts[i] = 0;
	int r = prep_stmt(st, &q, err, "SELECT state, COUNT(*) FROM jobs GROUP BY state", "");
	if (r)
		return r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(q, 0);
		enum job_state state;
		if (s && job_state_parse(s, strlen(s), &state))
			counts[state] = sqlite3_column_int64(q, 1);
	}
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "count jobs");
}

int store_metric_names_json(struct store *st, const char *job, struct sbuf *out,
			    struct tc_err *err)
{
	sqlite3_stmt *q;
	int r = prep_stmt(st, &q, err,
			  "SELECT s.metric, s.rank, COALESCE(SUM(c.count), 0) FROM metric_series s"
			  " LEFT JOIN metric_chunks c ON c.series_id = s.id WHERE s.job_id = ?"
			  " GROUP BY s.id ORDER BY s.metric, s.rank",
			  "s", job);
	if (r)
		return r;
	sbuf_adds(out, "{\"series\":[");
	int n = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		sbuf_adds(out, n++ ? ",{\"metric\":" : "{\"metric\":");
		json_add_str(out, (const char *)sqlite3_column_text(q, 0));
		sbuf_addf(out, ",\"rank\":%d,\"points\":%lld}", sqlite3_column_int(q, 1),
			  (long long)sqlite3_column_int64(q, 2));
	}
	sbuf_adds(out, "]}");
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "read metrics");
}
