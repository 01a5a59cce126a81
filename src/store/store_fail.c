/*
 * store_fail.c -- an I/O error on the database in words: which file, what
 * sqlite was doing to it, what to do.  sqlite's own message says only
 * "disk I/O error" (the fault sweep, docs/reliability.md).
 */
#include "store/store_int.h"

#include <errno.h>
#include <string.h>

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
