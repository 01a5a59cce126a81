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

static char *dup_text(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? xstrdup((const char *)t) : NULL;
}

static int bind_text(sqlite3_stmt *q, int i, const char *s)
{
	return s ? sqlite3_bind_text(q, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(q, i);
}

/* One statement that returns no rows; binds texts (NULL allowed) in order. */
static int exec_texts(struct store *st, struct tc_err *err, const char *what, const char *sql,
		      int n, const char *const *v)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, what);
	int ok = 1;
	for (int i = 0; i < n && ok; i++)
		ok = bind_text(q, i + 1, v[i]) == SQLITE_OK;
	int rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, what);
	sqlite3_finalize(q);
	return rc;
}

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
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO events (job_id, time, state, reason) VALUES (?,?,?,?)", -1,
			       &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "event");
	int ok = bind_text(q, 1, id) == SQLITE_OK && sqlite3_bind_double(q, 2, t) == SQLITE_OK &&
		 bind_text(q, 3, state) == SQLITE_OK && bind_text(q, 4, reason ? reason : "") == SQLITE_OK;
	int rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "event");
	sqlite3_finalize(q);
	return rc;
}

int store_job_submit(struct store *st, const struct job_row *j, struct tc_err *err)
{
	int rc = begin(st, err);
	if (rc)
		return rc;
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO jobs (id, name, state, run_dir, spec_json, created, world_size,"
			       " user, priority, preemptible, device_type, device_count, device_want,"
			       " backend, managed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,1)",
			       -1, &q, NULL) != SQLITE_OK)
		return end(st, db_fail(st, err, "submit"), err);
	const char *queued = job_state_name(JOB_QUEUED);
	int ok = bind_text(q, 1, j->id) == SQLITE_OK && bind_text(q, 2, j->name) == SQLITE_OK &&
		 bind_text(q, 3, queued) == SQLITE_OK && bind_text(q, 4, j->run_dir) == SQLITE_OK &&
		 bind_text(q, 5, j->spec_json) == SQLITE_OK &&
		 sqlite3_bind_double(q, 6, j->created) == SQLITE_OK &&
		 sqlite3_bind_int(q, 7, j->world_size) == SQLITE_OK &&
		 bind_text(q, 8, j->user) == SQLITE_OK && sqlite3_bind_int(q, 9, j->priority) == SQLITE_OK &&
		 sqlite3_bind_int(q, 10, j->preemptible) == SQLITE_OK &&
		 bind_text(q, 11, j->device_type) == SQLITE_OK &&
		 sqlite3_bind_int(q, 12, j->device_count) == SQLITE_OK &&
		 bind_text(q, 13, j->device_want) == SQLITE_OK && bind_text(q, 14, j->backend) == SQLITE_OK;
	rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "submit");
	sqlite3_finalize(q);
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
	int rc = sqlite3_prepare_v2(st->db, sql.buf, -1, &q, NULL) != SQLITE_OK
			 ? db_fail(st, err, "read jobs")
			 : 0;
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
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "UPDATE jobs SET state=?, devices=?, sup_pid=?, sup_ticks=?,"
			       " stop_reason=NULL, exit_code=-1, ended=NULL, root_cause=NULL"
			       " WHERE id=? AND ended IS NULL",
			       -1, &q, NULL) != SQLITE_OK)
		return end(st, db_fail(st, err, "launch"), err);
	const char *starting = job_state_name(JOB_STARTING);
	int ok = bind_text(q, 1, starting) == SQLITE_OK && bind_text(q, 2, devices) == SQLITE_OK &&
		 sqlite3_bind_int64(q, 3, (sqlite3_int64)pid) == SQLITE_OK &&
		 sqlite3_bind_int64(q, 4, (sqlite3_int64)ticks) == SQLITE_OK &&
		 bind_text(q, 5, id) == SQLITE_OK;
	rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "launch");
	sqlite3_finalize(q);
	/*
	 * A supervisor that failed at once (input staging, say) may have
	 * recorded its end before the server gets here: that end stays, and
	 * nothing of the launch is written over it.
	 */
	if (!rc && sqlite3_changes(st->db) == 0)
		return end(st, 0, err);
	/* its leases (the server took them) are the supervisor's from now on */
	if (!rc && sqlite3_prepare_v2(st->db, "UPDATE leases SET pid=?, ticks=? WHERE job_id=?", -1, &q,
				      NULL) != SQLITE_OK)
		rc = db_fail(st, err, "launch");
	else if (!rc) {
		ok = sqlite3_bind_int64(q, 1, (sqlite3_int64)pid) == SQLITE_OK &&
		     sqlite3_bind_int64(q, 2, (sqlite3_int64)ticks) == SQLITE_OK &&
		     bind_text(q, 3, id) == SQLITE_OK;
		rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "launch");
		sqlite3_finalize(q);
	}
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
	const char *v[] = { job_state_name(state), id };
	rc = exec_texts(st, err, "requeue",
			count_restart ? "UPDATE jobs SET state=?, devices=NULL, stop_reason=NULL,"
					" sup_pid=0, sup_ticks=0, exit_code=-1, ended=NULL,"
					" restarts=restarts+1 WHERE id=?"
				      : "UPDATE jobs SET state=?, devices=NULL, stop_reason=NULL,"
					" sup_pid=0, sup_ticks=0, exit_code=-1, ended=NULL WHERE id=?",
			2, v);
	if (!rc)
		rc = add_event(st, id, now_wall(), v[0], reason, err);
	return end(st, rc, err);
}

int store_job_set_devices(struct store *st, const char *id, const char *devices,
			  struct tc_err *err)
{
	const char *v[] = { devices, id };
	return exec_texts(st, err, "set devices", "UPDATE jobs SET devices=? WHERE id=?", 2, v);
}

int store_job_set_stop_reason(struct store *st, const char *id, enum job_stop why,
			      struct tc_err *err)
{
	const char *v[] = { job_stop_name(why), id };
	return exec_texts(st, err, "set stop reason", "UPDATE jobs SET stop_reason=? WHERE id=?", 2, v);
}

int store_job_stop_reason(struct store *st, const char *id, enum job_stop *out,
			  struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = JOB_STOP_NONE;
	if (sqlite3_prepare_v2(st->db, "SELECT stop_reason FROM jobs WHERE id=?", -1, &q, NULL) !=
	    SQLITE_OK)
		return db_fail(st, err, "read stop reason");
	int rc = 0;
	if (bind_text(q, 1, id) != SQLITE_OK)
		rc = db_fail(st, err, "read stop reason");
	int r = rc ? SQLITE_ERROR : sqlite3_step(q);
	if (r == SQLITE_ROW)
		*out = job_stop_parse((const char *)sqlite3_column_text(q, 0));
	else if (!rc && r != SQLITE_DONE)
		rc = db_fail(st, err, "read stop reason");
	sqlite3_finalize(q);
	return rc;
}

int store_job_delete(struct store *st, const char *id, struct tc_err *err)
{
	const char *v[] = { id };
	int rc = exec_texts(st, err, "delete job", "DELETE FROM jobs WHERE id=?", 1, v);
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
	if (sqlite3_prepare_v2(st->db,
			       "SELECT e.id, e.job_id, e.time, e.state, e.reason, COALESCE(j.user, '')"
			       " FROM events e LEFT JOIN jobs j ON j.id = e.job_id WHERE e.id > ?"
			       " ORDER BY e.id LIMIT ?",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "read events");
	if (sqlite3_bind_int64(q, 1, after) != SQLITE_OK || sqlite3_bind_int(q, 2, limit) != SQLITE_OK) {
		sqlite3_finalize(q);
		return db_fail(st, err, "read events");
	}
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_event *e = &(*out)[(*nr)++];
		e->id = sqlite3_column_int64(q, 0);
		e->job_id = dup_text(q, 1);
		e->time = sqlite3_column_double(q, 2);
		const char *word = (const char *)sqlite3_column_text(q, 3);
		/* history: a word this trainctl does not know reads as lost */
		if (!word || !job_state_parse(word, strlen(word), &e->state))
			e->state = JOB_LOST;
		e->reason = dup_text(q, 4);
		e->user = dup_text(q, 5);
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
	if (sqlite3_prepare_v2(st->db, "SELECT COALESCE(MAX(id), 0) FROM events", -1, &q, NULL) !=
	    SQLITE_OK)
		return db_fail(st, err, "read events");
	int rc = 0;
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

static int bind_args(sqlite3_stmt *q, const struct strvec *args)
{
	for (size_t i = 0; i < args->nr; i++)
		if (bind_text(q, (int)i + 1, args->v[i]) != SQLITE_OK)
			return -1;
	return 0;
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
	if (sqlite3_prepare_v2(st->db, sql.buf, -1, &q, NULL) != SQLITE_OK || bind_args(q, &args) ||
	    sqlite3_step(q) != SQLITE_ROW) {
		rc = db_fail(st, err, "count jobs");
		goto out;
	}
	*total = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	q = NULL;
	sbuf_reset(&sql);
	sbuf_addf(&sql, "SELECT " STORE_JOB_COLS " FROM jobs%s ORDER BY id DESC LIMIT %ld OFFSET %ld",
		  where.buf, f->limit, f->offset);
	if (sqlite3_prepare_v2(st->db, sql.buf, -1, &q, NULL) != SQLITE_OK || bind_args(q, &args)) {
		rc = db_fail(st, err, "list jobs");
		goto out;
	}
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
	if (sqlite3_prepare_v2(st->db, sql.buf, -1, &q, NULL) != SQLITE_OK || bind_args(q, &args) ||
	    sqlite3_step(q) != SQLITE_ROW) {
		rc = db_fail(st, err, "count jobs");
		goto out;
	}
	*total = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	q = NULL;
	sbuf_reset(&sql);
	sbuf_addf(&sql, "SELECT " STORE_JOB_COLS_BRIEF " FROM jobs%s ORDER BY id DESC LIMIT %ld"
		  " OFFSET %ld", where.buf, f->limit, f->offset);
	if (sqlite3_prepare_v2(st->db, sql.buf, -1, &q, NULL) != SQLITE_OK || bind_args(q, &args)) {
		rc = db_fail(st, err, "list jobs");
		goto out;
	}
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
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db, "INSERT INTO tokens (hash, user, admin, created) VALUES (?,?,?,?)",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "add token");
	int ok = bind_text(q, 1, hash) == SQLITE_OK && bind_text(q, 2, user) == SQLITE_OK &&
		 sqlite3_bind_int(q, 3, admin) == SQLITE_OK &&
		 sqlite3_bind_double(q, 4, now_wall()) == SQLITE_OK;
	int rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "add token");
	sqlite3_finalize(q);
	return rc;
}

int store_token_find(struct store *st, const char *hash, char **user, bool *admin,
		     struct tc_err *err)
{
	sqlite3_stmt *q;
	*user = NULL;
	*admin = false;
	if (sqlite3_prepare_v2(st->db, "SELECT user, admin FROM tokens WHERE hash = ?", -1, &q, NULL) !=
	    SQLITE_OK)
		return db_fail(st, err, "read tokens");
	int rc = 0;
	int r = bind_text(q, 1, hash) == SQLITE_OK ? sqlite3_step(q) : SQLITE_ERROR;
	if (r == SQLITE_ROW) {
		*user = dup_text(q, 0);
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
	if (sqlite3_prepare_v2(st->db, "SELECT COUNT(*) FROM tokens", -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "read tokens");
	int rc = 0;
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
	if (sqlite3_prepare_v2(st->db, "SELECT hash, user, admin, created FROM tokens ORDER BY created, hash",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "read tokens");
	int rc = 0, r;
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
	sqlite3_stmt *q;
	*n = 0;
	const char *sql = prefix ? "DELETE FROM tokens WHERE substr(hash, 1, length(?1)) = ?1"
				 : "DELETE FROM tokens WHERE user = ?1";
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "revoke tokens");
	int rc = bind_text(q, 1, prefix ? prefix : user) == SQLITE_OK && sqlite3_step(q) == SQLITE_DONE
			 ? 0 : db_fail(st, err, "revoke tokens");
	if (!rc)
		*n = sqlite3_changes(st->db);
	sqlite3_finalize(q);
	return rc;
}

/* ---- resource telemetry ---- */

int store_usage_add(struct store *st, const char *id, double t, double cpu, double mem,
		    const char *dev_json, struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db, "INSERT INTO job_usage (job_id, time, cpu, mem, dev) VALUES (?,?,?,?,?)",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "record usage");
	int ok = bind_text(q, 1, id) == SQLITE_OK && sqlite3_bind_double(q, 2, t) == SQLITE_OK &&
		 sqlite3_bind_double(q, 3, cpu) == SQLITE_OK &&
		 sqlite3_bind_double(q, 4, mem) == SQLITE_OK && bind_text(q, 5, dev_json) == SQLITE_OK;
	int rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "record usage");
	sqlite3_finalize(q);
	return rc;
}

int store_usage_json(struct store *st, const char *id, double since, struct sbuf *out,
		     struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT time, cpu, mem, dev FROM job_usage WHERE job_id = ? AND time > ?"
			       " ORDER BY time",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "read usage");
	if (bind_text(q, 1, id) != SQLITE_OK || sqlite3_bind_double(q, 2, since) != SQLITE_OK) {
		sqlite3_finalize(q);
		return db_fail(st, err, "read usage");
	}
	sbuf_addch(out, '[');
	int r, n = 0;
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
	if (sqlite3_prepare_v2(st->db, "SELECT state, COUNT(*) FROM jobs GROUP BY state", -1, &q,
			       NULL) != SQLITE_OK)
		return db_fail(st, err, "count jobs");
	int r;
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
	if (sqlite3_prepare_v2(st->db,
			       "SELECT s.metric, s.rank, COALESCE(SUM(c.count), 0) FROM metric_series s"
			       " LEFT JOIN metric_chunks c ON c.series_id = s.id WHERE s.job_id = ?"
			       " GROUP BY s.id ORDER BY s.metric, s.rank",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "read metrics");
	if (bind_text(q, 1, job) != SQLITE_OK) {
		sqlite3_finalize(q);
		return db_fail(st, err, "read metrics");
	}
	sbuf_adds(out, "{\"series\":[");
	int r, n = 0;
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
