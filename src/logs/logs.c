/* logs.c -- print and follow rank logs; see logs.h. */
#include "logs/logs.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/upath.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/runpath.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct source {
	int rank;
	int fd;
	struct sbuf partial;
	off_t pos; /* the log's offset where partial begins */
	/* rank-N.times (logs.h): read as far as the lines printed need */
	int tfd;
	struct sbuf tbuf;      /* read, not parsed yet */
	long long t_cur;       /* the time of the lines at and after the entry passed, ms; -1 none */
	bool have_next;
	long long next_off, next_ms;
};

/* A line kept for --merge: printed once the round's lines are sorted by time. */
struct mline {
	long long ms;
	size_t seq;
	int rank;
	char *text; /* with its newline */
	size_t len;
};

struct printer {
	const struct logs_opts *o;
	FILE *out;
	struct mline *v;
	size_t n, alloc, seq;
};

static void source_init(struct source *s)
{
	s->fd = s->tfd = -1;
	s->pos = 0;
	s->t_cur = -1;
	s->have_next = false;
	sbuf_init(&s->partial, 0);
	sbuf_init(&s->tbuf, 0);
}

/* The next "OFFSET MS" entry of the times file into s->next_*; false when none is there yet. */
static bool next_time(struct source *s)
{
	for (;;) {
		char *nl = s->tbuf.len ? memchr(s->tbuf.buf, '\n', s->tbuf.len) : NULL;
		if (nl) {
			*nl = '\0';
			long long off, ms;
			int ok = sscanf(s->tbuf.buf, "%lld %lld", &off, &ms) == 2;
			sbuf_remove_front(&s->tbuf, (size_t)(nl - s->tbuf.buf) + 1);
			if (ok) {
				s->next_off = off;
				s->next_ms = ms;
				return true;
			}
			continue; /* a torn entry: the next one holds */
		}
		char buf[8192];
		ssize_t r = s->tfd >= 0 ? read(s->tfd, buf, sizeof(buf)) : 0;
		if (r <= 0)
			return false;
		/* an entry is a few dozen bytes: a file of the job's that is not one is not read whole */
		if (s->tbuf.len > 256)
			sbuf_reset(&s->tbuf);
		sbuf_add(&s->tbuf, buf, (size_t)r);
	}
}

/* The time of the line at offset off of the log, ms (-1: not known). */
static long long time_at(struct source *s, off_t off)
{
	while ((s->have_next || (s->have_next = next_time(s))) && s->next_off <= (long long)off) {
		s->t_cur = s->next_ms;
		s->have_next = false;
	}
	return s->t_cur;
}

/* "2026-11-28T12:14:21.123Z " (kubectl's --timestamps, to the ms), "- " when not known */
static void put_time(FILE *out, long long ms)
{
	if (ms < 0) {
		fputs("- ", out);
		return;
	}
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];
	if (!gmtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm)) {
		fputs("- ", out);
		return;
	}
	fprintf(out, "%s.%03lldZ ", buf, ms % 1000);
}

static void put_one(struct printer *pr, int rank, long long ms, const char *line, size_t len,
		    bool add_nl)
{
	if (pr->o->merge) {
		XGROW(pr->v, pr->n + 1, pr->alloc);
		struct mline *m = &pr->v[pr->n++];
		m->ms = ms;
		m->seq = pr->seq++;
		m->rank = rank;
		m->text = xmalloc(len + 1);
		memcpy(m->text, line, len);
		if (add_nl)
			m->text[len++] = '\n';
		m->len = len;
		return;
	}
	if (pr->o->timestamps)
		put_time(pr->out, ms);
	if (pr->o->prefix)
		fprintf(pr->out, "[%d] ", rank);
	fwrite(line, 1, len, pr->out);
	if (add_nl)
		fputc('\n', pr->out);
}

static int cmp_mline(const void *a, const void *b)
{
	const struct mline *x = a, *y = b;
	if (x->ms != y->ms)
		return x->ms < y->ms ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* --merge: the lines read so far, by time (ties: the order read, rank by rank) */
static void flush_merged(struct printer *pr)
{
	if (pr->n)
		qsort(pr->v, pr->n, sizeof(*pr->v), cmp_mline);
	for (size_t i = 0; i < pr->n; i++) {
		if (pr->o->timestamps)
			put_time(pr->out, pr->v[i].ms);
		fprintf(pr->out, "[%d] ", pr->v[i].rank);
		fwrite(pr->v[i].text, 1, pr->v[i].len, pr->out);
		free(pr->v[i].text);
	}
	pr->n = 0;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int logs_open_dir(const char *run_dir, int *fd, uid_t *owner, struct tc_err *err)
{
	int rd = -1;
	struct sbuf leaf = SBUF_INIT;
	*fd = -1;
	run_leaf(&leaf, RUN_LOGS, 0);
	int rc = upath_run_dir(run_dir, UPATH_ANY, &rd, owner, err);
	if (!rc)
		rc = upath_dir(rd, leaf.buf, *owner, fd, err);
	if (rd >= 0)
		close(rd);
	sbuf_release(&leaf);
	return rc;
}

/* Ranks that have a rank-<r>.log in the folder dfd, sorted. */
static int find_ranks(int dfd, uid_t owner, int **out, size_t *nr)
{
	struct strvec names = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	int rc = upath_list(dfd, ".", owner, &names, &err);
	tc_err_release(&err);
	if (rc)
		return -1;
	for (size_t i = 0; i < names.nr; i++) {
		int r;
		if (run_is_rank_log(names.v[i], &r)) {
			XGROW(*out, *nr + 1, alloc);
			(*out)[(*nr)++] = r;
		}
	}
	strvec_clear(&names);
	if (*nr) /* qsort(NULL, 0) is undefined behaviour (UBSan aborts on it) */
		qsort(*out, *nr, sizeof(int), cmp_int);
	return 0;
}

/* rank's log in the folder dfd: fd, or -1 with errno (ENOENT: not there yet). */
static int open_rank(int dfd, uid_t owner, int rank, struct sbuf *name, struct tc_err *err)
{
	sbuf_reset(name);
	run_leaf(name, RUN_RANK_LOG, rank);
	int fd = -1;
	int rc = upath_open(dfd, name->buf, owner, &fd, err);
	if (rc)
		errno = rc == TC_ENOTFOUND ? ENOENT : ELOOP;
	return fd;
}

bool logs_was_cut(int dfd, int rank, int fd)
{
	struct sbuf name = SBUF_INIT;
	struct stat now, held;
	run_leaf(&name, RUN_RANK_LOG, rank);
	bool cut = fstatat(dfd, name.buf, &now, AT_SYMLINK_NOFOLLOW) == 0 && fstat(fd, &held) == 0 &&
		   (now.st_ino != held.st_ino || now.st_dev != held.st_dev);
	sbuf_release(&name);
	return cut;
}

int logs_after_cut(int dfd, uid_t owner, int rank, int *fd, off_t *off, struct tc_err *err)
{
	struct stat old, cur;
	bool have_old = fstat(*fd, &old) == 0;
	close(*fd);
	struct sbuf name = SBUF_INIT, rec = SBUF_INIT;
	*fd = open_rank(dfd, owner, rank, &name, err);
	int rc = *fd < 0 ? (err && err->code ? err->code : TC_ENOTFOUND) : 0;
	off_t at = 0;
	sbuf_reset(&name);
	run_leaf(&name, RUN_RANK_CUT, rank);
	struct tc_err e2 = TC_ERR_INIT;
	unsigned long long oino, nino;
	long long osize, head, mlen, keep, db, dl;
	if (!rc && fstat(*fd, &cur) == 0 && upath_read(dfd, name.buf, owner, 4096, &rec, &e2) == 0 &&
	    sscanf(rec.buf, "%llu %lld %llu %lld %lld %lld %lld %lld", &oino, &osize, &nino, &head,
		   &mlen, &keep, &db, &dl) == 8 && head >= 0 && mlen > 0) {
		at = (off_t)head; /* not this cut's record: from the marker on */
		if (*off <= (off_t)head)
			at = *off; /* still in the head, the same in every file */
		else if (have_old && oino == (unsigned long long)old.st_ino &&
		    nino == (unsigned long long)cur.st_ino && osize == (long long)*off &&
		    osize >= keep)
			at = (off_t)(head + mlen + (osize - keep));
		if (at > cur.st_size)
			at = (off_t)head;
	}
	tc_err_release(&e2);
	sbuf_release(&rec);
	sbuf_release(&name);
	*off = at;
	return rc;
}

int logs_ranks(const char *run_dir, int **ranks, size_t *n, struct tc_err *err)
{
	int dfd;
	uid_t owner;
	*ranks = NULL;
	*n = 0;
	int rc = logs_open_dir(run_dir, &dfd, &owner, err);
	if (rc)
		return rc;
	if (find_ranks(dfd, owner, ranks, n) < 0)
		rc = tc_error(err, TC_ENOTFOUND, "cannot list the logs of the job");
	close(dfd);
	return rc;
}

int logs_has_worker_log(const char *run_dir, long rank, struct tc_err *err)
{
	int *ranks = NULL;
	size_t nr = 0;
	int rc = logs_ranks(run_dir, &ranks, &nr, err);
	if (rc == TC_ENOTFOUND) {
		tc_err_release(err);
		rc = 0;
	}
	bool found = false;
	for (size_t i = 0; !rc && i < nr && !found; i++)
		found = rank < 0 || ranks[i] == rank;
	free(ranks);
	return rc ? rc : found;
}

int logs_read_supervisor(const char *run_dir, struct sbuf *out, struct tc_err *err)
{
	int dfd;
	uid_t owner;
	int rc = logs_open_dir(run_dir, &dfd, &owner, err);
	if (rc)
		return rc;
	struct sbuf leaf = SBUF_INIT;
	run_leaf(&leaf, RUN_SUPERVISOR_LOG, 0);
	rc = upath_read(dfd, leaf.buf, owner, LOGS_READ_MAX, out, err);
	sbuf_release(&leaf);
	close(dfd);
	return rc;
}

static void put_lines(struct printer *pr, struct source *s, const char *data, size_t len,
		      bool flush_partial)
{
	bool timed = pr->o->timestamps || pr->o->merge;
	sbuf_add(&s->partial, data, len);
	size_t start = 0;
	for (;;) {
		char *nl = memchr(s->partial.buf + start, '\n', s->partial.len - start);
		if (!nl)
			break;
		size_t end = (size_t)(nl - s->partial.buf) + 1;
		long long ms = timed ? time_at(s, s->pos + (off_t)start) : -1;
		put_one(pr, s->rank, ms, s->partial.buf + start, end - start, false);
		start = end;
	}
	sbuf_remove_front(&s->partial, start);
	s->pos += (off_t)start;
	if (flush_partial && s->partial.len) {
		long long ms = timed ? time_at(s, s->pos) : -1;
		put_one(pr, s->rank, ms, s->partial.buf, s->partial.len, true);
		s->pos += (off_t)s->partial.len;
		sbuf_reset(&s->partial);
	}
}

/* Offset where the last n lines of fd begin (0: all of it). */
static off_t tail_offset(int fd, long n)
{
	struct stat st;
	if (n < 0 || fstat(fd, &st) < 0)
		return 0;
	if (n == 0)
		return st.st_size;
	off_t pos = st.st_size;
	long seen = 0;
	char buf[8192];
	while (pos > 0) {
		size_t want = pos > (off_t)sizeof(buf) ? sizeof(buf) : (size_t)pos;
		pos -= (off_t)want;
		if (pread(fd, buf, want, pos) != (ssize_t)want)
			return 0;
		for (size_t i = want; i-- > 0;) {
			off_t off = pos + (off_t)i;
			/* the newline that ends the file closes the last line */
			if (buf[i] == '\n' && off != st.st_size - 1 && ++seen == n)
				return off + 1;
		}
	}
	return 0;
}

static void drain(struct printer *pr, struct source *s, bool final)
{
	char buf[65536];
	ssize_t r;
	while ((r = read(s->fd, buf, sizeof(buf))) > 0)
		put_lines(pr, s, buf, (size_t)r, false);
	if (final)
		put_lines(pr, s, NULL, 0, true);
}

/* rank's times file (logs.h) when there is one: without it the lines' times are not known */
static void open_times(int dfd, uid_t owner, struct source *s, struct sbuf *name)
{
	sbuf_reset(name);
	run_leaf(name, RUN_RANK_TIMES, s->rank);
	struct tc_err e = TC_ERR_INIT;
	if (upath_open(dfd, name->buf, owner, &s->tfd, &e))
		s->tfd = -1;
	tc_err_release(&e);
}

/*
 * Following every rank: a rank whose log appears later (a worker not started
 * yet, a node's log the hub has not received yet) joins, read from its start.
 */
static void add_new_ranks(int dfd, uid_t owner, int **ranks, struct source **src, size_t *nr)
{
	int *now = NULL;
	size_t nn = 0;
	if (find_ranks(dfd, owner, &now, &nn) < 0)
		return;
	for (size_t k = 0; k < nn; k++) {
		bool known = false;
		for (size_t i = 0; i < *nr && !known; i++)
			known = (*ranks)[i] == now[k];
		if (known)
			continue;
		*ranks = xrealloc(*ranks, (*nr + 1) * sizeof(**ranks));
		*src = xrealloc(*src, (*nr + 1) * sizeof(**src));
		(*ranks)[*nr] = now[k];
		source_init(&(*src)[*nr]); /* opened by the follow loop */
		(*src)[*nr].rank = now[k];
		(*nr)++;
	}
	free(now);
}

/* The log was cut while followed: go on in the new file (logs_after_cut); 0 or -1. */
static int follow_cut(int dfd, uid_t owner, struct source *s, struct sbuf *name)
{
	struct tc_err e = TC_ERR_INIT;
	off_t at = s->pos;
	int rc = logs_after_cut(dfd, owner, s->rank, &s->fd, &at, &e);
	tc_err_release(&e);
	if (rc || (s->pos = lseek(s->fd, at, SEEK_SET)) < 0) {
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1; /* opened again by the next round, from its start */
		s->pos = 0;
		return -1;
	}
	if (s->tfd >= 0) {
		/* the times were rebuilt with the log: read them again up to here */
		close(s->tfd);
		s->tfd = -1;
		sbuf_reset(&s->tbuf);
		s->have_next = false;
		s->t_cur = -1;
		open_times(dfd, owner, s, name);
	}
	return 0;
}

int logs_print(const struct logs_opts *o, FILE *out, struct tc_err *err)
{
	int *ranks = NULL;
	size_t nr = 0;
	int rc = 0, dfd = -1;
	uid_t owner;
	struct source *src = NULL;
	struct sbuf name = SBUF_INIT;
	if ((rc = logs_open_dir(o->run_dir, &dfd, &owner, err)))
		return rc;
	if (o->rank >= 0) {
		ranks = xmalloc(sizeof(int));
		ranks[0] = o->rank;
		nr = 1;
	} else if (find_ranks(dfd, owner, &ranks, &nr) < 0) {
		close(dfd);
		return tc_error(err, TC_ENOTFOUND, "cannot list the logs of the job");
	}
	src = xcalloc(nr ? nr : 1, sizeof(*src));
	for (size_t i = 0; i < nr; i++)
		source_init(&src[i]);
	struct printer pr = { .o = o, .out = out };
	bool timed = o->timestamps || o->merge;
	for (size_t i = 0; i < nr; i++) {
		struct tc_err e2 = TC_ERR_INIT;
		src[i].rank = ranks[i];
		src[i].fd = open_rank(dfd, owner, ranks[i], &name, &e2);
		if (src[i].fd < 0 && !(o->follow && errno == ENOENT)) {
			rc = tc_error(err, e2.code, "logs: %s", e2.msg);
			tc_err_release(&e2);
			goto out;
		}
		tc_err_release(&e2);
		if (src[i].fd >= 0 &&
		    (src[i].pos = lseek(src[i].fd, tail_offset(src[i].fd, o->tail), SEEK_SET)) < 0) {
			rc = tc_error_errno(err, TC_ESYS, "seek");
			goto out;
		}
		if (src[i].fd >= 0 && timed)
			open_times(dfd, owner, &src[i], &name);
	}
	for (size_t i = 0; i < nr; i++)
		if (src[i].fd >= 0)
			drain(&pr, &src[i], !o->follow);
	flush_merged(&pr);
	while (o->follow) {
		bool alive = o->alive ? o->alive(o->alive_data) : false;
		fflush(out);
		if (ferror(out)) {
			rc = tc_error(err, TC_ESYS, "cannot write the log");
			goto out;
		}
		if (o->rank < 0)
			add_new_ranks(dfd, owner, &ranks, &src, &nr);
		for (size_t i = 0; i < nr; i++) {
			if (src[i].fd < 0) {
				struct tc_err e2 = TC_ERR_INIT;
				src[i].fd = open_rank(dfd, owner, ranks[i], &name, &e2);
				tc_err_release(&e2);
				if (src[i].fd >= 0 && timed)
					open_times(dfd, owner, &src[i], &name);
			}
			bool cut = src[i].fd >= 0 && logs_was_cut(dfd, ranks[i], src[i].fd);
			if (src[i].fd >= 0)
				drain(&pr, &src[i], !alive || cut);
			if (cut && follow_cut(dfd, owner, &src[i], &name) == 0)
				drain(&pr, &src[i], !alive);
		}
		flush_merged(&pr);
		if (!alive)
			break;
		usleep(200 * 1000);
	}
out:
	for (size_t i = 0; i < nr; i++) {
		if (src[i].fd >= 0)
			close(src[i].fd);
		if (src[i].tfd >= 0)
			close(src[i].tfd);
		sbuf_release(&src[i].partial);
		sbuf_release(&src[i].tbuf);
	}
	for (size_t i = 0; i < pr.n; i++) /* what an error left unprinted */
		free(pr.v[i].text);
	free(pr.v);
	free(src);
	free(ranks);
	sbuf_release(&name);
	close(dfd);
	return rc;
}
