/*
 * xalloc.h -- allocation that never returns NULL (Redis's zmalloc habit):
 * on exhaustion it prints the size asked for and aborts, so callers never
 * test the result.
 */
#ifndef TC_CORE_XALLOC_H
#define TC_CORE_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
_Noreturn void xdie_oom(size_t n);

/* Grow *arr (element size sz) so that index need-1 fits. */
#define XGROW(arr, need, alloc)                                               \
	do {                                                                  \
		if ((size_t)(need) > (alloc)) {                               \
			size_t n_ = (alloc) ? (alloc) * 2 : 8;                \
			while (n_ < (size_t)(need))                           \
				n_ *= 2;                                      \
			(arr) = xrealloc((arr), n_ * sizeof(*(arr)));         \
			(alloc) = n_;                                         \
		}                                                             \
	} while (0)

#endif
