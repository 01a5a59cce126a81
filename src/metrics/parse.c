/*
 * parse.c -- metrics line parsers: DLLogger (JSON and stdout), Tecorigin
 * tcap_dllogger (JSON with a Python-repr data string, and stdout), and the
 * MindFormers loss-monitor line.  See metrics.h for the contract.
 *
 * Every parser works the same way: set the line context (kind, step, epoch,
 * iteration, times) and add records by name with rec_num()/rec_text().
 * Strings go into one arena per parser and are addressed by offset while
 * the line is parsed (the arena may move); finish() turns offsets into
 * pointers and copies the line context into every record.
 */
#include "metrics/metrics.h"
#include "metrics/jscan.h"
#include "core/enc.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOOFF ((size_t)-1)

struct rec_offs {
	size_t name, key, str, unit;
};

struct metrics_parser {
	struct metric_rec *recs;
	struct rec_offs *offs;
	size_t n, alloc;
	struct sbuf arena;  /* NUL-separated strings of the current line */
	struct sbuf k, v;   /* scratch: unescaped Python keys and values */
	struct sbuf js;     /* scratch: decoded JSON strings (tcap data, metric) */
	const char *reason; /* static text; why the last line was malformed */

	/* context of the line being parsed, shared by all its records */
	enum metrics_kind kind;
	enum metrics_format format;
	int rank;
	long long epoch, iter;
	size_t step;
	double wall, elapsed;
	const char *meta_key; /* METADATA: current key, in the line */
	size_t meta_key_len;
};

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
					     "mindformers" };
	return (unsigned)f < sizeof(names) / sizeof(names[0]) ? names[f] : "?";
}

/* ---- small text helpers ------------------------------------------------ */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

static void trim(const char **s, size_t *len)
{
	while (*len && is_blank(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && is_blank((*s)[*len - 1]))
		(*len)--;
}

static bool text_is(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len == n && !memcmp(s, lit, n);
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

	trim(&s, &len);
	if (!len || len >= sizeof(buf))
		return false;
	if (fast_decimal(s, len, out))
		return true;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		/* strtod would take hex ("0x1f") and stop at a NUL byte */
		if (c == 'x' || c == 'X' || c == '\0' || is_blank(c))
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

static bool as_int(double d, long long *out)
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
	trim(&s, &len);
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]) && !(i == 0 && s[i] == '-'))
			return false;
	return metrics_parse_number(s, len, &d) && as_int(d, out);
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

static void set_step(struct metrics_parser *p, const char *s, size_t len)
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

static void rec_num(struct metrics_parser *p, const char *name, size_t nlen, double v,
		    const char *unit, size_t ulen)
{
	long long r;
	if (!p->meta_key && text_is(name, nlen, "rank") && as_int(v, &r) && r >= 0 &&
	    r <= 0x7fffffff) {
		p->rank = (int)r;
		return;
	}
	size_t i = rec_new(p, name, nlen);
	p->recs[i].has_value = true;
	p->recs[i].value = v;
	if (unit) {
		trim(&unit, &ulen);
		if (ulen)
			p->offs[i].unit = arena_add(p, unit, ulen);
	}
}

static void rec_str(struct metrics_parser *p, const char *name, size_t nlen, const char *s,
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
	trim(&s, &len);
	if (text_is(s, len, "None"))
		return TV_NONE;
	if (text_is(s, len, "True")) {
		*out = 1;
		return TV_NUM;
	}
	if (text_is(s, len, "False")) {
		*out = 0;
		return TV_NUM;
	}
	if (metrics_parse_number(s, len, out) || wrapped_number(s, len, out))
		return TV_NUM;
	return TV_STR;
}

static void rec_text(struct metrics_parser *p, const char *name, size_t nlen, const char *s,
		     size_t len, const char *unit, size_t ulen)
{
	double d;
	switch (text_value(s, len, &d)) {
	case TV_NONE:
		return;
	case TV_NUM:
		rec_num(p, name, nlen, d, unit, ulen);
		return;
	case TV_STR:
		trim(&s, &len);
		rec_str(p, name, nlen, s, len);
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

static enum metrics_result malformed(struct metrics_parser *p, const char *why)
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
	trim(&s, &len);
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
	trim(&s, &len);
	set_step(p, s, len);
	long long a;
	if (!len || text_is(s, len, "()") || text_is(s, len, "[]") ||
	    text_is(s, len, "Summary:")) {
		p->kind = METRICS_SUMMARY;
	} else if (text_is(s, len, "PARAMETER")) {
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
			trim(&t, &tl);
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
	while (b > lo && !is_blank(b[-1]))
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
		trim(&v, &vlen);
		s = next ? ve : end;
		sep = next;
		if (!nlen)
			continue;
		double d;
		if (text_value(v, vlen, &d) != TV_STR) {
			rec_text(p, name, nlen, v, vlen, NULL, 0);
			continue;
		}
		/* "512.0 imgs/s": a number then its unit */
		size_t t = 0;
		while (t < vlen && !is_blank(v[t]))
			t++;
		if (t < vlen && text_value(v, t, &d) == TV_NUM) {
			rec_num(p, name, nlen, d, v + t, vlen - t);
			continue;
		}
		rec_str(p, name, nlen, v, vlen);
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
			return malformed(p, "no ' - ' after the time");
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

/* ---- Python repr dicts (tcap_dllogger's data) ---------------------------- */

/*
 * A Python string literal at s[*i] (quote ' or ", optional u/b/r prefix),
 * unescaped into out.  Returns false on an unterminated string.
 */
static bool py_string(const char *s, size_t len, size_t *i, struct sbuf *out)
{
	bool raw = false;
	size_t j = *i;
	while (j < len && strchr("uUbBrR", s[j]) && s[j]) {
		if (s[j] == 'r' || s[j] == 'R')
			raw = true;
		j++;
	}
	if (j >= len || (s[j] != '\'' && s[j] != '"'))
		return false;
	char q = s[j++];
	sbuf_reset(out);
	while (j < len && s[j] != q) {
		char c = s[j++];
		if (c != '\\' || j >= len) {
			sbuf_addch(out, c);
			continue;
		}
		if (raw) {
			sbuf_addch(out, c);
			sbuf_addch(out, s[j++]);
			continue;
		}
		c = s[j++];
		int nhex = 0;
		switch (c) {
		case 'n': sbuf_addch(out, '\n'); break;
		case 't': sbuf_addch(out, '\t'); break;
		case 'r': sbuf_addch(out, '\r'); break;
		case 'a': sbuf_addch(out, '\a'); break;
		case 'b': sbuf_addch(out, '\b'); break;
		case 'f': sbuf_addch(out, '\f'); break;
		case 'v': sbuf_addch(out, '\v'); break;
		case '\n': break; /* line continuation */
		case 'x': nhex = 2; break;
		case 'u': nhex = 4; break;
		case 'U': nhex = 8; break;
		case '0': case '1': case '2': case '3':
		case '4': case '5': case '6': case '7': {
			unsigned v = (unsigned)(c - '0');
			for (int k = 0; k < 2 && j < len && s[j] >= '0' && s[j] <= '7'; k++)
				v = v * 8 + (unsigned)(s[j++] - '0');
			utf8_add(out, v);
			break;
		}
		default: /* \\ \' \" and unknown escapes (kept as written) */
			if (c != '\\' && c != '\'' && c != '"')
				sbuf_addch(out, '\\');
			sbuf_addch(out, c);
		}
		if (nhex) {
			unsigned long v = 0;
			int k;
			for (k = 0; k < nhex && j < len && hex_digit(s[j]) >= 0; k++)
				v = v * 16 + (unsigned long)hex_digit(s[j++]);
			if (k < nhex)
				return false;
			utf8_add(out, v);
		}
	}
	if (j >= len)
		return false;
	*i = j + 1;
	return true;
}

/* Skip a bare value (number, None, tensor(...), [..]) up to , or } at depth 0. */
static bool py_skip_bare(const char *s, size_t len, size_t *i, struct sbuf *tmp)
{
	int depth = 0;
	size_t j = *i;
	while (j < len) {
		char c = s[j];
		if (c == '\'' || c == '"') {
			if (!py_string(s, len, &j, tmp))
				return false;
			continue;
		}
		if (depth == 0 && (c == ',' || c == '}'))
			break;
		if (c == '(' || c == '[' || c == '{')
			depth++;
		else if (c == ')' || c == ']' || c == '}')
			depth--;
		j++;
	}
	*i = j;
	return j < len;
}

static void skip_ws(const char *s, size_t len, size_t *i)
{
	while (*i < len && is_blank(s[*i]))
		(*i)++;
}

/* {'rank': '0', 'train.loss': '2.301'} -- str() of a dict. */
static bool py_dict(struct metrics_parser *p, const char *s, size_t len)
{
	size_t i = 0;
	skip_ws(s, len, &i);
	if (i >= len || s[i++] != '{')
		return false;
	skip_ws(s, len, &i);
	if (i < len && s[i] == '}')
		return true;
	for (;;) {
		skip_ws(s, len, &i);
		size_t ks = i;
		if (i < len && (s[i] == '\'' || s[i] == '"')) {
			if (!py_string(s, len, &i, &p->k))
				return false;
		} else {
			/* a non-string key (int): keep its text */
			while (i < len && s[i] != ':' && s[i] != ',' && s[i] != '}')
				i++;
			const char *kt = s + ks;
			size_t kl = i - ks;
			trim(&kt, &kl);
			sbuf_reset(&p->k);
			sbuf_add(&p->k, kt, kl);
		}
		skip_ws(s, len, &i);
		if (i >= len || s[i++] != ':')
			return false;
		skip_ws(s, len, &i);
		size_t vs = i;
		bool quoted = false;
		if (i < len && (s[i] == '\'' || s[i] == '"')) {
			if (!py_string(s, len, &i, &p->v))
				return false;
			quoted = true;
			skip_ws(s, len, &i);
			if (i < len && s[i] != ',' && s[i] != '}') {
				/* not a lone string: 'a' 'b' or similar; take it raw */
				quoted = false;
				i = vs;
			}
		}
		if (!quoted) {
			if (!py_skip_bare(s, len, &i, &p->v))
				return false;
			const char *vt = s + vs;
			size_t vl = i - vs;
			trim(&vt, &vl);
			sbuf_reset(&p->v);
			sbuf_add(&p->v, vt, vl);
		}
		rec_text(p, p->k.buf, p->k.len, p->v.buf, p->v.len, NULL, 0);
		skip_ws(s, len, &i);
		if (i >= len)
			return false;
		char c = s[i++];
		if (c == '}')
			break;
		if (c != ',')
			return false;
		skip_ws(s, len, &i);
		if (i < len && s[i] == '}') /* trailing comma */
			break;
	}
	return true;
}

/* ---- JSON forms (the scanner is jscan.c) --------------------------------- */

/*
 * One value of data / metadata into a record.  j is on the value, which
 * the first pass has already checked.
 */
static void jrec(struct metrics_parser *p, struct jscan *j, struct jspan name)
{
	struct jspan sv;
	double d;
	const char *a = j->s;
	switch (*j->s) {
	case '"':
		jscan_str(j, &p->v, &sv);
		rec_text(p, name.s, name.len, sv.s, sv.len, NULL, 0);
		return;
	case '[':
	case '{':
		/* kept as written: "[0.9, 0.999]" */
		jscan_skip(j, 1);
		rec_str(p, name.s, name.len, a, (size_t)(j->s - a));
		return;
	case 't':
		j->s += 4;
		rec_num(p, name.s, name.len, 1, NULL, 0);
		return;
	case 'f':
		j->s += 5;
		rec_num(p, name.s, name.len, 0, NULL, 0);
		return;
	case 'n':
		j->s += 4;
		return;
	default:
		jscan_number(j, &d);
		rec_num(p, name.s, name.len, d, NULL, 0);
	}
}

/* Every key of a checked object: a record each (meta: METADATA fields). */
static void jrecs(struct metrics_parser *p, struct jspan obj, const struct jspan *metric)
{
	struct jscan j = { obj.s, obj.s + obj.len, NULL };
	struct jspan key;
	j.s++; /* '{' */
	for (;;) {
		jscan_ws(&j);
		if (*j.s == '}')
			return;
		if (*j.s == ',') {
			j.s++;
			jscan_ws(&j);
		}
		jscan_str(&j, &p->k, &key);
		jscan_ws(&j);
		j.s++; /* ':' */
		jscan_ws(&j);
		if (metric) {
			p->meta_key = key.s;
			p->meta_key_len = key.len;
			jrec(p, &j, *metric);
			p->meta_key = NULL;
		} else {
			jrec(p, &j, key);
		}
	}
}

/* step: "PARAMETER", [], [e], [e, i, ...] or a number; kept as written. */
static void jstep(struct metrics_parser *p, struct jspan st)
{
	struct jscan j = { st.s, st.s + st.len, NULL };
	struct jspan sv;
	double d;
	long long x;
	if (*j.s == '"') {
		jscan_str(&j, &p->v, &sv);
		set_step(p, sv.s, sv.len);
		if (text_is(sv.s, sv.len, "PARAMETER"))
			p->kind = METRICS_PARAMETER;
		return;
	}
	set_step(p, st.s, st.len);
	if (*j.s == '[') {
		size_t n = 0;
		j.s++;
		for (;;) {
			jscan_ws(&j);
			if (*j.s == ']')
				break;
			if (*j.s == ',') {
				j.s++;
				jscan_ws(&j);
			}
			if (n < 2 && (*j.s == '-' || isdigit((unsigned char)*j.s))) {
				jscan_number(&j, &d);
				if (as_int(d, &x))
					*(n ? &p->iter : &p->epoch) = x;
			} else {
				jscan_skip(&j, 1);
			}
			n++;
		}
		p->kind = n == 0 ? METRICS_SUMMARY : n == 1 ? METRICS_EPOCH : METRICS_POINT;
	} else if (*j.s == '-' || isdigit((unsigned char)*j.s)) {
		jscan_number(&j, &d);
		if (as_int(d, &x))
			p->iter = x;
	}
}

/* A time field: a string holding seconds, or a number. */
static bool jtime(struct metrics_parser *p, struct jscan *j, double *out)
{
	struct jspan sv;
	double d;
	if (j->s < j->end && *j->s == '"') {
		if (!jscan_str(j, &p->v, &sv))
			return false;
		if (metrics_parse_number(sv.s, sv.len, &d))
			*out = d;
		return true;
	}
	const char *a = j->s;
	if (!jscan_skip(j, 1))
		return false;
	struct jscan n = { a, j->s, NULL };
	if (a < j->end && (*a == '-' || isdigit((unsigned char)*a) || *a == 'N' || *a == 'I') &&
	    jscan_number(&n, &d))
		*out = d;
	return true;
}

enum jtype { JT_NONE, JT_LOG, JT_METADATA, JT_OTHER };

static enum metrics_result parse_json(struct metrics_parser *p, const char *s, size_t len)
{
	struct jscan j = { s, s + len, NULL };
	struct jspan key, sv, step = { 0 }, data = { 0 }, metric = { 0 }, meta = { 0 };
	enum jtype type = JT_NONE;
	bool metric_str = false;

	/* Pass 1: check the whole object, note where the parts lie. */
	jscan_ws(&j);
	if (j.s >= j.end || *j.s != '{')
		return malformed(p, "JSON is not an object");
	j.s++;
	jscan_ws(&j);
	if (j.s < j.end && *j.s == '}')
		j.s++;
	else
		for (;;) {
			jscan_ws(&j);
			if (j.s >= j.end || *j.s != '"' || !jscan_str(&j, &p->k, &key))
				return malformed(p, j.err ? j.err : "expected a key");
			jscan_ws(&j);
			if (j.s >= j.end || *j.s++ != ':')
				return malformed(p, "expected ':'");
			jscan_ws(&j);
			const char *a = j.s;
			struct jspan *keep = NULL;
			if (text_is(key.s, key.len, "type")) {
				if (j.s < j.end && *j.s == '"') {
					if (!jscan_str(&j, &p->v, &sv))
						return malformed(p, j.err);
					type = text_is(sv.s, sv.len, "LOG")        ? JT_LOG
					       : text_is(sv.s, sv.len, "METADATA") ? JT_METADATA
										   : JT_OTHER;
					goto next;
				}
			} else if (text_is(key.s, key.len, "timestamp")) {
				if (!jtime(p, &j, &p->wall))
					return malformed(p, j.err);
				goto next;
			} else if (text_is(key.s, key.len, "elapsedtime")) {
				if (!jtime(p, &j, &p->elapsed))
					return malformed(p, j.err);
				goto next;
			} else if (text_is(key.s, key.len, "step")) {
				keep = &step;
			} else if (text_is(key.s, key.len, "data")) {
				keep = &data;
			} else if (text_is(key.s, key.len, "metric")) {
				keep = &metric;
				metric_str = j.s < j.end && *j.s == '"';
			} else if (text_is(key.s, key.len, "metadata")) {
				keep = &meta;
			}
			if (!jscan_skip(&j, 1))
				return malformed(p, j.err);
			if (keep) {
				keep->s = a;
				keep->len = (size_t)(j.s - a);
			}
		next:
			jscan_ws(&j);
			if (j.s >= j.end)
				return malformed(p, "unterminated JSON");
			char c = *j.s++;
			if (c == '}')
				break;
			if (c != ',')
				return malformed(p, "expected ',' or '}'");
		}
	jscan_ws(&j);
	if (j.s != j.end)
		return malformed(p, "text after the JSON object");
	if (type == JT_NONE)
		return malformed(p, "no \"type\"");

	/* Pass 2: records. */
	if (type == JT_METADATA) {
		if (!metric_str || (meta.s && *meta.s != '{' && !text_is(meta.s, meta.len, "null")))
			return malformed(p, "METADATA without \"metric\" or \"metadata\" object");
		p->kind = METRICS_METADATA;
		struct jscan m = { metric.s, metric.s + metric.len, NULL };
		struct jspan name;
		jscan_str(&m, &p->js, &name);
		if (meta.s && *meta.s == '{')
			jrecs(p, meta, &name);
		return METRICS_PARSED;
	}
	if (type != JT_LOG)
		return METRICS_PARSED; /* INFO and the like carry no metrics */
	if (step.s)
		jstep(p, step);
	if (!data.s || text_is(data.s, data.len, "null"))
		return METRICS_PARSED;
	if (*data.s == '{') {
		jrecs(p, data, NULL);
	} else if (*data.s == '"') {
		/* tcap_dllogger: data = str(dict) */
		struct jscan d = { data.s, data.s + data.len, NULL };
		jscan_str(&d, &p->js, &sv);
		if (!py_dict(p, sv.s, sv.len))
			return malformed(p, "\"data\" is not a Python dict");
	} else {
		return malformed(p, "\"data\" is not an object");
	}
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
			rec_text(p, k, kl, v + 1, (size_t)(slash - v - 1), NULL, 0);
			sbuf_reset(&p->k);
			sbuf_add(&p->k, k, kl);
			sbuf_adds(&p->k, "_mean");
			rec_text(p, p->k.buf, p->k.len, slash + 1, (size_t)(v + vl - 1 - slash - 1),
				 NULL, 0);
			return;
		}
		if (metrics_parse_number(v + 1, vl - 2, &d)) { /* "[1.234]" */
			rec_num(p, k, kl, d, NULL, 0);
			return;
		}
	}
	if (text_value(v, vl, &d) != TV_STR) {
		rec_text(p, k, kl, v, vl, NULL, 0);
		return;
	}
	/* "120ms", "123.456T": a number with its unit glued on */
	size_t u = vl;
	while (u > 0 && (isalpha((unsigned char)v[u - 1]) || v[u - 1] == '/' || v[u - 1] == '%'))
		u--;
	if (u > 0 && u < vl && metrics_parse_number(v, u, &d)) {
		rec_num(p, k, kl, d, v + u, vl - u);
		return;
	}
	rec_str(p, k, kl, v, vl);
}

static enum metrics_result parse_mindformers(struct metrics_parser *p, const char *line,
					     size_t len, const char *at)
{
	size_t i = (size_t)(at - line) + strlen("{ Epoch:");
	long long e, E, st, S;
	p->wall = parse_datetime(line, (size_t)(at - line) < 32 ? (size_t)(at - line) : 32);
	if (!mf_pair(line, len, &i, &e, &E))
		return malformed(p, "bad Epoch:[e/E]");
	const char *stp = ", step:";
	if (len - i < strlen(stp) || memcmp(line + i, stp, strlen(stp)))
		return malformed(p, "no step:[s/S] after Epoch");
	i += strlen(stp);
	if (!mf_pair(line, len, &i, &st, &S))
		return malformed(p, "bad step:[s/S]");
	p->epoch = e;
	p->iter = st;
	sbuf_reset(&p->v);
	sbuf_addf(&p->v, "%lld/%lld %lld/%lld", e, E, st, S);
	set_step(p, p->v.buf, p->v.len);

	/* ", key: value" pairs; values may hold ", " inside brackets */
	while (i < len) {
		while (i < len && (line[i] == ',' || is_blank(line[i])))
			i++;
		size_t ks = i;
		while (i < len && line[i] != ':')
			i++;
		if (i >= len)
			break;
		const char *k = line + ks;
		size_t kl = i - ks;
		trim(&k, &kl);
		i++;
		size_t vs = i;
		int depth = 0;
		while (i < len) {
			char c = line[i];
			if (c == '[' || c == '(' || c == '{')
				depth++;
			else if ((c == ']' || c == ')' || c == '}') && depth > 0)
				depth--;
			else if (c == ',' && depth == 0)
				break;
			i++;
		}
		const char *v = line + vs;
		size_t vl = i - vs;
		trim(&v, &vl);
		if (!kl)
			continue;
		/* "overflow cond" -> "overflow_cond"; p->k is mf_value's */
		sbuf_reset(&p->v);
		for (size_t j = 0; j < kl; j++)
			sbuf_addch(&p->v, is_blank(k[j]) ? '_' : k[j]);
		mf_value(p, p->v.buf, p->v.len, v, vl);
	}
	return METRICS_PARSED;
}

/* ---- dispatch ---------------------------------------------------------------- */

typedef enum metrics_result (*parse_fn)(struct metrics_parser *p, const char *s, size_t len);

static enum metrics_result parse_dlll(struct metrics_parser *p, const char *s, size_t len)
{
	return parse_json(p, s, len);
}

/* TCAPPDLL carries both forms: JSON when a '{' follows the prefix. */
static enum metrics_result parse_tcap(struct metrics_parser *p, const char *s, size_t len)
{
	size_t i = 0;
	skip_ws(s, len, &i);
	if (i < len && s[i] == '{') {
		p->format = METRICS_FMT_TCAP_JSON;
		return parse_json(p, s + i, len - i);
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
		if ((size_t)(end - q) >= sizeof(mf_marker) - 1 &&
		    !memcmp(q, mf_marker, sizeof(mf_marker) - 1)) {
			reset_line(p, METRICS_FMT_MINDFORMERS);
			enum metrics_result r = parse_mindformers(p, line, len, q);
			return r == METRICS_PARSED ? finish(p, recs, nrecs) : r;
		}
		q++;
	}
	return METRICS_NONE;
}
