/* store_sweep.c -- the sweeps and sweep_trials tables (see store.h). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_COLS                                                                             \
	"id, name, state, def_json, user, managed, created, COALESCE(ended,0), driver_pid,"     \
	" driver_ticks, note"
#define TRIAL_COLS                                                                             \
	"sweep_id, idx, params_json, state, job_id, objective, steps, note, early,"             \
	" COALESCE(started,0), COALESCE(ended,0)"

/* A time to bind with 'f': 0 (not yet) is SQL NULL. */
static double opt_time(double t)
{
	return t > 0 ? t : NAN;
}

static int insert_trial(struct store *st, const struct trial_row *t, struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT INTO sweep_trials (sweep_id, idx, params_json, state)"
			" VALUES (?,?,?,?)",
			"siss", t->sweep_id, (long long)t->idx, t->params_json, t->state);
}

int store_sweep_create(struct store *st, const struct sweep_row *s, const struct trial_row *t,
		       size_t nt, struct tc_err *err)
{
	int rc = store_begin(st, err);
	if (rc)
		return rc;
	rc = run_stmt(st, err,
		      "INSERT INTO sweeps (id, name, state, def_json, user, managed, created,"
		      " driver_pid, driver_ticks) VALUES (?,?,?,?,COALESCE(?,''),?,?,?,?)",
		      "sssssidii", s->id, s->name, s->state, s->def_json, s->user,
		      (long long)s->managed, s->created, (long long)s->driver_pid,
		      (long long)s->driver_ticks);
	for (size_t i = 0; !rc && i < nt; i++)
		rc = insert_trial(st, &t[i], err);
	return store_commit(st, rc, err);
}

static void read_sweep(sqlite3_stmt *q, struct sweep_row *s)
{
	memset(s, 0, sizeof(*s));
	s->id = col_dup(q, 0);
	s->name = col_dup(q, 1);
	s->state = col_dup(q, 2);
	s->def_json = col_dup(q, 3);
	s->user = col_dup(q, 4);
	s->managed = sqlite3_column_int(q, 5) != 0;
	s->created = sqlite3_column_double(q, 6);
	s->ended = sqlite3_column_double(q, 7);
	s->driver_pid = (pid_t)sqlite3_column_int64(q, 8);
	s->driver_ticks = (unsigned long long)sqlite3_column_int64(q, 9);
	s->note = col_dup(q, 10);
}

static void read_trial(sqlite3_stmt *q, struct trial_row *t)
{
	memset(t, 0, sizeof(*t));
	t->sweep_id = col_dup(q, 0);
	t->idx = sqlite3_column_int(q, 1);
	t->params_json = col_dup(q, 2);
	t->state = col_dup(q, 3);
	t->job_id = col_dup(q, 4);
	t->objective = sqlite3_column_type(q, 5) == SQLITE_NULL ? NAN : sqlite3_column_double(q, 5);
	t->steps = sqlite3_column_int64(q, 6);
	t->note = col_dup(q, 7);
	t->early = sqlite3_column_int(q, 8) != 0;
	t->started = sqlite3_column_double(q, 9);
	t->ended = sqlite3_column_double(q, 10);
}

/* Every row of a SELECT SWEEP_COLS with up to one text parameter. */
static int query_sweeps(struct store *st, const char *sql, const char *arg, struct sweep_row **out,
			size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	int r = prep_stmt(st, &q, err, sql, arg ? "s" : "", arg);
	if (r)
		return r;
	size_t alloc = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		if (*nr == alloc) {
			alloc = alloc ? 2 * alloc : 8;
			*out = xrealloc(*out, alloc * sizeof(**out));
		}
		read_sweep(q, &(*out)[(*nr)++]);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		sweep_rows_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read sweeps");
	}
	return 0;
}

int store_sweep_get(struct store *st, const char *ref, struct sweep_row *out, struct tc_err *err)
{
	struct sweep_row *v = NULL;
	size_t n = 0;
	if (!*ref)
		return tc_error(err, TC_EUSAGE, "empty sweep reference");
	int rc = query_sweeps(st, "SELECT " SWEEP_COLS " FROM sweeps WHERE id = ?1", ref, &v, &n, err);
	if (!rc && !n) {
		struct sbuf pat = SBUF_INIT;
		for (const char *c = ref; *c; c++) {
			if (*c == '%' || *c == '_' || *c == '\\')
				sbuf_addch(&pat, '\\');
			sbuf_addch(&pat, *c);
		}
		sbuf_addch(&pat, '%');
		rc = query_sweeps(st, "SELECT " SWEEP_COLS " FROM sweeps WHERE id LIKE ?1 ESCAPE '\\'"
				  " ORDER BY id DESC LIMIT 2", pat.buf, &v, &n, err);
		sbuf_release(&pat);
		if (!rc && n > 1) {
			rc = tc_error(err, TC_EUSAGE, "sweep '%s' is ambiguous: %s, %s, ...", ref, v[0].id,
				      v[1].id);
			goto out;
		}
	}
	if (!rc && !n)
		rc = query_sweeps(st, "SELECT " SWEEP_COLS " FROM sweeps WHERE name = ?1"
				  " ORDER BY id DESC LIMIT 1", ref, &v, &n, err);
	if (!rc && !n)
		rc = tc_error(err, TC_ENOTFOUND, "no sweep '%s'", ref);
	if (!rc) {
		*out = v[0];
		memset(&v[0], 0, sizeof(v[0]));
	}
out:
	sweep_rows_free(v, n);
	return rc;
}

int store_sweep_list(struct store *st, bool running_managed, struct sweep_row **out, size_t *nr,
		     struct tc_err *err)
{
	return query_sweeps(st,
			    running_managed ? "SELECT " SWEEP_COLS " FROM sweeps WHERE managed = 1 AND"
					      " state = ?1 ORDER BY id"
					    : "SELECT " SWEEP_COLS " FROM sweeps ORDER BY id DESC",
			    running_managed ? sweep_state_name(SWEEP_RUNNING) : NULL, out, nr, err);
}

/* The state word of the row sql (one "s" argument, or "si") selects, heap; NULL: no row. */
static int read_word(struct store *st, const char *sql, const char *id, long long idx,
		     bool with_idx, char **out, struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	int r = with_idx ? prep_stmt(st, &q, err, sql, "si", id, idx)
			 : prep_stmt(st, &q, err, sql, "s", id);
	if (r)
		return r;
	r = sqlite3_step(q);
	if (r == SQLITE_ROW)
		*out = col_dup(q, 0);
	sqlite3_finalize(q);
	return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : db_fail(st, err, "read state");
}

/* state.h's diagram enforced (sweep_word_edge): an undrawn edge refused, an end over an end kept */
int store_sweep_set_state(struct store *st, const char *id, const char *state, const char *note,
			  bool ended, struct tc_err *err)
{
	bool own = sqlite3_get_autocommit(st->db) != 0;
	int rc = own ? store_begin(st, err) : 0;
	char *cur = NULL;
	if (!rc)
		rc = read_word(st, "SELECT state FROM sweeps WHERE id=?", id, 0, false, &cur, err);
	enum word_edge v = rc ? WORD_KEEP : sweep_word_edge(cur, state);
	if (v == WORD_REFUSE)
		rc = tc_error(err, TC_EUSAGE, "sweep %s: cannot go from %s to %s", id,
			      cur ? cur : "nothing", state ? state : "nothing");
	else if (v == WORD_WRITE)
		rc = run_stmt(st, err,
			      "UPDATE sweeps SET state=?, note=COALESCE(?, note),"
			      " ended=CASE WHEN ? THEN COALESCE(ended, ?) ELSE ended END WHERE id=?",
			      "ssids", state, note, (long long)ended, now_wall(), id);
	free(cur);
	return own ? store_commit(st, rc, err) : rc;
}

int store_sweep_set_driver(struct store *st, const char *id, pid_t pid, unsigned long long ticks,
			   struct tc_err *err)
{
	return run_stmt(st, err, "UPDATE sweeps SET driver_pid=?, driver_ticks=? WHERE id=?", "iis",
			(long long)pid, (long long)ticks, id);
}

static int query_trials(struct store *st, const char *sql, const char *arg, struct trial_row **out,
			size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	int r = prep_stmt(st, &q, err, sql, "s", arg);
	if (r)
		return r;
	size_t alloc = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		if (*nr == alloc) {
			alloc = alloc ? 2 * alloc : 8;
			*out = xrealloc(*out, alloc * sizeof(**out));
		}
		read_trial(q, &(*out)[(*nr)++]);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		trial_rows_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read trials");
	}
	return 0;
}

int store_sweep_trials(struct store *st, const char *id, struct trial_row **out, size_t *nr,
		       struct tc_err *err)
{
	return query_trials(st, "SELECT " TRIAL_COLS " FROM sweep_trials WHERE sweep_id=? ORDER BY idx",
			    id, out, nr, err);
}

int store_trial_of_job(struct store *st, const char *job_id, struct trial_row *out,
		       struct tc_err *err)
{
	struct trial_row *v = NULL;
	size_t n = 0;
	int rc = query_trials(st, "SELECT " TRIAL_COLS " FROM sweep_trials WHERE job_id=? LIMIT 1",
			      job_id, &v, &n, err);
	if (!rc && !n)
		rc = tc_error(err, TC_ENOTFOUND, "job %s is no sweep's trial", job_id);
	if (!rc) {
		*out = v[0];
		memset(&v[0], 0, sizeof(v[0]));
	}
	trial_rows_free(v, n);
	return rc;
}

int store_trial_update(struct store *st, const struct trial_row *t, struct tc_err *err)
{
	bool own = sqlite3_get_autocommit(st->db) != 0;
	int rc = own ? store_begin(st, err) : 0;
	char *cur = NULL;
	if (!rc)
		rc = read_word(st, "SELECT state FROM sweep_trials WHERE sweep_id=? AND idx=?",
			       t->sweep_id, t->idx, true, &cur, err);
	enum word_edge v = rc ? WORD_KEEP : trial_word_edge(cur, t->state);
	if (v == WORD_REFUSE)
		rc = tc_error(err, TC_EUSAGE, "sweep %s: trial %d cannot go from %s to %s",
			      t->sweep_id, t->idx, cur ? cur : "nothing",
			      t->state ? t->state : "nothing");
	else if (v == WORD_WRITE)
		rc = run_stmt(st, err,
			      "UPDATE sweep_trials SET state=?, job_id=?, objective=?, steps=?, note=?,"
			      " early=?, started=?, ended=? WHERE sweep_id=? AND idx=?",
			      "ssfisiffsi", t->state, t->job_id, t->objective, t->steps, t->note,
			      (long long)t->early, opt_time(t->started), opt_time(t->ended),
			      t->sweep_id, (long long)t->idx);
	free(cur);
	return own ? store_commit(st, rc, err) : rc;
}

void sweep_row_release(struct sweep_row *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->name);
	free(s->state);
	free(s->def_json);
	free(s->user);
	free(s->note);
	memset(s, 0, sizeof(*s));
}

void sweep_rows_free(struct sweep_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sweep_row_release(&v[i]);
	free(v);
}

void trial_row_release(struct trial_row *t)
{
	if (!t)
		return;
	free(t->sweep_id);
	free(t->params_json);
	free(t->state);
	free(t->job_id);
	free(t->note);
	memset(t, 0, sizeof(*t));
}

void trial_rows_free(struct trial_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		trial_row_release(&v[i]);
	free(v);
}
