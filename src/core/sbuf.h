/*
 * sbuf.h -- growable strings (git's strbuf).
 *
 * Invariants: buf is never NULL and always NUL-terminated, also right after
 * SBUF_INIT (it points at a shared empty string until the first growth);
 * len excludes the NUL.  Ownership leaves the struct only via sbuf_detach().
 * Allocation failure aborts (see xalloc.h), so no function here fails.
 */
#ifndef TC_CORE_SBUF_H
#define TC_CORE_SBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "core/err.h"

extern char sbuf_empty[];

struct sbuf {
	char *buf;
	size_t len;
	size_t alloc; /* 0 while buf == sbuf_empty */
};
#define SBUF_INIT { sbuf_empty, 0, 0 }

void sbuf_init(struct sbuf *sb, size_t hint);
void sbuf_grow(struct sbuf *sb, size_t extra);
void sbuf_add(struct sbuf *sb, const void *data, size_t len);
void sbuf_adds(struct sbuf *sb, const char *s);
void sbuf_addch(struct sbuf *sb, char c);
void sbuf_addf(struct sbuf *sb, const char *fmt, ...) TC_PRINTF(2, 3);
void sbuf_vaddf(struct sbuf *sb, const char *fmt, va_list ap);
/* fmt as one line handed to say(ctx, line), the callback of modules that print nothing. */
void sbuf_vsay(void (*say)(void *ctx, const char *line), void *ctx, const char *fmt, va_list ap);
/* Append s quoted for a POSIX shell ('...' with ' escaped). */
void sbuf_add_shell_quoted(struct sbuf *sb, const char *s);
/* v[0..n) as a shell reads them back: space-separated, quoted only where needed. */
void sbuf_add_shell_argv(struct sbuf *sb, const char *const *v, size_t n);
void sbuf_reset(struct sbuf *sb);
void sbuf_setlen(struct sbuf *sb, size_t len);
/* Drop bytes [0, n) keeping the rest. */
void sbuf_remove_front(struct sbuf *sb, size_t n);
/* Remove trailing whitespace. */
void sbuf_rtrim(struct sbuf *sb);
/* Hand the buffer to the caller (always a heap string); sb is reset. */
char *sbuf_detach(struct sbuf *sb);
void sbuf_release(struct sbuf *sb);

#endif
