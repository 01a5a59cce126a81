/*
 * logcap.h -- a rank log with a size cap (spec logs.max_bytes): the writer
 * of logs/rank-R.log and its rank-R.times for one worker.
 *
 * Layout (what readers see, logs/logs.h): one file, always in order
 *
 *     HEAD    the first whole lines, at most max/2 bytes, never changed once cut
 *     MARKER  "[trainctl: N bytes (M lines) dropped here: the log passed
 *              logs.max_bytes 1.0 GiB]\n", counting everything dropped so far
 *     TAIL    the newest lines
 *
 * Below the cap the file is appended to as before.  When a write would take
 * it past max, the file is rebuilt beside itself (rank-R.log.new: head,
 * marker with the new counts, the newest max/4 bytes from a line start) and
 * renamed over the log, so a reader that opens the name always sees a whole
 * head + marker + tail, and the log stays within max + the marker's length;
 * the tail then grows again to max before the next cut (each byte is copied
 * about three times more, in exchange for readers that need no second file).
 * rank-R.times is rebuilt the same way (offsets of the new file), and
 * rank-R.cut, renamed into place before the log, tells a follower holding
 * the old file where to go on in the new one (logs_cut_resume, logs/logs.h):
 *
 *     OLD_INO OLD_SIZE NEW_INO HEAD MARKER_LEN KEEP_AT DROPPED_BYTES DROPPED_LINES
 *
 * KEEP_AT is the old file's offset of the new file's first tail byte (past
 * OLD_SIZE when the kept tail starts inside the write that caused the cut).
 *
 * Invariants: only whole lines are written (the workers' loop cuts them);
 * a line longer than the kept tail is kept by its last bytes; bytes and
 * lines counted in the marker are exactly those no longer in the file.
 * Metrics never depend on the file: the supervisor ingests each line as it
 * streams (workers.c), before and after a cut.  A cut that fails (a full
 * disk) leaves the log as it was and growing; it is tried again once the
 * log has grown by another max/4.
 */
#ifndef TC_LAUNCH_LOGCAP_H
#define TC_LAUNCH_LOGCAP_H

#include <stddef.h>

#include "core/err.h"

struct logcap {
	int dfd;              /* the run folder's logs/ */
	int fd;               /* rank-R.log, O_RDWR | O_APPEND; -1 when closed */
	int tfd;              /* rank-R.times (logs/logs.h), -1 when it could not be opened */
	int rank;
	long long max;        /* 0: no cap */
	long long size;       /* the log's size now */
	long long head;       /* the head's length once cut, -1 before */
	long long mlen;       /* the marker line's length once cut */
	long long dropped_bytes, dropped_lines;
	long long times_last; /* the last time written to rank-R.times, ms */
	long long retry_at;   /* after a failed cut: the size to try again at */
};

/* A closed logcap, for structs that are closed before they are opened. */
#define LOGCAP_CLOSED { .dfd = -1, .fd = -1, .tfd = -1, .head = -1 }

/*
 * Open rank's log in run_dir's logs/ for appending (created when missing,
 * never through a link), with the cap max bytes (0: none).  A log an earlier
 * attempt cut goes on with its head, marker and counts (rank-R.cut).
 */
int logcap_open(struct logcap *c, const char *run_dir, int rank, long long max,
		struct tc_err *err);

/*
 * Append data (whole lines) to the log, and its time to rank-R.times;
 * cuts the log first when it would pass the cap.  0, or -1 with errno
 * when the bytes could not be written: then none of them is in the log
 * (a short write is cut off), so the caller may keep them and try again.
 */
int logcap_write(struct logcap *c, const char *data, size_t len);

/* Close it (a closed one too); c is LOGCAP_CLOSED after. */
void logcap_close(struct logcap *c);

#endif
