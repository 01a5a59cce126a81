/*
 * patterns.c -- metrics from lines no built-in format reads: the job's own
 * POSIX extended regexes (metrics.patterns:, docs/metrics.md), compiled
 * once per job.  Only lines that no built-in parser took reach them
 * (ingest.c), so a job with DLLogger output pays nothing here.
 */
#include "metrics/metrics.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

const char metrics_none_hint[] =
	"no line was a metrics line: trainctl reads NVIDIA DLLogger (DLLL/DLL), "
	"Tecorigin tcap_dllogger (TCAPPDLL) and MindFormers loss lines, and any other "
	"output through metrics.patterns: in the job spec (docs/metrics.md)";

struct compiled {
	regex_t re;
	struct metrics_pattern p; /* a copy */
};

struct metrics_matcher {
	struct compiled *c;
	size_t n;
	regmatch_t *m;      /* room for the most groups any pattern has */
	struct sbuf line;   /* the line, NUL-terminated for regexec */
	struct sbuf text;   /* steps and text values of this line, by offset */
	struct metric_rec *recs;
	size_t *soff, *voff; /* per record: step and str offsets (SIZE_MAX: none) */
	size_t nrecs, arecs;
};

void metrics_pattern_release(struct metrics_pattern *p)
{
	if (!p)
		return;
	free(p->regex);
	for (size_t i = 0; i < p->nvalues; i++)
		free(p->names[i]);
	free(p->names);
	free(p->groups);
	memset(p, 0, sizeof(*p));
}

static void copy_pattern(struct metrics_pattern *to, const struct metrics_pattern *from)
{
	to->regex = xstrdup(from->regex);
	to->step = from->step;
	to->nvalues = from->nvalues;
	to->names = xcalloc(from->nvalues ? from->nvalues : 1, sizeof(*to->names));
	to->groups = xcalloc(from->nvalues ? from->nvalues : 1, sizeof(*to->groups));
	for (size_t i = 0; i < from->nvalues; i++) {
		to->names[i] = xstrdup(from->names[i]);
		to->groups[i] = from->groups[i];
	}
}

struct metrics_matcher *metrics_matcher_new(const struct metrics_pattern *p, size_t n,
					    size_t *bad)
{
	struct metrics_matcher *m = xcalloc(1, sizeof(*m));
	size_t groups = 1;
	m->c = xcalloc(n ? n : 1, sizeof(*m->c));
	for (size_t i = 0; i < n; i++) {
		if (regcomp(&m->c[i].re, p[i].regex, REG_EXTENDED)) {
			*bad = i;
			metrics_matcher_free(m);
			return NULL;
		}
		m->n++;
		copy_pattern(&m->c[i].p, &p[i]);
		if (m->c[i].re.re_nsub + 1 > groups)
			groups = m->c[i].re.re_nsub + 1;
	}
	m->m = xcalloc(groups, sizeof(*m->m));
	sbuf_init(&m->line, 0);
	sbuf_init(&m->text, 0);
	return m;
}

void metrics_matcher_free(struct metrics_matcher *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		regfree(&m->c[i].re);
		metrics_pattern_release(&m->c[i].p);
	}
	free(m->c);
	free(m->m);
	sbuf_release(&m->line);
	sbuf_release(&m->text);
	free(m->recs);
	free(m->soff);
	free(m->voff);
	free(m);
}

/* Group g of the last match as an offset into m->text (NUL-terminated), or SIZE_MAX. */
static size_t keep_group(struct metrics_matcher *m, size_t nsub, int g)
{
	if (g < 0 || (size_t)g > nsub || m->m[g].rm_so < 0)
		return SIZE_MAX;
	size_t off = m->text.len;
	sbuf_add(&m->text, m->line.buf + m->m[g].rm_so, (size_t)(m->m[g].rm_eo - m->m[g].rm_so));
	sbuf_addch(&m->text, '\0');
	return off;
}

static struct metric_rec *add_rec(struct metrics_matcher *m)
{
	if (m->nrecs == m->arecs) {
		m->arecs = m->arecs ? 2 * m->arecs : 8;
		m->recs = xrealloc(m->recs, m->arecs * sizeof(*m->recs));
		m->soff = xrealloc(m->soff, m->arecs * sizeof(*m->soff));
		m->voff = xrealloc(m->voff, m->arecs * sizeof(*m->voff));
	}
	struct metric_rec *r = &m->recs[m->nrecs++];
	memset(r, 0, sizeof(*r));
	r->kind = METRICS_POINT;
	r->format = METRICS_FMT_PATTERN;
	r->rank = -1;
	r->epoch = -1;
	r->iter = -1;
	r->value = r->wall_time = r->elapsed = NAN;
	return r;
}

static void one_pattern(struct metrics_matcher *m, const struct compiled *c)
{
	size_t nsub = c->re.re_nsub;
	if (regexec(&c->re, m->line.buf, nsub + 1, m->m, 0))
		return;
	size_t step = keep_group(m, nsub, c->p.step > 0 ? c->p.step : -1);
	long long iter = -1;
	double d;
	if (step != SIZE_MAX) {
		const char *s = m->text.buf + step;
		if (metrics_parse_number(s, strlen(s), &d) && isfinite(d) && d == floor(d) &&
		    fabs(d) < 9e18)
			iter = (long long)d;
	}
	for (size_t i = 0; i < c->p.nvalues; i++) {
		size_t v = keep_group(m, nsub, c->p.groups[i]);
		if (v == SIZE_MAX)
			continue;
		struct metric_rec *r = add_rec(m);
		r->name = c->p.names[i];
		r->iter = iter;
		m->soff[m->nrecs - 1] = step;
		const char *s = m->text.buf + v;
		if (metrics_parse_number(s, strlen(s), &d)) {
			r->has_value = true;
			r->value = d;
			m->voff[m->nrecs - 1] = SIZE_MAX;
		} else {
			m->voff[m->nrecs - 1] = v;
		}
	}
}

size_t metrics_matcher_match(struct metrics_matcher *m, const char *line, size_t len,
			     const struct metric_rec **recs)
{
	*recs = NULL;
	if (!m || !m->n)
		return 0;
	if (len && line[len - 1] == '\n')
		len--;
	if (len && line[len - 1] == '\r')
		len--;
	sbuf_reset(&m->line);
	sbuf_add(&m->line, line, len); /* a NUL inside ends the line for regexec */
	sbuf_reset(&m->text);
	m->nrecs = 0;
	for (size_t i = 0; i < m->n; i++)
		one_pattern(m, &m->c[i]);
	/* the text may have moved while it grew: pointers only now */
	for (size_t i = 0; i < m->nrecs; i++) {
		m->recs[i].step = m->soff[i] == SIZE_MAX ? "" : m->text.buf + m->soff[i];
		m->recs[i].str = m->voff[i] == SIZE_MAX ? NULL : m->text.buf + m->voff[i];
	}
	*recs = m->recs;
	return m->nrecs;
}
