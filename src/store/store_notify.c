/* store_notify.c -- webhook deliveries per job and unhealthy devices (store.h). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static char *col_text(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? xstrdup((const char *)t) : NULL;
}

int store_delivery_add(struct store *st, const char *job, const struct store_delivery *d,
		       struct tc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO notify_deliveries (job_id, time, event, url, ok, tries,"
			       " status, error) VALUES (?,?,?,?,?,?,?,?)",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(q, 2, d->time);
	sqlite3_bind_text(q, 3, d->event, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(q, 4, d->url, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(q, 5, d->ok ? 1 : 0);
	sqlite3_bind_int(q, 6, d->tries);
	sqlite3_bind_int64(q, 7, d->status);
	if (d->error)
		sqlite3_bind_text(q, 8, d->error, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(q, 8);
	int r = sqlite3_step(q);
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "record a webhook delivery");
}

int store_deliveries(struct store *st, const char *job, struct store_delivery **out, size_t *nr,
		     struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT time, event, url, ok, tries, status, error FROM notify_deliveries"
			       " WHERE job_id=? ORDER BY time, rowid",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
	size_t alloc = 0;
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_delivery *d = &(*out)[(*nr)++];
		d->time = sqlite3_column_double(q, 0);
		d->event = col_text(q, 1);
		d->url = col_text(q, 2);
		d->ok = sqlite3_column_int(q, 3) != 0;
		d->tries = sqlite3_column_int(q, 4);
		d->status = (long)sqlite3_column_int64(q, 5);
		d->error = col_text(q, 6);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_deliveries_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read webhook deliveries");
	}
	return 0;
}

void store_deliveries_free(struct store_delivery *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].event);
		free(v[i].url);
		free(v[i].error);
	}
	free(v);
}

int store_device_health_set(struct store *st, const char *type, int id, const char *reason,
			    struct tc_err *err)
{
	sqlite3_stmt *q;
	const char *sql = reason ? "INSERT OR REPLACE INTO device_health (device_type, device_id,"
				   " reason, since) VALUES (?1, ?2, ?3, ?4)"
				 : "DELETE FROM device_health WHERE device_type=?1 AND device_id=?2"
				   " AND node=''";
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, type, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(q, 2, id);
	if (reason) {
		sqlite3_bind_text(q, 3, reason, -1, SQLITE_TRANSIENT);
		sqlite3_bind_double(q, 4, now_wall());
	}
	int r = sqlite3_step(q);
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "record a device's health");
}

int store_node_health_set(struct store *st, const char *node, const char *type, int id,
			  const char *reason, const char *job, struct tc_err *err)
{
	if (!node || !*node)
		return tc_error(err, TC_EUSAGE, "device health of a node without a name");
	sqlite3_stmt *q;
	const char *sql = reason ? "INSERT OR REPLACE INTO device_health (node, device_type,"
				   " device_id, reason, since, job_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
				 : "DELETE FROM device_health WHERE node=?1 AND device_type=?2"
				   " AND device_id=?3";
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, node, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(q, 2, type, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(q, 3, id);
	if (reason) {
		sqlite3_bind_text(q, 4, reason, -1, SQLITE_TRANSIENT);
		sqlite3_bind_double(q, 5, now_wall());
		if (job)
			sqlite3_bind_text(q, 6, job, -1, SQLITE_TRANSIENT);
	}
	int r = sqlite3_step(q);
	sqlite3_finalize(q);
	return r == SQLITE_DONE ? 0 : db_fail(st, err, "record a node's device health");
}

int store_devices_unhealthy(struct store *st, struct store_sick **out, size_t *nr,
			    struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT device_type, device_id, reason, since, node, job_id"
			       " FROM device_health ORDER BY node, device_type, device_id",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	size_t alloc = 0;
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_sick *s = &(*out)[(*nr)++];
		s->type = col_text(q, 0);
		s->id = sqlite3_column_int(q, 1);
		s->reason = col_text(q, 2);
		s->since = sqlite3_column_double(q, 3);
		s->node = col_text(q, 4);
		s->job = col_text(q, 5);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_sick_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read device health");
	}
	return 0;
}

void store_sick_free(struct store_sick *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].type);
		free(v[i].reason);
		free(v[i].node);
		free(v[i].job);
	}
	free(v);
}
