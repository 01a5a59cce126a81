/*
 * route.h -- private to src/api/: the route table of the HTTP server and
 * its matcher.  A route is a method, a path pattern, a handler and who may
 * call it.  route_match() is pure (no libmicrohttpd, no store), so that the
 * unit tests (tests/unit/test_server.c) call it directly.
 *
 * PATTERNS
 *   "/api/v1/jobs/{job}/logs" is matched segment by segment: a literal
 *   matches itself, "{name}" matches any one segment and captures it under
 *   name, "*" matches any one segment, and "**" (last only) matches zero or
 *   more segments.  One trailing '/' of the path is ignored, so
 *   "/api/v1/jobs/" is "/api/v1/jobs".  Paths arrive percent-decoded
 *   (libmicrohttpd decodes them before the handler sees them), so captures
 *   are taken as they are: decoding again would turn "%2525" into "%".
 *
 * ORDER
 *   The first route of the table whose pattern matches the path names the
 *   resource.  Every route with that same pattern is one of its methods:
 *   the one with the request's method runs; if there is none the answer is
 *   405 and the methods there are (route_allow_text); a path no pattern
 *   matches is 404.  So catch-alls (a last "**") go after the routes they
 *   stand behind.
 */
#ifndef TC_API_ROUTE_H
#define TC_API_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/sbuf.h"

/* Methods as bits; HEAD is GET.  ROUTE_ANY also takes PUT, PATCH, ... */
enum route_method {
	ROUTE_GET = 1,
	ROUTE_POST = 2,
	ROUTE_DELETE = 4,
	ROUTE_OTHER = 8,
	ROUTE_ANY = 15,
};

/* Who may call a route (server_auth_decide, auth.c). */
enum route_need {
	NEED_NONE,  /* anyone: /metrics, the web UI's files */
	NEED_USER,  /* a token's user, or anyone while the server has no tokens */
	NEED_ADMIN, /* an admin token, or anyone while the server has no tokens */
};

struct api_call; /* api.c: one request being answered */
typedef int (*route_fn)(struct api_call *c);

struct route {
	unsigned methods;     /* enum route_method bits */
	const char *pattern;
	route_fn fn;
	enum route_need need;
};

#define ROUTE_MAX_PARAMS 4

struct route_param {
	const char *name; /* the pattern's text between the braces (not NUL-terminated) */
	size_t name_len;
	const char *value;
};

/* The outcome of route_match; release with route_match_release. */
struct route_match {
	unsigned status;              /* 0: matched, 404 or 405 */
	const struct route *route;    /* status 0: the route to run */
	const struct route *resource; /* 0 or 405: the first route of the matched pattern */
	unsigned allow;               /* the methods the matched pattern has */
	size_t nparams;
	struct route_param params[ROUTE_MAX_PARAMS];
	char *copy;                   /* the path's segments, which params point into */
};

/* ROUTE_GET for "GET" and "HEAD", ..., ROUTE_OTHER for anything else. */
unsigned route_method_of(const char *method);
/*
 * Match method and path against table[0..n).  Always fills m (release it
 * with route_match_release); params hold the captures of m->resource's
 * pattern also on a 405, so that a job named in the path is still looked
 * up first.
 */
void route_match(const struct route *table, size_t n, const char *method, const char *path,
		 struct route_match *m);
void route_match_release(struct route_match *m);
/* The capture {name}, or NULL. */
const char *route_param(const struct route_match *m, const char *name);
/* "GET", "GET or POST", "GET, POST or DELETE": the 405 answer's methods. */
void route_allow_text(unsigned allow, struct sbuf *out);

#endif
