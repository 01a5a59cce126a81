/*
 * console.c -- `trainctl run` on a terminal: a progress line per rank in
 * place of the metric lines, everything else echoed as before.  The rules
 * are the notes of console_int.h.
 */
#include "launch/console_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define REDRAW_MS 250     /* at most 4 redraws a second (note 2) */
#define ANCHOR_MS 5000    /* steps/s is measured over the last 5..10 s */
#define MAX_SHOWN 8       /* ranks with a line of their own; the rest are counted */
#define MAX_RANK (1 << 20)

/* A point of a rank's progress: key is the epoch when pos counts within one, else -1. */
struct sample {
	long long key, pos;
	int64_t t;
	bool set;
};

struct rank_line {
	bool shown;
	long long cur, total; /* the step and the steps in all (-1: unknown) */
	long long epoch;      /* >= 0: cur counts within this epoch */
	long long lines;      /* step lines: the step of lines that give none */
	struct sbuf last_step;
	double loss, acc;     /* NaN until seen */
	double rate;          /* steps/s, NaN until known */
	struct sample a, b;   /* the older and the newer anchor of rate */
};

struct console {
	int fd;
	char *acc_name, *loss_name; /* acc_name from the spec or the first "acc" metric */
	bool acc_given;
	struct rank_line *r;
	size_t nr;
	const char *lo, *hi;   /* the data console_expect announced */
	const char **taken;    /* its lines the readers took, in order */
	size_t ntaken, ataken;
	int drawn;             /* rows of the block on the screen now */
	bool dirty;            /* the block differs from what is drawn */
	int64_t last_draw;
	struct sbuf out, line;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct console *active; /* note 4 */

struct console *console_new(int fd, bool raw, bool quiet, const char *accuracy)
{
	const char *term = getenv("TERM");
	if (raw || quiet || !isatty(fd) || (term && !strcmp(term, "dumb")))
		return NULL;
	struct console *c = xcalloc(1, sizeof(*c));
	c->fd = fd;
	if (accuracy && *accuracy) {
		c->acc_name = xstrdup(accuracy);
		c->acc_given = true;
	}
	sbuf_init(&c->out, 0);
	sbuf_init(&c->line, 0);
	pthread_mutex_lock(&mu);
	if (!active)
		active = c;
	pthread_mutex_unlock(&mu);
	return c;
}

static int width_of(int fd)
{
	struct winsize ws;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	return 80;
}

static void flush_out(struct console *c)
{
	/* best effort: the logs hold every line, a closed terminal stops nothing */
	if (c->out.len && write_all(c->fd, c->out.buf, c->out.len) < 0)
		errno = 0;
	sbuf_reset(&c->out);
	if (c->out.alloc > (4u << 20))
		sbuf_release(&c->out);
}

static void erase(struct console *c)
{
	if (c->drawn > 0)
		sbuf_addf(&c->out, "\r\033[%dA\033[J", c->drawn);
	c->drawn = 0;
	c->dirty = true;
}

static void add_duration(struct sbuf *sb, double s)
{
	long long t = (long long)(s + 0.5);
	if (t >= 3600)
		sbuf_addf(sb, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
	else
		sbuf_addf(sb, "%lld:%02lld", t / 60, t % 60);
}

static void rank_text(struct console *c, size_t i, struct sbuf *sb)
{
	const struct rank_line *r = &c->r[i];
	sbuf_addf(sb, "[%zu] ", i);
	if (r->total >= 0)
		sbuf_addf(sb, "step %lld/%lld", r->cur, r->total);
	else if (r->epoch >= 0)
		sbuf_addf(sb, "epoch %lld step %lld", r->epoch, r->cur);
	else
		sbuf_addf(sb, "step %lld", r->cur);
	if (c->loss_name && !isnan(r->loss))
		sbuf_addf(sb, "  %s %.4g", c->loss_name, r->loss);
	if (c->acc_name && !isnan(r->acc))
		sbuf_addf(sb, "  %s %.4g", c->acc_name, r->acc);
	if (isfinite(r->rate) && r->rate > 0) {
		sbuf_addf(sb, "  %.3g steps/s", r->rate);
		if (r->total > r->cur) {
			sbuf_adds(sb, "  ETA ");
			add_duration(sb, (double)(r->total - r->cur) / r->rate);
		}
	}
}

/* The block: a line per rank with progress, the first MAX_SHOWN - 1 of many. */
static void draw(struct console *c, int64_t now)
{
	size_t shown = 0, more = 0, cols = (size_t)width_of(c->fd) - 1;
	long long lo = 0, hi = 0; /* the steps of the ranks counted, not shown */
	for (size_t i = 0; i < c->nr; i++)
		shown += c->r[i].shown;
	size_t room = shown > MAX_SHOWN ? MAX_SHOWN - 1 : shown;
	erase(c);
	int rows = 0;
	for (size_t i = 0; i < c->nr; i++) {
		if (!c->r[i].shown)
			continue;
		if (room == 0) {
			lo = more && lo < c->r[i].cur ? lo : c->r[i].cur;
			hi = more && hi > c->r[i].cur ? hi : c->r[i].cur;
			more++;
			continue;
		}
		room--;
		sbuf_reset(&c->line);
		rank_text(c, i, &c->line);
		sbuf_add(&c->out, c->line.buf, c->line.len < cols ? c->line.len : cols);
		sbuf_addch(&c->out, '\n');
		rows++;
	}
	if (more) {
		sbuf_reset(&c->line);
		sbuf_addf(&c->line, "... and %zu more ranks, at step %lld", more, lo);
		if (hi > lo)
			sbuf_addf(&c->line, " to %lld", hi);
		sbuf_add(&c->out, c->line.buf, c->line.len < cols ? c->line.len : cols);
		sbuf_addch(&c->out, '\n');
		rows++;
	}
	c->drawn = rows;
	c->dirty = false;
	c->last_draw = now;
}

static void draw_if_due(struct console *c, int64_t now)
{
	if (c->dirty && now - c->last_draw >= REDRAW_MS)
		draw(c, now);
}

void console_expect(struct console *c, const char *data, size_t len)
{
	if (!c)
		return;
	pthread_mutex_lock(&mu);
	c->lo = data;
	c->hi = data + len;
	c->ntaken = 0;
	pthread_mutex_unlock(&mu);
}

/* "a/b" or "a/b c/d" (MindFormers' "epoch/epochs step/steps"): how many numbers, into v. */
static int fractions(const char *s, long long v[4])
{
	int n = 0;
	while (*s) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		if (n == 4)
			return 0;
		char *end;
		errno = 0;
		long long x = strtoll(s, &end, 10);
		if (end == s || errno || x < 0)
			return 0;
		v[n++] = x;
		s = end;
		if (n % 2 == 1) {
			while (*s == ' ')
				s++;
			if (*s++ != '/')
				return 0;
		} else if (*s && *s != ' ') {
			return 0;
		}
	}
	return n == 2 || n == 4 ? n : 0;
}

static struct rank_line *rank_at(struct console *c, int rank)
{
	if (rank < 0 || rank >= MAX_RANK)
		return NULL;
	if ((size_t)rank >= c->nr) {
		c->r = xrealloc(c->r, ((size_t)rank + 1) * sizeof(*c->r));
		for (size_t i = c->nr; i <= (size_t)rank; i++) {
			memset(&c->r[i], 0, sizeof(c->r[i]));
			c->r[i].loss = c->r[i].acc = c->r[i].rate = NAN;
			c->r[i].total = c->r[i].epoch = -1;
			sbuf_init(&c->r[i].last_step, 0);
		}
		c->nr = (size_t)rank + 1;
	}
	return &c->r[rank];
}

/* The step of a point record: cur, total and epoch of r (note: the x rule of `metrics`). */
static void step_of(struct rank_line *r, const struct metric_rec *p)
{
	long long v[4];
	bool fresh = !r->lines || strcmp(r->last_step.buf, p->step);
	if (fresh) {
		r->lines++;
		sbuf_reset(&r->last_step);
		sbuf_adds(&r->last_step, p->step);
	}
	int n = fractions(p->step, v);
	r->epoch = -1;
	r->total = -1;
	if (n == 4 && v[1] > 0 && v[3] > 0 && v[0] >= 1) {
		/* epochs count from 1, steps within each epoch */
		r->cur = (v[0] - 1) * v[3] + v[2];
		r->total = v[1] * v[3];
	} else if (n == 2 && v[1] > 0) {
		r->cur = v[0];
		r->total = v[1];
	} else if (p->epoch < 0 && p->iter >= 0) {
		r->cur = p->iter;
	} else if (p->iter >= 0) {
		r->epoch = p->epoch;
		r->cur = p->iter;
	} else {
		r->cur = r->lines;
	}
}

/* steps/s between the anchors and now; an epoch's own count starts over */
static void measure(struct rank_line *r, int64_t now)
{
	struct sample s = { r->epoch, r->cur, now, true };
	if (!r->b.set || r->b.key != s.key || r->cur < r->b.pos) {
		r->a = r->b = s;
		return;
	}
	if (now - r->b.t >= ANCHOR_MS) {
		r->a = r->b;
		r->b = s;
	}
	const struct sample *from = r->a.set && r->a.key == s.key ? &r->a : &r->b;
	if (now - from->t >= 500 && r->cur > from->pos)
		r->rate = (double)(r->cur - from->pos) * 1000.0 / (double)(now - from->t);
}

static bool loss_like(const char *name)
{
	return strcasestr(name, "loss") != NULL;
}

void console_took(struct console *c, int rank, const char *line, const struct metric_rec *recs,
		  size_t n)
{
	if (!c)
		return;
	pthread_mutex_lock(&mu);
	/* as numbers: line may point anywhere (a followed file's buffer) */
	if ((uintptr_t)line >= (uintptr_t)c->lo && (uintptr_t)line < (uintptr_t)c->hi) {
		XGROW(c->taken, c->ntaken + 1, c->ataken);
		c->taken[c->ntaken++] = line;
	}
	struct rank_line *r = rank_at(c, rank);
	int64_t now = now_mono_ms();
	bool stepped = false;
	for (size_t i = 0; r && i < n; i++) {
		const struct metric_rec *p = &recs[i];
		if (p->kind == METRICS_POINT && !stepped) {
			step_of(r, p);
			measure(r, now);
			stepped = r->shown = c->dirty = true;
		}
		if (!p->has_value || p->kind > METRICS_SUMMARY)
			continue;
		if (!c->acc_name && strcasestr(p->name, "acc"))
			c->acc_name = xstrdup(p->name);
		if (!c->loss_name && p->kind == METRICS_POINT && loss_like(p->name))
			c->loss_name = xstrdup(p->name);
		if (c->acc_name && !strcmp(p->name, c->acc_name))
			r->acc = p->value;
		else if (c->loss_name && p->kind == METRICS_POINT && !strcmp(p->name, c->loss_name))
			r->loss = p->value;
		else
			continue;
		c->dirty |= r->shown;
	}
	/* drawn by console_echo right after, or by the next tick (a followed file's line) */
	pthread_mutex_unlock(&mu);
}

void console_echo(struct console *c, int rank, const char *data, size_t len)
{
	if (!c)
		return;
	pthread_mutex_lock(&mu);
	const char *p = data, *end = data + len;
	size_t t = 0;
	bool any = false;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		while (t < c->ntaken && c->taken[t] < p)
			t++;
		if (t < c->ntaken && c->taken[t] == p) {
			p += n;
			continue;
		}
		if (!any && c->drawn)
			erase(c);
		any = true;
		sbuf_addf(&c->out, "[%d] ", rank);
		sbuf_add(&c->out, p, n);
		p += n;
	}
	c->lo = c->hi = NULL;
	c->ntaken = 0;
	draw_if_due(c, now_mono_ms());
	flush_out(c);
	pthread_mutex_unlock(&mu);
}

int console_tick(struct console *c, int64_t now_ms)
{
	if (!c)
		return -1;
	pthread_mutex_lock(&mu);
	int wait = -1;
	draw_if_due(c, now_ms);
	flush_out(c);
	if (c->dirty) {
		int64_t left = c->last_draw + REDRAW_MS - now_ms;
		wait = left > 0 ? (int)left : 0;
	}
	pthread_mutex_unlock(&mu);
	return wait;
}

void console_before_stderr(void)
{
	pthread_mutex_lock(&mu);
	if (active && active->drawn) {
		erase(active);
		flush_out(active);
	}
	pthread_mutex_unlock(&mu);
}

void console_free(struct console *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&mu);
	if (c->dirty)
		draw(c, now_mono_ms());
	flush_out(c);
	if (active == c)
		active = NULL;
	pthread_mutex_unlock(&mu);
	for (size_t i = 0; i < c->nr; i++)
		sbuf_release(&c->r[i].last_step);
	free(c->r);
	free(c->taken);
	free(c->acc_name);
	free(c->loss_name);
	sbuf_release(&c->out);
	sbuf_release(&c->line);
	free(c);
}
