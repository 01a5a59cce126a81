/*
 * request.h -- private to api.c and listen.c: a request's life on the
 * API's listeners (listen.c) and its steps through the route table
 * (api.c): decided on its headers before a byte of its body is kept, then
 * answered by its route.
 */
#ifndef TC_API_REQUEST_H
#define TC_API_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "api/api_int.h"
#include "api/route.h"
#include "core/reqbody.h"

struct MHD_Connection;
struct epreq;

struct api_req {
	struct reqbody body;  /* kept only once the headers passed (decide) */
	bool too_big, answered;
	size_t dropped;       /* body bytes read and not kept */
	bool started;         /* on_request has seen it (uri_log made it) */
	char *raw_uri;        /* the request target as sent, for the endpoint proxy */
	long peer_uid;        /* the Unix socket's peer, or -1 */
	struct gconn *gc;     /* its connection, for the header deadline (guard.c) */
	/* decided on the headers, before a byte of the body is kept (decide) */
	bool decided;
	struct route_match m;
	struct who w;         /* the caller */
	unsigned auth;        /* authenticate()'s refusal (401, 403), or 0 */
	unsigned refuse;      /* another refusal (a hub secret's, 503 for the budget), or 0 */
	char *refuse_msg;     /* its message */
	struct epreq *ep;     /* on an endpoint's host name: its request (eporigin.c) */
};

/* The refusal's words when the bodies already hold the server's budget (503). */
extern const char api_budget_spent[];

/*
 * On the headers, before a byte of the body is kept: the route, who asks,
 * a hub route's job secret, and room for the body.  *now: answer the
 * refusal at once (api_reply_refused), the body unread.
 */
void api_decide(struct srv *s, struct MHD_Connection *con, const char *url,
		const char *method, struct api_req *rq, bool *now);
/* The same for a request on an endpoint's host name (eporigin_claim took it). */
void api_decide_endpoint(struct MHD_Connection *con, struct api_req *rq, bool *now);
/* The answer to a request refused on its headers or by its body's size. */
int api_reply_refused(struct MHD_Connection *con, const struct api_req *rq, const char *url);
/* The request, its body read, through the route table to its handler. */
int api_dispatch(struct srv *s, struct MHD_Connection *con, const char *url,
		 const char *method, struct api_req *rq);

#endif
