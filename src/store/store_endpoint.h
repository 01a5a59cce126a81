/*
 * store_endpoint.h -- a job's endpoints and their ports (store_endpoint.c);
 * store.h includes it.
 */
#ifndef TC_STORE_ENDPOINT_H
#define TC_STORE_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

/*
 * A job's endpoint (endpoint/endpoint.h, store_endpoint.c): one row per
 * name, replaced whole by each put.  secret is the token the proxy hands
 * the service (never shown by the API); host:port where it listens.
 */
struct store_endpoint {
	char *name, *kind;
	char *host;     /* "127.0.0.1" for a sidecar of this machine */
	int port;
	char *state;    /* starting | running | exited | stopped | failed */
	long pid;       /* the sidecar's pid (its group), 0 when none */
	char *secret;   /* NULL: the service has no token of ours */
	char *note;     /* why it exited or failed, or NULL */
	double updated;
};
int store_endpoint_put(struct store *st, const char *job, const struct store_endpoint *e,
		       struct tc_err *err);
/* A job's endpoints, by name. */
int store_endpoints(struct store *st, const char *job, struct store_endpoint **out, size_t *nr,
		    struct tc_err *err);
/* One of them: TC_ENOTFOUND when the job has none of that name. */
int store_endpoint_get(struct store *st, const char *job, const char *name,
		       struct store_endpoint *out, struct tc_err *err);
void store_endpoint_release(struct store_endpoint *e);
void store_endpoints_free(struct store_endpoint *v, size_t nr);

#endif
