/*
 * relay.h -- the node's side of the endpoint relay (gateway/parking.h,
 * docs/endpoints.md "Endpoints on other nodes"): node 0 of a job whose hub
 * is `trainctl server` on another host keeps a few connections parked at
 * the server for each of its HTTP endpoints, so that the server's proxy
 * reaches them without the endpoint leaving the node's 127.0.0.1.
 *
 * NOTES ON THE DESIGN
 * (1) A connection: TCP to the hub's address, then
 *         GET /api/v1/hub/{job}/relay/{name} HTTP/1.1
 *         X-Trainctl-Hub-Secret: ..., Connection: Upgrade, Upgrade: trainctl-relay
 *     answered 101; then it waits.  Its first bytes are a request for the
 *     endpoint: the node connects to 127.0.0.1 at the port of the endpoint
 *     it started under that name (never a port the server names) and pumps
 *     both ways until either side closes.
 * (2) Threads: each connection is one thread, which parks, pumps, and parks
 *     again (or ends when enough others are parked).  When one starts
 *     pumping, another is started so that pool stay parked, up to max per
 *     endpoint.  A refused or failed connection is tried again after a
 *     back-off (1 s, up to 10 s): a server that restarts is found again.
 *     A 404 (a hub that is not `trainctl server`: it has no such route) or
 *     a 410 (the job has ended) ends the thread.
 * (3) ep_relay_stop shuts every socket down and joins every thread: nothing
 *     is left when the job ends.
 *
 * Ownership: the relay copies what it is given.  Nothing here prints; the
 * say callback gets one line per kind of trouble (it may be called from the
 * relay's threads).
 */
#ifndef TC_ENDPOINT_RELAY_H
#define TC_ENDPOINT_RELAY_H

#include <stddef.h>

#include "core/err.h"
#include "core/sbuf.h"

struct ep_relay_target {
	const char *name; /* the endpoint's name */
	int port;         /* where it listens on 127.0.0.1 */
};

struct ep_relay_opts {
	const char *url;    /* http://HOST:PORT of the hub (`trainctl server`) */
	const char *secret; /* the job's hub secret */
	const char *job_id;
	const struct ep_relay_target *targets;
	size_t ntargets;
	int pool; /* parked per endpoint; <= 0: 2 */
	int max;  /* connections per endpoint, parked and in use; <= 0: 8 */
	void (*say)(void *ctx, const char *msg);
	void *say_ctx;
};

struct ep_relay;

int ep_relay_start(const struct ep_relay_opts *o, struct ep_relay **out, struct tc_err *err);
/* Close everything and join every thread (note 3); NULL is a no-op. */
void ep_relay_stop(struct ep_relay *r);
/* Connections parked now, over all endpoints (tests). */
int ep_relay_parked(struct ep_relay *r);

/* ---- pure parts (unit-tested) ---- */
/* "http://HOST:PORT[/...]" -> host and port (heap); -1 for anything else. */
int ep_relay_parse_url(const char *url, char **host, char **port);
/* The upgrade request of note 1, appended to out. */
void ep_relay_request(struct sbuf *out, const char *hostport, const char *job, const char *name,
		      const char *secret);
/*
 * The server's answer so far (buf, n): 1 when its head is whole (*status,
 * *head_len: the bytes up to and with the empty line), 0 when more is
 * needed, -1 when it is not an HTTP answer (or its head is over 16 KiB).
 */
int ep_relay_parse_answer(const char *buf, size_t n, unsigned *status, size_t *head_len);

#endif
