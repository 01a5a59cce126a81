/* test_logcap.c -- a rank log's cap: head, marker, tail (launch/logcap.h), and its followers (logs.h) */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "jobs/runpath.h"
#include "launch/logcap.h"
#include "logs/logs.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh run folder with its logs/ under the test's tmpdir: heap path. */
static char *fresh_run(const char *name)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s/logs", test_tmpdir(), name);
	CHECK(mkdir_p(p.buf, NULL) == 0);
	sbuf_setlen(&p, p.len - 5);
	return sbuf_detach(&p);
}

/* A fresh run folder (heap path) with rank's log opened in c, capped at max. */
static char *opened(struct logcap *c, const char *name, int rank, long long max)
{
	char *run = fresh_run(name);
	CHECK_INT(logcap_open(c, run, rank, max, NULL), 0);
	return run;
}

static void read_log(const char *run, const char *leaf, struct sbuf *out)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/logs/%s", run, leaf);
	sbuf_reset(out);
	CHECK(read_file(p.buf, out, NULL) == 0);
	sbuf_release(&p);
}

struct parts {
	size_t head, marker_at, marker_len, tail; /* bytes */
	long long dropped_bytes, dropped_lines;
};

/* Split a cut log into head, marker and tail; false when it has no marker. */
static bool split(const struct sbuf *log, struct parts *p)
{
	const char *m = strstr(log->buf, "[trainctl: ");
	if (!m)
		return false;
	CHECK(m == log->buf || m[-1] == '\n');
	const char *nl = strchr(m, '\n');
	CHECK(nl != NULL);
	CHECK(sscanf(m, "[trainctl: %lld bytes (%lld lines) dropped here", &p->dropped_bytes,
		     &p->dropped_lines) == 2);
	CHECK(strstr(m, "the log passed logs.max_bytes ") < nl);
	CHECK(strstr(nl, "[trainctl: ") == NULL); /* one marker */
	p->head = p->marker_at = (size_t)(m - log->buf);
	p->marker_len = (size_t)(nl - m) + 1;
	p->tail = log->len - p->head - p->marker_len;
	return true;
}

static long long count_lines(const char *s, size_t n)
{
	long long k = 0;
	for (size_t i = 0; i < n; i++)
		k += s[i] == '\n';
	return k;
}

/* "line NNNNN\n" (11 bytes) for from .. from + n - 1, one write each */
static void write_lines(struct logcap *c, int from, int n)
{
	for (int i = from; i < from + n; i++) {
		char line[32];
		int k = snprintf(line, sizeof(line), "line %05d\n", i);
		CHECK_INT(logcap_write(c, line, (size_t)k), 0);
	}
}

TEST(no_cap_keeps_everything)
{
	struct logcap c;
	char *run = opened(&c, "nocap", 0, 0);
	write_lines(&c, 0, 2000);
	logcap_close(&c);
	struct sbuf log = SBUF_INIT;
	read_log(run, "rank-0.log", &log);
	CHECK_INT(log.len, 2000 * 11);
	CHECK(!strstr(log.buf, "[trainctl:"));
	sbuf_release(&log);
	free(run);
}

TEST(head_marker_tail_and_counts)
{
	struct logcap c;
	const long long max = 4096;
	char *run = opened(&c, "cut", 3, max);
	const int total = 3000;
	struct sbuf log = SBUF_INIT;
	struct parts p;
	for (int i = 0; i < total; i += 100) {
		write_lines(&c, i, 100);
		/* within the cap plus the marker at every moment */
		read_log(run, "rank-3.log", &log);
		CHECK((long long)log.len <= max + (split(&log, &p) ? (long long)p.marker_len : 0));
	}
	logcap_close(&c);
	read_log(run, "rank-3.log", &log);
	CHECK(split(&log, &p));
	CHECK((long long)(p.head + p.tail) <= max);
	CHECK(p.head <= (size_t)max / 2 && p.head > (size_t)max / 2 - 11);
	CHECK(!strncmp(log.buf, "line 00000\n", 11));           /* the first line */
	CHECK(!strcmp(log.buf + log.len - 11, "line 02999\n")); /* the last */
	CHECK(log.buf[p.head - 1] == '\n');
	CHECK(!strncmp(log.buf + p.head + p.marker_len, "line ", 5)); /* the tail starts at a line */
	/* the counts: nothing lost, nothing counted twice */
	CHECK_INT((long long)(p.head + p.tail) + p.dropped_bytes, (long long)total * 11);
	CHECK_INT(count_lines(log.buf, p.head) + p.dropped_lines +
			  count_lines(log.buf + p.head + p.marker_len, p.tail),
		  total);
	CHECK_CONTAINS(log.buf, "the log passed logs.max_bytes 4.0 KiB]\n");
	/* every time entry points at a line's start in the new file */
	struct sbuf t = SBUF_INIT;
	read_log(run, "rank-3.times", &t);
	long long prev = -1;
	for (const char *s = t.buf; *s; s = strchr(s, '\n') + 1) {
		long long off, ms;
		CHECK(sscanf(s, "%lld %lld", &off, &ms) == 2);
		CHECK(off >= prev && off < (long long)log.len);
		CHECK(off == 0 || log.buf[off - 1] == '\n');
		prev = off;
	}
	sbuf_release(&t);
	sbuf_release(&log);
	free(run);
}

TEST(a_line_longer_than_the_limit)
{
	struct logcap c;
	const long long max = 4096;
	char *run = opened(&c, "long", 0, max);
	CHECK_INT(logcap_write(&c, "first\n", 6), 0);
	struct sbuf big = SBUF_INIT;
	for (int i = 0; i < 10000; i++)
		sbuf_addch(&big, (char)('a' + i % 26));
	sbuf_addch(&big, '\n');
	CHECK_INT(logcap_write(&c, big.buf, big.len), 0);
	CHECK_INT(logcap_write(&c, "last\n", 5), 0);
	logcap_close(&c);
	struct sbuf log = SBUF_INIT;
	struct parts p;
	read_log(run, "rank-0.log", &log);
	CHECK(split(&log, &p));
	CHECK_INT(p.head, 6); /* the whole lines that fit: "first" */
	CHECK((long long)(p.head + p.tail) <= max);
	CHECK(!strcmp(log.buf + log.len - 5, "last\n"));
	CHECK_INT((long long)(p.head + p.tail) + p.dropped_bytes, 6 + (long long)big.len + 5);
	sbuf_release(&big);
	sbuf_release(&log);
	free(run);
}

TEST(a_first_line_longer_than_the_head)
{
	struct logcap c;
	char *run = opened(&c, "longfirst", 0, 4096);
	struct sbuf big = SBUF_INIT;
	for (int i = 0; i < 5000; i++)
		sbuf_addch(&big, 'x');
	sbuf_addch(&big, '\n');
	CHECK_INT(logcap_write(&c, big.buf, big.len), 0);
	logcap_close(&c);
	struct sbuf log = SBUF_INIT;
	struct parts p;
	read_log(run, "rank-0.log", &log);
	CHECK(split(&log, &p));
	CHECK_INT(p.head, 0);
	CHECK_INT(p.tail, 1024); /* its newest bytes */
	CHECK_INT(p.dropped_bytes, 5001 - 1024);
	CHECK_INT(p.dropped_lines, 0); /* its newline is kept */
	sbuf_release(&big);
	sbuf_release(&log);
	free(run);
}

TEST(a_later_attempt_goes_on_with_the_counts)
{
	char *run = fresh_run("again");
	struct logcap c;
	int written = 0;
	for (int attempt = 0; attempt < 3; attempt++) {
		CHECK_INT(logcap_open(&c, run, 1, 4096, NULL), 0);
		write_lines(&c, written, 1000);
		written += 1000;
		logcap_close(&c);
	}
	struct sbuf log = SBUF_INIT;
	struct parts p;
	read_log(run, "rank-1.log", &log);
	CHECK(split(&log, &p));
	CHECK_INT((long long)(p.head + p.tail) + p.dropped_bytes, (long long)written * 11);
	CHECK_INT(count_lines(log.buf, p.head) + p.dropped_lines +
			  count_lines(log.buf + p.head + p.marker_len, p.tail),
		  written);
	sbuf_release(&log);
	free(run);
}

/* A follower reading between writes sees every line once, in order, across every cut. */
TEST(a_follower_goes_on_across_cuts)
{
	struct logcap c;
	char *run = opened(&c, "follow", 0, 4096);
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/logs", run);
	int dfd = open(dir.buf, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	int fd = openat(dfd, "rank-0.log", O_RDONLY);
	CHECK(fd >= 0);
	off_t off = 0;
	struct sbuf seen = SBUF_INIT;
	int cuts = 0, markers = 0;
	char buf[8192];
	for (int i = 0; i < 5000; i++) {
		char line[32];
		int n = snprintf(line, sizeof(line), "line %05d\n", i);
		CHECK_INT(logcap_write(&c, line, (size_t)n), 0);
		if (i % 7)
			continue;
		bool cut = logs_was_cut(dfd, 0, fd);
		ssize_t r;
		while ((r = pread(fd, buf, sizeof(buf), off)) > 0) {
			sbuf_add(&seen, buf, (size_t)r);
			off += r;
		}
		if (cut) {
			cuts++;
			CHECK_INT(logs_after_cut(dfd, getuid(), 0, &fd, &off, NULL), 0);
			CHECK(fd >= 0);
			while ((r = pread(fd, buf, sizeof(buf), off)) > 0) {
				sbuf_add(&seen, buf, (size_t)r);
				off += r;
			}
		}
	}
	CHECK(cuts > 5);
	/* every line once, in order: the follower never saw a marker, nothing was dropped before it read */
	int want = 0;
	for (const char *s = seen.buf; *s; s = strchr(s, '\n') + 1) {
		int k;
		if (!strncmp(s, "[trainctl:", 10)) {
			markers++;
			continue;
		}
		CHECK(sscanf(s, "line %d", &k) == 1);
		CHECK_INT(k, want);
		want++;
	}
	CHECK_INT(markers, 0);
	CHECK(want >= 4995);
	close(fd);
	close(dfd);
	logcap_close(&c);
	sbuf_release(&seen);
	sbuf_release(&dir);
	free(run);
}

/*
 * A follower that read only the first line before many cuts: the rest of
 * the file it holds (the head and what followed), then the marker and the tail.
 */
TEST(a_slow_follower_gets_head_marker_tail)
{
	struct logcap c;
	char *run = opened(&c, "slow", 0, 4096);
	CHECK_INT(logcap_write(&c, "first\n", 6), 0);
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/logs", run);
	int dfd = open(dir.buf, O_RDONLY | O_DIRECTORY);
	int fd = openat(dfd, "rank-0.log", O_RDONLY);
	CHECK(dfd >= 0 && fd >= 0);
	char buf[8192];
	struct sbuf seen = SBUF_INIT;
	ssize_t r;
	off_t off = 0;
	while ((r = pread(fd, buf, sizeof(buf), off)) > 0) {
		sbuf_add(&seen, buf, (size_t)r);
		off += r;
	}
	write_lines(&c, 0, 3000);
	CHECK(logs_was_cut(dfd, 0, fd));
	while ((r = pread(fd, buf, sizeof(buf), off)) > 0) {
		sbuf_add(&seen, buf, (size_t)r);
		off += r;
	}
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(logs_after_cut(dfd, getuid(), 0, &fd, &off, &err), 0);
	struct sbuf log = SBUF_INIT;
	struct parts p;
	read_log(run, "rank-0.log", &log);
	CHECK(split(&log, &p));
	CHECK_INT(off, p.head); /* not this cut's follower: from the marker on */
	while ((r = pread(fd, buf, sizeof(buf), off)) > 0) {
		sbuf_add(&seen, buf, (size_t)r);
		off += r;
	}
	size_t rest = log.len - p.head;
	CHECK(!strncmp(seen.buf, log.buf, p.head)); /* the head first */
	CHECK(seen.len > rest && !strcmp(seen.buf + seen.len - rest, log.buf + p.head));
	/* and never a line twice */
	int prev = -1;
	for (const char *s = strstr(seen.buf, "line "); s; s = strstr(s + 1, "\nline ")) {
		int k;
		CHECK(sscanf(s + (*s == '\n'), "line %d", &k) == 1);
		CHECK(k > prev);
		prev = k;
	}
	close(fd);
	close(dfd);
	logcap_close(&c);
	sbuf_release(&log);
	sbuf_release(&seen);
	sbuf_release(&dir);
	free(run);
}
