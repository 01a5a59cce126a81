/*
 * store.c -- SQLite state: opening, transactions, the statement runner, and
 * jobs with their workers and events (store.h, store_jobs.h); the schema and
 * its migrations are store_schema.c.
 */
#include "store/store.h"
#include "store/store_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/runpath.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

int exec_sql(struct store *st, const char *sql, struct tc_err *err)
{
	char *msg = NULL;
	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		int rc = db_fail_msg(st, err, NULL, msg ? msg : "error");
		sqlite3_free(msg);
		return rc;
	}
	return 0;
}

int store_runs_private(const char *home, struct tc_err *err)
{
	struct sbuf runs = SBUF_INIT;
	struct stat sb;
	mode_t want = geteuid() == 0 ? 0711 : 0700;
	int rc = 0;
	run_runs(&runs, home);
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

/*
 * How a connection is opened: store_open's, read and write, with the
 * schema brought up to date; or store_open_read's fallbacks, read-only
 * with the schema as it is (OPEN_READ: with the -wal and -shm, which must
 * exist or be made; OPEN_FILE: the database file alone, immutable=1).
 */
enum open_how { OPEN_WRITE, OPEN_READ, OPEN_FILE };

/* "file:PATH?immutable=1", PATH escaped as a URI path (SQLite decodes %XX) */
static void immutable_uri(struct sbuf *uri, const char *path)
{
	sbuf_adds(uri, "file:");
	for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
		if (isalnum(*c) || strchr("/-._~", *c))
			sbuf_addch(uri, (char)*c);
		else
			sbuf_addf(uri, "%%%02X", *c);
	}
	sbuf_adds(uri, "?immutable=1");
}

/*
 * The connection to st->path, how says which, with SQLite's open flags
 * (SQLITE_OPEN_NOMUTEX or 0).  The first read is here, so a database that
 * is damaged or cannot be read says so now.
 */
static int connect_db(struct store *st, enum open_how how, int flags, struct tc_err *err)
{
	struct sbuf uri = SBUF_INIT;
	const char *name = st->path;
	if (how == OPEN_WRITE) {
		flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	} else {
		flags |= SQLITE_OPEN_READONLY;
		st->read_only = true;
	}
	if (how == OPEN_FILE) {
		immutable_uri(&uri, st->path);
		name = uri.buf;
		flags |= SQLITE_OPEN_URI;
	}
	int rc = 0;
	if (sqlite3_open_v2(name, &st->db, flags, NULL) != SQLITE_OK) {
		rc = tc_error(err, TC_ESTORE, "cannot open database '%s': %s", st->path,
			      st->db ? sqlite3_errmsg(st->db) : "out of memory");
		goto out;
	}
	sqlite3_busy_timeout(st->db, 10000);
	/*
	 * The last connection to close would checkpoint the WAL and fsync twice,
	 * tens of ms at the end of every command; SQLite's automatic checkpoints
	 * (every 1000 pages) keep the WAL bounded instead.
	 */
	if (sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL) != SQLITE_OK) {
		rc = tc_error(err, TC_ESTORE, "cannot configure database '%s': %s", st->path,
			      sqlite3_errmsg(st->db));
		goto out;
	}
	if (how == OPEN_WRITE) {
		if ((rc = wal_mode(st, err)) || (rc = refuse_read_only(st, err)) ||
		    (rc = exec_sql(st, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", err)))
			goto out;
		rc = store_migrate(st, err);
	} else {
		rc = store_schema_current(st, err);
	}
out:
	sbuf_release(&uri);
	return rc;
}

/* The primary SQLite code of st's last failure; 0 when it has no connection. */
static int fail_code(const struct store *st)
{
	int code = st->db ? sqlite3_errcode(st->db) & 0xff : 0;
	return code ? code : st->refused ? SQLITE_READONLY : 0; /* refuse_read_only */
}

/* Open home's database how says; *code: SQLite's code of a failure (0: none or not SQLite's). */
static int open_db(const char *home, enum open_how how, int flags, struct store **out, int *code,
		   struct tc_err *err)
{
	struct store *st = xcalloc(1, sizeof(*st));
	struct sbuf path = SBUF_INIT;
	*code = 0;
	st->home = xstrdup(home);
	int rc = mkdir_p(home, err);
	if (rc)
		goto fail;
	sbuf_addf(&path, "%s/trainctl.db", home);
	st->path = xstrdup(path.buf);
	if ((rc = store_private_files(home, path.buf, err)) || (rc = connect_db(st, how, flags, err)))
		goto fail;
	sbuf_release(&path);
	*out = st;
	return 0;
fail:
	*code = fail_code(st);
	if (!st->named) /* the message names the database already */
		tc_error_prefix(err, "%s", path.len ? path.buf : home);
	sbuf_release(&path);
	store_close(st);
	return rc;
}

int store_open(const char *home, struct store **out, struct tc_err *err)
{
	int code;
	return open_db(home, OPEN_WRITE, 0, out, &code, err);
}

int store_open_unlocked(const char *home, struct store **out, struct tc_err *err)
{
	int code;
	return open_db(home, OPEN_WRITE, SQLITE_OPEN_NOMUTEX, out, &code, err);
}

/* Is there WAL content that the database file alone would not show? */
static bool wal_has_frames(const char *home)
{
	struct sbuf wal = SBUF_INIT;
	struct stat sb;
	sbuf_addf(&wal, "%s/trainctl.db-wal", home);
	bool frames = stat(wal.buf, &sb) == 0 ? sb.st_size > 0 : errno != ENOENT;
	sbuf_release(&wal);
	return frames;
}

/*
 * A full disk must not hide the jobs (issue 28): opening for writing makes
 * the -wal and -shm and sizes the -shm, which a full file system refuses.
 * Then read-only: SQLite reads a WAL database whose -shm exists or can be
 * made (sqlite.org/wal.html, "Read-Only Databases"); failing that, when the
 * WAL holds nothing (another program's last close checkpointed it into the
 * database and removed it), the database file is the whole truth.  A WAL
 * with frames and no -shm stays an error: the file alone would be stale.
 */
int store_open_read(const char *home, struct store **out, struct tc_err *err)
{
	int code, rc = open_db(home, OPEN_WRITE, 0, out, &code, err);
	if (!rc || (code != SQLITE_FULL && code != SQLITE_READONLY && code != SQLITE_CANTOPEN &&
		    code != SQLITE_IOERR && code != SQLITE_PERM))
		return rc;
	/* the first error stands when no read-only way works: it says why */
	struct tc_err e2 = TC_ERR_INIT;
	int r2 = open_db(home, OPEN_READ, 0, out, &code, &e2);
	if (r2 && code != SQLITE_NOTADB && code != SQLITE_CORRUPT && !wal_has_frames(home)) {
		tc_err_release(&e2);
		r2 = open_db(home, OPEN_FILE, 0, out, &code, &e2);
	}
	if (!r2) {
		tc_err_release(err);
	} else if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
		tc_err_release(err);
		*err = e2; /* damaged: that is what to say */
		return r2;
	}
	tc_err_release(&e2);
	return r2 ? rc : 0;
}

bool store_read_only(const struct store *st)
{
	return st->read_only;
}

bool store_write_refused(const struct store *st)
{
	return st->refused;
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
	free(st->path);
	free(st->home);
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

/* Bind q's parameters by fmt (store_int.h); false when one did not bind. */
static bool bind_va(sqlite3_stmt *q, const char *fmt, va_list ap)
{
	bool ok = true;
	for (int i = 1; fmt[i - 1]; i++) {
		int r;
		switch (fmt[i - 1]) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			r = s ? sqlite3_bind_text(q, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(q, i);
			break;
		}
		case 'd':
			r = sqlite3_bind_double(q, i, va_arg(ap, double));
			break;
		case 'f': {
			double d = va_arg(ap, double);
			r = isfinite(d) ? sqlite3_bind_double(q, i, d) : sqlite3_bind_null(q, i);
			break;
		}
		case 'i':
			r = sqlite3_bind_int64(q, i, va_arg(ap, long long));
			break;
		default: /* a letter store_int.h does not list: the arguments after it are unknown */
			return false;
		}
		ok = ok && r == SQLITE_OK;
	}
	return ok;
}

static int prep_va(struct store *st, sqlite3_stmt **q, struct tc_err *err, const char *sql,
		   const char *fmt, va_list ap)
{
	*q = NULL;
	if (sqlite3_prepare_v2(st->db, sql, -1, q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	if (!bind_va(*q, fmt, ap)) {
		int rc = db_fail(st, err, "bind");
		sqlite3_finalize(*q);
		*q = NULL;
		return rc;
	}
	return 0;
}

int prep_stmt(struct store *st, sqlite3_stmt **q, struct tc_err *err, const char *sql,
	      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = prep_va(st, q, err, sql, fmt, ap);
	va_end(ap);
	return rc;
}

int run_stmt(struct store *st, struct tc_err *err, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *q;
	va_list ap;
	va_start(ap, fmt);
	int rc = prep_va(st, &q, err, sql, fmt, ap);
	va_end(ap);
	if (rc)
		return rc;
	int r = sqlite3_step(q);
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
	if (!rc) /* its devices' interval, in the same transaction (store_usage.h) */
		rc = store_usage_edge(st, id, state, now, err);
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

char *col_dup(sqlite3_stmt *q, int i)
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
	return read_job(q, j, col_dup);
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
	int rc = prep_stmt(st, &q, err, sql, arg ? "s" : "", arg);
	if (rc)
		return rc;
	rc = store_query_jobs(st, q, out, nr, err);
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
	int rc = prep_stmt(st, &q, err, sql, "ss", arg, user);
	if (rc)
		return rc;
	rc = store_query_jobs(st, q, out, nr, err);
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
	struct tc_err ignored = TC_ERR_INIT;
	int rc = prep_stmt(st, &q, &ignored,
			   "SELECT DISTINCT name FROM (SELECT name FROM jobs WHERE"
			   " (?1 IS NULL OR user = ?1) ORDER BY id DESC LIMIT 1000)",
			   "s", user);
	tc_err_release(&ignored); /* a hint only: without it, "no job" stands alone */
	if (rc)
		return NULL;
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
	int r = prep_stmt(st, &q, err,
			  "SELECT attempt, rank, local_rank, pid, exit_code, signal, started,"
			  " COALESCE(ended, 0) FROM workers WHERE job_id=? ORDER BY attempt, rank",
			  "s", job);
	if (r)
		return r;
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
	int r = prep_stmt(st, &q, err,
			  "SELECT time, state, reason FROM events WHERE job_id=? ORDER BY id", "s",
			  job);
	if (r)
		return r;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct event_row *e = &(*out)[(*nr)++];
		e->time = sqlite3_column_double(q, 0);
		col_state(q, 1, &e->state); /* history: an unknown word reads as lost */
		e->reason = col_dup(q, 2);
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
