/* store_endpoint.c -- a job's endpoints: sidecar services and where they listen (store.h). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/xalloc.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

int store_endpoint_put(struct store *st, const char *job, const struct store_endpoint *e,
		       struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT OR REPLACE INTO job_endpoints (job_id, name, kind, host, port,"
			" state, pid, secret, note, updated) VALUES (?,?,?,?,?,?,?,?,?,?)",
			"ssssisissd", job, e->name, e->kind, e->host, (long long)e->port, e->state,
			(long long)e->pid, e->secret, e->note, e->updated);
}

#define EP_COLS "name, kind, host, port, state, pid, secret, note, updated"

static void read_row(sqlite3_stmt *q, struct store_endpoint *e)
{
	e->name = col_dup(q, 0);
	e->kind = col_dup(q, 1);
	e->host = col_dup(q, 2);
	e->port = sqlite3_column_int(q, 3);
	e->state = col_dup(q, 4);
	e->pid = (long)sqlite3_column_int64(q, 5);
	e->secret = col_dup(q, 6);
	e->note = col_dup(q, 7);
	e->updated = sqlite3_column_double(q, 8);
}

int store_endpoints(struct store *st, const char *job, struct store_endpoint **out, size_t *nr,
		    struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	int r = prep_stmt(st, &q, err,
			  "SELECT " EP_COLS " FROM job_endpoints WHERE job_id=? ORDER BY name", "s",
			  job);
	if (r)
		return r;
	size_t alloc = 0;
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
	int r = prep_stmt(st, &q, err,
			  "SELECT " EP_COLS " FROM job_endpoints WHERE job_id=? AND name=?", "ss",
			  job, name);
	if (r)
		return r;
	r = sqlite3_step(q);
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
