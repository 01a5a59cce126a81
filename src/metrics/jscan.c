/* jscan.c -- the one-line JSON scanner of the metrics parsers; see jscan.h. */
#include "metrics/jscan.h"
#include "core/enc.h"
#include "core/xalloc.h"
#include "metrics/metrics.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void jscan_ws(struct jscan *j)
{
	/* every character above ' ' is no white space: one compare for most */
	while (j->s < j->end && (unsigned char)*j->s <= ' ' &&
	       (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r'))
		j->s++;
}

bool jscan_fail(struct jscan *j, const char *why)
{
	if (!j->err)
		j->err = why;
	return false;
}

bool jscan_lit(struct jscan *j, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(j->end - j->s) < n || memcmp(j->s, lit, n))
		return false;
	j->s += n;
	return true;
}

static unsigned long hex4(const char *s)
{
	unsigned long v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hex_digit(s[i]);
		if (h < 0)
			return (unsigned long)-1;
		v = v * 16 + (unsigned long)h;
	}
	return v;
}

bool jscan_str(struct jscan *j, struct sbuf *scratch, struct jspan *out)
{
	const char *a = ++j->s, *q = a;
	bool esc = false;
	while (q < j->end && *q != '"') {
		/* the common case first: a plain character */
		if ((unsigned char)*q >= 0x20 && *q != '\\') {
			q++;
			continue;
		}
		if (*q == '\\') {
			/* check escapes here, so decoding later cannot fail */
			if (j->end - q < 2 || !strchr("\"\\/bfnrtu", q[1]) || !q[1])
				return jscan_fail(j, "bad escape in string");
			if (q[1] == 'u' && (j->end - q < 6 || hex4(q + 2) == (unsigned long)-1))
				return jscan_fail(j, "bad \\u escape");
			esc = true;
			q += 2;
		} else if ((unsigned char)*q < 0x20) {
			return jscan_fail(j, "control character in string");
		} else {
			q++;
		}
	}
	if (q >= j->end)
		return jscan_fail(j, "unterminated string");
	j->s = q + 1;
	if (!out)
		return true;
	if (!esc) {
		out->s = a;
		out->len = (size_t)(q - a);
		return true;
	}
	/* decode a..q */
	const char *e = q;
	sbuf_reset(scratch);
	for (q = a; q < e; q++) {
		if (*q != '\\') {
			sbuf_addch(scratch, *q);
			continue;
		}
		q++; /* q < e: a backslash never ends the span */
		switch (*q) {
		case '"': sbuf_addch(scratch, '"'); break;
		case '\\': sbuf_addch(scratch, '\\'); break;
		case '/': sbuf_addch(scratch, '/'); break;
		case 'b': sbuf_addch(scratch, '\b'); break;
		case 'f': sbuf_addch(scratch, '\f'); break;
		case 'n': sbuf_addch(scratch, '\n'); break;
		case 'r': sbuf_addch(scratch, '\r'); break;
		case 't': sbuf_addch(scratch, '\t'); break;
		case 'u': {
			unsigned long c = hex4(q + 1); /* checked above */
			q += 4;
			if (c >= 0xd800 && c < 0xdc00 && e - q >= 7 && q[1] == '\\' && q[2] == 'u') {
				unsigned long lo = hex4(q + 3);
				if (lo >= 0xdc00 && lo < 0xe000) {
					c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
					q += 6;
				}
			}
			utf8_add(scratch, c);
			break;
		}
		}
	}
	out->s = scratch->buf;
	out->len = scratch->len;
	return true;
}

bool jscan_number(struct jscan *j, double *out)
{
	/* the three words only where their first letters are (most numbers are digits) */
	char c0 = j->s < j->end ? *j->s : '\0';
	if (c0 == 'N' || c0 == 'I' || (c0 == '-' && j->end - j->s > 1 && j->s[1] == 'I')) {
		if (jscan_lit(j, "NaN")) {
			*out = NAN;
			return true;
		}
		if (jscan_lit(j, "Infinity")) {
			*out = INFINITY;
			return true;
		}
		if (jscan_lit(j, "-Infinity")) {
			*out = -INFINITY;
			return true;
		}
	}
	const char *a = j->s, *q = a;
#define DIGITS(q)                                                        \
	do {                                                             \
		const char *d0 = q;                                      \
		while (q < j->end && isdigit((unsigned char)*q))         \
			q++;                                             \
		if (q == d0)                                             \
			return jscan_fail(j, "bad number");                   \
	} while (0)
	if (q < j->end && *q == '-')
		q++;
	DIGITS(q);
	if (q < j->end && *q == '.') {
		q++;
		DIGITS(q);
	}
	if (q < j->end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < j->end && (*q == '+' || *q == '-'))
			q++;
		DIGITS(q);
	}
#undef DIGITS
	j->s = q;
	if (metrics_parse_number(a, (size_t)(q - a), out))
		return true;
	/* longer than metrics_parse_number takes: hundreds of digits */
	char *copy = xstrndup(a, (size_t)(q - a));
	*out = strtod(copy, NULL);
	free(copy);
	return true;
}

/* Skip an array or object at j->s, checking its syntax. */
static bool skip_container(struct jscan *j, int depth)
{
	char close = *j->s == '[' ? ']' : '}';
	bool obj = close == '}';
	if (depth >= JSCAN_DEPTH)
		return jscan_fail(j, "JSON nested too deep");
	j->s++;
	jscan_ws(j);
	if (j->s < j->end && *j->s == close) {
		j->s++;
		return true;
	}
	for (;;) {
		jscan_ws(j);
		if (obj) {
			if (j->s >= j->end || *j->s != '"' || !jscan_str(j, NULL, NULL))
				return jscan_fail(j, "expected a key");
			jscan_ws(j);
			if (j->s >= j->end || *j->s++ != ':')
				return jscan_fail(j, "expected ':'");
		}
		if (!jscan_skip(j, depth + 1))
			return false;
		jscan_ws(j);
		if (j->s >= j->end)
			return jscan_fail(j, "unterminated JSON");
		char c = *j->s++;
		if (c == close)
			return true;
		if (c != ',')
			return jscan_fail(j, "expected ',' or end of container");
	}
}

bool jscan_skip(struct jscan *j, int depth)
{
	double d;
	jscan_ws(j);
	if (j->s >= j->end)
		return jscan_fail(j, "expected a value");
	switch (*j->s) {
	case '"':
		return jscan_str(j, NULL, NULL);
	case '[':
	case '{':
		return skip_container(j, depth);
	case 't':
		return jscan_lit(j, "true") || jscan_fail(j, "bad literal");
	case 'f':
		return jscan_lit(j, "false") || jscan_fail(j, "bad literal");
	case 'n':
		return jscan_lit(j, "null") || jscan_fail(j, "bad literal");
	default:
		return jscan_number(j, &d);
	}
}
