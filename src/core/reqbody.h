/*
 * reqbody.h -- the bodies of HTTP requests a process keeps, under one
 * memory budget for all of them (docs/security.md, "Unauthenticated
 * bytes").
 *
 * Every listener that keeps a request's body (the API, the hub's sockets,
 * the endpoint origins) keeps it here, and only once the request's
 * credential has passed on its headers.  Each body has its route's cap;
 * all bodies together have the process's budget (reqbody_set_budget,
 * default REQBODY_BUDGET_DEFAULT): the bytes a body's buffer holds are
 * taken from it before the buffer grows and given back when the request
 * ends, so that many connections together cannot grow the process past
 * it.  A body that would pass its cap gets 413, one that would pass the
 * budget 503, and neither keeps a byte more.
 */
#ifndef TC_CORE_REQBODY_H
#define TC_CORE_REQBODY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/sbuf.h"

#define REQBODY_BUDGET_DEFAULT ((size_t)256 << 20)

/* A body that a refused request may send anyway: read and dropped, so that
 * the client reads its answer rather than a reset; a longer one is not read. */
#define REQBODY_DRAIN_MAX ((size_t)64 << 10)

struct reqbody {
	struct sbuf data; /* the bytes kept, NUL-terminated */
	size_t cap;       /* the route's most */
	size_t taken;     /* bytes of the budget this body holds */
};
#define REQBODY_INIT { SBUF_INIT, 0, 0 }

/* The process's budget in bytes (0: the default); bodies already kept keep theirs. */
void reqbody_set_budget(size_t bytes);
size_t reqbody_budget(void);
/* Bytes the process's bodies hold now. */
size_t reqbody_in_use(void);

/*
 * On the headers, the route's cap and the declared Content-Length (-1:
 * none, chunked): 0 with the declared bytes taken from the budget at
 * once, 413 over the cap, 503 over the budget.
 */
unsigned reqbody_open(struct reqbody *b, size_t cap, long long declared);
/*
 * A listener's decision on the headers, after the credential passed:
 * reqbody_open, and *now when the refusal is to be answered at once, its
 * body unread (one too long to drain, or 64 times the cap), rather than
 * once a short body was read and dropped.  0 (a short body on a route
 * without one is 0 too: read and dropped), 413 or 503.
 */
unsigned reqbody_admit(struct reqbody *b, size_t cap, long long declared, bool *now);
/* n more bytes: 0, 413 or 503; on 413 and 503 what was kept is dropped. */
unsigned reqbody_add(struct reqbody *b, const void *p, size_t n);
/*
 * A piece of a request's body as a listener's upload callback gets it: kept
 * when keep (the request is not refused) and b's route takes a body, else
 * read and dropped and counted in *dropped.  0, or reqbody_add's 413 or 503
 * (the piece is dropped too); -1 once more was dropped than any refusal
 * reads (64 times the cap, REQBODY_DRAIN_MAX times 64 for a route without a
 * body: a chunked body that does not end): the connection is to end.
 */
int reqbody_take(struct reqbody *b, bool keep, const void *p, size_t n, size_t *dropped);
/* Drop the bytes and give the budget back; b may be opened again. */
void reqbody_release(struct reqbody *b);

/*
 * The body's length from the Content-Length and Transfer-Encoding headers
 * (NULL: absent): the length, 0 for none, -1 when it is not said (chunked)
 * or cannot be read.
 */
long long reqbody_declared(const char *content_length, const char *transfer_encoding);
/* May a refused request's body be read and dropped before its answer? (REQBODY_DRAIN_MAX) */
bool reqbody_drains(long long declared);

#endif
