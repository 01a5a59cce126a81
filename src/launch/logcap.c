/* logcap.c -- a rank log with a size cap: head, marker, tail (logcap.h). */
#include "launch/logcap.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/runpath.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK ((size_t)1 << 16)
#define TIMES_MAX ((long long)64 << 20) /* a times file past this is started afresh at a cut */

/* ---- opening ---- */

/* name in logs/ (dfd), never through a link, a regular file with one name; -1 with errno */
static int open_in(int dfd, const char *name, int flags)
{
	return openat_regular_nofollow(dfd, name, flags | O_APPEND, 0644);
}

/* A log an earlier attempt cut: its head, marker and counts from rank-R.cut. */
static void restore_cut(struct logcap *c)
{
	struct sbuf leaf = SBUF_INIT;
	run_leaf(&leaf, RUN_RANK_CUT, c->rank);
	int fd = openat(c->dfd, leaf.buf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	sbuf_release(&leaf);
	if (fd < 0)
		return;
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	struct stat sb;
	unsigned long long oino, nino;
	long long osize, head, mlen, keep, db, dl;
	if (n <= 0 || fstat(c->fd, &sb) < 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %lld %llu %lld %lld %lld %lld %lld", &oino, &osize, &nino, &head,
		   &mlen, &keep, &db, &dl) != 8 || nino != (unsigned long long)sb.st_ino ||
	    head < 0 || mlen <= 0 || head + mlen > c->size || db < 0 || dl < 0)
		return;
	c->head = head;
	c->mlen = mlen;
	c->dropped_bytes = db;
	c->dropped_lines = dl;
}

int logcap_open(struct logcap *c, const char *run_dir, int rank, long long max,
		struct tc_err *err)
{
	*c = (struct logcap)LOGCAP_CLOSED;
	c->rank = rank;
	c->max = max > 0 ? max : 0;
	struct sbuf p = SBUF_INIT;
	run_path(&p, run_dir, NULL, RUN_LOGS, 0);
	/* logs/ belongs to the job's user: a symlink there must not aim our writes */
	c->dfd = open(p.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->dfd < 0) {
		int rc = tc_error_errno(err, TC_ESYS, "cannot open %s", p.buf);
		sbuf_release(&p);
		return rc;
	}
	sbuf_reset(&p);
	run_leaf(&p, RUN_RANK_LOG, rank);
	c->fd = open_in(c->dfd, p.buf, O_RDWR | O_CREAT);
	struct stat sb;
	if (c->fd < 0 || fstat(c->fd, &sb) < 0) {
		int rc = tc_error_errno(err, TC_ESYS, "cannot open logs/%s", p.buf);
		sbuf_release(&p);
		logcap_close(c);
		return rc;
	}
	c->size = (long long)sb.st_size;
	sbuf_reset(&p);
	run_leaf(&p, RUN_RANK_TIMES, rank);
	c->tfd = open_in(c->dfd, p.buf, O_RDWR | O_CREAT); /* without it only the times are lost */
	sbuf_release(&p);
	restore_cut(c);
	return 0;
}

void logcap_close(struct logcap *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->tfd >= 0)
		close(c->tfd);
	if (c->dfd >= 0)
		close(c->dfd);
	*c = (struct logcap)LOGCAP_CLOSED;
}

/* ---- the body being cut: the log from `from` to its end, then the new write ---- */

struct body {
	int fd;
	long long from, fsize; /* the file's part: [from, fsize) */
	const char *data;      /* then these */
	size_t len;
	long long n;           /* the body's length */
};

/* k bytes of the body at off into buf; 0, or -1 with errno */
static int body_read(const struct body *b, long long off, char *buf, size_t k)
{
	long long fpart = b->fsize - b->from;
	while (k && off < fpart) {
		size_t want = (long long)k < fpart - off ? k : (size_t)(fpart - off);
		ssize_t r = pread(b->fd, buf, want, (off_t)(b->from + off));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (!r)
				errno = EIO; /* the log shrank under us */
			return -1;
		}
		buf += r;
		off += r;
		k -= (size_t)r;
	}
	if (k)
		memcpy(buf, b->data + (off - fpart), k);
	return 0;
}

/* The last '\n' in body[lo, hi): its offset, -1 none, -2 a read failed. */
static long long last_nl(const struct body *b, long long lo, long long hi, char *buf)
{
	while (hi > lo) {
		size_t k = hi - lo < (long long)CHUNK ? (size_t)(hi - lo) : CHUNK;
		if (body_read(b, hi - (long long)k, buf, k) < 0)
			return -2;
		const char *p = memrchr(buf, '\n', k);
		if (p)
			return hi - (long long)k + (p - buf);
		hi -= (long long)k;
	}
	return -1;
}

/* The first '\n' in body[lo, hi): its offset, -1 none, -2 a read failed. */
static long long first_nl(const struct body *b, long long lo, long long hi, char *buf)
{
	for (; lo < hi;) {
		size_t k = hi - lo < (long long)CHUNK ? (size_t)(hi - lo) : CHUNK;
		if (body_read(b, lo, buf, k) < 0)
			return -2;
		const char *p = memchr(buf, '\n', k);
		if (p)
			return lo + (p - buf);
		lo += (long long)k;
	}
	return -1;
}

/* The lines ('\n's) in body[lo, hi); -1 a read failed. */
static long long count_nl(const struct body *b, long long lo, long long hi, char *buf)
{
	long long n = 0;
	for (; lo < hi;) {
		size_t k = hi - lo < (long long)CHUNK ? (size_t)(hi - lo) : CHUNK;
		if (body_read(b, lo, buf, k) < 0)
			return -1;
		for (const char *p = buf; (p = memchr(p, '\n', k - (size_t)(p - buf))); p++)
			n++;
		lo += (long long)k;
	}
	return n;
}

/* body[lo, hi) appended to fd; 0 or -1 with errno */
static int body_copy(const struct body *b, long long lo, long long hi, int fd, char *buf)
{
	for (; lo < hi;) {
		size_t k = hi - lo < (long long)CHUNK ? (size_t)(hi - lo) : CHUNK;
		if (body_read(b, lo, buf, k) < 0 || write_all(fd, buf, k) < 0)
			return -1;
		lo += (long long)k;
	}
	return 0;
}

/* ---- times ---- */

/* rank-R.times gets "OFFSET MS" where a write of whole lines begins (logs.h): the log stays byte-exact */
static void note_time(struct logcap *c, long long ms)
{
	if (c->tfd < 0 || ms == c->times_last)
		return;
	char line[64];
	int n = snprintf(line, sizeof(line), "%lld %lld\n", c->size, ms);
	if (n > 0 && write_all(c->tfd, line, (size_t)n) < 0)
		errno = 0; /* best effort: `logs --timestamps` then shows the previous time */
	c->times_last = ms;
}

struct cutplan {
	long long head;  /* the new head's length */
	long long mlen;  /* the marker's */
	long long ts;    /* the body's first kept byte */
	long long now;   /* ms */
};

struct timeplace {
	long long tail_at; /* the new file's offset of the first kept byte */
	long long first_ms; /* the time of the first kept line, -1 not known */
	struct sbuf tail;
};

/* One "OFFSET MS" entry of the old log (or the new write's) placed in the cut log. */
static void place_time(const struct body *b, const struct cutplan *p, struct timeplace *t,
		       struct sbuf *out, long long off, long long ms)
{
	if (off < p->head) {
		sbuf_addf(out, "%lld %lld\n", off, ms);
		return;
	}
	if (off < b->from)
		return; /* the old marker's */
	long long boff = off - b->from;
	if (boff <= p->ts)
		t->first_ms = ms;
	else
		sbuf_addf(&t->tail, "%lld %lld\n", t->tail_at + boff - p->ts, ms);
}

/*
 * The times of the cut log into out: the head's entries as they were, the
 * marker's (now), the first kept line's (the last time at or before it) and
 * those after it, moved to the new offsets.
 */
static void cut_times(struct logcap *c, const struct body *b, const struct cutplan *p,
		      struct sbuf *out)
{
	struct sbuf old = SBUF_INIT;
	struct stat sb;
	if (c->tfd >= 0 && fstat(c->tfd, &sb) == 0 && sb.st_size > 0 && sb.st_size <= TIMES_MAX) {
		sbuf_grow(&old, (size_t)sb.st_size);
		ssize_t r = pread(c->tfd, old.buf, (size_t)sb.st_size, 0);
		if (r > 0)
			sbuf_setlen(&old, (size_t)r);
	}
	struct timeplace t = { p->head + p->mlen, -1, SBUF_INIT };
	const char *s = old.buf, *end = old.buf + old.len, *nl;
	for (; s < end && (nl = memchr(s, '\n', (size_t)(end - s))); s = nl + 1) {
		long long off, ms;
		if (sscanf(s, "%lld %lld", &off, &ms) == 2)
			place_time(b, p, &t, out, off, ms);
	}
	place_time(b, p, &t, out, b->fsize, p->now); /* the write that caused the cut */
	sbuf_addf(out, "%lld %lld\n", p->head, p->now);
	if (t.first_ms >= 0)
		sbuf_addf(out, "%lld %lld\n", t.tail_at, t.first_ms);
	sbuf_add(out, t.tail.buf, t.tail.len);
	sbuf_release(&t.tail);
	sbuf_release(&old);
}

/* text to a fresh leaf ".new" beside leaf, renamed over it; 0 or -1 with errno */
static int replace_small(int dfd, const char *leaf, const char *text, size_t len)
{
	struct sbuf tmp = SBUF_INIT;
	sbuf_addf(&tmp, "%s.new", leaf);
	int fd = openat(dfd, tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	int rc = fd < 0 ? -1 : 0;
	if (!rc && write_all(fd, text, len) < 0)
		rc = -1;
	int e = errno;
	if (fd >= 0 && close(fd) < 0 && !rc) {
		rc = -1;
		e = errno;
	}
	if (!rc && renameat(dfd, tmp.buf, dfd, leaf) < 0) {
		rc = -1;
		e = errno;
	}
	if (rc)
		unlinkat(dfd, tmp.buf, 0);
	sbuf_release(&tmp);
	errno = e;
	return rc;
}

/* ---- the cut ---- */

/* Where the cut goes: the head (first cut), the first kept byte, the counts; 0 or -1. */
static int plan_cut(struct logcap *c, const struct body *b, struct cutplan *p, long long *hstart,
		    char *buf)
{
	long long half = c->max / 2, keep = c->max / 4;
	*hstart = 0;
	p->head = c->head;
	if (p->head < 0) {
		/* the head is the whole lines within the first half: none when the first line is longer */
		long long nl = last_nl(b, 0, b->n < half ? b->n : half, buf);
		if (nl < -1)
			return -1;
		p->head = *hstart = nl + 1;
	}
	long long lo = b->n - keep > *hstart ? b->n - keep : *hstart;
	p->ts = lo;
	if (lo > *hstart) {
		/* the tail begins at a line; a line longer than the whole tail keeps its last bytes */
		long long nl = first_nl(b, lo - 1, b->n - 1, buf);
		if (nl < -1)
			return -1;
		if (nl >= 0)
			p->ts = nl + 1;
	}
	return 0;
}

static int cut(struct logcap *c, const char *data, size_t len)
{
	struct body b = { c->fd, c->head >= 0 ? c->head + c->mlen : 0, c->size, data, len, 0 };
	b.n = b.fsize - b.from + (long long)len;
	struct cutplan p = { .now = (long long)(now_wall() * 1000.0) };
	char *buf = xmalloc(CHUNK);
	struct sbuf marker = SBUF_INIT, times = SBUF_INIT, cutrec = SBUF_INIT;
	struct sbuf leaf = SBUF_INIT, tleaf = SBUF_INIT, cleaf = SBUF_INIT, tmp = SBUF_INIT;
	int nfd = -1, e = 0;
	long long hstart, nl;
	if (plan_cut(c, &b, &p, &hstart, buf) < 0 || (nl = count_nl(&b, hstart, p.ts, buf)) < 0)
		goto fail;
	long long dbytes = c->dropped_bytes + (p.ts - hstart), dlines = c->dropped_lines + nl;
	sbuf_addf(&marker, "[trainctl: %lld bytes (%lld lines) dropped here: the log passed "
			   "logs.max_bytes ", dbytes, dlines);
	format_bytes(&marker, (double)c->max);
	sbuf_adds(&marker, "]\n");
	p.mlen = (long long)marker.len;

	/* the new log beside the old: head, marker, tail */
	run_leaf(&leaf, RUN_RANK_LOG, c->rank);
	sbuf_addf(&tmp, "%s.new", leaf.buf);
	nfd = openat(c->dfd, tmp.buf, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
		     0644);
	struct body head = { c->fd, 0, c->size, NULL, 0, c->size };
	struct stat sb;
	if (nfd < 0 || body_copy(c->head >= 0 ? &head : &b, 0, p.head, nfd, buf) < 0 ||
	    write_all(nfd, marker.buf, marker.len) < 0 || body_copy(&b, p.ts, b.n, nfd, buf) < 0 ||
	    fstat(nfd, &sb) < 0)
		goto fail;
	struct stat osb;
	if (fstat(c->fd, &osb) < 0)
		goto fail;
	cut_times(c, &b, &p, &times);
	run_leaf(&tleaf, RUN_RANK_TIMES, c->rank);
	run_leaf(&cleaf, RUN_RANK_CUT, c->rank);
	sbuf_addf(&cutrec, "%" PRIuMAX " %lld %" PRIuMAX " %lld %lld %lld %lld %lld\n",
		  (uintmax_t)osb.st_ino, c->size, (uintmax_t)sb.st_ino, p.head, p.mlen,
		  b.from + p.ts, dbytes, dlines);
	/* the record first: a follower that sees the new log finds where to go on */
	if (replace_small(c->dfd, cleaf.buf, cutrec.buf, cutrec.len) < 0)
		goto fail;
	if (c->tfd >= 0 && replace_small(c->dfd, tleaf.buf, times.buf, times.len) < 0)
		errno = 0; /* the log still cuts: only --timestamps is off for the old lines */
	if (renameat(c->dfd, tmp.buf, c->dfd, leaf.buf) < 0)
		goto fail;
	close(c->fd);
	c->fd = nfd;
	c->size = (long long)sb.st_size;
	c->head = p.head;
	c->mlen = p.mlen;
	c->dropped_bytes = dbytes;
	c->dropped_lines = dlines;
	c->retry_at = 0;
	if (c->tfd >= 0) {
		close(c->tfd);
		c->tfd = open_in(c->dfd, tleaf.buf, O_RDWR | O_CREAT);
	}
	c->times_last = p.now;
	goto out;
fail:
	e = errno ? errno : EIO;
	if (nfd >= 0) {
		close(nfd);
		unlinkat(c->dfd, tmp.buf, 0);
	}
	nfd = -1;
out:
	free(buf);
	sbuf_release(&marker);
	sbuf_release(&times);
	sbuf_release(&cutrec);
	sbuf_release(&leaf);
	sbuf_release(&tleaf);
	sbuf_release(&cleaf);
	sbuf_release(&tmp);
	errno = e;
	return e ? -1 : 0;
}

int logcap_write(struct logcap *c, const char *data, size_t len)
{
	if (c->fd < 0) {
		errno = EBADF;
		return -1;
	}
	if (!len)
		return 0;
	long long after = c->size + (long long)len;
	if (c->max > 0 && after > c->max && after >= c->retry_at) {
		errno = 0;
		if (cut(c, data, len) == 0)
			return 0;
		/* not cut (a full disk): the bytes are kept whole; tried again later */
		c->retry_at = after + c->max / 4;
	}
	note_time(c, (long long)(now_wall() * 1000.0));
	if (write_all(c->fd, data, len) < 0) {
		/* all or nothing: a short write's part is cut off, so a caller that keeps
		 * the bytes to write later (a full disk, diskfull.c) never doubles them */
		int e = errno;
		struct stat sb;
		if (ftruncate(c->fd, (off_t)c->size) < 0 && fstat(c->fd, &sb) == 0)
			c->size = (long long)sb.st_size;
		errno = e;
		return -1;
	}
	c->size = after;
	return 0;
}
