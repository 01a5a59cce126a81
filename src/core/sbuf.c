/* sbuf.c -- growable strings; invariants in sbuf.h. */
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char sbuf_empty[1];

void sbuf_init(struct sbuf *sb, size_t hint)
{
	sb->buf = sbuf_empty;
	sb->len = 0;
	sb->alloc = 0;
	if (hint)
		sbuf_grow(sb, hint);
}

void sbuf_grow(struct sbuf *sb, size_t extra)
{
	if (extra > SIZE_MAX - sb->len - 1)
		xdie_oom(SIZE_MAX);
	size_t need = sb->len + extra + 1;
	if (need <= sb->alloc)
		return;
	size_t n = sb->alloc ? sb->alloc : 64;
	while (n < need)
		n = n > SIZE_MAX / 2 ? need : n * 2;
	if (sb->alloc == 0) {
		sb->buf = xmalloc(n);
		sb->buf[0] = '\0';
	} else {
		sb->buf = xrealloc(sb->buf, n);
	}
	sb->alloc = n;
}

void sbuf_add(struct sbuf *sb, const void *data, size_t len)
{
	if (!len)
		return;
	sbuf_grow(sb, len);
	memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void sbuf_adds(struct sbuf *sb, const char *s)
{
	sbuf_add(sb, s, strlen(s));
}

void sbuf_addch(struct sbuf *sb, char c)
{
	sbuf_add(sb, &c, 1);
}

void sbuf_vaddf(struct sbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n <= 0)
		return;
	sbuf_grow(sb, (size_t)n);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void sbuf_addf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

void sbuf_add_shell_quoted(struct sbuf *sb, const char *s)
{
	sbuf_addch(sb, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			sbuf_adds(sb, "'\\''");
		else
			sbuf_addch(sb, *s);
	}
	sbuf_addch(sb, '\'');
}

void sbuf_add_shell_argv(struct sbuf *sb, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (i)
			sbuf_addch(sb, ' ');
		const char *s = v[i];
		bool plain = *s;
		for (; plain && *s; s++)
			plain = isalnum((unsigned char)*s) || strchr("_@%+=:,./-", *s);
		if (plain)
			sbuf_adds(sb, v[i]);
		else
			sbuf_add_shell_quoted(sb, v[i]);
	}
}

void sbuf_setlen(struct sbuf *sb, size_t len)
{
	if (sb->alloc == 0)
		return;
	if (len < sb->len)
		sb->len = len;
	sb->buf[sb->len] = '\0';
}

void sbuf_reset(struct sbuf *sb)
{
	sbuf_setlen(sb, 0);
}

void sbuf_remove_front(struct sbuf *sb, size_t n)
{
	if (n >= sb->len) {
		sbuf_reset(sb);
		return;
	}
	memmove(sb->buf, sb->buf + n, sb->len - n);
	sb->len -= n;
	sb->buf[sb->len] = '\0';
}

void sbuf_rtrim(struct sbuf *sb)
{
	while (sb->len && strchr(" \t\r\n", sb->buf[sb->len - 1]))
		sb->len--;
	if (sb->alloc)
		sb->buf[sb->len] = '\0';
}

char *sbuf_detach(struct sbuf *sb)
{
	char *r = sb->alloc ? sb->buf : xstrdup("");
	sbuf_init(sb, 0);
	return r;
}

void sbuf_release(struct sbuf *sb)
{
	if (sb->alloc)
		free(sb->buf);
	sbuf_init(sb, 0);
}

void sbuf_vsay(void (*say)(void *ctx, const char *line), void *ctx, const char *fmt, va_list ap)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_vaddf(&sb, fmt, ap);
	say(ctx, sb.buf);
	sbuf_release(&sb);
}
