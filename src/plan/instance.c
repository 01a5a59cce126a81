/*
 * instance.c -- partition instances: validation, the JSON-lines and CSV
 * forms (docs/plan.md), and APSS's synthesizer.
 */
#include "plan/plan.h"

#include "core/json.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void plan_instance_release(struct plan_instance *in)
{
	if (!in)
		return;
	free(in->x);
	free(in->c);
	memset(in, 0, sizeof(*in));
}

int plan_instance_check(const struct plan_instance *in, const char *what, struct tc_err *err)
{
	if (in->g < 1)
		return tc_error(err, TC_EINPUT, "%s: field 'x': needs at least one layer", what);
	if (in->s < 0)
		return tc_error(err, TC_EINPUT, "%s: field 'num_split': %d is negative", what, in->s);
	if (in->s > in->g - 1)
		return tc_error(err, TC_EINPUT,
				"%s: field 'num_split': %d cuts but only %d positions between %d layers",
				what, in->s, in->g - 1, in->g);
	for (int i = 0; i < in->g; i++)
		if (!isfinite(in->x[i]) || in->x[i] < 0)
			return tc_error(err, TC_EINPUT, "%s: field 'x[%d]': %s cost %g", what, i,
					isfinite(in->x[i]) ? "negative" : "non-finite", in->x[i]);
	for (int j = 0; j < in->g - 1; j++)
		for (int k = 0; k < in->s; k++) {
			double v = in->c[(size_t)j * in->s + k];
			if (!isfinite(v) || v < 0)
				return tc_error(err, TC_EINPUT, "%s: field 'C[%d][%d]': %s cost %g",
						what, j, k, isfinite(v) ? "negative" : "non-finite", v);
		}
	if (in->micro_batches < 0)
		return tc_error(err, TC_EINPUT, "%s: field 'micro_batches': %ld is not >= 1", what,
				in->micro_batches);
	return 0;
}

/* ---- JSON lines --------------------------------------------------------- */

static int json_costs(json_t *arr, double *out, int n, const char *what, const char *field,
		      struct tc_err *err)
{
	if (!json_is_array(arr))
		return tc_error(err, TC_EINPUT, "%s: field '%s': expected an array", what, field);
	if ((int)json_array_size(arr) != n)
		return tc_error(err, TC_EINPUT, "%s: field '%s': expected %d values, got %zu", what,
				field, n, json_array_size(arr));
	for (int i = 0; i < n; i++) {
		json_t *v = json_array_get(arr, (size_t)i);
		if (!json_is_number(v))
			return tc_error(err, TC_EINPUT, "%s: field '%s[%d]': not a number", what,
					field, i);
		out[i] = json_number_value(v);
	}
	return 0;
}

static int json_int_field(json_t *v, const char *what, const char *field, long *out,
			  struct tc_err *err)
{
	if (!json_is_integer(v))
		return tc_error(err, TC_EINPUT, "%s: field '%s': expected an integer", what, field);
	json_int_t i = json_integer_value(v);
	if (i < 0 || i > 1000000000)
		return tc_error(err, TC_EINPUT, "%s: field '%s': %lld out of range", what, field,
				(long long)i);
	*out = (long)i;
	return 0;
}


/*
 * Fast path for well-formed instance lines (a 102/63 line holds 6,464
 * numbers; jansson builds a node per number).  It accepts only the JSON it
 * fully understands -- the five keys, plain numbers, no escapes -- and
 * returns 1 on anything else so that the jansson path parses the line again
 * and words the error.  Decimals of at most 15 significant digits are
 * converted exactly (an integer below 2^53 divided or multiplied by an exact
 * power of ten is correctly rounded, Clinger's fast path); others go to
 * strtod, on a bounded copy: the line is (ptr, len), not a C string.
 */
struct fp {
	const char *p, *end;
};

static void fp_ws(struct fp *f)
{
	while (f->p < f->end && (*f->p == ' ' || *f->p == '\t' || *f->p == '\n' || *f->p == '\r'))
		f->p++;
}

static bool fp_char(struct fp *f, char c)
{
	fp_ws(f);
	if (f->p < f->end && *f->p == c) {
		f->p++;
		return true;
	}
	return false;
}

static bool fp_number(struct fp *f, double *out, bool *integral)
{
	static const double p10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
				      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	fp_ws(f);
	const char *st = f->p, *q = f->p, *e = f->end;
	bool neg = false;
	uint64_t m = 0;
	int digits = 0, scale = 0, ex = 0;
	if (q < e && *q == '-') {
		neg = true;
		q++;
	}
	if (q >= e || *q < '0' || *q > '9')
		return false;
	if (*q == '0' && q + 1 < e && q[1] >= '0' && q[1] <= '9')
		return false; /* leading zero */
	for (; q < e && *q >= '0' && *q <= '9'; q++)
		if (digits < 19 && (m || *q != '0')) {
			m = m * 10 + (uint64_t)(*q - '0');
			digits++;
		} else if (m || *q != '0') {
			digits++, scale--; /* beyond 19 digits: strtod below */
		}
	*integral = true;
	if (q < e && *q == '.') {
		*integral = false;
		q++;
		if (q >= e || *q < '0' || *q > '9')
			return false;
		for (; q < e && *q >= '0' && *q <= '9'; q++)
			if (digits < 19) {
				if (m || *q != '0')
					digits++;
				m = m * 10 + (uint64_t)(*q - '0');
				scale++;
			}
	}
	if (q < e && (*q == 'e' || *q == 'E')) {
		*integral = false;
		q++;
		int es = 1;
		if (q < e && (*q == '+' || *q == '-'))
			es = *q++ == '-' ? -1 : 1;
		if (q >= e || *q < '0' || *q > '9')
			return false;
		for (; q < e && *q >= '0' && *q <= '9'; q++)
			if (ex < 100000)
				ex = ex * 10 + (*q - '0');
		ex *= es;
	}
	f->p = q;
	int p = ex - scale;
	double v;
	if (digits <= 15 && p >= -22 && p <= 22) {
		v = p < 0 ? (double)m / p10[-p] : (double)m * p10[p];
	} else {
		/* strtod wants a terminator, and the number may end the buffer: it
		 * reads a NUL-terminated copy of exactly the digits scanned above
		 * (without the sign, which is applied below) */
		char small[64], *big = NULL, *b = small;
		const char *d = st + (neg ? 1 : 0);
		size_t n = (size_t)(q - d);
		if (n >= sizeof(small))
			b = big = xmalloc(n + 1);
		memcpy(b, d, n);
		b[n] = '\0';
		v = strtod(b, NULL);
		free(big);
	}
	*out = neg ? -v : v;
	return true;
}

static bool fp_array(struct fp *f, double **v, size_t *n, size_t *alloc)
{
	*n = 0;
	if (!fp_char(f, '['))
		return false;
	if (fp_char(f, ']'))
		return true;
	do {
		bool integral;
		XGROW(*v, *n + 1, *alloc);
		if (!fp_number(f, &(*v)[*n], &integral))
			return false;
		(*n)++;
	} while (fp_char(f, ','));
	return fp_char(f, ']');
}

static int fast_json(const char *line, size_t len, const char *what, struct plan_instance *out,
		     struct tc_err *err)
{
	struct fp f = { line, line + len };
	double *x = NULL, *c = NULL, *row = NULL;
	size_t nx = 0, xa = 0, ca = 0, ra = 0, nr = 0, rows = 0, width = 0;
	long num[3] = { -1, -1, -1 }; /* num_split, graph_size, micro_batches */
	bool have_x = false, have_c = false;
	int rc = 1;

	if (!fp_char(&f, '{') || fp_char(&f, '}'))
		goto out;
	do {
		fp_ws(&f);
		if (f.p >= f.end || *f.p != '"')
			goto out;
		const char *k = ++f.p;
		while (f.p < f.end && *f.p != '"' && *f.p != '\\')
			f.p++;
		if (f.p >= f.end || *f.p != '"')
			goto out;
		size_t kl = (size_t)(f.p++ - k);
		if (!fp_char(&f, ':'))
			goto out;
		if (kl == 1 && *k == 'x' && !have_x) {
			have_x = true;
			if (!fp_array(&f, &x, &nx, &xa))
				goto out;
		} else if (kl == 1 && *k == 'C' && !have_c) {
			have_c = true;
			if (!fp_char(&f, '['))
				goto out;
			if (!fp_char(&f, ']')) {
				do {
					if (!fp_array(&f, &row, &nr, &ra))
						goto out;
					if (rows == 0)
						width = nr;
					else if (nr != width)
						goto out;
					XGROW(c, (rows + 1) * width + 1, ca);
					if (width)
						memcpy(c + rows * width, row, width * sizeof(double));
					rows++;
				} while (fp_char(&f, ','));
				if (!fp_char(&f, ']'))
					goto out;
			}
		} else {
			int which = kl == 9 && !memcmp(k, "num_split", 9)       ? 0 :
				    kl == 10 && !memcmp(k, "graph_size", 10)     ? 1 :
				    kl == 13 && !memcmp(k, "micro_batches", 13) ? 2 : -1;
			double v;
			bool integral;
			if (which < 0 || num[which] >= 0 || !fp_number(&f, &v, &integral) || !integral ||
			    v < 0 || v > 1e9)
				goto out;
			num[which] = (long)v;
		}
	} while (fp_char(&f, ','));
	if (!fp_char(&f, '}'))
		goto out;
	fp_ws(&f);
	if (f.p != f.end)
		goto out;
	long s = num[0];
	if (!have_x || !have_c || s < 0 || nx < 1 || s > (long)nx - 1 || rows != nx - 1 ||
	    (rows && width != (size_t)s) || (num[1] >= 0 && num[1] != (long)nx) || num[2] == 0)
		goto out;
	memset(out, 0, sizeof(*out));
	out->g = (int)nx;
	out->s = (int)s;
	out->micro_batches = num[2] > 0 ? num[2] : 0;
	out->x = x;
	out->c = c ? c : xmalloc(sizeof(double));
	x = c = NULL;
	rc = plan_instance_check(out, what, err);
	if (rc)
		plan_instance_release(out);
out:
	free(x);
	free(c);
	free(row);
	return rc;
}

int plan_instance_from_json(const char *line, size_t len, const char *what,
			    struct plan_instance *out, struct tc_err *err)
{
	json_error_t jerr;
	struct sbuf name = SBUF_INIT;
	int rc = fast_json(line, len, what, out, err);
	long s = -1, gs = -1, mb = 0;
	if (rc <= 0)
		return rc;
	rc = 0;
	json_t *root = json_loadb(line, len, 0, &jerr);

	memset(out, 0, sizeof(*out));
	if (!root) {
		rc = tc_error(err, TC_EINPUT, "%s: not JSON: %s (column %d)", what, jerr.text,
			      jerr.column);
		goto out;
	}
	if (!json_is_object(root)) {
		rc = tc_error(err, TC_EINPUT, "%s: expected a JSON object", what);
		goto out;
	}
	const char *key;
	json_t *val;
	json_t *jx = NULL, *jc = NULL;
	json_object_foreach(root, key, val) {
		if (!strcmp(key, "x"))
			jx = val;
		else if (!strcmp(key, "C"))
			jc = val;
		else if (!strcmp(key, "num_split"))
			rc = json_int_field(val, what, key, &s, err);
		else if (!strcmp(key, "graph_size"))
			rc = json_int_field(val, what, key, &gs, err);
		else if (!strcmp(key, "micro_batches"))
			rc = json_int_field(val, what, key, &mb, err);
		else
			rc = tc_error(err, TC_EINPUT,
				      "%s: unknown field '%s' (known: x, C, num_split, graph_size, micro_batches)",
				      what, key);
		if (rc)
			goto out;
	}
	if (!jx || !json_is_array(jx)) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'x': missing or not an array", what);
		goto out;
	}
	if (s < 0) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'num_split': missing", what);
		goto out;
	}
	int g = (int)json_array_size(jx);
	if (gs >= 0 && gs != g) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'x': graph_size is %ld but x has %d values",
			      what, gs, g);
		goto out;
	}
	if (g < 1 || s > g - 1) {
		out->g = g;
		out->s = (int)(s > g ? g : s);
		rc = tc_error(err, TC_EINPUT,
			      "%s: field 'num_split': %ld cuts but only %d positions between %d layers",
			      what, s, g > 0 ? g - 1 : 0, g);
		goto out;
	}
	if (mb == 0 && json_object_get(root, "micro_batches")) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'micro_batches': must be >= 1", what);
		goto out;
	}
	out->g = g;
	out->s = (int)s;
	out->micro_batches = mb;
	out->x = xmalloc((size_t)g * sizeof(double));
	out->c = xmalloc(((size_t)(g - 1) * (size_t)s + 1) * sizeof(double));
	rc = json_costs(jx, out->x, g, what, "x", err);
	if (rc)
		goto out;
	if (!jc || !json_is_array(jc)) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'C': missing or not an array", what);
		goto out;
	}
	if ((int)json_array_size(jc) != g - 1) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'C': expected %d rows (graph_size - 1), got %zu",
			      what, g - 1, json_array_size(jc));
		goto out;
	}
	for (int j = 0; j < g - 1; j++) {
		sbuf_reset(&name);
		sbuf_addf(&name, "C[%d]", j);
		rc = json_costs(json_array_get(jc, (size_t)j), out->c + (size_t)j * s, (int)s, what,
				name.buf, err);
		if (rc)
			goto out;
	}
	rc = plan_instance_check(out, what, err);
out:
	if (rc)
		plan_instance_release(out);
	json_decref(root);
	sbuf_release(&name);
	return rc;
}

void plan_add_number(struct sbuf *sb, double v)
{
	json_add_number(sb, v); /* the shortest form that reads back (core/json.h) */
}

void plan_instance_to_json(const struct plan_instance *in, struct sbuf *out)
{
	sbuf_addf(out, "{\"graph_size\":%d,\"num_split\":%d,", in->g, in->s);
	if (in->micro_batches)
		sbuf_addf(out, "\"micro_batches\":%ld,", in->micro_batches);
	sbuf_adds(out, "\"x\":[");
	for (int i = 0; i < in->g; i++) {
		if (i)
			sbuf_addch(out, ',');
		plan_add_number(out, in->x[i]);
	}
	sbuf_adds(out, "],\"C\":[");
	for (int j = 0; j < in->g - 1; j++) {
		sbuf_adds(out, j ? ",[" : "[");
		for (int k = 0; k < in->s; k++) {
			if (k)
				sbuf_addch(out, ',');
			plan_add_number(out, in->c[(size_t)j * in->s + k]);
		}
		sbuf_addch(out, ']');
	}
	sbuf_adds(out, "]}\n");
}

/* ---- CSV ---------------------------------------------------------------- */

/* Split one line on commas (fields trimmed) into v; returns the count. */
static size_t csv_fields(char *line, char ***v, size_t *alloc)
{
	size_t n = 0;
	char *p = line;
	for (;;) {
		char *e = strchr(p, ',');
		if (e)
			*e = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		size_t l = strlen(p);
		while (l && (p[l - 1] == ' ' || p[l - 1] == '\t' || p[l - 1] == '\r'))
			p[--l] = '\0';
		XGROW(*v, n + 1, *alloc);
		(*v)[n++] = p;
		if (!e)
			break;
		p = e + 1;
	}
	return n;
}

static int csv_num(const char *f, const char *what, int line, const char *field, double *out,
		   struct tc_err *err)
{
	char *end;
	errno = 0;
	double v = strtod(f, &end);
	if (!*f || *end || errno == ERANGE)
		return tc_error(err, TC_EINPUT, "%s:%d: field '%s': not a number '%s'", what, line,
				field, f);
	*out = v;
	return 0;
}

int plan_instance_from_csv(const char *text, const char *what, struct plan_instance *out,
			   struct tc_err *err)
{
	char *buf = xstrdup(text), *save = buf;
	char **f = NULL;
	size_t falloc = 0, xalloc_n = 0, calloc_n = 0;
	struct sbuf field = SBUF_INIT;
	int rc = 0, lineno = 0, s = -1, g = 0;
	bool ended = false;

	memset(out, 0, sizeof(*out));
	while (save) {
		char *line = save;
		char *nl = strchr(line, '\n');
		if (nl) {
			*nl = '\0';
			save = nl + 1;
		} else {
			save = NULL;
		}
		lineno++;
		const char *t = line;
		while (*t == ' ' || *t == '\t' || *t == '\r')
			t++;
		if (!*t || *t == '#')
			continue;
		size_t n = csv_fields(line, &f, &falloc);
		if (s < 0) {
			if (strcmp(f[0], "x") != 0) {
				rc = tc_error(err, TC_EINPUT,
					      "%s:%d: expected the header 'x,C0,C1,...' first", what,
					      lineno);
				goto out;
			}
			s = (int)n - 1;
			continue;
		}
		if (ended) {
			rc = tc_error(err, TC_EINPUT,
				      "%s:%d: a row after the last layer (only the last row may lack C values)",
				      what, lineno);
			goto out;
		}
		/* The last layer has no boundary after it: its C fields are
		 * absent or empty. */
		size_t given = n;
		while (given > 1 && !*f[given - 1])
			given--;
		if (given == 1 && s > 0) {
			ended = true;
		} else if ((int)given != s + 1 || n != (size_t)s + 1) {
			rc = tc_error(err, TC_EINPUT, "%s:%d: field 'C[%d]': expected %d values, got %zu",
				      what, lineno, g, s, given - 1);
			goto out;
		}
		sbuf_reset(&field);
		sbuf_addf(&field, "x[%d]", g);
		XGROW(out->x, (size_t)g + 1, xalloc_n);
		rc = csv_num(f[0], what, lineno, field.buf, &out->x[g], err);
		if (rc)
			goto out;
		if (!ended) {
			XGROW(out->c, ((size_t)g + 1) * (size_t)s + 1, calloc_n);
			for (int k = 0; k < s; k++) {
				sbuf_reset(&field);
				sbuf_addf(&field, "C[%d][%d]", g, k);
				rc = csv_num(f[k + 1], what, lineno, field.buf,
					     &out->c[(size_t)g * s + k], err);
				if (rc)
					goto out;
			}
		}
		g++;
		if (s == 0)
			ended = false;
	}
	if (s < 0 || g == 0) {
		rc = tc_error(err, TC_EINPUT, "%s: no instance (header 'x,C0,...' and one row per layer)",
			      what);
		goto out;
	}
	if (s > 0 && !ended) {
		rc = tc_error(err, TC_EINPUT,
			      "%s: the last row (layer %d) must hold only x: it has no boundary after it",
			      what, g - 1);
		goto out;
	}
	out->g = g;
	out->s = s;
	if (!out->c)
		out->c = xmalloc(sizeof(double));
	rc = plan_instance_check(out, what, err);
out:
	if (rc)
		plan_instance_release(out);
	free(f);
	free(buf);
	sbuf_release(&field);
	return rc;
}

/* ---- reader ------------------------------------------------------------- */

struct plan_reader {
	char *path;
	FILE *f;
	bool own;
	bool csv;
	bool csv_done;
	char *line;
	size_t line_alloc;
	long lineno;
	long index;
	struct sbuf what;
};

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

int plan_reader_open(const char *path, struct plan_reader **out, struct tc_err *err)
{
	struct plan_reader *r = xcalloc(1, sizeof(*r));
	r->path = xstrdup(path);
	sbuf_init(&r->what, 64);
	r->index = -1;
	if (!strcmp(path, "-")) {
		r->f = stdin;
	} else {
		r->f = fopen(path, "r");
		if (!r->f) {
			int rc = tc_error_errno(err, TC_EINPUT, "cannot open '%s'", path);
			plan_reader_free(r);
			return rc;
		}
		r->own = true;
		r->csv = ends_with(path, ".csv");
	}
	*out = r;
	return 0;
}

int plan_reader_next(struct plan_reader *r, struct plan_instance *in, struct tc_err *err)
{
	if (r->csv) {
		if (r->csv_done)
			return 0;
		r->csv_done = true;
		struct sbuf text = SBUF_INIT;
		int rc = read_file(r->path, &text, err);
		if (!rc)
			rc = plan_instance_from_csv(text.buf, r->path, in, err);
		sbuf_release(&text);
		r->index = 0;
		return rc ? rc : 1;
	}
	for (;;) {
		errno = 0;
		ssize_t n = getline(&r->line, &r->line_alloc, r->f);
		if (n < 0) {
			if (ferror(r->f))
				return tc_error_errno(err, TC_EINPUT, "cannot read '%s'", r->path);
			return 0;
		}
		r->lineno++;
		size_t i = 0;
		while (i < (size_t)n && (r->line[i] == ' ' || r->line[i] == '\t' ||
					 r->line[i] == '\r' || r->line[i] == '\n'))
			i++;
		if (i == (size_t)n)
			continue; /* blank line */
		r->index++;
		sbuf_reset(&r->what);
		sbuf_addf(&r->what, "%s:%ld: instance %ld", r->path, r->lineno, r->index);
		int rc = plan_instance_from_json(r->line, (size_t)n, r->what.buf, in, err);
		return rc ? rc : 1;
	}
}

long plan_reader_index(const struct plan_reader *r)
{
	return r->index;
}

void plan_reader_free(struct plan_reader *r)
{
	if (!r)
		return;
	if (r->own && r->f && fclose(r->f) != 0) {
		/* read-only stream: nothing was lost */
	}
	free(r->path);
	free(r->line);
	sbuf_release(&r->what);
	free(r);
}

/* ---- synthesizer -------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** */
static inline uint64_t next_u64(struct plan_synth *sy)
{
	uint64_t *s = sy->state;
	uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* k in [0, 10^6): the value is k / 10^6. */
static inline int next_micro(struct plan_synth *sy)
{
	double u = (double)(next_u64(sy) >> 11) * 0x1.0p-53;
	return (int)(u * 1e6);
}

void plan_synth_init(struct plan_synth *sy, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		sy->state[i] = splitmix64(&x);
}

void plan_synth_next(struct plan_synth *sy, int g, int s, struct plan_instance *out)
{
	memset(out, 0, sizeof(*out));
	out->g = g;
	out->s = s;
	out->x = xmalloc((size_t)g * sizeof(double));
	out->c = xmalloc(((size_t)(g - 1) * (size_t)s + 1) * sizeof(double));
	for (int i = 0; i < g; i++)
		out->x[i] = next_micro(sy) / 1e6;
	for (size_t i = 0; i < (size_t)(g - 1) * (size_t)s; i++)
		out->c[i] = next_micro(sy) / 1e6;
}

static char *put_micro(char *p, int k)
{
	*p++ = '0';
	*p++ = '.';
	for (int d = 5; d >= 0; d--) {
		p[d] = (char)('0' + k % 10);
		k /= 10;
	}
	return p + 6;
}

int plan_synth_write(FILE *f, int g, int s, long n, uint64_t seed, struct tc_err *err)
{
	if (g < 1 || s < 0 || s > g - 1)
		return tc_error(err, TC_EUSAGE,
				"--num-split must be in [0, graph-size - 1] (graph size %d, %d cuts)",
				g, s);
	struct plan_synth sy;
	plan_synth_init(&sy, seed);
	/* Written by hand (not printf): 6.4M values per 1000 instances at 102/63. */
	struct sbuf head = SBUF_INIT;
	sbuf_addf(&head, "{\"graph_size\":%d,\"num_split\":%d,\"x\":[", g, s);
	size_t cap = head.len + (size_t)g * 9 + (size_t)(g - 1) * ((size_t)s * 9 + 3) + 16;
	char *line = xmalloc(cap);
	for (long i = 0; i < n; i++) {
		char *p = line;
		memcpy(p, head.buf, head.len);
		p += head.len;
		for (int j = 0; j < g; j++) {
			if (j)
				*p++ = ',';
			p = put_micro(p, next_micro(&sy));
		}
		memcpy(p, "],\"C\":[", 7);
		p += 7;
		for (int j = 0; j < g - 1; j++) {
			if (j)
				*p++ = ',';
			*p++ = '[';
			for (int k = 0; k < s; k++) {
				if (k)
					*p++ = ',';
				p = put_micro(p, next_micro(&sy));
			}
			*p++ = ']';
		}
		memcpy(p, "]}\n", 3);
		p += 3;
		size_t len = (size_t)(p - line);
		if (fwrite(line, 1, len, f) != len) {
			free(line);
			sbuf_release(&head);
			return tc_error_errno(err, TC_ESYS, "cannot write instances");
		}
	}
	free(line);
	sbuf_release(&head);
	return 0;
}
