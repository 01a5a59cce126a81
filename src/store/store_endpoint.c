/* store_endpoint.c -- a job's endpoints: sidecar services and where they listen (store.h). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/xalloc.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static char *col_text(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? xstrdup((const char *)t) : NULL;
}

static void bind_opt(sqlite3_stmt *q, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(q, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(q, i);
}

int store_endpoint_put(struct store *st, const char *job, const struct store_endpoint *e,
		       struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "INSERT OR REPLACE INTO job_endpoints (job_id, name, kind, host, port,"
			       " state, pid, secret, note, updated) VALUES (?,?,?,?,?,?,?,?,?,?)",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(q, 2, e->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(q, 3, e->kind, -1, SQLITE_TRANSIENT);
	bind_opt(q, 4, e->host);
	sqlite3_bind_int(q, 5, e->port);
	sqlite3_bind_text(q, 6, e->state, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(q, 7, e->pid);
	bind_opt(q, 8, e->secret);
	bind_opt(q, 9, e->note);
	sqlite3_bind_double(q, 10, e->updated);
	int r = sqlite3_step(q);
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "record an endpoint");
}

#define EP_COLS "name, kind, host, port, state, pid, secret, note, updated"

static void read_row(sqlite3_stmt *q, struct store_endpoint *e)
{
	e->name = col_text(q, 0);
	e->kind = col_text(q, 1);
	e->host = col_text(q, 2);
	e->port = sqlite3_column_int(q, 3);
	e->state = col_text(q, 4);
	e->pid = (long)sqlite3_column_int64(q, 5);
	e->secret = col_text(q, 6);
	e->note = col_text(q, 7);
	e->updated = sqlite3_column_double(q, 8);
}

int store_endpoints(struct store *st, const char *job, struct store_endpoint **out, size_t *nr,
		    struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT " EP_COLS " FROM job_endpoints WHERE job_id=? ORDER BY name", -1,
			       &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
	size_t alloc = 0;
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		read_row(q, &(*out)[(*nr)++]);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_endpoints_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read endpoints");
	}
	return 0;
}

int store_endpoint_get(struct store *st, const char *job, const char *name,
		       struct store_endpoint *out, struct tc_err *err)
{
	sqlite3_stmt *q;
	memset(out, 0, sizeof(*out));
	if (sqlite3_prepare_v2(st->db,
			       "SELECT " EP_COLS " FROM job_endpoints WHERE job_id=? AND name=?", -1,
			       &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(q, 2, name, -1, SQLITE_TRANSIENT);
	int r = sqlite3_step(q);
	if (r == SQLITE_ROW)
		read_row(q, out);
	sqlite3_finalize(q);
	if (r == SQLITE_ROW)
		return 0;
	if (r == SQLITE_DONE)
		return tc_error(err, TC_ENOTFOUND, "job %s has no endpoint '%s'", job, name);
	return db_fail(st, err, "read an endpoint");
}

void store_endpoint_release(struct store_endpoint *e)
{
	if (!e)
		return;
	free(e->name);
	free(e->kind);
	free(e->host);
	free(e->state);
	free(e->secret);
	free(e->note);
	memset(e, 0, sizeof(*e));
}

void store_endpoints_free(struct store_endpoint *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		store_endpoint_release(&v[i]);
	free(v);
}
