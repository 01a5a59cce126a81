/*
 * logs.h -- reading a job's rank logs: the last N lines, or following them
 * while the job runs (`trainctl logs`).  Lines from several ranks get the
 * same "[r] " prefix as on the supervisor's console.
 */
#ifndef TC_LOGS_H
#define TC_LOGS_H

#include <stdbool.h>
#include <stdio.h>

#include "core/err.h"
#include "core/sbuf.h"

#include <sys/types.h>

/* Is the job still running?  Polled while following. */
typedef bool (*logs_alive_fn)(void *data);

struct logs_opts {
	/*
	 * The job's run folder.  Its logs/ is the account's: every part is
	 * opened from the run folder's descriptor with O_NOFOLLOW and checked
	 * to be the folder owner's (core/upath.h), so a logs/ or a rank log
	 * swapped for a link is refused, never read through.
	 */
	const char *run_dir;
	int rank;        /* -1: every rank_*.log found */
	long tail;       /* -1: everything */
	bool follow;
	bool prefix;     /* "[r] " before each line */
	logs_alive_fn alive;
	void *alive_data;
	/*
	 * --timestamps: each line after the time its rank wrote it
	 * ("2026-11-28T12:14:21.123Z ", "- " when not known).  --merge: the
	 * lines of every rank ordered by that time, each with "[r] " (while
	 * following: each round's lines).  The times come from the supervisor's
	 * rank-N.times next to each rank-N.log: "OFFSET MS" lines, the log's
	 * byte offset where one write of whole lines began and the wall time
	 * in ms; a line has the time of the last entry at or before its
	 * offset.  The rank logs themselves stay byte-exact.
	 */
	bool timestamps;
	bool merge;
};

int logs_print(const struct logs_opts *o, FILE *out, struct tc_err *err);

/*
 * A rank log with a cap (logs.max_bytes) is rebuilt beside itself and
 * renamed over its name when it passes the cap: head, a marker line of what
 * was dropped, the newest lines (launch/logcap.h).  A reader that opens the
 * name sees them in that order; a follower holding the old file goes on in
 * the new one:
 *
 * logs_was_cut: does rank's log in logs/ (dfd) name another file than fd?
 * Ask before reading fd to its end: a cut renames only after its last write
 * to the old file.
 *
 * logs_after_cut: fd was read to its end at *off; *fd becomes the file the
 * name holds now (the old one closed) and *off where to go on in it: the
 * same offset while that is in the head (never changed), just after what
 * was read when rank-R.cut records this very cut, else at the marker (the
 * tail again rather than a line lost); 0 without a record.  0, or a TC_E*
 * code when the new file cannot be opened (*fd is then -1).
 */
bool logs_was_cut(int dfd, int rank, int fd);
int logs_after_cut(int dfd, uid_t owner, int rank, int *fd, off_t *off, struct tc_err *err);

/* The ranks with a log in run_dir's logs/, sorted (heap array; none: NULL, 0). */
int logs_ranks(const char *run_dir, int **ranks, size_t *n, struct tc_err *err);

/*
 * Does run_dir's logs/ hold a worker log: rank's, or any rank's (rank < 0)?
 * 1 or 0 (no logs/ yet is 0), or a TC_E* code when logs/ cannot be read
 * (a link: refused).
 */
int logs_has_worker_log(const char *run_dir, long rank, struct tc_err *err);

/*
 * The job's logs/ folder, opened as logs_print does; *owner gets the
 * account every file in it must belong to.  fd is the caller's to close.
 */
int logs_open_dir(const char *run_dir, int *fd, uid_t *owner, struct tc_err *err);

/* Cap of a whole file read from logs/ in one piece (supervisor.log). */
#define LOGS_READ_MAX ((size_t)256 << 20)

/* logs/supervisor.log of run_dir, appended to out. */
int logs_read_supervisor(const char *run_dir, struct sbuf *out, struct tc_err *err);

#endif
