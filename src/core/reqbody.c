/* reqbody.c -- request bodies under one memory budget (reqbody.h). */
#include "core/reqbody.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

static atomic_size_t budget = REQBODY_BUDGET_DEFAULT;
static atomic_size_t in_use;

void reqbody_set_budget(size_t bytes)
{
	atomic_store(&budget, bytes ? bytes : REQBODY_BUDGET_DEFAULT);
}

size_t reqbody_budget(void)
{
	return atomic_load(&budget);
}

size_t reqbody_in_use(void)
{
	return atomic_load(&in_use);
}

/* n bytes of the budget, all or none. */
static bool take(size_t n)
{
	size_t limit = atomic_load(&budget);
	size_t cur = atomic_load(&in_use);
	do {
		if (n > limit || cur > limit - n)
			return false;
	} while (!atomic_compare_exchange_weak(&in_use, &cur, cur + n));
	return true;
}

static void give(size_t n)
{
	atomic_fetch_sub(&in_use, n);
}

/* The buffer holds at least need bytes (the NUL included), its growth taken first. */
static unsigned grow(struct reqbody *b, size_t need)
{
	if (need <= b->data.alloc)
		return 0;
	size_t want = b->data.alloc ? b->data.alloc * 2 : 4096;
	if (want < need)
		want = need;
	if (want > b->cap + 1)
		want = b->cap + 1; /* need <= cap + 1: the caller checked the cap */
	if (!take(want - b->data.alloc)) {
		want = need; /* the doubling does not fit: what it needs may */
		if (!take(want - b->data.alloc))
			return 503;
	}
	b->taken += want - b->data.alloc;
	if (b->data.alloc) {
		b->data.buf = xrealloc(b->data.buf, want);
	} else {
		b->data.buf = xmalloc(want);
		b->data.buf[0] = '\0';
	}
	b->data.alloc = want;
	return 0;
}

unsigned reqbody_open(struct reqbody *b, size_t cap, long long declared)
{
	reqbody_release(b);
	b->cap = cap;
	if (declared <= 0)
		return 0;
	if ((unsigned long long)declared > cap)
		return 413;
	return grow(b, (size_t)declared + 1);
}

unsigned reqbody_add(struct reqbody *b, const void *p, size_t n)
{
	if (!n)
		return 0;
	unsigned st = n > b->cap - b->data.len ? 413 : grow(b, b->data.len + n + 1);
	if (st) {
		reqbody_release(b);
		return st;
	}
	sbuf_add(&b->data, p, n); /* fits: no growth */
	return 0;
}

int reqbody_take(struct reqbody *b, bool keep, const void *p, size_t n, size_t *dropped)
{
	keep = keep && b->cap;
	unsigned st = keep ? reqbody_add(b, p, n) : 0;
	if (!keep || st)
		*dropped += n;
	if (*dropped > 64 * (b->cap ? b->cap : REQBODY_DRAIN_MAX))
		return -1;
	return (int)st;
}

void reqbody_release(struct reqbody *b)
{
	if (b->taken)
		give(b->taken);
	b->taken = 0;
	sbuf_release(&b->data);
}

long long reqbody_declared(const char *content_length, const char *transfer_encoding)
{
	long n;
	if (transfer_encoding)
		return -1;
	if (!content_length)
		return 0;
	return parse_long(content_length, 0, LONG_MAX, &n) ? n : -1;
}

bool reqbody_drains(long long declared)
{
	return declared >= 0 && (unsigned long long)declared <= REQBODY_DRAIN_MAX;
}

unsigned reqbody_admit(struct reqbody *b, size_t cap, long long declared, bool *now)
{
	unsigned st = reqbody_open(b, cap, declared);
	*now = false;
	if (st == 413 && !cap) {
		/* a route without a body: a short one is read and dropped, a long one refused */
		*now = !reqbody_drains(declared);
		return *now ? 413 : 0;
	}
	if (st == 413) /* read and dropped so that the client gets its 413; an absurd one is not read */
		*now = declared > 64LL * (long long)cap;
	else if (st)
		*now = !reqbody_drains(declared);
	return st;
}
