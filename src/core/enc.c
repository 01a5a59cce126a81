/* enc.c -- URL, hex, UTF-8 and varint encodings; see enc.h. */
#include "core/enc.h"

#include <string.h>

void url_encode(struct sbuf *sb, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		    *c == '-' || *c == '_' || *c == '.' || *c == '~' || (keep_slash && *c == '/')) {
			sbuf_addch(sb, (char)*c);
		} else {
			sbuf_addch(sb, '%');
			sbuf_addch(sb, hex[*c >> 4]);
			sbuf_addch(sb, hex[*c & 15]);
		}
	}
}

void hex_encode(char *out, const void *data, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *d = data;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * n] = '\0';
}

int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void utf8_add(struct sbuf *sb, unsigned long c)
{
	if (c < 0x80) {
		sbuf_addch(sb, (char)c);
	} else if (c < 0x800) {
		sbuf_addch(sb, (char)(0xc0 | (c >> 6)));
		sbuf_addch(sb, (char)(0x80 | (c & 0x3f)));
	} else if (c < 0x10000) {
		sbuf_addch(sb, (char)(0xe0 | (c >> 12)));
		sbuf_addch(sb, (char)(0x80 | ((c >> 6) & 0x3f)));
		sbuf_addch(sb, (char)(0x80 | (c & 0x3f)));
	} else if (c < 0x110000) {
		sbuf_addch(sb, (char)(0xf0 | (c >> 18)));
		sbuf_addch(sb, (char)(0x80 | ((c >> 12) & 0x3f)));
		sbuf_addch(sb, (char)(0x80 | ((c >> 6) & 0x3f)));
		sbuf_addch(sb, (char)(0x80 | (c & 0x3f)));
	} else {
		sbuf_adds(sb, "\xef\xbf\xbd"); /* U+FFFD */
	}
}

size_t varint_put(unsigned char *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (unsigned char)((v & 0x7f) | 0x80);
		v >>= 7;
	}
	out[n++] = (unsigned char)v;
	return n;
}

void csv_add(struct sbuf *sb, const char *s)
{
	if (!strpbrk(s, ",\"\n\r")) {
		sbuf_adds(sb, s);
		return;
	}
	sbuf_addch(sb, '"');
	for (; *s; s++) {
		if (*s == '"')
			sbuf_addch(sb, '"');
		sbuf_addch(sb, *s);
	}
	sbuf_addch(sb, '"');
}

void term_escape(struct sbuf *sb, const char *s, size_t len, bool keep_newline)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		bool c1 = c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] >= 0x80 &&
			  (unsigned char)s[i + 1] <= 0x9f;
		if (c1) {
			unsigned char d = (unsigned char)s[++i];
			sbuf_addf(sb, "\\x%c%c", hex[d >> 4], hex[d & 15]);
		} else if ((c < 0x20 && c != '\t' && !(c == '\n' && keep_newline)) || c == 0x7f) {
			sbuf_adds(sb, "\\x");
			sbuf_addch(sb, hex[c >> 4]);
			sbuf_addch(sb, hex[c & 15]);
		} else {
			sbuf_addch(sb, (char)c);
		}
	}
}

/* ---- base64 ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void b64_encode(struct sbuf *out, const void *data, size_t n)
{
	const unsigned char *p = data;
	sbuf_grow(out, (n + 2) / 3 * 4 + 1);
	char *o = out->buf + out->len;
	size_t i = 0;
	for (; i + 3 <= n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = b64[(v >> 6) & 63];
		*o++ = b64[v & 63];
	}
	if (i < n) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	out->len = (size_t)(o - out->buf);
	out->buf[out->len] = '\0';
}

static int b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

bool b64_decode(struct sbuf *out, const char *text, size_t n)
{
	if (n % 4)
		return false;
	sbuf_grow(out, n / 4 * 3 + 1);
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			unsigned char c = (unsigned char)text[i + k];
			if (c == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_val(c)) < 0) {
				return false;
			}
		}
		unsigned x = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 |
			     (unsigned)v[3];
		unsigned char b[3] = { (unsigned char)(x >> 16), (unsigned char)(x >> 8),
				       (unsigned char)x };
		sbuf_add(out, b, (size_t)(3 - pad));
	}
	return true;
}
