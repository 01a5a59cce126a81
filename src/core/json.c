/* json.c -- the JSON string escaper and finite-or-null numbers; see json.h. */
#include "core/json.h"
#include "core/enc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (up to end), 0 when none starts there. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	size_t n;
	unsigned long cp;
	if (*p < 0x80)
		return 1;
	if (*p >= 0xc2 && *p <= 0xdf) {
		n = 2;
		cp = *p & 0x1f;
	} else if (*p >= 0xe0 && *p <= 0xef) {
		n = 3;
		cp = *p & 0x0f;
	} else if (*p >= 0xf0 && *p <= 0xf4) {
		n = 4;
		cp = *p & 0x07;
	} else {
		return 0;
	}
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* overlong forms, UTF-16 surrogates and past U+10FFFF are not UTF-8 */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void json_add_str(struct sbuf *sb, const char *s)
{
	if (!s) {
		sbuf_adds(sb, "null");
		return;
	}
	sbuf_addch(sb, '"');
	const unsigned char *p = (const unsigned char *)s;
	const unsigned char *end = p + strlen(s);
	const unsigned char *run = p;
	while (p < end) {
		size_t n;
		if (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') {
			p++; /* plain ASCII, most of what is written */
			continue;
		}
		if (*p >= 0x80 && (n = utf8_len(p, end)) != 0) {
			p += n;
			continue;
		}
		sbuf_add(sb, run, (size_t)(p - run));
		switch (*p) {
		case '"': sbuf_adds(sb, "\\\""); break;
		case '\\': sbuf_adds(sb, "\\\\"); break;
		case '\n': sbuf_adds(sb, "\\n"); break;
		case '\t': sbuf_adds(sb, "\\t"); break;
		case '\r': sbuf_adds(sb, "\\r"); break;
		default:
			if (*p < 0x20) {
				char h[3];
				hex_encode(h, p, 1);
				sbuf_adds(sb, "\\u00");
				sbuf_adds(sb, h);
			} else {
				sbuf_adds(sb, "\\ufffd");
			}
		}
		run = ++p;
	}
	sbuf_add(sb, run, (size_t)(p - run));
	sbuf_addch(sb, '"');
}

json_t *json_real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *json_string_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* ---- numbers in their shortest form ---- */

void fmt_shortest(char *buf, size_t size, double v)
{
	/* %.17g always reads back; 0.1 + 0.2 prints 0.30000000000000004 there, 0.3 at %.15g when exact */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (prec == 17 || !isfinite(v) || strtod(buf, NULL) == v)
			break;
	}
}

void json_add_number(struct sbuf *sb, double v)
{
	if (!isfinite(v)) {
		sbuf_adds(sb, "null"); /* JSON has no NaN or infinity */
		return;
	}
	char buf[40];
	fmt_shortest(buf, sizeof(buf), v);
	sbuf_adds(sb, buf);
}

static void indent(struct sbuf *sb, size_t flags, int depth)
{
	int n = (int)(flags & 0x1F);
	if (!n)
		return;
	sbuf_addch(sb, '\n');
	for (int i = 0; i < n * depth; i++)
		sbuf_addch(sb, ' ');
}

static int dump(const json_t *v, size_t flags, int depth, struct sbuf *sb)
{
	/* jansson's separators: "," and ":" compact, ", " and ": " otherwise, no
	 * space before a newline */
	const char *comma = (flags & JSON_COMPACT) || (flags & 0x1F) ? "," : ", ";
	const char *colon = flags & JSON_COMPACT ? ":" : ": ";
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		if (!json_object_size(v)) {
			sbuf_adds(sb, "{}");
			return 0;
		}
		sbuf_addch(sb, '{');
		const char *k;
		json_t *x;
		size_t i = 0;
		json_object_foreach((json_t *)v, k, x) {
			if (i++)
				sbuf_adds(sb, comma);
			indent(sb, flags, depth + 1);
			json_add_str(sb, k);
			sbuf_adds(sb, colon);
			if (dump(x, flags, depth + 1, sb))
				return -1;
		}
		indent(sb, flags, depth);
		sbuf_addch(sb, '}');
		return 0;
	}
	case JSON_ARRAY: {
		size_t n = json_array_size(v);
		if (!n) {
			sbuf_adds(sb, "[]");
			return 0;
		}
		sbuf_addch(sb, '[');
		for (size_t i = 0; i < n; i++) {
			if (i)
				sbuf_adds(sb, comma);
			indent(sb, flags, depth + 1);
			if (dump(json_array_get(v, i), flags, depth + 1, sb))
				return -1;
		}
		indent(sb, flags, depth);
		sbuf_addch(sb, ']');
		return 0;
	}
	case JSON_STRING:
		json_add_str(sb, json_string_value(v));
		return 0;
	case JSON_INTEGER:
		sbuf_addf(sb, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return 0;
	case JSON_REAL: {
		double d = json_real_value(v);
		if (!isfinite(d))
			return -1;
		char buf[40];
		fmt_shortest(buf, sizeof(buf) - 2, d);
		if (!strpbrk(buf, ".eE"))
			strcat(buf, ".0"); /* a real stays a real when read back */
		sbuf_adds(sb, buf);
		return 0;
	}
	case JSON_TRUE:
		sbuf_adds(sb, "true");
		return 0;
	case JSON_FALSE:
		sbuf_adds(sb, "false");
		return 0;
	case JSON_NULL:
		sbuf_adds(sb, "null");
		return 0;
	}
	return -1;
}

char *json_dumps_shortest(const json_t *v, size_t flags)
{
	if (!v || (!(flags & JSON_ENCODE_ANY) && !json_is_object(v) && !json_is_array(v)))
		return NULL;
	struct sbuf sb = SBUF_INIT;
	if (dump(v, flags, 0, &sb)) {
		sbuf_release(&sb);
		return NULL;
	}
	return sbuf_detach(&sb);
}
