/*
 * diag.c -- step times, the hang timeout, stragglers, stacks and the
 * culprit, the resume check (diag.h).  Pure: no I/O, no clock.
 */
#include "diag/diag.h"
#include "core/xalloc.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- numbers ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double diag_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	/* n is at most a few thousand, and this runs about once a second */
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double diag_hang_timeout(const struct diag_hang_rule *r, long long steps, double median)
{
	if (steps <= 0)
		return r->startup_seconds > 0 ? r->startup_seconds : 0;
	if (steps < r->warmup_steps)
		return 0;
	double t = r->min_seconds;
	if (isfinite(median) && r->factor * median > t)
		t = r->factor * median;
	return t;
}

/* ---- step times ---- */

#define JOB_WINDOW 4096 /* step times the job's median is taken over */

struct rank_steps {
	double *ring; /* the last window step times */
	int n, next;
	double last_t; /* NaN: no step yet in this attempt */
	long long count;
};

struct diag_steps {
	struct rank_steps *r;
	int nranks, window;
	double job[JOB_WINDOW];
	int njob, jnext;
};

struct diag_steps *diag_steps_new(int nranks, int window)
{
	struct diag_steps *d = xcalloc(1, sizeof(*d));
	d->nranks = nranks > 0 ? nranks : 1;
	d->window = window >= 2 ? window : 2;
	d->r = xcalloc((size_t)d->nranks, sizeof(*d->r));
	for (int i = 0; i < d->nranks; i++) {
		d->r[i].ring = xcalloc((size_t)d->window, sizeof(double));
		d->r[i].last_t = NAN;
	}
	return d;
}

void diag_steps_free(struct diag_steps *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->nranks; i++)
		free(d->r[i].ring);
	free(d->r);
	free(d);
}

void diag_steps_add(struct diag_steps *d, int rank, double t, double own)
{
	if (!d || rank < 0 || rank >= d->nranks)
		return;
	struct rank_steps *r = &d->r[rank];
	double dt = isfinite(own) && own >= 0 ? own : (isfinite(r->last_t) ? t - r->last_t : NAN);
	r->last_t = t;
	r->count++;
	if (!isfinite(dt) || dt < 0)
		return;
	r->ring[r->next] = dt;
	r->next = (r->next + 1) % d->window;
	if (r->n < d->window)
		r->n++;
	d->job[d->jnext] = dt;
	d->jnext = (d->jnext + 1) % JOB_WINDOW;
	if (d->njob < JOB_WINDOW)
		d->njob++;
}

void diag_steps_new_attempt(struct diag_steps *d)
{
	for (int i = 0; d && i < d->nranks; i++) {
		d->r[i].last_t = NAN;
		d->r[i].n = d->r[i].next = 0;
	}
}

long long diag_steps_count(const struct diag_steps *d)
{
	long long m = 0;
	for (int i = 0; d && i < d->nranks; i++)
		if (d->r[i].count > m)
			m = d->r[i].count;
	return m;
}

double diag_steps_median(const struct diag_steps *d)
{
	if (!d || !d->njob)
		return NAN;
	double *v = xmalloc((size_t)d->njob * sizeof(double));
	memcpy(v, d->job, (size_t)d->njob * sizeof(double));
	double m = diag_median(v, (size_t)d->njob);
	free(v);
	return m;
}

double diag_steps_rank_time(const struct diag_steps *d, int rank)
{
	if (!d || rank < 0 || rank >= d->nranks || d->r[rank].n < 2)
		return NAN;
	const struct rank_steps *r = &d->r[rank];
	double *v = xmalloc((size_t)r->n * sizeof(double));
	memcpy(v, r->ring, (size_t)r->n * sizeof(double));
	double m = diag_median(v, (size_t)r->n);
	free(v);
	return m;
}

long long diag_steps_rank_count(const struct diag_steps *d, int rank)
{
	return d && rank >= 0 && rank < d->nranks ? d->r[rank].count : 0;
}

int diag_steps_ranks(const struct diag_steps *d)
{
	return d ? d->nranks : 0;
}

int diag_stragglers_of(const double *times, int n, double percent, int *out, int max,
		       double *median)
{
	double *v = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(double));
	size_t nv = 0;
	for (int i = 0; i < n; i++)
		if (isfinite(times[i]))
			v[nv++] = times[i];
	double m = nv >= 2 ? diag_median(v, nv) : NAN;
	free(v);
	if (median)
		*median = m;
	int k = 0;
	if (!isfinite(m))
		return 0;
	for (int i = 0; i < n && k < max; i++)
		if (isfinite(times[i]) && times[i] > m * (1 + percent / 100))
			out[k++] = i;
	return k;
}

int diag_stragglers(const struct diag_steps *d, double percent, int *out, int max,
		    double *median)
{
	if (!d) {
		if (median)
			*median = NAN;
		return 0;
	}
	double *t = xmalloc((size_t)d->nranks * sizeof(double));
	for (int i = 0; i < d->nranks; i++)
		t[i] = d->r[i].n >= d->window ? diag_steps_rank_time(d, i) : NAN;
	int k = diag_stragglers_of(t, d->nranks, percent, out, max, median);
	free(t);
	return k;
}

/* ---- stacks ---- */

static bool starts(const char *p, const char *end, const char *prefix)
{
	size_t n = strlen(prefix);
	return (size_t)(end - p) >= n && !memcmp(p, prefix, n);
}

/* '  File "X", line N in F' */
static bool parse_frame(const char *p, const char *end, struct diag_frame *f)
{
	while (p < end && *p == ' ')
		p++;
	if (!starts(p, end, "File \""))
		return false;
	p += 6;
	const char *q = p;
	while (q < end && *q != '"')
		q++;
	if (q >= end)
		return false;
	const char *file = p;
	size_t flen = (size_t)(q - p);
	p = q + 1;
	if (!starts(p, end, ", line "))
		return false;
	p += 7;
	long line = 0;
	while (p < end && isdigit((unsigned char)*p) && line < 100000000)
		line = line * 10 + (*p++ - '0');
	if (!starts(p, end, " in "))
		return false;
	p += 4;
	f->file = xstrndup(file, flen);
	f->func = xstrndup(p, (size_t)(end - p));
	f->line = (int)line;
	return true;
}

void diag_stack_parse(const char *text, size_t len, struct diag_stack *out)
{
	const char *p = text, *end = text + len;
	size_t at = 0, af = 0;
	struct diag_thread *cur = NULL;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if (le > p && le[-1] == '\r')
			le--;
		bool cur_thread = starts(p, le, "Current thread ");
		if (cur_thread || starts(p, le, "Thread ") || starts(p, le, "Stack (")) {
			XGROW(out->t, out->nt + 1, at);
			cur = &out->t[out->nt++];
			memset(cur, 0, sizeof(*cur));
			cur->current = cur_thread;
			af = 0;
		} else if (cur) {
			struct diag_frame f;
			if (parse_frame(p, le, &f)) {
				XGROW(cur->f, cur->nf + 1, af);
				cur->f[cur->nf++] = f;
			}
		}
		p = nl ? nl + 1 : end;
	}
}

void diag_stack_release(struct diag_stack *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nt; i++) {
		for (size_t k = 0; k < s->t[i].nf; k++) {
			free(s->t[i].f[k].file);
			free(s->t[i].f[k].func);
		}
		free(s->t[i].f);
	}
	free(s->t);
	s->t = NULL;
	s->nt = 0;
}

/* Functions that wait for every rank; and the libraries whose frames do. */
static const char *const collective_funcs[] = {
	"all_reduce", "allreduce", "all_gather", "all_gather_into_tensor", "allgather",
	"all_gather_object", "reduce_scatter", "reduce_scatter_tensor", "broadcast",
	"broadcast_object_list", "barrier", "monitored_barrier", "all_to_all",
	"all_to_all_single", "alltoall", "reduce", "gather", "scatter", "gather_object",
	"recv", "irecv", "send", "isend", "batch_isend_irecv", "AllReduce", "AllGather",
	"Broadcast", "ReduceScatter", "_allreduce", NULL,
};
static const char *const collective_files[] = {
	"torch/distributed/", "mindspore/communication/", "paddle/distributed/",
	"deepspeed/comm/", "horovod/", "megatron/core/parallel_state", NULL,
};

static bool frame_collective(const struct diag_frame *f)
{
	for (const char *const *c = collective_funcs; *c; c++)
		if (!strcmp(f->func, *c))
			return true;
	for (const char *const *c = collective_files; *c; c++)
		if (strstr(f->file, *c))
			return true;
	return false;
}

bool diag_stack_in_collective(const struct diag_stack *s, const char **where)
{
	/* the innermost frames only: the caller of a collective is the user's code */
	for (size_t i = 0; s && i < s->nt; i++)
		for (size_t k = 0; k < s->t[i].nf && k < 3; k++)
			if (frame_collective(&s->t[i].f[k])) {
				if (where)
					*where = s->t[i].f[k].func;
				return true;
			}
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The innermost frame of every thread, sorted: where the process is. */
static char *stack_signature(const struct diag_stack *s)
{
	struct sbuf sb = SBUF_INIT;
	char **v = xcalloc(s->nt + 1, sizeof(char *));
	size_t n = 0;
	for (size_t i = 0; i < s->nt; i++)
		if (s->t[i].nf) {
			struct sbuf f = SBUF_INIT;
			sbuf_addf(&f, "%s:%d:%s", s->t[i].f[0].file, s->t[i].f[0].line, s->t[i].f[0].func);
			v[n++] = sbuf_detach(&f);
		}
	qsort(v, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n; i++) {
		sbuf_addf(&sb, "%s\n", v[i]);
		free(v[i]);
	}
	free(v);
	return sbuf_detach(&sb);
}

int diag_culprit(const struct diag_stack *const *stacks, int n, struct sbuf *why)
{
	int have = 0, in = 0, out_rank = -1, nout = 0;
	const char *where = NULL;
	for (int i = 0; i < n; i++) {
		if (!stacks[i] || !stacks[i]->nt)
			continue;
		have++;
		const char *w = NULL;
		if (diag_stack_in_collective(stacks[i], &w)) {
			in++;
			where = w;
		} else {
			nout++;
			if (out_rank < 0)
				out_rank = i;
		}
	}
	if (in && nout == 1) {
		sbuf_addf(why, "rank %d is not in a collective while %d other rank%s wait%s in %s",
			  out_rank, in, in == 1 ? "" : "s", in == 1 ? "s" : "", where);
		return out_rank;
	}
	if (in && nout > 1) {
		sbuf_addf(why, "%d ranks are not in a collective while %d wait in %s; the first is rank %d",
			  nout, in, where, out_rank);
		return out_rank;
	}
	if (have < 3) {
		sbuf_adds(why, have ? "no rank stands out (the stacks show no collective)"
				    : "no stacks to compare");
		return -1;
	}
	/* no collective: the one rank whose innermost frames differ from the rest's */
	char **sig = xcalloc((size_t)n, sizeof(char *));
	for (int i = 0; i < n; i++)
		if (stacks[i] && stacks[i]->nt)
			sig[i] = stack_signature(stacks[i]);
	int culprit = -1, odd = 0;
	for (int i = 0; i < n; i++) {
		if (!sig[i])
			continue;
		int same = 0;
		for (int k = 0; k < n; k++)
			if (k != i && sig[k] && !strcmp(sig[i], sig[k]))
				same++;
		if (!same) {
			odd++;
			culprit = i;
		}
	}
	/* exactly one odd one out, and the others agree among themselves */
	if (odd != 1)
		culprit = -1;
	for (int i = 0; i < n; i++)
		free(sig[i]);
	free(sig);
	if (culprit >= 0)
		sbuf_addf(why, "rank %d is not where the other %d ranks are", culprit, have - 1);
	else
		sbuf_adds(why, "no rank stands out (the stacks show no collective)");
	return culprit;
}

/* ---- resume check ---- */

long long diag_ckpt_step(const char *path)
{
	if (!path)
		return -1;
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	size_t start = len;
	while (start > 0 && path[start - 1] != '/')
		start--;
	long long v = -1;
	for (size_t i = start; i < len;) {
		if (!isdigit((unsigned char)path[i])) {
			i++;
			continue;
		}
		long long x = 0;
		for (; i < len && isdigit((unsigned char)path[i]); i++)
			x = x < 100000000000000LL ? x * 10 + (path[i] - '0') : x;
		v = x;
	}
	return v;
}

bool diag_resume_continues(long long ckpt, long long epoch, long long iter)
{
	if (ckpt < 0 || (epoch < 0 && iter < 0))
		return true; /* nothing to compare */
	return iter == ckpt + 1 || epoch == ckpt + 1;
}

/* ---- the exception line ---- */

/* An exception line names its type first: "KeyError: 'x'", "torch.OutOfMemoryError: ...". */
static bool looks_like_exception(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.'))
		i++;
	return i > 0 && isalpha((unsigned char)s[0]) && (i == n || s[i] == ':');
}

static const char *next_line(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl + 1 : end;
}

char *diag_exception_line(const char *text, size_t len, bool traceback)
{
	static const char mark[] = "Traceback (most recent call last):";
	const char *end = text + len, *last = NULL;
	for (const char *p = text; p < end; p = next_line(p, end))
		if ((size_t)(end - p) >= sizeof(mark) - 1 && !memcmp(p, mark, sizeof(mark) - 1))
			last = p;
	if (traceback && !last)
		return NULL;
	const char *p = last ? next_line(last, end) : text;
	/* the frames are indented; the exception line is the first that is not */
	while (last && p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p = next_line(p, end);
	size_t n = (size_t)(next_line(p, end) - p);
	while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	if (!n || !looks_like_exception(p, n))
		return NULL;
	if (n > DIAG_EXCEPTION_MAX) /* cut at a character's start */
		for (n = DIAG_EXCEPTION_MAX; n && ((unsigned char)p[n] & 0xc0) == 0x80;)
			n--;
	return xstrndup(p, n);
}
