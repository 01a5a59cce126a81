/* store_ckpt.c -- checkpoint rows; see the checkpoints section of store.h. */
#include "store/store.h"
#include "store/store_int.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* node < 0: the job's row (checkpoints), else node's own (checkpoint_nodes). */
static int ckpt_put(struct store *st, const char *job, int node, const struct store_ckpt *c,
		    struct tc_err *err)
{
	/* the job's row has no node column: its format stops before the last 'i' */
	return run_stmt(st, err,
			node < 0 ? "INSERT OR REPLACE INTO checkpoints (job_id, name, dir, step, epoch,"
				   " layout, nfiles, bytes, checksum, files_json, created, state)"
				   " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
				 : "INSERT OR REPLACE INTO checkpoint_nodes (job_id, name, dir, step,"
				   " epoch, layout, nfiles, bytes, checksum, files_json, created, state,"
				   " node) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
			node < 0 ? "sssiiiiissds" : "sssiiiiissdsi", job, c->name, c->dir, c->step,
			c->epoch, (long long)c->layout, c->nfiles, c->bytes, c->checksum, c->files_json,
			c->created, c->state ? c->state : "complete", (long long)node);
}

int store_ckpt_put(struct store *st, const char *job, const struct store_ckpt *c,
		   struct tc_err *err)
{
	return ckpt_put(st, job, -1, c, err);
}

int store_ckpt_node_put(struct store *st, const char *job, int node, const struct store_ckpt *c,
			struct tc_err *err)
{
	return ckpt_put(st, job, node < 0 ? 0 : node, c, err);
}

static int ckpt_set_state(struct store *st, const char *job, int node, const char *name,
			  const char *state, struct tc_err *err)
{
	return run_stmt(st, err,
			node < 0 ? "UPDATE checkpoints SET state = ? WHERE job_id = ? AND name = ?"
				 : "UPDATE checkpoint_nodes SET state = ? WHERE job_id = ? AND name = ?"
				   " AND node = ?",
			node < 0 ? "sss" : "sssi", state, job, name, (long long)node);
}

int store_ckpt_set_state(struct store *st, const char *job, const char *name, const char *state,
			 struct tc_err *err)
{
	return ckpt_set_state(st, job, -1, name, state, err);
}

int store_ckpt_node_set_state(struct store *st, const char *job, int node, const char *name,
			      const char *state, struct tc_err *err)
{
	return ckpt_set_state(st, job, node < 0 ? 0 : node, name, state, err);
}

static char *text(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return xstrdup(t ? (const char *)t : "");
}

static int ckpt_list(struct store *st, const char *job, bool all, struct store_ckpt **out,
		     int **nodes, size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	if (nodes)
		*nodes = NULL;
	const char *sql =
		nodes ? "SELECT name, dir, step, epoch, layout, nfiles, bytes, checksum,"
			" files_json, created, state, node FROM checkpoint_nodes WHERE job_id = ?"
			" ORDER BY node, step, name"
		: all ? "SELECT name, dir, step, epoch, layout, nfiles, bytes, checksum,"
			" files_json, created, state FROM checkpoints WHERE job_id = ?"
			" ORDER BY step, name"
		      : "SELECT name, dir, step, epoch, layout, nfiles, bytes, checksum,"
			" files_json, created, state FROM checkpoints WHERE job_id = ?"
			" AND state = 'complete' ORDER BY step, name";
	int r = prep_stmt(st, &q, err, sql, "s", job);
	if (r)
		return r;
	size_t alloc = 0, nalloc = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		if (nodes) {
			XGROW(*nodes, *nr + 1, nalloc);
			(*nodes)[*nr] = sqlite3_column_int(q, 11);
		}
		struct store_ckpt *c = &(*out)[(*nr)++];
		c->name = text(q, 0);
		c->dir = text(q, 1);
		c->step = sqlite3_column_int64(q, 2);
		c->epoch = sqlite3_column_int64(q, 3);
		c->layout = sqlite3_column_int(q, 4);
		c->nfiles = sqlite3_column_int64(q, 5);
		c->bytes = sqlite3_column_int64(q, 6);
		c->checksum = text(q, 7);
		c->files_json = text(q, 8);
		c->created = sqlite3_column_double(q, 9);
		c->state = text(q, 10);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_ckpt_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		if (nodes) {
			free(*nodes);
			*nodes = NULL;
		}
		return db_fail(st, err, "list checkpoints");
	}
	return 0;
}

int store_ckpt_list(struct store *st, const char *job, bool all, struct store_ckpt **out,
		    size_t *nr, struct tc_err *err)
{
	return ckpt_list(st, job, all, out, NULL, nr, err);
}

int store_ckpt_node_list(struct store *st, const char *job, struct store_ckpt **out, int **nodes,
			 size_t *nr, struct tc_err *err)
{
	return ckpt_list(st, job, true, out, nodes, nr, err);
}

void store_ckpt_free(struct store_ckpt *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].name);
		free(v[i].dir);
		free(v[i].checksum);
		free(v[i].files_json);
		free(v[i].state);
	}
	free(v);
}
