/* store_notify.c -- webhook deliveries per job and unhealthy devices (store.h). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

int store_delivery_add(struct store *st, const char *job, const struct store_delivery *d,
		       struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT INTO notify_deliveries (job_id, time, event, url, ok, tries,"
			" status, error) VALUES (?,?,?,?,?,?,?,?)",
			"sdssiiis", job, d->time, d->event, d->url, (long long)(d->ok ? 1 : 0),
			(long long)d->tries, (long long)d->status, d->error);
}

int store_deliveries(struct store *st, const char *job, struct store_delivery **out, size_t *nr,
		     struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	int r = prep_stmt(st, &q, err,
			  "SELECT time, event, url, ok, tries, status, error FROM notify_deliveries"
			  " WHERE job_id=? ORDER BY time, rowid",
			  "s", job);
	if (r)
		return r;
	size_t alloc = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_delivery *d = &(*out)[(*nr)++];
		d->time = sqlite3_column_double(q, 0);
		d->event = col_dup(q, 1);
		d->url = col_dup(q, 2);
		d->ok = sqlite3_column_int(q, 3) != 0;
		d->tries = sqlite3_column_int(q, 4);
		d->status = (long)sqlite3_column_int64(q, 5);
		d->error = col_dup(q, 6);
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
	if (!reason)
		return run_stmt(st, err,
				"DELETE FROM device_health WHERE device_type=?1 AND device_id=?2"
				" AND node=''",
				"si", type, (long long)id);
	return run_stmt(st, err,
			"INSERT OR REPLACE INTO device_health (device_type, device_id,"
			" reason, since) VALUES (?1, ?2, ?3, ?4)",
			"sisd", type, (long long)id, reason, now_wall());
}

int store_node_health_set(struct store *st, const char *node, const char *type, int id,
			  const char *reason, const char *job, struct tc_err *err)
{
	if (!node || !*node)
		return tc_error(err, TC_EUSAGE, "device health of a node without a name");
	if (!reason)
		return run_stmt(st, err,
				"DELETE FROM device_health WHERE node=?1 AND device_type=?2"
				" AND device_id=?3",
				"ssi", node, type, (long long)id);
	return run_stmt(st, err,
			"INSERT OR REPLACE INTO device_health (node, device_type,"
			" device_id, reason, since, job_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
			"ssisds", node, type, (long long)id, reason, now_wall(), job);
}

int store_devices_unhealthy(struct store *st, struct store_sick **out, size_t *nr,
			    struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	int r = prep_stmt(st, &q, err,
			  "SELECT device_type, device_id, reason, since, node, job_id"
			  " FROM device_health ORDER BY node, device_type, device_id",
			  "");
	if (r)
		return r;
	size_t alloc = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_sick *s = &(*out)[(*nr)++];
		s->type = col_dup(q, 0);
		s->id = sqlite3_column_int(q, 1);
		s->reason = col_dup(q, 2);
		s->since = sqlite3_column_double(q, 3);
		s->node = col_dup(q, 4);
		s->job = col_dup(q, 5);
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
