/*
 * util.h -- small helpers shared by every module: numbers, time, files,
 * paths.  Everything here reports failure through struct tc_err.
 */
#ifndef TC_CORE_UTIL_H
#define TC_CORE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/err.h"
#include "core/sbuf.h"

/* Strict integer parse: whole string, base 10, within [min, max]. */
bool parse_long(const char *s, long min, long max, long *out);
bool parse_double(const char *s, double *out);
/*
 * A duration: one or more NUMBER UNIT parts, units d, h, m, s ("90m",
 * "2h", "1h30m", "45s"); a bare number is refused (seconds or Slurm's
 * minutes?).  Whole seconds in [1, max] into *out.
 */
bool parse_duration(const char *s, long max, long *out);
/* secs as parse_duration reads it back, in the largest unit that divides it ("90m", "2h", "61s"). */
void format_duration(struct sbuf *out, long secs);

/* Wall clock in seconds (with fraction) and a monotonic clock in ms. */
double now_wall(void);
int64_t now_mono_ms(void);
/* CLOCK_MONOTONIC ms from now, for pthread_cond_timedwait on a CLOCK_MONOTONIC condvar. */
struct timespec mono_deadline(int ms);
/* "2026-11-26T00:58:06Z" style (UTC) into out. */
void format_time_utc(struct sbuf *out, double t);
/* A byte count in binary units, "812 B", "286.0 MiB" (the one unit style of trainctl's output). */
void format_bytes(struct sbuf *out, double bytes);

/* mkdir -p with mode 0755. */
int mkdir_p(const char *path, struct tc_err *err);
/*
 * Read a whole file into out (appending): for files of the caller's own
 * (its spec, its state folder, /proc).  A path a user can write, or a file
 * a spec names that a server reads, goes through core/upath.h instead
 * (links refused, FIFOs and devices refused, a size cap).
 */
int read_file(const char *path, struct sbuf *out, struct tc_err *err);
/*
 * open(2) for a file in a folder the job's user can write (its logs): the
 * last component is never followed through a symlink (O_NOFOLLOW), a FIFO
 * cannot block the open (O_NONBLOCK, cleared after), and anything but a
 * regular file with one link is refused (a hard link would be another
 * file's name).  O_CLOEXEC is added.  fd, or -1 with errno (ELOOP for a
 * symlink, EINVAL for a non-regular or multiply linked file).
 */
int open_regular_nofollow(const char *path, int flags, mode_t mode);
/* The same for name in the folder dirfd (AT_FDCWD: path as above). */
int openat_regular_nofollow(int dirfd, const char *name, int flags, mode_t mode);
/* read_file through open_regular_nofollow. */
int read_file_nofollow(const char *path, struct sbuf *out, struct tc_err *err);
/*
 * Write data to path atomically (temp file + rename): readers see the old
 * file or the whole new one, never a part.  No fsync: run-folder files are
 * re-creatable, and an fsync costs tens of ms on some disks, which would
 * come straight out of a job's start and end.
 */
int write_file_atomic(const char *path, const void *data, size_t len, struct tc_err *err);
/* The same with the new file's mode (0600 for job.yaml, job.env). */
int write_file_atomic_mode(const char *path, const void *data, size_t len, mode_t mode,
			   struct tc_err *err);
/* write(2) until done, retrying on EINTR/partial writes; -1 on error. */
ssize_t write_all(int fd, const void *buf, size_t len);
bool path_exists(const char *path);
bool is_dir(const char *path);
/* Absolute form of path (relative ones against base, or the cwd if NULL). */
char *path_absolute(const char *path, const char *base);
/* The directory part of path ("." when none); heap string. */
char *path_dirname(const char *path);
const char *path_basename(const char *path);
/* Find an executable on PATH; heap string or NULL. */
char *which(const char *prog);
/* The absolute path of this process's own binary (/proc/self/exe); heap string, or NULL with errno. */
char *path_self_exe(void);

/*
 * $TRAINCTL_HOME, else ~/.trainctl ($HOME, else the account's home in
 * passwd); heap string, or NULL when there is no home at all.
 */
char *trainctl_home(void);

/* Levenshtein distance, for "did you mean" hints. */
size_t edit_distance(const char *a, const char *b);

/* "s" unless n is 1: "%d worker%s", n, plural_s(n) */
static inline const char *plural_s(long long n)
{
	return n == 1 ? "" : "s";
}

/* Process start time (clock ticks since boot, proc_stat_read in proc.h); 0 if gone. */
unsigned long long proc_start_ticks(pid_t pid);
/* Is pid alive and (if ticks != 0) the same process as recorded? */
bool proc_alive(pid_t pid, unsigned long long ticks);

#endif
