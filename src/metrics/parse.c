/*
 * parse.c -- metrics line parsers: the parser and its records, DLLogger's
 * and tcap_dllogger's stdout forms, the MindFormers loss-monitor line, and
 * the dispatch by prefix.  The JSON forms are parse_json.c.  See metrics.h
 * for the contract and parse_int.h for how every parser works.
 */
#include "metrics/metrics.h"
#include "metrics/parse_int.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct metrics_parser *metrics_parser_new(void)
{
	struct metrics_parser *p = xcalloc(1, sizeof(*p));
	sbuf_init(&p->arena, 256);
	sbuf_init(&p->k, 64);
	sbuf_init(&p->v, 64);
	sbuf_init(&p->js, 0);
	return p;
}

void metrics_parser_free(struct metrics_parser *p)
{
	if (!p)
		return;
	free(p->recs);
	free(p->offs);
	sbuf_release(&p->arena);
	sbuf_release(&p->k);
	sbuf_release(&p->v);
	sbuf_release(&p->js);
	free(p);
}

const char *metrics_parser_reason(const struct metrics_parser *p)
{
	return p->reason ? p->reason : "";
}

const char *metrics_kind_name(enum metrics_kind k)
{
	static const char *const names[] = { "point", "epoch", "summary", "parameter",
					     "metadata" };
	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

const char *metrics_format_name(enum metrics_format f)
{
	static const char *const names[] = { "dlll", "dll", "tcap-json", "tcap",
					     "mindformers", "pattern", "tfevents" };
	return (unsigned)f < sizeof(names) / sizeof(names[0]) ? names[f] : "?";
}

/* ---- small text helpers ------------------------------------------------ */

void mp_trim(const char **s, size_t *len)
{
	while (*len && mp_is_blank(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && mp_is_blank((*s)[*len - 1]))
		(*len)--;
}

void mp_skip_ws(const char *s, size_t len, size_t *i)
{
	while (*i < len && mp_is_blank(s[*i]))
		(*i)++;
}

/* First occurrence of needle in [s, s+len), or NULL. */
static const char *find(const char *s, size_t len, const char *needle)
{
	return memmem(s, len, needle, strlen(needle));
}

/*
 * Plain decimals ("-12.345", "1700000000.123456") without strtod: when the
 * digits make an integer m <= 2^53 and there are f <= 22 of them after the
 * point, m and 10^f are exact doubles and one IEEE division rounds
 * correctly, so the result is strtod's.  Anything else returns false.
 */
static bool fast_decimal(const char *s, size_t len, double *out)
{
	static const double p10[] = { 1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
				      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
				      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	const uint64_t limit = (uint64_t)1 << 53;
	size_t i = 0, digits = 0;
	int frac = 0;
	bool neg = false, dot = false;
	uint64_t m = 0;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	for (; i < len; i++) {
		char c = s[i];
		if (c >= '0' && c <= '9') {
			if (m > limit / 10)
				return false;
			m = m * 10 + (uint64_t)(c - '0');
			digits++;
			frac += dot;
		} else if (c == '.' && !dot) {
			dot = true;
		} else {
			return false;
		}
	}
	if (!digits || m > limit || frac > 22)
		return false;
	double d = (double)m / p10[frac];
	*out = neg ? -d : d;
	return true;
}

bool metrics_parse_number(const char *s, size_t len, double *out)
{
	/* A number is short; anything longer is not one (and needs no heap). */
	char buf[64];

	mp_trim(&s, &len);
	if (!len || len >= sizeof(buf))
		return false;
	if (fast_decimal(s, len, out))
		return true;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		/* strtod would take hex ("0x1f") and stop at a NUL byte */
		if (c == 'x' || c == 'X' || c == '\0' || mp_is_blank(c))
			return false;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	char *end;
	errno = 0;
	double d = strtod(buf, &end);
	if (end != buf + len)
		return false;
	*out = d; /* ERANGE: overflow gives +-HUGE_VAL, underflow ~0; both fine */
	return true;
}

bool mp_as_int(double d, long long *out)
{
	if (!isfinite(d) || d != floor(d) || fabs(d) > 9.0e18)
		return false;
	*out = (long long)d;
	return true;
}

/* Strict non-negative/negative decimal integer over the whole text. */
static bool text_int(const char *s, size_t len, long long *out)
{
	double d;
	mp_trim(&s, &len);
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]) && !(i == 0 && s[i] == '-'))
			return false;
	return metrics_parse_number(s, len, &d) && mp_as_int(d, out);
}

/* ---- records ------------------------------------------------------------ */

static size_t arena_add(struct metrics_parser *p, const char *s, size_t len)
{
	size_t off = p->arena.len;
	sbuf_add(&p->arena, s, len);
	sbuf_addch(&p->arena, '\0');
	return off;
}

static void reset_line(struct metrics_parser *p, enum metrics_format f)
{
	p->n = 0;
	sbuf_reset(&p->arena);
	p->reason = NULL;
	p->kind = METRICS_POINT;
	p->format = f;
	p->rank = -1;
	p->epoch = -1;
	p->iter = -1;
	p->step = arena_add(p, "", 0);
	p->wall = NAN;
	p->elapsed = NAN;
	p->meta_key = NULL;
	p->meta_key_len = 0;
}

void mp_set_step(struct metrics_parser *p, const char *s, size_t len)
{
	p->step = arena_add(p, s, len);
}

static size_t rec_new(struct metrics_parser *p, const char *name, size_t nlen)
{
	size_t need = p->n + 1;
	if (need > p->alloc) {
		size_t a = p->alloc;
		XGROW(p->recs, need, a);
		p->offs = xrealloc(p->offs, a * sizeof(*p->offs));
		p->alloc = a;
	}
	size_t i = p->n++;
	struct metric_rec *r = &p->recs[i];
	r->has_value = false;
	r->value = NAN;
	p->offs[i].name = arena_add(p, name, nlen);
	p->offs[i].key = p->meta_key ? arena_add(p, p->meta_key, p->meta_key_len) : NOOFF;
	p->offs[i].str = NOOFF;
	p->offs[i].unit = NOOFF;
	return i;
}

void mp_rec_num(struct metrics_parser *p, const char *name, size_t nlen, double v,
		    const char *unit, size_t ulen)
{
	long long r;
	if (!p->meta_key && mp_text_is(name, nlen, "rank") && mp_as_int(v, &r) && r >= 0 &&
	    r <= 0x7fffffff) {
		p->rank = (int)r;
		return;
	}
	size_t i = rec_new(p, name, nlen);
	p->recs[i].has_value = true;
	p->recs[i].value = v;
	if (unit) {
		mp_trim(&unit, &ulen);
		if (ulen)
			p->offs[i].unit = arena_add(p, unit, ulen);
	}
}

void mp_rec_str(struct metrics_parser *p, const char *name, size_t nlen, const char *s,
		    size_t slen)
{
	size_t i = rec_new(p, name, nlen);
	p->offs[i].str = arena_add(p, s, slen);
}

/*
 * A wrapper around a number, as Python prints tensors and numpy scalars:
 * "tensor(2.3010, device='cuda:0')", "np.float64(0.5)",
 * "Tensor(shape=[], dtype=Float32, value= 1.234)".
 */
static bool wrapped_number(const char *s, size_t len, double *out)
{
	size_t i = 0;
	while (i < len && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.'))
		i++;
	if (!i || i >= len || s[i] != '(' || s[len - 1] != ')')
		return false;
	const char *a = s + i + 1, *end = s + len - 1;
	const char *val = find(a, (size_t)(end - a), "value=");
	if (val)
		a = val + 6;
	const char *b = a;
	while (b < end && *b != ',' && *b != ')')
		b++;
	return metrics_parse_number(a, (size_t)(b - a), out);
}

enum textval { TV_NONE, TV_NUM, TV_STR };

/* Interpret a textual value (note 5 of metrics.h). */
static enum textval text_value(const char *s, size_t len, double *out)
{
	mp_trim(&s, &len);
	if (mp_text_is(s, len, "None"))
		return TV_NONE;
	if (mp_text_is(s, len, "True")) {
		*out = 1;
		return TV_NUM;
	}
	if (mp_text_is(s, len, "False")) {
		*out = 0;
		return TV_NUM;
	}
	if (metrics_parse_number(s, len, out) || wrapped_number(s, len, out))
		return TV_NUM;
	return TV_STR;
}

void mp_rec_text(struct metrics_parser *p, const char *name, size_t nlen, const char *s,
		     size_t len, const char *unit, size_t ulen)
{
	double d;
	switch (text_value(s, len, &d)) {
	case TV_NONE:
		return;
	case TV_NUM:
		mp_rec_num(p, name, nlen, d, unit, ulen);
		return;
	case TV_STR:
		mp_trim(&s, &len);
		mp_rec_str(p, name, nlen, s, len);
		return;
	}
}

static enum metrics_result finish(struct metrics_parser *p, const struct metric_rec **recs,
				  size_t *nrecs)
{
	const char *a = p->arena.buf;
	for (size_t i = 0; i < p->n; i++) {
		struct metric_rec *r = &p->recs[i];
		const struct rec_offs *o = &p->offs[i];
		r->kind = p->kind;
		r->format = p->format;
		r->rank = p->rank;
		r->epoch = p->epoch;
		r->iter = p->iter;
		r->step = a + p->step;
		r->name = a + o->name;
		r->key = o->key == NOOFF ? NULL : a + o->key;
		r->str = o->str == NOOFF ? NULL : a + o->str;
		r->unit = o->unit == NOOFF ? NULL : a + o->unit;
		r->wall_time = p->wall;
		r->elapsed = p->elapsed;
	}
	*recs = p->recs;
	*nrecs = p->n;
	return METRICS_PARSED;
}

enum metrics_result mp_malformed(struct metrics_parser *p, const char *why)
{
	p->n = 0;
	p->reason = why;
	return METRICS_MALFORMED;
}

/* ---- times ---------------------------------------------------------------- */

static bool digits(const char *s, size_t len, size_t at, size_t n, int *out)
{
	if (at + n > len)
		return false;
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[at + i]))
			return false;
		v = v * 10 + (s[at + i] - '0');
	}
	*out = v;
	return true;
}

/*
 * "YYYY-MM-DD HH:MM:SS[.frac|,ms][+HH:MM]" (str(datetime), Python logging's
 * asctime) to seconds since 1970; without an offset it is local time, which
 * is what datetime.now() printed on this machine.  NaN when not a time.
 */
static double parse_datetime(const char *s, size_t len)
{
	int Y, M, D, h, m, sec;
	mp_trim(&s, &len);
	if (!digits(s, len, 0, 4, &Y) || len < 19 || s[4] != '-' || !digits(s, len, 5, 2, &M) ||
	    s[7] != '-' || !digits(s, len, 8, 2, &D) || (s[10] != ' ' && s[10] != 'T') ||
	    !digits(s, len, 11, 2, &h) || s[13] != ':' || !digits(s, len, 14, 2, &m) ||
	    s[16] != ':' || !digits(s, len, 17, 2, &sec))
		return NAN;
	size_t i = 19;
	double frac = 0, scale = 0.1;
	if (i < len && (s[i] == '.' || s[i] == ',')) {
		for (i++; i < len && isdigit((unsigned char)s[i]); i++, scale /= 10)
			frac += (s[i] - '0') * scale;
	}
	struct tm tm = { 0 };
	tm.tm_year = Y - 1900;
	tm.tm_mon = M - 1;
	tm.tm_mday = D;
	tm.tm_hour = h;
	tm.tm_min = m;
	tm.tm_sec = sec;
	int oh, om;
	if (i + 6 <= len && (s[i] == '+' || s[i] == '-') && digits(s, len, i + 1, 2, &oh) &&
	    s[i + 3] == ':' && digits(s, len, i + 4, 2, &om)) {
		time_t t = timegm(&tm);
		int off = (oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1);
		return (double)t - off + frac;
	}
	if (i < len && s[i] == 'Z')
		return (double)timegm(&tm) + frac;
	tm.tm_isdst = -1;
	time_t t = mktime(&tm);
	return t == (time_t)-1 ? NAN : (double)t + frac;
}

/* ---- step text (stdout forms) --------------------------------------------- */

/* "Epoch: N" style keyword; returns true and the integer after it. */
static bool keyword_int(const char *s, size_t len, const char *kw, bool skip_validation,
			long long *out)
{
	size_t kl = strlen(kw);
	const char *at = s, *end = s + len;
	while ((at = find(at, (size_t)(end - at), kw))) {
		if (skip_validation && at - s >= 11 && !memcmp(at - 11, "Validation ", 11)) {
			at += kl;
			continue;
		}
		const char *b = at + kl;
		while (b < end && *b == ' ')
			b++;
		const char *e = b;
		while (e < end && (isdigit((unsigned char)*e) || (e == b && *e == '-')))
			e++;
		return text_int(b, (size_t)(e - b), out);
	}
	return false;
}

/* Step as printed by DLLogger's StdOutBackend step_format functions. */
static void step_from_text(struct metrics_parser *p, const char *s, size_t len)
{
	mp_trim(&s, &len);
	mp_set_step(p, s, len);
	long long a;
	if (!len || mp_text_is(s, len, "()") || mp_text_is(s, len, "[]") ||
	    mp_text_is(s, len, "Summary:")) {
		p->kind = METRICS_SUMMARY;
	} else if (mp_text_is(s, len, "PARAMETER")) {
		p->kind = METRICS_PARAMETER;
	} else if ((s[0] == '(' && s[len - 1] == ')') || (s[0] == '[' && s[len - 1] == ']')) {
		/* str(tuple) / str(list): "(0, 10)", "(0,)", "[0, 10, 2]" */
		const char *q = s + 1, *end = s + len - 1;
		long long v[2] = { -1, -1 };
		size_t n = 0;
		while (q < end) {
			const char *c = memchr(q, ',', (size_t)(end - q));
			const char *e = c ? c : end;
			const char *t = q;
			size_t tl = (size_t)(e - q);
			mp_trim(&t, &tl);
			if (tl) {
				long long x = -1;
				if (n < 2 && text_int(t, tl, &x))
					v[n] = x;
				n++;
			}
			q = c ? c + 1 : end;
		}
		p->kind = n == 0 ? METRICS_SUMMARY : n == 1 ? METRICS_EPOCH : METRICS_POINT;
		p->epoch = v[0];
		p->iter = v[1];
	} else if (text_int(s, len, &a)) {
		p->iter = a;
	} else {
		/* "Epoch: 0 Iteration: 10", "Training Epoch: 1 Training Iteration: 5" */
		bool he = keyword_int(s, len, "Epoch:", false, &p->epoch);
		bool hi = keyword_int(s, len, "Iteration:", true, &p->iter);
		if (he && !hi && !find(s, len, "Iteration:"))
			p->kind = METRICS_EPOCH;
	}
}

/* ---- DLL / TCAPPDLL stdout forms --------------------------------------- */

/* Start of the blank-free token that ends right before `end` (not before lo). */
static const char *token_start(const char *lo, const char *end)
{
	const char *b = end;
	while (b > lo && !mp_is_blank(b[-1]))
		b--;
	return b;
}

/* "name : value [unit]" pairs separated by blanks (default_metric_format). */
static void plain_pairs(struct metrics_parser *p, const char *s, const char *end,
			const char *sep)
{
	while (sep) {
		const char *ns = token_start(s, sep);
		const char *vs = sep + 3;
		const char *next = vs < end ? find(vs, (size_t)(end - vs), " : ") : NULL;
		const char *ve = next ? token_start(vs, next) : end;
		const char *name = ns;
		size_t nlen = (size_t)(sep - ns);
		const char *v = vs;
		size_t vlen = (size_t)(ve - vs);
		mp_trim(&v, &vlen);
		s = next ? ve : end;
		sep = next;
		if (!nlen)
			continue;
		double d;
		if (text_value(v, vlen, &d) != TV_STR) {
			mp_rec_text(p, name, nlen, v, vlen, NULL, 0);
			continue;
		}
		/* "512.0 imgs/s": a number then its unit */
		size_t t = 0;
		while (t < vlen && !mp_is_blank(v[t]))
			t++;
		if (t < vlen && text_value(v, t, &d) == TV_NUM) {
			mp_rec_num(p, name, nlen, d, v + t, vlen - t);
			continue;
		}
		mp_rec_str(p, name, nlen, v, vlen);
	}
}

static enum metrics_result parse_plain(struct metrics_parser *p, const char *s, size_t len)
{
	const char *end = s + len, *body;
	if (len >= 2 && s[0] == '-' && s[1] == ' ') {
		body = s + 2; /* prefix_format "DLL - " without a time */
	} else {
		const char *dash = find(s, len, " - ");
		if (!dash)
			return mp_malformed(p, "no ' - ' after the time");
		p->wall = parse_datetime(s, (size_t)(dash - s));
		body = dash + 3;
	}
	const char *sep = find(body, (size_t)(end - body), " : ");
	if (!sep) {
		step_from_text(p, body, (size_t)(end - body));
		return METRICS_PARSED;
	}
	const char *ns = token_start(body, sep);
	step_from_text(p, body, (size_t)(ns - body));
	plain_pairs(p, ns, end, sep);
	return METRICS_PARSED;
}

/* ---- MindFormers --------------------------------------------------------- */

/* "[  1/  2]" at s: two integers; advances *i past the ']'. */
static bool mf_pair(const char *s, size_t len, size_t *i, long long *a, long long *b)
{
	size_t j = *i;
	if (j >= len || s[j] != '[')
		return false;
	const char *slash = memchr(s + j, '/', len - j);
	const char *close = memchr(s + j, ']', len - j);
	if (!slash || !close || slash > close)
		return false;
	if (!text_int(s + j + 1, (size_t)(slash - s - j - 1), a) ||
	    !text_int(slash + 1, (size_t)(close - slash - 1), b))
		return false;
	*i = (size_t)(close - s) + 1;
	return true;
}

static void mf_value(struct metrics_parser *p, const char *k, size_t kl, const char *v,
		     size_t vl)
{
	double d;
	/* "loss:[2.345/2.400]": this step and the running mean */
	if (vl >= 2 && v[0] == '[' && v[vl - 1] == ']') {
		const char *slash = memchr(v, '/', vl);
		if (slash) {
			mp_rec_text(p, k, kl, v + 1, (size_t)(slash - v - 1), NULL, 0);
			sbuf_reset(&p->k);
			sbuf_add(&p->k, k, kl);
			sbuf_adds(&p->k, "_mean");
			mp_rec_text(p, p->k.buf, p->k.len, slash + 1, (size_t)(v + vl - 1 - slash - 1),
				 NULL, 0);
			return;
		}
		if (metrics_parse_number(v + 1, vl - 2, &d)) { /* "[1.234]" */
			mp_rec_num(p, k, kl, d, NULL, 0);
			return;
		}
	}
	if (text_value(v, vl, &d) != TV_STR) {
		mp_rec_text(p, k, kl, v, vl, NULL, 0);
		return;
	}
	/* "120ms", "123.456T": a number with its unit glued on */
	size_t u = vl;
	while (u > 0 && (isalpha((unsigned char)v[u - 1]) || v[u - 1] == '/' || v[u - 1] == '%'))
		u--;
	if (u > 0 && u < vl && metrics_parse_number(v, u, &d)) {
		mp_rec_num(p, k, kl, d, v + u, vl - u);
		return;
	}
	mp_rec_str(p, k, kl, v, vl);
}

/*
 * Two shapes: the older "{ Epoch:[e/E], step:[s/S], ..." and the current
 * "{ step:[s/S], ..., throughput: 1.36T }" (no epoch; the brace closed).
 * `with_epoch` says which marker found the line.
 */
static enum metrics_result parse_mindformers(struct metrics_parser *p, const char *line,
					     size_t len, const char *at, bool with_epoch)
{
	size_t i = (size_t)(at - line) + strlen(with_epoch ? "{ Epoch:" : "{ step:");
	long long e = -1, E = -1, st, S;
	p->wall = parse_datetime(line, (size_t)(at - line) < 32 ? (size_t)(at - line) : 32);
	if (with_epoch) {
		if (!mf_pair(line, len, &i, &e, &E))
			return mp_malformed(p, "bad Epoch:[e/E]");
		const char *stp = ", step:";
		if (len - i < strlen(stp) || memcmp(line + i, stp, strlen(stp)))
			return mp_malformed(p, "no step:[s/S] after Epoch");
		i += strlen(stp);
	}
	if (!mf_pair(line, len, &i, &st, &S))
		return mp_malformed(p, "bad step:[s/S]");
	p->epoch = e;
	p->iter = st;
	sbuf_reset(&p->v);
	if (with_epoch)
		sbuf_addf(&p->v, "%lld/%lld ", e, E);
	sbuf_addf(&p->v, "%lld/%lld", st, S);
	mp_set_step(p, p->v.buf, p->v.len);

	/* ", key: value" pairs; values may hold ", " inside brackets */
	while (i < len) {
		while (i < len && (line[i] == ',' || mp_is_blank(line[i])))
			i++;
		size_t ks = i;
		while (i < len && line[i] != ':')
			i++;
		if (i >= len)
			break;
		const char *k = line + ks;
		size_t kl = i - ks;
		mp_trim(&k, &kl);
		i++;
		size_t vs = i;
		int depth = 0;
		while (i < len) {
			char c = line[i];
			if (c == '[' || c == '(' || c == '{')
				depth++;
			else if ((c == ']' || c == ')' || c == '}') && depth > 0)
				depth--;
			else if ((c == ',' || c == '}') && depth == 0)
				break; /* '}' closes the current shape's record */
			i++;
		}
		bool closed = i < len && line[i] == '}';
		const char *v = line + vs;
		size_t vl = i - vs;
		mp_trim(&v, &vl);
		if (closed)
			i = len;
		if (!kl)
			continue;
		/* "loss: N/A": a pipeline stage that has no loss, not a value */
		if (mp_text_is(v, vl, "N/A"))
			continue;
		/* "overflow cond" -> "overflow_cond"; p->k is mf_value's */
		sbuf_reset(&p->v);
		for (size_t j = 0; j < kl; j++)
			sbuf_addch(&p->v, mp_is_blank(k[j]) ? '_' : k[j]);
		mf_value(p, p->v.buf, p->v.len, v, vl);
	}
	return METRICS_PARSED;
}

/* ---- dispatch ---------------------------------------------------------------- */

typedef enum metrics_result (*parse_fn)(struct metrics_parser *p, const char *s, size_t len);

static enum metrics_result parse_dlll(struct metrics_parser *p, const char *s, size_t len)
{
	return mp_parse_json(p, s, len);
}

/* TCAPPDLL carries both forms: JSON when a '{' follows the prefix. */
static enum metrics_result parse_tcap(struct metrics_parser *p, const char *s, size_t len)
{
	size_t i = 0;
	mp_skip_ws(s, len, &i);
	if (i < len && s[i] == '{') {
		p->format = METRICS_FMT_TCAP_JSON;
		return mp_parse_json(p, s + i, len - i);
	}
	p->format = METRICS_FMT_TCAP_PLAIN;
	return parse_plain(p, s, len);
}

/* Longer prefixes first where one starts another ("DLLL " / "DLL "). */
static const struct line_format {
	const char *prefix;
	size_t len;
	enum metrics_format format;
	parse_fn parse;
} formats[] = {
	{ "DLLL ", 5, METRICS_FMT_DLLL, parse_dlll },
	{ "DLL ", 4, METRICS_FMT_DLL, parse_plain },
	{ "TCAPPDLL ", 9, METRICS_FMT_TCAP_JSON, parse_tcap },
};

/* MindFormers' line sits anywhere: after its logger's time/level prefix. */
static const char mf_marker[] = "{ Epoch:[";
static const char mf_marker_new[] = "{ step:[";

/*
 * Where a second record starts inside a line: a record marker ("TCAPPDLL ",
 * "DLLL ", "DLL ") after the line's first byte, followed by what follows it
 * in a real record (a time's digit, '{', or "- ").
 */
size_t metrics_first_record_len(const char *line, size_t len)
{
	const char *end = line + len;
	for (const char *q = line + 1; q < end;) {
		const char *d = memmem(q, (size_t)(end - q), "DLL", 3);
		if (!d)
			break;
		const char *start = d, *after = NULL;
		if (d - line >= 5 && !memcmp(d - 5, "TCAPP", 5))
			start = d - 5;
		if (end - d >= 4 && d[3] == ' ')
			after = d + 4; /* "DLL " or "TCAPPDLL " */
		else if (start == d && end - d >= 5 && d[3] == 'L' && d[4] == ' ')
			after = d + 5; /* "DLLL " */
		if (after && after < end && start > line &&
		    ((*after >= '0' && *after <= '9') || *after == '{' || *after == '-'))
			return (size_t)(start - line);
		q = d + 3;
	}
	return len;
}

enum metrics_result metrics_parse_line(struct metrics_parser *p, const char *line,
				       size_t len, const struct metric_rec **recs,
				       size_t *nrecs)
{
	*nrecs = 0;
	*recs = p->recs;
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (!len)
		return METRICS_NONE;
	if (line[0] == 'D' || line[0] == 'T') {
		for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
			const struct line_format *f = &formats[i];
			if (len < f->len || memcmp(line, f->prefix, f->len))
				continue;
			reset_line(p, f->format);
			enum metrics_result r = f->parse(p, line + f->len, len - f->len);
			return r == METRICS_PARSED ? finish(p, recs, nrecs) : r;
		}
	}
	const char *q = line, *end = line + len;
	while ((q = memchr(q, '{', (size_t)(end - q)))) {
		bool old_shape = (size_t)(end - q) >= sizeof(mf_marker) - 1 &&
				 !memcmp(q, mf_marker, sizeof(mf_marker) - 1);
		if (old_shape || ((size_t)(end - q) >= sizeof(mf_marker_new) - 1 &&
				  !memcmp(q, mf_marker_new, sizeof(mf_marker_new) - 1))) {
			reset_line(p, METRICS_FMT_MINDFORMERS);
			enum metrics_result r = parse_mindformers(p, line, len, q, old_shape);
			return r == METRICS_PARSED ? finish(p, recs, nrecs) : r;
		}
		q++;
	}
	return METRICS_NONE;
}
