/* json.c -- the JSON string escaper and finite-or-null numbers; see json.h. */
#include "core/json.h"
#include "core/enc.h"

#include <math.h>
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
