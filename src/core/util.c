/* util.c -- numbers, time, files and paths; see util.h. */
#include "core/util.h"
#include "core/proc.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool parse_long(const char *s, long min, long max, long *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool parse_double(const char *s, double *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno == ERANGE && !isinf(v))
		errno = 0; /* underflow to a tiny number is still a number */
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool parse_duration(const char *s, long max, long *out)
{
	if (!s || !*s)
		return false;
	long total = 0;
	char last = 0; /* units in decreasing order, each once */
	static const char units[] = "dhms";
	static const long mult[] = { 86400, 3600, 60, 1 };
	while (*s) {
		if (*s < '0' || *s > '9')
			return false;
		long v = 0;
		for (; *s >= '0' && *s <= '9'; s++) {
			if (v > (max - (*s - '0')) / 10)
				return false; /* past max, before it can overflow */
			v = v * 10 + (*s - '0');
		}
		const char *u = *s ? strchr(units, *s) : NULL;
		if (!u || (last && u <= strchr(units, last)))
			return false;
		last = *s++;
		long m = mult[u - units];
		if (v > (max - total) / m)
			return false;
		total += v * m;
	}
	if (total < 1)
		return false;
	*out = total;
	return true;
}

void format_duration(struct sbuf *out, long secs)
{
	/* the largest unit that divides it: 5400 is "90m", as a spec would say it */
	static const char units[] = "dhm";
	static const long mult[] = { 86400, 3600, 60 };
	for (int i = 0; i < 3; i++)
		if (secs > 0 && secs % mult[i] == 0) {
			sbuf_addf(out, "%ld%c", secs / mult[i], units[i]);
			return;
		}
	sbuf_addf(out, "%lds", secs);
}

double now_wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t now_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec mono_deadline(int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

void format_time_utc(struct sbuf *out, double t)
{
	time_t s = (time_t)t;
	struct tm tm;
	char buf[32];
	gmtime_r(&s, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	sbuf_adds(out, buf);
}

void format_bytes(struct sbuf *out, double bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;
	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	sbuf_addf(out, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

int mkdir_p(const char *path, struct tc_err *err)
{
	if (!*path) {
		/* the loop below starts past the first byte */
		errno = ENOENT;
		return tc_error_errno(err, TC_ESYS, "cannot create directory ''");
	}
	char *p = xstrdup(path);
	int rc = 0;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			rc = tc_error_errno(err, TC_ESYS, "cannot create directory '%s'", p);
			goto out;
		}
		*s = c;
		if (!c)
			break;
	}
	if (!is_dir(path))
		rc = tc_error(err, TC_ESYS, "'%s' exists and is not a directory", path);
out:
	free(p);
	return rc;
}

int open_regular_nofollow(const char *path, int flags, mode_t mode)
{
	return openat_regular_nofollow(AT_FDCWD, path, flags, mode);
}

int openat_regular_nofollow(int dirfd, const char *name, int flags, mode_t mode)
{
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
	if (fd < 0)
		return -1;
	struct stat sb;
	int e = fstat(fd, &sb) < 0 ? errno : 0;
	if (!e && (!S_ISREG(sb.st_mode) || sb.st_nlink != 1))
		e = EINVAL;
	if (e) {
		close(fd);
		errno = e;
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int read_fd(int fd, const char *path, struct sbuf *out, struct tc_err *err);

int read_file(const char *path, struct sbuf *out, struct tc_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, TC_ENOTFOUND, "cannot open '%s'", path);
	return read_fd(fd, path, out, err);
}

int read_file_nofollow(const char *path, struct sbuf *out, struct tc_err *err)
{
	int fd = open_regular_nofollow(path, O_RDONLY, 0);
	if (fd < 0)
		return tc_error_errno(err, TC_ENOTFOUND, "cannot open '%s'", path);
	return read_fd(fd, path, out, err);
}

static int read_fd(int fd, const char *path, struct sbuf *out, struct tc_err *err)
{
	for (;;) {
		sbuf_grow(out, 65536);
		ssize_t n = read(fd, out->buf + out->len, out->alloc - out->len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int rc = tc_error_errno(err, TC_ESYS, "cannot read '%s'", path);
			close(fd);
			return rc;
		}
		if (n == 0)
			break;
		out->len += (size_t)n;
		out->buf[out->len] = '\0';
	}
	close(fd);
	return 0;
}

ssize_t write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t left = len;
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		left -= (size_t)n;
	}
	return (ssize_t)len;
}

int write_file_atomic(const char *path, const void *data, size_t len, struct tc_err *err)
{
	return write_file_atomic_mode(path, data, len, 0644, err);
}

int write_file_atomic_mode(const char *path, const void *data, size_t len, mode_t mode,
			   struct tc_err *err)
{
	struct sbuf tmp = SBUF_INIT;
	int rc = 0;
	sbuf_addf(&tmp, "%s.tmp.%ld", path, (long)getpid());
	/* a new file, never one (or a link) someone put under the temp name */
	if (unlink(tmp.buf) < 0 && errno != ENOENT) {
		rc = tc_error_errno(err, TC_ESYS, "cannot create '%s'", tmp.buf);
		goto out;
	}
	int fd = open(tmp.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot create '%s'", tmp.buf);
		goto out;
	}
	if (write_all(fd, data, len) < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot write '%s'", tmp.buf);
		close(fd);
		unlink(tmp.buf);
		goto out;
	}
	if (close(fd) < 0 || rename(tmp.buf, path) < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot write '%s'", path);
		unlink(tmp.buf);
	}
out:
	sbuf_release(&tmp);
	return rc;
}

bool path_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *path_absolute(const char *path, const char *base)
{
	if (path[0] == '/')
		return xstrdup(path);
	struct sbuf sb = SBUF_INIT;
	if (base) {
		sbuf_adds(&sb, base);
	} else {
		char *cwd = getcwd(NULL, 0);
		sbuf_adds(&sb, cwd ? cwd : ".");
		free(cwd);
	}
	if (!strcmp(path, "."))
		return sbuf_detach(&sb);
	if (sb.len && sb.buf[sb.len - 1] != '/')
		sbuf_addch(&sb, '/');
	if (!strncmp(path, "./", 2))
		path += 2;
	sbuf_adds(&sb, path);
	return sbuf_detach(&sb);
}

char *path_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return xstrdup(".");
	if (slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

const char *path_basename(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

char *path_self_exe(void)
{
	for (size_t size = 256; size <= (1u << 20); size *= 2) {
		char *buf = xmalloc(size);
		ssize_t n = readlink("/proc/self/exe", buf, size);
		if (n > 0 && (size_t)n < size) {
			buf[n] = '\0';
			return buf;
		}
		free(buf);
		if (n <= 0)
			return NULL;
	}
	errno = ENAMETOOLONG;
	return NULL;
}

char *which(const char *prog)
{
	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0 ? xstrdup(prog) : NULL;
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	struct sbuf sb = SBUF_INIT;
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t n = colon ? (size_t)(colon - path) : strlen(path);
		sbuf_reset(&sb);
		sbuf_add(&sb, path, n);
		sbuf_addch(&sb, '/');
		sbuf_adds(&sb, prog);
		if (n && access(sb.buf, X_OK) == 0)
			return sbuf_detach(&sb);
		path += n + (colon ? 1 : 0);
	}
	sbuf_release(&sb);
	return NULL;
}

char *trainctl_home(void)
{
	const char *h = getenv("TRAINCTL_HOME");
	if (h && *h)
		return path_absolute(h, NULL);
	const char *home = getenv("HOME");
	if (!home || !*home) {
		/*
		 * never a shared folder such as /tmp: another user could create
		 * it first; the account's own home, else none
		 */
		struct passwd *pw = getpwuid(getuid());
		home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
	}
	if (!home)
		return NULL;
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/.trainctl", home);
	return sbuf_detach(&sb);
}

size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t *row = xcalloc(lb + 1, sizeof(*row));
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	size_t d = row[lb];
	free(row);
	return d;
}

unsigned long long proc_start_ticks(pid_t pid)
{
	struct proc_stat st;
	return proc_stat_read(pid, &st) == 0 ? st.start_ticks : 0;
}

bool proc_alive(pid_t pid, unsigned long long ticks)
{
	if (pid <= 0)
		return false;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	unsigned long long now = proc_start_ticks(pid);
	if (now == 0)
		return false;
	return ticks == 0 || now == ticks;
}
