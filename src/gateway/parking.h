/*
 * parking.h -- the server's way to an endpoint on another host
 * (docs/endpoints.md "Endpoints on other nodes").
 *
 * An endpoint listens on its node's 127.0.0.1 only.  When that node is not
 * the server's host (node 0 of a Slurm job), the node's supervisor keeps a
 * few connections to the server parked (endpoint/relay.h): each is an HTTP
 * request to the hub route
 *     GET /api/v1/hub/{job}/relay/{name}
 *     X-Trainctl-Hub-Secret: {the job's secret}
 *     Connection: Upgrade
 *     Upgrade: trainctl-relay
 * that the server answers 101 and keeps in a pool per (job, endpoint name).
 * The proxy (proxy.c) takes one in place of the socket it would connect to
 * 127.0.0.1:PORT and uses it the same way; the node, on the first bytes,
 * connects to its own endpoint NAME and pumps both ways.
 *
 * NOTES ON THE DESIGN
 * (1) A parked socket belongs to the libmicrohttpd connection thread that
 *     upgraded it: that thread holds it (relay_pool_hold) until it is taken
 *     and released, or the node closes it, or its job ends, or the server
 *     stops; then libmicrohttpd closes it.  Nobody else closes it: the taker
 *     gives it back with relay_pool_release (proxy.c: up_close).
 * (2) Bounded: at most RELAY_PARK_MAX parked per (job, name), at most
 *     RELAY_JOB_MAX parked or in use per job; each is also one of the
 *     node's connections under the server's per-client limit (guard.c).
 * (3) The server never connects to a node, and never names a port: the
 *     node chooses its endpoint by the name it parked the connection for.
 *
 * Ownership: a pool owns its entries (not their sockets, note 1).
 */
#ifndef TC_GATEWAY_PARKING_H
#define TC_GATEWAY_PARKING_H

#include <stdbool.h>
#include <stddef.h>

#define RELAY_PARK_MAX 4   /* parked per (job, endpoint) */
#define RELAY_JOB_MAX 16   /* parked or in use per job (a node has --max-client-connections, 32) */
#define RELAY_WAIT_MS 5000 /* how long a request waits for a parked connection */
#define RELAY_UPGRADE "trainctl-relay"

struct relay_pool;

struct relay_pool *relay_pool_new(int park_max, int job_max);
/* Every entry must be gone (relay_pool_stop, and their holders returned). */
void relay_pool_free(struct relay_pool *p);

/* May (job, name) park one more?  0, or the HTTP status of the refusal (429, 503). */
int relay_pool_admit(struct relay_pool *p, const char *job, const char *name);

/*
 * Park fd for (job, name) and hold it, in the caller's thread, until it is
 * done with (note 1): returns then, and the caller closes it.  gone(ctx,
 * job) is asked every second or so whether the job has ended (true: the
 * entry is dropped); may be NULL.  Returns at once (-1) when over a limit.
 */
int relay_pool_hold(struct relay_pool *p, const char *job, const char *name, int fd,
		    bool (*gone)(void *ctx, const char *job), void *ctx);

/* A parked socket of (job, name), waiting at most wait_ms for one: its fd, or -1. */
int relay_pool_take(struct relay_pool *p, const char *job, const char *name, int wait_ms);
/* Give back a taken fd (shut down: the node sees its end); false: fd is not a taken one. */
bool relay_pool_release(struct relay_pool *p, int fd);

/* Counts, for tests and the limits: parked and in use, of (job, name) or of job (name NULL). */
void relay_pool_count(struct relay_pool *p, const char *job, const char *name, int *parked,
		      int *used);
/* Drop every parked entry (the server stops); later holds return at once. */
void relay_pool_stop(struct relay_pool *p);

/* ---- the server's pool (parking.c) ---- */
struct srv;
struct MHD_Connection;
struct gconn;
/* The route: park this connection for (job, name) once the job's secret checks out. */
int relay_answer(struct srv *s, struct MHD_Connection *con, const char *job, const char *name,
		 struct gconn *gc);
/* proxy.c: a parked socket of (job, name) within RELAY_WAIT_MS, or -1. */
int relay_take(const char *job, const char *name);
/* proxy.c: close an endpoint socket, giving it back when it is a relay's. */
void relay_close(int fd);
/* The server stops: every parked connection is let go. */
void relay_stop_all(void);

#endif
