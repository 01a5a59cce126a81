/*
 * store_fail.c -- a failure of the database in words: which file, what
 * sqlite was doing to it (an I/O error), what to do (a full disk, a damaged
 * file, a read-only one).  sqlite's own message says only
 * "disk I/O error" (the fault sweep, docs/reliability.md).
 */
#include "store/store_int.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

/* What sqlite was doing when the I/O error came (its extended code), or NULL. */
static const char *io_step(int ext)
{
	static const struct {
		int code;
		const char *step;
	} steps[] = {
		{SQLITE_IOERR_READ, "a read"},
		{SQLITE_IOERR_SHORT_READ, "a read"},
		{SQLITE_IOERR_WRITE, "a write"},
		{SQLITE_IOERR_FSYNC, "an fsync"},
		{SQLITE_IOERR_DIR_FSYNC, "an fsync of its folder"},
		{SQLITE_IOERR_TRUNCATE, "a truncate"},
		{SQLITE_IOERR_FSTAT, "a stat"},
		{SQLITE_IOERR_DELETE, "a delete"},
		{SQLITE_IOERR_SHMOPEN, "the open of its -shm"},
		{SQLITE_IOERR_SHMSIZE, "the sizing of its -shm"},
		{SQLITE_IOERR_SHMMAP, "the map of its -shm"},
		{SQLITE_IOERR_RDLOCK, "a lock"},
		{SQLITE_IOERR_LOCK, "a lock"},
		{SQLITE_IOERR_UNLOCK, "an unlock"},
	};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (steps[i].code == ext)
			return steps[i].step;
	return NULL;
}

int io_fail(struct store *st, struct tc_err *err, const char *what, const char *sqlite_msg)
{
	int ext = sqlite3_extended_errcode(st->db), sys = sqlite3_system_errno(st->db);
	const char *step = (ext & 0xff) == SQLITE_CANTOPEN ? "an open" : io_step(ext);
	/* sqlite reads errno late, after other calls may have replaced it:
	 * only the words of a failing disk are worth repeating */
	if (sys != EIO && sys != EROFS)
		sys = 0;
	return tc_error(err, TC_ESTORE, "database %s: %s failed (%s%s%s%ssqlite: %s): check the file"
			" system (its free space, `dmesg`), then try again; `trainctl doctor` checks"
			" the state folder", st->path, step ? step : "an I/O call", what ? what : "",
			what ? "; " : "", sys ? strerror(sys) : "", sys ? "; " : "", sqlite_msg);
}

int refuse_read_only(struct store *st, struct tc_err *err)
{
	if (sqlite3_db_readonly(st->db, "main") != 1)
		return 0;
	/* a writer on it would fail at every write, a server lose every job */
	st->refused = st->named = true;
	return tc_error(err, TC_ESTORE, "database %s: cannot open it for writing (sqlite opened it"
			" read-only): check its permissions and the file system (free space, quota,"
			" `dmesg`), then try again; `trainctl doctor` checks the state folder",
			st->path);
}

/* No block left for us on the file system holding home (an I/O error's likely cause). */
static bool fs_full(const char *home)
{
	struct statvfs fs;
	return home && statvfs(home, &fs) == 0 && fs.f_bavail == 0;
}

/*
 * Say what failed, in words a user can act on where sqlite's alone would not
 * do (db_fail, db_fail_msg: store_int.h).  sqlite_msg is sqlite's message of
 * the failure; what, the step that failed, or NULL (exec_sql's errors never
 * named one).
 */
int db_fail_msg(struct store *st, struct tc_err *err, const char *what,
		     const char *sqlite_msg)
{
	int code = sqlite3_errcode(st->db) & 0xff, sys = sqlite3_system_errno(st->db);
	bool full = code == SQLITE_FULL ||
		    (code == SQLITE_IOERR && (sys == ENOSPC || sys == EDQUOT || fs_full(st->home)));
	st->refused = full || code == SQLITE_READONLY ||
		      (code == SQLITE_IOERR && sys == EROFS);
	st->named = st->path && (full || code == SQLITE_NOTADB || code == SQLITE_CORRUPT ||
				 code == SQLITE_IOERR || code == SQLITE_CANTOPEN);
	if (st->named && !full && (code == SQLITE_IOERR || code == SQLITE_CANTOPEN))
		return io_fail(st, err, what, sqlite_msg);
	if (!st->named)
		return what ? tc_error(err, TC_ESTORE, "database: %s: %s", what, sqlite_msg)
			    : tc_error(err, TC_ESTORE, "database: %s", sqlite_msg);
	if (!full)
		return tc_error(err, TC_ESTORE, "database %s is damaged (sqlite: %s): move it aside and"
				" start again, or restore a copy; `trainctl doctor` checks the state"
				" folder", st->path, sqlite_msg);
	return tc_error(err, TC_ESTORE, "database %s: the file system holding %s is %s (sqlite: %s):"
			" free space there, then try again", st->path, st->home,
			sys == EDQUOT ? "over its quota" : "full", sqlite_msg);
}

int db_fail(struct store *st, struct tc_err *err, const char *what)
{
	return db_fail_msg(st, err, what, sqlite3_errmsg(st->db));
}
