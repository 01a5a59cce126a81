/* store_ckpt.c -- checkpoint rows; see the checkpoints section of store.h. */
#include "store/store.h"
#include "store/store_int.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

int store_ckpt_put(struct store *st, const char *job, const struct store_ckpt *c,
		   struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "INSERT OR REPLACE INTO checkpoints (job_id, name, dir, step, epoch, layout,"
			       " nfiles, bytes, checksum, files_json, created, state)"
			       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "record checkpoint");
	int ok = sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
		 sqlite3_bind_text(q, 2, c->name, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
		 sqlite3_bind_text(q, 3, c->dir, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
		 sqlite3_bind_int64(q, 4, c->step) == SQLITE_OK &&
		 sqlite3_bind_int64(q, 5, c->epoch) == SQLITE_OK &&
		 sqlite3_bind_int(q, 6, c->layout) == SQLITE_OK &&
		 sqlite3_bind_int64(q, 7, c->nfiles) == SQLITE_OK &&
		 sqlite3_bind_int64(q, 8, c->bytes) == SQLITE_OK &&
		 sqlite3_bind_text(q, 9, c->checksum, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
		 sqlite3_bind_text(q, 10, c->files_json, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
		 sqlite3_bind_double(q, 11, c->created) == SQLITE_OK &&
		 sqlite3_bind_text(q, 12, c->state ? c->state : "complete", -1, SQLITE_TRANSIENT) ==
			 SQLITE_OK;
	int rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "record checkpoint");
	sqlite3_finalize(q);
	return rc;
}

int store_ckpt_set_state(struct store *st, const char *job, const char *name, const char *state,
			 struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db, "UPDATE checkpoints SET state = ? WHERE job_id = ? AND name = ?",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "update checkpoint");
	int ok = sqlite3_bind_text(q, 1, state, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
		 sqlite3_bind_text(q, 2, job, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
		 sqlite3_bind_text(q, 3, name, -1, SQLITE_TRANSIENT) == SQLITE_OK;
	int rc = ok && sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "update checkpoint");
	sqlite3_finalize(q);
	return rc;
}

static char *text(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return xstrdup(t ? (const char *)t : "");
}

int store_ckpt_list(struct store *st, const char *job, bool all, struct store_ckpt **out,
		    size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db,
			       all ? "SELECT name, dir, step, epoch, layout, nfiles, bytes, checksum,"
				     " files_json, created, state FROM checkpoints WHERE job_id = ?"
				     " ORDER BY step, name"
				   : "SELECT name, dir, step, epoch, layout, nfiles, bytes, checksum,"
				     " files_json, created, state FROM checkpoints WHERE job_id = ?"
				     " AND state = 'complete' ORDER BY step, name",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "list checkpoints");
	if (sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
		sqlite3_finalize(q);
		return db_fail(st, err, "list checkpoints");
	}
	size_t alloc = 0;
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
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
		return db_fail(st, err, "list checkpoints");
	}
	return 0;
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
