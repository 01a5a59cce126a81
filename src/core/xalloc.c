/* xalloc.c -- allocation that aborts on exhaustion. */
#include "core/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void xdie_oom(size_t n)
{
	fprintf(stderr, "trainctl: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		xdie_oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		xdie_oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		xdie_oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		xdie_oom(strlen(s) + 1);
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		xdie_oom(n + 1);
	return p;
}
