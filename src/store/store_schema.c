/*
 * store_schema.c -- the database's tables: the migrations, each run once and
 * in order, and user_version, which records how far (store_migrate); and
 * doctor's look at the file as it is: its integrity and its schema.
 */
#include "store/store_int.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <sqlite3.h>
#include <string.h>

/* Each migration runs once, in order; user_version records how far. */
static const char *const migrations[] = {
	"CREATE TABLE jobs ("
	" id TEXT PRIMARY KEY, name TEXT NOT NULL, state TEXT NOT NULL,"
	" run_dir TEXT NOT NULL, spec_json TEXT NOT NULL,"
	" created REAL NOT NULL, started REAL, ended REAL,"
	" exit_code INTEGER NOT NULL DEFAULT -1, root_cause TEXT,"
	" restarts INTEGER NOT NULL DEFAULT 0, world_size INTEGER NOT NULL DEFAULT 0,"
	" sup_pid INTEGER NOT NULL DEFAULT 0, sup_ticks INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX jobs_name ON jobs(name);"
	"CREATE TABLE workers ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" attempt INTEGER NOT NULL, rank INTEGER NOT NULL, local_rank INTEGER NOT NULL,"
	" pid INTEGER NOT NULL, exit_code INTEGER NOT NULL DEFAULT -1,"
	" signal INTEGER NOT NULL DEFAULT 0, started REAL NOT NULL, ended REAL,"
	" PRIMARY KEY (job_id, attempt, rank));"
	"CREATE TABLE events ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" time REAL NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL);"
	"CREATE INDEX events_job ON events(job_id, id);",
	/* 2: metrics (store_metrics.c).  Points live in chunks: one row per
	 * series and flush, a packed blob of points (see store_metrics.c). */
	"CREATE TABLE metric_series ("
	" id INTEGER PRIMARY KEY,"
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" metric TEXT NOT NULL, rank INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX metric_series_key ON metric_series(job_id, metric, rank);"
	"CREATE TABLE metric_chunks ("
	" id INTEGER PRIMARY KEY,"
	" series_id INTEGER NOT NULL REFERENCES metric_series(id) ON DELETE CASCADE,"
	" first INTEGER NOT NULL, count INTEGER NOT NULL, data BLOB NOT NULL);"
	"CREATE UNIQUE INDEX metric_chunks_key ON metric_chunks(series_id, first);"
	"CREATE TABLE metric_params ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, name TEXT NOT NULL, value TEXT,"
	" PRIMARY KEY (job_id, rank, name));"
	"CREATE TABLE metric_meta ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" metric TEXT NOT NULL, key TEXT NOT NULL, value TEXT,"
	" PRIMARY KEY (job_id, metric, key));"
	"CREATE TABLE metric_counters ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, lines INTEGER NOT NULL, records INTEGER NOT NULL,"
	" malformed INTEGER NOT NULL, last_error TEXT,"
	" PRIMARY KEY (job_id, rank));",
	/* 3: checkpoints (store_ckpt.c) */
	"CREATE TABLE checkpoints ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" name TEXT NOT NULL, dir TEXT NOT NULL, step INTEGER NOT NULL,"
	" epoch INTEGER NOT NULL DEFAULT -1, layout INTEGER NOT NULL,"
	" nfiles INTEGER NOT NULL, bytes INTEGER NOT NULL, checksum TEXT NOT NULL,"
	" files_json TEXT NOT NULL, created REAL NOT NULL,"
	" state TEXT NOT NULL DEFAULT 'complete',"
	" PRIMARY KEY (job_id, name));",
	/* 4: trainctl server (store_server.c): owner, scheduling fields, the
	 * devices a job holds, why the server stopped it, tokens, telemetry */
	"ALTER TABLE jobs ADD COLUMN user TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 100;"
	"ALTER TABLE jobs ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE jobs ADD COLUMN device_type TEXT NOT NULL DEFAULT 'cpu';"
	"ALTER TABLE jobs ADD COLUMN device_count INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE jobs ADD COLUMN device_want TEXT;"
	"ALTER TABLE jobs ADD COLUMN devices TEXT;"
	"ALTER TABLE jobs ADD COLUMN stop_reason TEXT;"
	"ALTER TABLE jobs ADD COLUMN managed INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX jobs_state ON jobs(state);"
	"CREATE INDEX jobs_user ON jobs(user, id);"
	"CREATE TABLE tokens ("
	" hash TEXT PRIMARY KEY, user TEXT NOT NULL, admin INTEGER NOT NULL DEFAULT 0,"
	" created REAL NOT NULL);"
	"CREATE TABLE job_usage ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" time REAL NOT NULL, cpu REAL NOT NULL, mem REAL NOT NULL, dev TEXT);"
	"CREATE INDEX job_usage_job ON job_usage(job_id, time);",
	/* 5: backend: slurm (store_slurm.c): the Slurm job id, its nodes and
	 * the Slurm state last seen */
	"ALTER TABLE jobs ADD COLUMN backend TEXT NOT NULL DEFAULT 'local';"
	"ALTER TABLE jobs ADD COLUMN slurm_job TEXT;"
	"ALTER TABLE jobs ADD COLUMN slurm_nodes TEXT;"
	"ALTER TABLE jobs ADD COLUMN slurm_state TEXT;",
	/* 6: device leases (store_lease.c): who holds which device, by the
	 * holder's pid and start time; no foreign key, as `trainctl run` takes
	 * its devices before its job row exists */
	"CREATE TABLE leases ("
	" device_type TEXT NOT NULL, device_id INTEGER NOT NULL, job_id TEXT NOT NULL,"
	" pid INTEGER NOT NULL, ticks INTEGER NOT NULL, since REAL NOT NULL,"
	" PRIMARY KEY (device_type, device_id));"
	"CREATE INDEX leases_job ON leases(job_id);",
	/* 7: listings by state come newest first from the index itself (no
	 * sort of the matching rows); it covers state alone too */
	"CREATE INDEX jobs_state_id ON jobs(state, id);"
	"DROP INDEX jobs_state;",
	/* 8: metric summaries kept as points are written (store_metrics.c, note 4) */
	"CREATE TABLE metric_summary ("
	" series_id INTEGER NOT NULL REFERENCES metric_series(id) ON DELETE CASCADE,"
	" kind INTEGER NOT NULL, points INTEGER NOT NULL, n INTEGER NOT NULL,"
	" n_finite INTEGER NOT NULL, sum REAL NOT NULL, n_pos INTEGER NOT NULL,"
	" sum_pos REAL NOT NULL, min REAL, min_step TEXT, max REAL, max_step TEXT,"
	" last REAL, last_step TEXT, last_index INTEGER NOT NULL, last_text TEXT,"
	" PRIMARY KEY (series_id, kind));"
	"CREATE TABLE metric_rank_steps ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, nseq INTEGER NOT NULL, last_seq INTEGER NOT NULL,"
	" last_t REAL, ordered INTEGER NOT NULL,"
	" PRIMARY KEY (job_id, rank));",
	/* 9: webhook deliveries per job and devices found unhealthy (store_notify.c) */
	"CREATE TABLE notify_deliveries ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" time REAL NOT NULL, event TEXT NOT NULL, url TEXT NOT NULL, ok INTEGER NOT NULL,"
	" tries INTEGER NOT NULL, status INTEGER NOT NULL, error TEXT);"
	"CREATE INDEX notify_deliveries_job ON notify_deliveries(job_id, time);"
	"CREATE TABLE device_health ("
	" device_type TEXT NOT NULL, device_id INTEGER NOT NULL, reason TEXT NOT NULL,"
	" since REAL NOT NULL, PRIMARY KEY (device_type, device_id));",
	/* 10: sweeps and their trials (store_sweep.c); a trial's job_id is set
	 * once its job exists, and outlives the job's row (no foreign key) */
	"CREATE TABLE sweeps ("
	" id TEXT PRIMARY KEY, name TEXT NOT NULL, state TEXT NOT NULL,"
	" def_json TEXT NOT NULL, user TEXT NOT NULL DEFAULT '',"
	" managed INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, ended REAL,"
	" driver_pid INTEGER NOT NULL DEFAULT 0, driver_ticks INTEGER NOT NULL DEFAULT 0,"
	" note TEXT);"
	"CREATE TABLE sweep_trials ("
	" sweep_id TEXT NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,"
	" idx INTEGER NOT NULL, params_json TEXT NOT NULL,"
	" state TEXT NOT NULL DEFAULT 'pending', job_id TEXT, objective REAL,"
	" steps INTEGER NOT NULL DEFAULT 0, note TEXT, early INTEGER NOT NULL DEFAULT 0,"
	" started REAL, ended REAL,"
	" PRIMARY KEY (sweep_id, idx));"
	"CREATE INDEX sweep_trials_job ON sweep_trials(job_id);",
	/* 11: the hub (store_hub.c): remote supervisors' secrets and acknowledged sequences */
	"CREATE TABLE hub_jobs ("
	" job_id TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
	" secret_sha256 TEXT NOT NULL, url TEXT);"
	"CREATE TABLE hub_streams ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" stream TEXT NOT NULL, acked INTEGER NOT NULL,"
	" PRIMARY KEY (job_id, stream));",
	/* 18: a listing (store_job_each) reads every column it shows from this
	 * index, in id order, without looking each row up in the table (a
	 * seventh of a 10,000-job listing); spec_json, most of a row, is not in
	 * it.  Its columns are STORE_JOB_COLS_BRIEF's (store_int.h): keep them so. */
	"CREATE INDEX jobs_list ON jobs(id, name, state, run_dir, created, started, ended,"
	" exit_code, root_cause, restarts, world_size, sup_pid, sup_ticks, user, priority,"
	" preemptible, device_type, device_count, device_want, devices, stop_reason, managed,"
	" backend, slurm_job, slurm_nodes, slurm_state);",
	/* 13: endpoints (store_endpoint.c): a job's sidecar services, their ports and states */
	"CREATE TABLE job_endpoints ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" name TEXT NOT NULL, kind TEXT NOT NULL, host TEXT, port INTEGER NOT NULL DEFAULT 0,"
	" state TEXT NOT NULL, pid INTEGER NOT NULL DEFAULT 0, secret TEXT, note TEXT,"
	" updated REAL NOT NULL,"
	" PRIMARY KEY (job_id, name));",
	/* 17 (in order of landing): each node's own checkpoints, for nodes whose
	 * disks are their own (store_ckpt.c); checkpoints stays the job's view */
	"CREATE TABLE checkpoint_nodes ("
	" job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	" node INTEGER NOT NULL, name TEXT NOT NULL, dir TEXT NOT NULL, step INTEGER NOT NULL,"
	" epoch INTEGER NOT NULL DEFAULT -1, layout INTEGER NOT NULL,"
	" nfiles INTEGER NOT NULL, bytes INTEGER NOT NULL, checksum TEXT NOT NULL,"
	" files_json TEXT NOT NULL, created REAL NOT NULL,"
	" state TEXT NOT NULL DEFAULT 'complete',"
	" PRIMARY KEY (job_id, node, name));",
	/* (in order of landing): device_health gains the node a device is on ('': this
	 * host, the one the server schedules; else a node of a multi-node job, as its
	 * supervisor found it, and the job that found it) */
	"CREATE TABLE device_health_nodes ("
	" node TEXT NOT NULL DEFAULT '', device_type TEXT NOT NULL, device_id INTEGER NOT NULL,"
	" reason TEXT NOT NULL, since REAL NOT NULL, job_id TEXT,"
	" PRIMARY KEY (node, device_type, device_id));"
	"INSERT INTO device_health_nodes (device_type, device_id, reason, since)"
	" SELECT device_type, device_id, reason, since FROM device_health;"
	"DROP TABLE device_health;"
	"ALTER TABLE device_health_nodes RENAME TO device_health;",
	/* (in order of landing): usage accounting (store_usage.c), one row per interval a
	 * job held its devices; no foreign key: the record outlives a deleted job */
	"CREATE TABLE usage ("
	" job_id TEXT NOT NULL, user TEXT NOT NULL DEFAULT '', team TEXT,"
	" device_type TEXT NOT NULL, device_count INTEGER NOT NULL,"
	" opened REAL NOT NULL, closed REAL, queue_wait REAL, outcome TEXT);"
	"CREATE INDEX usage_job ON usage(job_id, closed);"
	"CREATE INDEX usage_opened ON usage(opened);",
	/* the team a server job was submitted for (docs/server.md, "Teams"); NULL: none */
	"ALTER TABLE jobs ADD COLUMN team TEXT;",
	/* (in order of landing): the rendezvous round of a multi-node job the hub keeps
	 * (hub/rdzv.h), its JSON text, so a restarted hub reloads it (store_hub.c) */
	"CREATE TABLE hub_rdzv ("
	" job_id TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
	" round TEXT NOT NULL);",
};

static int schema_version(struct store *st, int *version, struct tc_err *err)
{
	sqlite3_stmt *q;
	*version = 0;
	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "read schema version");
	int step = sqlite3_step(q);
	if (step == SQLITE_ROW)
		*version = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	return step == SQLITE_ROW ? 0 : db_fail(st, err, "read schema version");
}

/* ---- for trainctl doctor (jobs/doctor.c): the file as it is, its integrity, its schema ---- */

int store_schema_versions(struct store *st, int *have, int *want, struct tc_err *err)
{
	*want = (int)(sizeof(migrations) / sizeof(migrations[0]));
	return schema_version(st, have, err);
}

int store_open_as_is(const char *home, struct store **out, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT;
	struct store *st = xcalloc(1, sizeof(*st));
	int rc = 0;
	*out = NULL;
	sbuf_addf(&path, "%s/trainctl.db", home);
	/* no SQLITE_OPEN_CREATE, no chmod, no migration: the file is looked at as it is */
	if (sqlite3_open_v2(path.buf, &st->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		rc = tc_error(err, TC_ESTORE, "cannot open database '%s': %s", path.buf,
			      st->db ? sqlite3_errmsg(st->db) : "out of memory");
		store_close(st);
	} else {
		sqlite3_busy_timeout(st->db, 10000);
		*out = st;
	}
	sbuf_release(&path);
	return rc;
}

int store_integrity(struct store *st, char **damage, struct tc_err *err)
{
	sqlite3_stmt *q;
	struct sbuf out = SBUF_INIT;
	*damage = NULL;
	int r = sqlite3_prepare_v2(st->db, "PRAGMA integrity_check(10)", -1, &q, NULL);
	if (r == SQLITE_OK) {
		while ((r = sqlite3_step(q)) == SQLITE_ROW) {
			const char *line = (const char *)sqlite3_column_text(q, 0);
			if (line && strcmp(line, "ok") != 0)
				sbuf_addf(&out, "%s%s", out.len ? "; " : "", line);
		}
		sqlite3_finalize(q);
	}
	int primary = r & 0xff;
	if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
		sbuf_release(&out);
		*damage = xstrdup(sqlite3_errmsg(st->db));
		return 0;
	}
	if (r != SQLITE_DONE) {
		sbuf_release(&out);
		return db_fail(st, err, "integrity check");
	}
	if (out.len)
		*damage = sbuf_detach(&out);
	sbuf_release(&out);
	return 0;
}

/*
 * The version is read again inside each BEGIN IMMEDIATE: two processes
 * opening a new database at once (a `run` and a `show`) would otherwise
 * both apply the same migration ("duplicate column name").
 */
int store_migrate(struct store *st, struct tc_err *err)
{
	int version = 0, want = (int)(sizeof(migrations) / sizeof(migrations[0]));
	int rc = schema_version(st, &version, err);
	while (!rc && version < want) {
		if ((rc = exec_sql(st, "BEGIN IMMEDIATE", err)))
			break;
		if (!(rc = schema_version(st, &version, err)) && version < want) {
			struct sbuf sql = SBUF_INIT;
			sbuf_addf(&sql, "%s PRAGMA user_version = %d;", migrations[version], version + 1);
			rc = exec_sql(st, sql.buf, err);
			sbuf_release(&sql);
		}
		if (!rc)
			rc = exec_sql(st, "COMMIT", err);
		if (rc) {
			/* leave the transaction; the error stands (the rollback has nothing to add) */
			(void)sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
			break;
		}
		if ((rc = schema_version(st, &version, err)))
			break;
	}
	if (!rc && version > want)
		rc = tc_error(err, TC_ESTORE, "database schema %d is newer than this trainctl knows (%d)",
			      version, want);
	return rc;
}

int store_schema_current(struct store *st, struct tc_err *err)
{
	int version = 0, want = (int)(sizeof(migrations) / sizeof(migrations[0]));
	int rc = schema_version(st, &version, err);
	if (!rc && version != want)
		rc = tc_error(err, TC_ESTORE, "database schema %d is not this trainctl's (%d), and it"
			      " cannot be brought up to date read-only", version, want);
	return rc;
}
