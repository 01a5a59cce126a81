/* store.c -- SQLite state; schema, transitions and queries (see store.h). */
#include "store/store.h"
#include "store/store_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
};

int db_fail(struct store *st, struct tc_err *err, const char *what)
{
	return tc_error(err, TC_ESTORE, "database: %s: %s", what, sqlite3_errmsg(st->db));
}

static int exec_sql(struct store *st, const char *sql, struct tc_err *err)
{
	char *msg = NULL;
	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		int rc = tc_error(err, TC_ESTORE, "database: %s", msg ? msg : "error");
		sqlite3_free(msg);
		return rc;
	}
	return 0;
}

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

/*
 * The version is read again inside each BEGIN IMMEDIATE: two processes
 * opening a new database at once (a `run` and a `show`) would otherwise
 * both apply the same migration ("duplicate column name").
 */
static int migrate(struct store *st, struct tc_err *err)
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

int store_runs_private(const char *home, struct tc_err *err)
{
	struct sbuf runs = SBUF_INIT;
	struct stat sb;
	mode_t want = geteuid() == 0 ? 0711 : 0700;
	int rc = 0;
	sbuf_addf(&runs, "%s/runs", home);
	if (mkdir(runs.buf, want) < 0 && errno != EEXIST)
		rc = tc_error_errno(err, TC_ESTORE, "cannot make %s", runs.buf);
	else if (lstat(runs.buf, &sb) < 0 || !S_ISDIR(sb.st_mode))
		rc = tc_error(err, TC_ESTORE, "%s is not a folder", runs.buf);
	else if (sb.st_uid == geteuid() && (sb.st_mode & 07777) != want && chmod(runs.buf, want) < 0)
		rc = tc_error_errno(err, TC_ESTORE, "cannot set the mode of %s", runs.buf);
	sbuf_release(&runs);
	return rc;
}

/*
 * The state folder and the database are ours alone (issue 13): the folder
 * 0700, or 0711 for root, whose server runs jobs as other accounts that
 * must pass through to their run folders (runs/ID/logs, owned by them);
 * trainctl.db 0600, and SQLite gives its -wal and -shm the database's
 * mode.  Folders and files of older versions are tightened; one owned by
 * another account is left as it is (chmod fails and is not an error).
 */
static int store_private_files(const char *home, const char *db, struct tc_err *err)
{
	struct stat sb;
	mode_t want = geteuid() == 0 ? 0711 : 0700;
	if (stat(home, &sb) == 0 && sb.st_uid == geteuid() && (sb.st_mode & 0777 & ~want))
		(void)chmod(home, sb.st_mode & 0777 & want);
	/*
	 * Never open() and close() a database this process may have open
	 * already: closing any fd of a file drops the process's POSIX locks
	 * on it, SQLite's included.  So: create it (0600) only when missing,
	 * and tighten an existing one by name.
	 */
	if (lstat(db, &sb) < 0) {
		int fd = open(db, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
	} else if (S_ISLNK(sb.st_mode)) {
		return tc_error(err, TC_ESTORE, "database '%s' is a link: refused", db);
	} else if (S_ISREG(sb.st_mode) && sb.st_uid == geteuid() && (sb.st_mode & 077)) {
		(void)chmod(db, 0600);
	}
	static const char *const side[] = { "-wal", "-shm" };
	for (size_t i = 0; i < 2; i++) {
		struct sbuf p = SBUF_INIT;
		sbuf_addf(&p, "%s%s", db, side[i]);
		if (lstat(p.buf, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
		    (sb.st_mode & 077))
			(void)chmod(p.buf, 0600);
		sbuf_release(&p);
	}
	return 0;
}

/*
 * Two processes opening a new database at once (a `run` and a `show`) both
 * turn it to WAL.  That needs an exclusive lock, and the one that holds a
 * shared lock while the other escalates gets SQLITE_BUSY at once: SQLite
 * skips the busy handler there, as waiting would deadlock.  So try again;
 * once one has switched, the pragma is a no-op for the other.
 */
static int wal_mode(struct store *st, struct tc_err *err)
{
	for (int tries = 0;; tries++) {
		if (sqlite3_exec(st->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) == SQLITE_OK)
			return 0;
		if ((sqlite3_errcode(st->db) & 0xff) != SQLITE_BUSY || tries == 1000)
			return db_fail(st, err, "switch to WAL");
		struct timespec nap = { 0, 10 * 1000 * 1000 };
		nanosleep(&nap, NULL);
	}
}

/* store_open with SQLite's open flags: SQLITE_OPEN_NOMUTEX or 0. */
static int open_db(const char *home, int flags, struct store **out, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT;
	struct store *st = xcalloc(1, sizeof(*st));
	int rc = mkdir_p(home, err);
	if (rc)
		goto fail;
	sbuf_addf(&path, "%s/trainctl.db", home);
	if ((rc = store_private_files(home, path.buf, err)))
		goto fail;
	if (sqlite3_open_v2(path.buf, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | flags,
			    NULL) != SQLITE_OK) {
		rc = tc_error(err, TC_ESTORE, "cannot open database '%s': %s", path.buf,
			      st->db ? sqlite3_errmsg(st->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(st->db, 10000);
	/*
	 * The last connection to close would checkpoint the WAL and fsync twice,
	 * tens of ms at the end of every command; SQLite's automatic checkpoints
	 * (every 1000 pages) keep the WAL bounded instead.
	 */
	if (sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL) != SQLITE_OK) {
		rc = tc_error(err, TC_ESTORE, "cannot configure database '%s': %s", path.buf,
			      sqlite3_errmsg(st->db));
		goto fail;
	}
	if ((rc = wal_mode(st, err)) ||
	    (rc = exec_sql(st, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", err)))
		goto fail;
	if ((rc = migrate(st, err)))
		goto fail;
	sbuf_release(&path);
	*out = st;
	return 0;
fail:
	tc_error_prefix(err, "%s", path.len ? path.buf : home);
	sbuf_release(&path);
	store_close(st);
	return rc;
}

int store_open(const char *home, struct store **out, struct tc_err *err)
{
	return open_db(home, 0, out, err);
}

int store_open_unlocked(const char *home, struct store **out, struct tc_err *err)
{
	return open_db(home, SQLITE_OPEN_NOMUTEX, out, err);
}

int store_keep_pages(struct store *st, int mib, struct tc_err *err)
{
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA cache_size=-%d;", mib * 1024);
	return exec_sql(st, sql, err);
}

void store_close(struct store *st)
{
	if (!st)
		return;
	sqlite3_close(st->db);
	free(st);
}

/* Ids handed out by this process so far: the suffix steps through it, so that
 * one process never repeats an id within a millisecond (16 random bits per id
 * gave two of the server's submissions the same id about once in 10,000). */
static atomic_uint job_id_seq;

char *store_new_job_id(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char buf[32];
	strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
	/* pid * an odd constant is one-to-one on the low 16 bits: processes with
	 * distinct pids start their runs of suffixes apart, and within a process the
	 * suffix repeats only after 65,536 ids */
	unsigned int n = atomic_fetch_add(&job_id_seq, 1u);
	unsigned int suffix = ((unsigned int)getpid() * 40503u + n) & 0xffffu;
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s-%03ld-%04x", buf, ts.tv_nsec / 1000000, suffix);
	return sbuf_detach(&sb);
}

/* Prepare, bind text/double/int by a tiny format, step, finalize. */
static int run_stmt(struct store *st, struct tc_err *err, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	va_list ap;
	va_start(ap, fmt);
	for (int i = 1; fmt[i - 1]; i++) {
		switch (fmt[i - 1]) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			if (s)
				sqlite3_bind_text(q, i, s, -1, SQLITE_TRANSIENT);
			else
				sqlite3_bind_null(q, i);
			break;
		}
		case 'd':
			sqlite3_bind_double(q, i, va_arg(ap, double));
			break;
		case 'i':
			sqlite3_bind_int64(q, i, va_arg(ap, long long));
			break;
		}
	}
	va_end(ap);
	int r = sqlite3_step(q);
	int rc = 0;
	if (r != SQLITE_DONE && r != SQLITE_ROW)
		rc = db_fail(st, err, "write");
	sqlite3_finalize(q);
	return rc;
}

/*
 * A write's own transaction, unless the caller is inside one already
 * (store_job_started puts several records in one).  txn_end commits what
 * txn_begin opened, or rolls it back when rc says so.
 */
static int txn_begin(struct store *st, bool *own, struct tc_err *err)
{
	*own = sqlite3_get_autocommit(st->db) != 0;
	return *own ? exec_sql(st, "BEGIN IMMEDIATE", err) : 0;
}

static int txn_end(struct store *st, bool own, int rc, struct tc_err *err)
{
	if (!own)
		return rc;
	if (rc) {
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	return exec_sql(st, "COMMIT", err);
}

int store_job_create(struct store *st, const struct job_row *j, struct tc_err *err)
{
	const char *state = job_state_name(j->state);
	bool own;
	int rc = txn_begin(st, &own, err);
	if (rc)
		return rc;
	/* user and devices: who ran it on what (NULL keeps the column's default) */
	rc = run_stmt(st, err,
		      "INSERT INTO jobs (id, name, state, run_dir, spec_json, created, world_size,"
		      " sup_pid, sup_ticks, user, device_type, device_count, devices)"
		      " VALUES (?,?,?,?,?,?,?,?,?,COALESCE(?,''),COALESCE(?,'cpu'),?,?)",
		      "sssssdiiissis", j->id, j->name, state, j->run_dir, j->spec_json, j->created,
		      (long long)j->world_size, (long long)j->sup_pid, (long long)j->sup_ticks,
		      j->user, j->device_type, (long long)j->device_count, j->devices);
	if (!rc)
		rc = run_stmt(st, err, "INSERT INTO events (job_id, time, state, reason) VALUES (?,?,?,?)",
			      "sdss", j->id, j->created, state, "created");
	return txn_end(st, own, rc, err);
}

static bool col_state(sqlite3_stmt *q, int i, enum job_state *out);

/*
 * May job id go to state to (store_int.h)?  Read inside the caller's
 * transaction.
 */
int store_job_edge(struct store *st, const char *id, enum job_state to, bool *ended,
		   struct tc_err *err)
{
	sqlite3_stmt *q;
	if (ended)
		*ended = false;
	if (sqlite3_prepare_v2(st->db, "SELECT state FROM jobs WHERE id=?", -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, id, -1, SQLITE_TRANSIENT);
	int r = sqlite3_step(q), rc = 0;
	enum job_state cur;
	if (r == SQLITE_ROW && col_state(q, 0, &cur) && !job_state_can(cur, to)) {
		if (ended && job_state_terminal(cur))
			*ended = true;
		else
			rc = tc_error(err, TC_EUSAGE, "job %s: cannot go from %s to %s", id,
				      job_state_name(cur), job_state_name(to));
	} else if (r != SQLITE_ROW && r != SQLITE_DONE)
		rc = db_fail(st, err, "read state");
	sqlite3_finalize(q);
	return rc;
}

static int set_state(struct store *st, const char *id, enum job_state state, int exit_code,
		     const char *root_cause, bool finish, const char *reason, struct tc_err *err)
{
	double now = now_wall();
	const char *name = job_state_name(state);
	bool own, ended = false;
	int rc = txn_begin(st, &own, err);
	if (rc)
		return rc;
	/*
	 * The diagram (state.h) is enforced here: an edge it does not draw is
	 * refused.  The first end recorded stays (jobs.h: jobs_finish); a later
	 * one changes nothing.
	 */
	if ((rc = store_job_edge(st, id, state, finish ? &ended : NULL, err)) || ended)
		return txn_end(st, own, rc, err);
	if (finish)
		rc = run_stmt(st, err,
			      "UPDATE jobs SET state=?, exit_code=?, root_cause=?, ended=? WHERE id=?",
			      "sisds", name, (long long)exit_code, root_cause, now, id);
	else if (state == JOB_RUNNING)
		rc = run_stmt(st, err,
			      "UPDATE jobs SET state=?, started=COALESCE(started, ?) WHERE id=?", "sds",
			      name, now, id);
	else
		rc = run_stmt(st, err, "UPDATE jobs SET state=? WHERE id=?", "ss", name, id);
	if (!rc)
		rc = run_stmt(st, err, "INSERT INTO events (job_id, time, state, reason) VALUES (?,?,?,?)",
			      "sdss", id, now, name, reason ? reason : "");
	return txn_end(st, own, rc, err);
}

int store_job_event(struct store *st, const char *id, const char *reason, struct tc_err *err)
{
	/* the job's state as it is: an event that is not a change of state */
	return run_stmt(st, err,
			"INSERT INTO events (job_id, time, state, reason)"
			" SELECT id, ?, state, ? FROM jobs WHERE id=?",
			"dss", now_wall(), reason ? reason : "", id);
}

int store_job_set_state(struct store *st, const char *id, enum job_state state,
			const char *reason, struct tc_err *err)
{
	return set_state(st, id, state, -1, NULL, false, reason, err);
}

int store_job_finish(struct store *st, const char *id, enum job_state state, int exit_code,
		     const char *root_cause, const char *reason, struct tc_err *err)
{
	return set_state(st, id, state, exit_code, root_cause, true, reason, err);
}

int store_job_set_restarts(struct store *st, const char *id, int restarts, struct tc_err *err)
{
	return run_stmt(st, err, "UPDATE jobs SET restarts=? WHERE id=?", "is", (long long)restarts,
			id);
}

int store_job_set_supervisor(struct store *st, const char *id, pid_t pid,
			     unsigned long long ticks, struct tc_err *err)
{
	return run_stmt(st, err, "UPDATE jobs SET sup_pid=?, sup_ticks=? WHERE id=?", "iis",
			(long long)pid, (long long)ticks, id);
}

static int worker_insert(struct store *st, const char *job, int attempt, int rank, int local_rank,
			 pid_t pid, double started, struct tc_err *err)
{
	return run_stmt(st, err,
			"INSERT OR REPLACE INTO workers (job_id, attempt, rank, local_rank, pid, started)"
			" VALUES (?,?,?,?,?,?)",
			"siiiid", job, (long long)attempt, (long long)rank, (long long)local_rank,
			(long long)pid, started);
}

int store_worker_start(struct store *st, const char *job, int attempt, int rank, int local_rank,
		       pid_t pid, struct tc_err *err)
{
	return worker_insert(st, job, attempt, rank, local_rank, pid, now_wall(), err);
}

int store_job_started(struct store *st, const struct store_start *s, struct tc_err *err)
{
	bool own;
	int rc = txn_begin(st, &own, err);
	if (!rc && s->create)
		rc = store_job_create(st, s->create, err);
	for (size_t i = 0; !rc && i < s->nworkers; i++) {
		const struct worker_row *w = &s->workers[i];
		rc = worker_insert(st, s->job_id, s->attempt, w->rank, w->local_rank, w->pid,
				   w->started, err);
	}
	if (!rc && s->why)
		rc = set_state(st, s->job_id, JOB_RUNNING, -1, NULL, false, s->why, err);
	return txn_end(st, own, rc, err);
}

int store_worker_end(struct store *st, const char *job, int attempt, int rank, int exit_code,
		     int sig, struct tc_err *err)
{
	return run_stmt(st, err,
			"UPDATE workers SET exit_code=?, signal=?, ended=? WHERE job_id=? AND attempt=?"
			" AND rank=?",
			"iidsii", (long long)exit_code, (long long)sig, now_wall(), job,
			(long long)attempt, (long long)rank);
}

int store_begin(struct store *st, struct tc_err *err)
{
	return exec_sql(st, "BEGIN IMMEDIATE", err);
}

int store_read_begin(struct store *st, struct tc_err *err)
{
	return exec_sql(st, "BEGIN", err);
}

int store_commit(struct store *st, int rc, struct tc_err *err)
{
	return txn_end(st, true, rc, err);
}

static char *col_text(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? xstrdup((const char *)t) : NULL;
}

/* The state in column i; false for a word jobs/state.h does not know. */
static bool col_state(sqlite3_stmt *q, int i, enum job_state *out)
{
	const char *t = (const char *)sqlite3_column_text(q, i);
	*out = JOB_LOST;
	return t && job_state_parse(t, strlen(t), out);
}

/* The text of column i, SQLite's own (valid until the next step of q). */
static char *col_view(sqlite3_stmt *q, int i)
{
	return (char *)sqlite3_column_text(q, i);
}

static int read_job(sqlite3_stmt *q, struct job_row *j, char *(*text)(sqlite3_stmt *, int))
{
	memset(j, 0, sizeof(*j));
	j->id = text(q, 0);
	j->name = text(q, 1);
	bool known = col_state(q, 2, &j->state);
	j->run_dir = text(q, 3);
	j->spec_json = text(q, 4);
	j->created = sqlite3_column_double(q, 5);
	j->started = sqlite3_column_double(q, 6);
	j->ended = sqlite3_column_double(q, 7);
	j->exit_code = sqlite3_column_int(q, 8);
	j->root_cause = text(q, 9);
	j->restarts = sqlite3_column_int(q, 10);
	j->world_size = sqlite3_column_int(q, 11);
	j->sup_pid = (pid_t)sqlite3_column_int64(q, 12);
	j->sup_ticks = (unsigned long long)sqlite3_column_int64(q, 13);
	j->user = text(q, 14);
	j->priority = sqlite3_column_int(q, 15);
	j->preemptible = sqlite3_column_int(q, 16) != 0;
	j->device_type = text(q, 17);
	j->device_count = sqlite3_column_int(q, 18);
	j->device_want = text(q, 19);
	j->devices = text(q, 20);
	j->stop_reason = job_stop_parse((const char *)sqlite3_column_text(q, 21));
	j->managed = sqlite3_column_int(q, 22) != 0;
	j->backend = text(q, 23);
	j->slurm_job = text(q, 24);
	j->slurm_nodes = text(q, 25);
	j->slurm_state = text(q, 26);
	return known ? 0 : -1;
}

int store_read_job(sqlite3_stmt *q, struct job_row *j)
{
	return read_job(q, j, col_text);
}

int store_view_job(sqlite3_stmt *q, struct job_row *j)
{
	return read_job(q, j, col_view);
}

int store_query_jobs(struct store *st, sqlite3_stmt *q, struct job_row **out, size_t *nr,
		     struct tc_err *err)
{
	size_t alloc = 0;
	int r, rc = 0;
	*out = NULL;
	*nr = 0;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct job_row *j = &(*out)[(*nr)++];
		if (store_read_job(q, j) && !rc)
			rc = tc_error(err, TC_ESTORE, "database: job %s has state '%s', which this"
				      " trainctl does not know", j->id, sqlite3_column_text(q, 2));
	}
	if (!rc && r != SQLITE_DONE)
		rc = db_fail(st, err, "read jobs");
	if (rc) {
		job_rows_free(*out, *nr);
		*out = NULL;
		*nr = 0;
	}
	return rc;
}

static int query_jobs(struct store *st, const char *sql, const char *arg, struct job_row **out,
		      size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	if (arg && sqlite3_bind_text(q, 1, arg, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
		sqlite3_finalize(q);
		return db_fail(st, err, "read jobs");
	}
	int rc = store_query_jobs(st, q, out, nr, err);
	sqlite3_finalize(q);
	return rc;
}

void store_states_sql(struct sbuf *sql, unsigned states)
{
	sbuf_addch(sql, '(');
	for (int s = 0, n = 0; s < JOB_NSTATES; s++)
		if (states & (1u << s))
			sbuf_addf(sql, "%s'%s'", n++ ? "," : "", job_state_name((enum job_state)s));
	sbuf_addch(sql, ')');
}

unsigned store_terminal_states(void)
{
	unsigned set = 0;
	for (int s = 0; s < JOB_NSTATES; s++)
		if (job_state_terminal((enum job_state)s))
			set |= 1u << s;
	return set;
}

/* query_jobs with ?2 bound to user, or NULL (SQL NULL: "anyone's") */
static int query_jobs_of(struct store *st, const char *sql, const char *arg, const char *user,
			 struct job_row **out, size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	if (sqlite3_bind_text(q, 1, arg, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
	    (user ? sqlite3_bind_text(q, 2, user, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(q, 2)) !=
		    SQLITE_OK) {
		sqlite3_finalize(q);
		return db_fail(st, err, "read jobs");
	}
	int rc = store_query_jobs(st, q, out, nr, err);
	sqlite3_finalize(q);
	return rc;
}

/*
 * user's jobs whose id is LIKE pat (escaped with '\\'): at most one, or
 * TC_EUSAGE naming two when ref is ambiguous.
 */
static int jobs_like_of(struct store *st, const char *ref, const char *pat, const char *user,
			struct job_row **v, size_t *n, struct tc_err *err)
{
	int rc = query_jobs_of(st, "SELECT " STORE_JOB_COLS " FROM jobs WHERE id LIKE ?1 ESCAPE '\\'"
			       " AND (?2 IS NULL OR user = ?2) ORDER BY id DESC LIMIT 2",
			       pat, user, v, n, err);
	if (!rc && *n > 1)
		rc = tc_error(err, TC_EUSAGE, "job '%s' is ambiguous: %s, %s, ...", ref, (*v)[0].id,
			      (*v)[1].id);
	return rc;
}

/* Four hex digits: the random suffix of an id (store_new_job_id). */
static bool is_id_suffix(const char *ref)
{
	size_t n = 0;
	for (; ref[n]; n++)
		if (!isxdigit((unsigned char)ref[n]) || isupper((unsigned char)ref[n]))
			return false;
	return n == 4;
}

/*
 * The name of one of user's recent jobs a few edits from ref, or NULL: the
 * did-you-mean of "no job".  Only the user's own names, as the lookup.
 */
static char *nearest_job_name(struct store *st, const char *ref, const char *user)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT DISTINCT name FROM (SELECT name FROM jobs WHERE"
			       " (?1 IS NULL OR user = ?1) ORDER BY id DESC LIMIT 1000)",
			       -1, &q, NULL) != SQLITE_OK)
		return NULL;
	if ((user ? sqlite3_bind_text(q, 1, user, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(q, 1)) !=
	    SQLITE_OK) {
		sqlite3_finalize(q);
		return NULL;
	}
	char *best = NULL;
	size_t bestd = 3, len = strlen(ref); /* at most 2 edits, fewer than ref has letters */
	while (sqlite3_step(q) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(q, 0);
		if (!name)
			continue;
		size_t d = edit_distance(name, ref);
		if (d < bestd && d < len) {
			bestd = d;
			free(best);
			best = xstrdup(name);
		}
	}
	sqlite3_finalize(q);
	return best;
}

int store_job_get(struct store *st, const char *ref, struct job_row *out, struct tc_err *err)
{
	return store_job_get_of(st, ref, NULL, out, err);
}

int store_job_get_of(struct store *st, const char *ref, const char *user, struct job_row *out,
		     struct tc_err *err)
{
	struct job_row *v = NULL;
	size_t n = 0;
	int rc;
	if (!*ref)
		return tc_error(err, TC_EUSAGE, "empty job reference");
	/* a whole id is anyone's (the caller says 403 for another user's) */
	rc = query_jobs(st, "SELECT " STORE_JOB_COLS " FROM jobs WHERE id = ?1", ref, &v, &n, err);
	if (!rc && n == 0) {
		struct sbuf pat = SBUF_INIT;
		/* escape LIKE wildcards in the prefix */
		for (const char *c = ref; *c; c++) {
			if (*c == '%' || *c == '_' || *c == '\\')
				sbuf_addch(&pat, '\\');
			sbuf_addch(&pat, *c);
		}
		sbuf_addch(&pat, '%');
		/* prefixes and names only among user's jobs: nobody learns another's ids */
		rc = jobs_like_of(st, ref, pat.buf, user, &v, &n, err);
		sbuf_release(&pat);
		if (rc)
			goto out;
	}
	if (!rc && n == 0)
		rc = query_jobs_of(st, "SELECT " STORE_JOB_COLS " FROM jobs WHERE name = ?1"
				   " AND (?2 IS NULL OR user = ?2) ORDER BY id DESC LIMIT 1",
				   ref, user, &v, &n, err);
	if (!rc && n == 0 && is_id_suffix(ref)) {
		/* the id's random suffix alone (the part a user reads off `ps`) */
		struct sbuf pat = SBUF_INIT;
		sbuf_addf(&pat, "%%-%s", ref);
		rc = jobs_like_of(st, ref, pat.buf, user, &v, &n, err);
		sbuf_release(&pat);
		if (rc)
			goto out;
	}
	if (!rc && n == 0) {
		char *near = nearest_job_name(st, ref, user);
		if (near)
			rc = tc_error(err, TC_ENOTFOUND, "no job '%s' (did you mean '%s'?)", ref, near);
		else
			rc = tc_error(err, TC_ENOTFOUND, "no job '%s'", ref);
		free(near);
	}
	if (!rc) {
		*out = v[0];
		memset(&v[0], 0, sizeof(v[0]));
	}
out:
	job_rows_free(v, n);
	return rc;
}

int store_job_list(struct store *st, bool all, struct job_row **out, size_t *nr,
		   struct tc_err *err)
{
	struct sbuf sql = SBUF_INIT;
	sbuf_adds(&sql, "SELECT " STORE_JOB_COLS " FROM jobs");
	if (!all) {
		sbuf_adds(&sql, " WHERE state NOT IN ");
		store_states_sql(&sql, store_terminal_states());
		sbuf_adds(&sql, " OR id IN (SELECT id FROM jobs ORDER BY id DESC LIMIT 20)");
	}
	sbuf_adds(&sql, " ORDER BY id DESC");
	int rc = query_jobs(st, sql.buf, NULL, out, nr, err);
	sbuf_release(&sql);
	return rc;
}

int store_workers(struct store *st, const char *job, struct worker_row **out, size_t *nr,
		  struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT attempt, rank, local_rank, pid, exit_code, signal, started,"
			       " COALESCE(ended, 0) FROM workers WHERE job_id=? ORDER BY attempt, rank",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct worker_row *w = &(*out)[(*nr)++];
		w->attempt = sqlite3_column_int(q, 0);
		w->rank = sqlite3_column_int(q, 1);
		w->local_rank = sqlite3_column_int(q, 2);
		w->pid = (pid_t)sqlite3_column_int64(q, 3);
		w->exit_code = sqlite3_column_int(q, 4);
		w->signal = sqlite3_column_int(q, 5);
		w->started = sqlite3_column_double(q, 6);
		w->ended = sqlite3_column_double(q, 7);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		free(*out);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read workers");
	}
	return 0;
}

int store_events(struct store *st, const char *job, struct event_row **out, size_t *nr,
		 struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT time, state, reason FROM events WHERE job_id=? ORDER BY id", -1,
			       &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
	int r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct event_row *e = &(*out)[(*nr)++];
		e->time = sqlite3_column_double(q, 0);
		col_state(q, 1, &e->state); /* history: an unknown word reads as lost */
		e->reason = col_text(q, 2);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		event_rows_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read events");
	}
	return 0;
}

void job_row_release(struct job_row *j)
{
	if (!j)
		return;
	free(j->id);
	free(j->name);
	free(j->run_dir);
	free(j->spec_json);
	free(j->root_cause);
	free(j->user);
	free(j->device_type);
	free(j->device_want);
	free(j->devices);
	free(j->backend);
	free(j->slurm_job);
	free(j->slurm_nodes);
	free(j->slurm_state);
	memset(j, 0, sizeof(*j));
}

void job_rows_free(struct job_row *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		job_row_release(&v[i]);
	free(v);
}

void event_rows_free(struct event_row *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(v[i].reason);
	free(v);
}
