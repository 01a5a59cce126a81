/* enc.c -- URL, hex, UTF-8 and varint encodings; see enc.h. */
#include "core/enc.h"

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
