/*
 * fault_io.c -- an I/O fault injector for the tests (LD_PRELOAD; built by
 * the test build as <build>/fault-io/libfault_io.so).  It makes the Nth
 * call of one I/O operation fail with a chosen errno, as SQLite's own test
 * suite does to its VFS, so that a test can walk N over every call a run
 * makes (tests/e2e/test_fault_sweep.py, docs/reliability.md).
 *
 *   TC_FAULT_OP      write | pwrite | fsync | fdatasync | rename | open | openat
 *                    (open also covers open64, creat and fopen; openat
 *                    openat64; pwrite pwrite64; rename renameat/renameat2)
 *   TC_FAULT_N       the call of that op, counted from 1 in each process
 *                    (a forked child counts from 0 again), that fails
 *   TC_FAULT_ERRNO   ENOSPC (default) | EIO | EDQUOT, or a number
 *   TC_FAULT_PERSIST 1: every call from the Nth on fails, not only the Nth
 *   TC_FAULT_PATH    only calls on a path containing this string count
 *                    (for write and fsync: the path the fd is open on)
 *   TC_FAULT_LOG     a folder: each process keeps there a file
 *                    "<pid>.<n>" with one line "<counts> <argv>" (its
 *                    calls of each op so far, rewritten at each call, so
 *                    a clean run tells the sweep how far N goes), and an
 *                    injection appends "<op> <N> <errno> <pid> <path>" to
 *                    "injected"
 *
 * Without TC_FAULT_OP nothing fails; calls are still counted.  Never
 * sanitized: with an ASan trainctl, put the ASan runtime first in
 * LD_PRELOAD (or set ASAN_OPTIONS=verify_asan_link_order=0); either way the
 * real functions are found with dlsym(RTLD_NEXT), so ASan's interceptors
 * and this library each see the call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

enum op { OP_WRITE, OP_PWRITE, OP_FSYNC, OP_FDATASYNC, OP_RENAME, OP_OPEN, OP_OPENAT, NOPS };
static const char *const op_names[NOPS] = {
	"write", "pwrite", "fsync", "fdatasync", "rename", "open", "openat",
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int fault_op = -1;
static unsigned long fault_n;
static int fault_errno = ENOSPC;
static int fault_persist;
static const char *fault_path;
static const char *log_dir;

static unsigned long counts[NOPS];
static pid_t counts_pid;    /* the process the counts are of */
static int count_fd = -1;   /* its file in TC_FAULT_LOG */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define REAL(name) real_##name
#define DECLARE_REAL(ret, name, ...)                                                      \
	static ret (*real_##name)(__VA_ARGS__);                                           \
	static void resolve_##name(void)                                                  \
	{                                                                                 \
		if (!real_##name)                                                         \
			real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name);      \
	}

DECLARE_REAL(ssize_t, write, int, const void *, size_t)
DECLARE_REAL(ssize_t, pwrite, int, const void *, size_t, off_t)
DECLARE_REAL(ssize_t, pwrite64, int, const void *, size_t, off64_t)
DECLARE_REAL(int, fsync, int)
DECLARE_REAL(int, fdatasync, int)
DECLARE_REAL(int, rename, const char *, const char *)
DECLARE_REAL(int, renameat, int, const char *, int, const char *)
DECLARE_REAL(int, renameat2, int, const char *, int, const char *, unsigned)
DECLARE_REAL(int, open, const char *, int, ...)
DECLARE_REAL(int, open64, const char *, int, ...)
DECLARE_REAL(int, __open_2, const char *, int)
DECLARE_REAL(int, __open64_2, const char *, int)
DECLARE_REAL(int, creat, const char *, mode_t)
DECLARE_REAL(int, openat, int, const char *, int, ...)
DECLARE_REAL(int, openat64, int, const char *, int, ...)
DECLARE_REAL(int, __openat_2, int, const char *, int)
DECLARE_REAL(int, __openat64_2, int, const char *, int)
DECLARE_REAL(FILE *, fopen, const char *, const char *)
DECLARE_REAL(FILE *, fopen64, const char *, const char *)

static void init(void)
{
	const char *op = getenv("TC_FAULT_OP");
	const char *n = getenv("TC_FAULT_N");
	const char *e = getenv("TC_FAULT_ERRNO");
	const char *p = getenv("TC_FAULT_PERSIST");

	for (int i = 0; op && i < NOPS; i++)
		if (!strcmp(op, op_names[i]))
			fault_op = i;
	fault_n = n ? strtoul(n, NULL, 10) : 0;
	if (fault_n == 0)
		fault_op = -1;
	if (e && !strcmp(e, "EIO"))
		fault_errno = EIO;
	else if (e && !strcmp(e, "EDQUOT"))
		fault_errno = EDQUOT;
	else if (e && *e >= '0' && *e <= '9')
		fault_errno = atoi(e);
	fault_persist = p && *p == '1';
	fault_path = getenv("TC_FAULT_PATH");
	if (fault_path && !*fault_path)
		fault_path = NULL;
	log_dir = getenv("TC_FAULT_LOG");
	if (log_dir && !*log_dir)
		log_dir = NULL;
	resolve_write();
	resolve_pwrite();
	resolve_open();
}

/* A child forked while another thread held the lock must not wait on it;
 * its counts start again (count per process). */
static void after_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	memset(counts, 0, sizeof counts);
	counts_pid = getpid();
	if (count_fd >= 0)
		close(count_fd); /* the parent's file */
	count_fd = -1;
}

static void before_fork(void)
{
	pthread_mutex_lock(&lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void fault_io_init(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* The path fd is open on, for the path filter and the injection's line. */
static void fd_path(int fd, char *out, size_t size)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	n = readlink(link, out, size - 1);
	out[n < 0 ? 0 : n] = '\0';
}

/* dirfd/path as one path (for the filter only: a relative path under a
 * dirfd is matched against the dirfd's folder and the name). */
static void at_path(int dirfd, const char *path, char *out, size_t size)
{
	char dir[PATH_MAX];

	if (!path) {
		out[0] = '\0';
		return;
	}
	if (path[0] == '/' || dirfd == AT_FDCWD) {
		snprintf(out, size, "%s", path);
		return;
	}
	fd_path(dirfd, dir, sizeof dir);
	/* a longer path is cut short: it serves the filter only */
	size_t d = strlen(dir), p = strlen(path);
	if (d + 1 + p + 1 > size) {
		snprintf(out, size, "%s", path);
		return;
	}
	memcpy(out, dir, d);
	out[d] = '/';
	memcpy(out + d + 1, path, p + 1);
}

/* This process's counts file, opened on its first counted call (again in a
 * forked child, whose counts start from 0). */
static void write_counts(void)
{
	char line[512], name[PATH_MAX];
	size_t len = 0;
	int fd;

	if (!log_dir)
		return;
	if (count_fd < 0) {
		static unsigned seq;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		snprintf(name, sizeof name, "%s/%d.%ld%09ld.%u", log_dir, (int)getpid(),
			 (long)ts.tv_sec, ts.tv_nsec, seq++);
		count_fd = REAL(open)(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (count_fd < 0)
			return;
	}
	for (int i = 0; i < NOPS; i++)
		len += (size_t)snprintf(line + len, sizeof line - len, "%s=%010lu ", op_names[i],
					counts[i]);
	fd = REAL(open)("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		/* the argv, NULs made spaces: which process of the run this is */
		ssize_t n = read(fd, line + len, sizeof line - len - 2);
		close(fd);
		for (ssize_t i = 0; i < n; i++)
			if (line[len + (size_t)i] == '\0')
				line[len + (size_t)i] = ' ';
		if (n > 0)
			len += (size_t)n;
	}
	line[len++] = '\n';
	if (REAL(pwrite)(count_fd, line, len, 0) < 0)
		return;
	if (ftruncate(count_fd, (off_t)len) < 0)
		return;
}

static void note_injection(int op, unsigned long n, const char *path)
{
	char name[PATH_MAX], line[PATH_MAX + 128];
	int fd, len;

	if (!log_dir)
		return;
	snprintf(name, sizeof name, "%s/injected", log_dir);
	fd = REAL(open)(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	len = snprintf(line, sizeof line, "%s %lu %d %d %s\n", op_names[op], n, fault_errno,
		       (int)getpid(), path);
	if (len > 0 && REAL(write)(fd, line, (size_t)len) < 0)
		len = 0;
	close(fd);
}

/* Count a call of op on path; 1 when it is the one to fail (errno set). */
static int fault(int op, const char *path)
{
	unsigned long n;
	int fail;

	pthread_once(&once, init);
	if (fault_path && (!path || !strstr(path, fault_path)))
		return 0;
	pthread_mutex_lock(&lock);
	if (counts_pid != getpid()) {
		/* a forked child: its own counts and its own file */
		memset(counts, 0, sizeof counts);
		counts_pid = getpid();
		if (count_fd >= 0)
			close(count_fd);
		count_fd = -1;
	}
	n = ++counts[op];
	write_counts();
	fail = op == fault_op && (n == fault_n || (fault_persist && n > fault_n));
	pthread_mutex_unlock(&lock);
	if (!fail)
		return 0;
	note_injection(op, n, path ? path : "");
	errno = fault_errno;
	return 1;
}

static int fault_fd(int op, int fd)
{
	char path[PATH_MAX];

	pthread_once(&once, init);
	if (!fault_path && !log_dir && fault_op != op)
		return 0;
	fd_path(fd, path, sizeof path);
	return fault(op, path);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	resolve_write();
	if (fault_fd(OP_WRITE, fd))
		return -1;
	return REAL(write)(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	resolve_pwrite();
	if (fault_fd(OP_PWRITE, fd))
		return -1;
	return REAL(pwrite)(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
	resolve_pwrite64();
	if (fault_fd(OP_PWRITE, fd))
		return -1;
	return REAL(pwrite64)(fd, buf, n, off);
}

int fsync(int fd)
{
	resolve_fsync();
	if (fault_fd(OP_FSYNC, fd))
		return -1;
	return REAL(fsync)(fd);
}

int fdatasync(int fd)
{
	resolve_fdatasync();
	if (fault_fd(OP_FDATASYNC, fd))
		return -1;
	return REAL(fdatasync)(fd);
}

int rename(const char *from, const char *to)
{
	resolve_rename();
	if (fault(OP_RENAME, to) || (fault_path && !strstr(to, fault_path) && fault(OP_RENAME, from)))
		return -1;
	return REAL(rename)(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to)
{
	char path[PATH_MAX];

	resolve_renameat();
	at_path(tofd, to, path, sizeof path);
	(void)fromfd;
	(void)from;
	if (fault(OP_RENAME, path))
		return -1;
	return REAL(renameat)(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
	char path[PATH_MAX];

	resolve_renameat2();
	at_path(tofd, to, path, sizeof path);
	if (fault(OP_RENAME, path))
		return -1;
	return REAL(renameat2)(fromfd, from, tofd, to, flags);
}

/* open's mode is there only with O_CREAT or O_TMPFILE */
#define MODE_ARG(flags, mode)                                            \
	do {                                                             \
		if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
			va_list ap;                                      \
			va_start(ap, flags);                             \
			mode = (mode_t)va_arg(ap, int);                  \
			va_end(ap);                                      \
		}                                                        \
	} while (0)

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	MODE_ARG(flags, mode);
	resolve_open();
	if (fault(OP_OPEN, path))
		return -1;
	return REAL(open)(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;

	MODE_ARG(flags, mode);
	resolve_open64();
	if (fault(OP_OPEN, path))
		return -1;
	return REAL(open64)(path, flags, mode);
}

int __open_2(const char *path, int flags)
{
	resolve___open_2();
	if (fault(OP_OPEN, path))
		return -1;
	return REAL(__open_2)(path, flags);
}

int __open64_2(const char *path, int flags)
{
	resolve___open64_2();
	if (fault(OP_OPEN, path))
		return -1;
	return REAL(__open64_2)(path, flags);
}

int creat(const char *path, mode_t mode)
{
	resolve_creat();
	if (fault(OP_OPEN, path))
		return -1;
	return REAL(creat)(path, mode);
}

FILE *fopen(const char *path, const char *how)
{
	resolve_fopen();
	if (fault(OP_OPEN, path))
		return NULL;
	return REAL(fopen)(path, how);
}

FILE *fopen64(const char *path, const char *how)
{
	resolve_fopen64();
	if (fault(OP_OPEN, path))
		return NULL;
	return REAL(fopen64)(path, how);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	char full[PATH_MAX];
	mode_t mode = 0;

	MODE_ARG(flags, mode);
	resolve_openat();
	at_path(dirfd, path, full, sizeof full);
	if (fault(OP_OPENAT, full))
		return -1;
	return REAL(openat)(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	char full[PATH_MAX];
	mode_t mode = 0;

	MODE_ARG(flags, mode);
	resolve_openat64();
	at_path(dirfd, path, full, sizeof full);
	if (fault(OP_OPENAT, full))
		return -1;
	return REAL(openat64)(dirfd, path, flags, mode);
}

int __openat_2(int dirfd, const char *path, int flags)
{
	char full[PATH_MAX];

	resolve___openat_2();
	at_path(dirfd, path, full, sizeof full);
	if (fault(OP_OPENAT, full))
		return -1;
	return REAL(__openat_2)(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	char full[PATH_MAX];

	resolve___openat64_2();
	at_path(dirfd, path, full, sizeof full);
	if (fault(OP_OPENAT, full))
		return -1;
	return REAL(__openat64_2)(dirfd, path, flags);
}
