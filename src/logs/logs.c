/* logs.c -- print and follow rank logs; see logs.h. */
#include "logs/logs.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/upath.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct source {
	int rank;
	int fd;
	struct sbuf partial;
};

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int logs_open_dir(const char *run_dir, int *fd, uid_t *owner, struct tc_err *err)
{
	int rd = -1;
	*fd = -1;
	int rc = upath_run_dir(run_dir, UPATH_ANY, &rd, owner, err);
	if (!rc)
		rc = upath_dir(rd, "logs", *owner, fd, err);
	if (rd >= 0)
		close(rd);
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
		long r;
		const char *n = names.v[i];
		size_t len = strlen(n);
		if (strncmp(n, "rank-", 5) || len < 10 || strcmp(n + len - 4, ".log"))
			continue;
		char *num = xstrndup(n + 5, len - 9);
		if (parse_long(num, 0, 1 << 20, &r)) {
			XGROW(*out, *nr + 1, alloc);
			(*out)[(*nr)++] = (int)r;
		}
		free(num);
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
	sbuf_addf(name, "rank-%d.log", rank);
	int fd = -1;
	int rc = upath_open(dfd, name->buf, owner, &fd, err);
	if (rc)
		errno = rc == TC_ENOTFOUND ? ENOENT : ELOOP;
	return fd;
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
	rc = upath_read(dfd, "supervisor.log", owner, LOGS_READ_MAX, out, err);
	close(dfd);
	return rc;
}

static void put_lines(struct source *s, const char *data, size_t len, bool prefix, FILE *out,
		      bool flush_partial)
{
	sbuf_add(&s->partial, data, len);
	size_t start = 0;
	for (;;) {
		char *nl = memchr(s->partial.buf + start, '\n', s->partial.len - start);
		if (!nl)
			break;
		size_t end = (size_t)(nl - s->partial.buf) + 1;
		if (prefix)
			fprintf(out, "[%d] ", s->rank);
		fwrite(s->partial.buf + start, 1, end - start, out);
		start = end;
	}
	sbuf_remove_front(&s->partial, start);
	if (flush_partial && s->partial.len) {
		if (prefix)
			fprintf(out, "[%d] ", s->rank);
		fwrite(s->partial.buf, 1, s->partial.len, out);
		fputc('\n', out);
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

static void drain(struct source *s, bool prefix, FILE *out, bool final)
{
	char buf[65536];
	ssize_t r;
	while ((r = read(s->fd, buf, sizeof(buf))) > 0)
		put_lines(s, buf, (size_t)r, prefix, out, false);
	if (final)
		put_lines(s, NULL, 0, prefix, out, true);
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
		(*src)[*nr].rank = now[k];
		(*src)[*nr].fd = -1; /* opened by the follow loop */
		sbuf_init(&(*src)[*nr].partial, 0);
		(*nr)++;
	}
	free(now);
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
	for (size_t i = 0; i < nr; i++) {
		src[i].fd = -1;
		sbuf_init(&src[i].partial, 0);
	}
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
		if (src[i].fd >= 0 && lseek(src[i].fd, tail_offset(src[i].fd, o->tail), SEEK_SET) < 0) {
			rc = tc_error_errno(err, TC_ESYS, "seek");
			goto out;
		}
	}
	bool prefix = o->prefix;
	for (size_t i = 0; i < nr; i++)
		if (src[i].fd >= 0)
			drain(&src[i], prefix, out, !o->follow);
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
			}
			if (src[i].fd >= 0)
				drain(&src[i], prefix, out, !alive);
		}
		if (!alive)
			break;
		usleep(200 * 1000);
	}
out:
	for (size_t i = 0; i < nr; i++) {
		if (src[i].fd >= 0)
			close(src[i].fd);
		sbuf_release(&src[i].partial);
	}
	free(src);
	free(ranks);
	sbuf_release(&name);
	close(dfd);
	return rc;
}
