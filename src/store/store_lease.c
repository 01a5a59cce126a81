/* store_lease.c -- device leases shared by `trainctl run` and the server; see store.h. */
#include "store/store.h"
#include "store/store_int.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* A lease row with its job's state, as both readers need it. */
#define LEASE_SQL                                                                            \
	"SELECT l.device_type, l.device_id, l.job_id, l.pid, l.ticks, j.name, j.user,"        \
	" COALESCE(j.managed, 0), j.state FROM leases l LEFT JOIN jobs j ON j.id = l.job_id"

/* The same process as when it took the lease, and not a zombie (its workers are gone). */
static bool holder_alive(pid_t pid, unsigned long long ticks)
{
	struct proc_stat ps;
	if (pid <= 0 || proc_stat_read(pid, &ps) < 0)
		return false;
	return ps.start_ticks == ticks && ps.state != 'Z' && ps.state != 'X';
}

/* Read the current row of q into l; true when the lease is held. */
static bool read_lease(sqlite3_stmt *q, struct store_lease *l)
{
	memset(l, 0, sizeof(*l));
	l->type = col_dup(q, 0);
	l->id = sqlite3_column_int(q, 1);
	l->job_id = col_dup(q, 2);
	l->pid = (pid_t)sqlite3_column_int64(q, 3);
	l->ticks = (unsigned long long)sqlite3_column_int64(q, 4);
	l->job_name = col_dup(q, 5);
	l->user = col_dup(q, 6);
	l->managed = sqlite3_column_int(q, 7) != 0;
	const char *word = (const char *)sqlite3_column_text(q, 8);
	enum job_state state;
	if (word && job_state_parse(word, strlen(word), &state) && job_state_terminal(state))
		return false;
	return holder_alive(l->pid, l->ticks);
}

void store_lease_release(struct store_lease *l)
{
	if (!l)
		return;
	free(l->type);
	free(l->job_id);
	free(l->job_name);
	free(l->user);
	memset(l, 0, sizeof(*l));
}

void store_leases_free(struct store_lease *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		store_lease_release(&v[i]);
	free(v);
}

/*
 * The held leases of type (NULL: every type) into *out, by type and id
 * (stale: the stale ones instead, for doctor).  Stale rows are otherwise
 * left alone: the next taker replaces them.
 */
static int leases_of(struct store *st, const char *type, bool stale, struct store_lease **out,
		     size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	const char *sql = type ? LEASE_SQL " WHERE l.device_type = ? ORDER BY l.device_id"
			       : LEASE_SQL " ORDER BY l.device_type, l.device_id";
	int r = prep_stmt(st, &q, err, sql, type ? "s" : "", type);
	if (r)
		return r;
	struct store_lease l;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		if (read_lease(q, &l) == stale) {
			store_lease_release(&l);
			continue;
		}
		XGROW(*out, *nr + 1, alloc);
		(*out)[(*nr)++] = l;
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_leases_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read leases");
	}
	return 0;
}

int store_leases_held(struct store *st, struct store_lease **out, size_t *nr,
		      struct tc_err *err)
{
	return leases_of(st, NULL, false, out, nr, err);
}

/* The live lease of another job on device id, or NULL. */
static const struct store_lease *other_holder(const struct store_lease *v, size_t n, int id,
					      const char *job)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].id == id && strcmp(v[i].job_id, job) != 0)
			return &v[i];
	return NULL;
}

static int write_lease(struct store *st, const char *job, const char *type, int id, pid_t pid,
		       unsigned long long ticks, struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT OR REPLACE INTO leases (device_type, device_id, job_id, pid, ticks,"
			" since) VALUES (?,?,?,?,?,?)",
			"sisiid", type, (long long)id, job, (long long)pid, (long long)ticks,
			now_wall());
}

static void lease_copy(struct store_lease *to, const struct store_lease *from)
{
	*to = *from;
	to->type = xstrdup(from->type);
	to->job_id = xstrdup(from->job_id);
	to->job_name = from->job_name ? xstrdup(from->job_name) : NULL;
	to->user = from->user ? xstrdup(from->user) : NULL;
}

int store_lease_take(struct store *st, const char *job, const char *type, const int *cand,
		     int ncand, int n, pid_t pid, unsigned long long ticks, int *got,
		     struct store_lease *busy, struct tc_err *err)
{
	if (busy)
		memset(busy, 0, sizeof(*busy));
	if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(st, err, "take lease");
	struct store_lease *v = NULL;
	size_t nv = 0;
	int rc = leases_of(st, type, false, &v, &nv, err);
	int k = 0;
	const struct store_lease *first = NULL;
	for (int i = 0; !rc && i < ncand && k < n; i++) {
		const struct store_lease *h = other_holder(v, nv, cand[i], job);
		if (h && !first)
			first = h;
		if (!h)
			got[k++] = cand[i];
	}
	if (!rc && k < n) {
		if (first) {
			rc = tc_error(err, TC_EBUSY, "%s %d is held by job %s", type, first->id,
				      first->job_id);
			if (busy)
				lease_copy(busy, first);
		} else {
			rc = tc_error(err, TC_EBUSY, "%d %s devices wanted, %d given", n, type, ncand);
		}
	}
	for (int i = 0; !rc && i < k; i++)
		rc = write_lease(st, job, type, got[i], pid, ticks, err);
	store_leases_free(v, nv);
	if (rc) {
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "take lease");
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	}
	return rc;
}

int store_lease_drop(struct store *st, const char *job, struct tc_err *err)
{
	return run_stmt(st, err, "DELETE FROM leases WHERE job_id=?", "s", job);
}

int store_leases_stale(struct store *st, struct store_lease **out, size_t *nr,
		       struct tc_err *err)
{
	return leases_of(st, NULL, true, out, nr, err);
}

int store_lease_drop_stale(struct store *st, const struct store_lease *l, struct tc_err *err)
{
	/* the row as it was read: a lease taken anew since (another pid) stays */
	return run_stmt(st, err,
			"DELETE FROM leases WHERE device_type=? AND device_id=? AND job_id=?"
			" AND pid=? AND ticks=?",
			"sisii", l->type, (long long)l->id, l->job_id, (long long)l->pid,
			(long long)l->ticks);
}
