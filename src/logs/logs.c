/* logs.c -- print and follow rank logs; see logs.h. */
#include "logs/logs.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <dirent.h>
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

/* Ranks that have a rank-<r>.log, sorted. */
static int find_ranks(const char *dir, int **out, size_t *nr)
{
	DIR *d = opendir(dir);
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		long r;
		const char *n = e->d_name;
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
	closedir(d);
	if (*nr) /* qsort(NULL, 0) is undefined behaviour (UBSan aborts on it) */
		qsort(*out, *nr, sizeof(int), cmp_int);
	return 0;
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
static void add_new_ranks(const char *dir, int **ranks, struct source **src, size_t *nr)
{
	int *now = NULL;
	size_t nn = 0;
	if (find_ranks(dir, &now, &nn) < 0)
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
	int rc = 0;
	struct source *src = NULL;
	if (o->rank >= 0) {
		ranks = xmalloc(sizeof(int));
		ranks[0] = o->rank;
		nr = 1;
	} else if (find_ranks(o->log_dir, &ranks, &nr) < 0) {
		return tc_error_errno(err, TC_ENOTFOUND, "cannot read '%s'", o->log_dir);
	}
	src = xcalloc(nr ? nr : 1, sizeof(*src));
	for (size_t i = 0; i < nr; i++) {
		struct sbuf p = SBUF_INIT;
		sbuf_addf(&p, "%s/rank-%d.log", o->log_dir, ranks[i]);
		src[i].rank = ranks[i];
		src[i].fd = open_regular_nofollow(p.buf, O_RDONLY, 0);
		sbuf_init(&src[i].partial, 0);
		if (src[i].fd < 0 && !(o->follow && errno == ENOENT)) {
			rc = tc_error_errno(err, TC_ENOTFOUND, "cannot open '%s'", p.buf);
			sbuf_release(&p);
			goto out;
		}
		sbuf_release(&p);
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
			add_new_ranks(o->log_dir, &ranks, &src, &nr);
		for (size_t i = 0; i < nr; i++) {
			if (src[i].fd < 0) {
				struct sbuf p = SBUF_INIT;
				sbuf_addf(&p, "%s/rank-%d.log", o->log_dir, ranks[i]);
				src[i].fd = open_regular_nofollow(p.buf, O_RDONLY, 0);
				sbuf_release(&p);
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
	return rc;
}
