/*
 * store_notify.h -- webhook deliveries and device health (store_notify.c);
 * store.h includes it.
 */
#ifndef TC_STORE_NOTIFY_H
#define TC_STORE_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

/* ---- webhook deliveries and device health (store_notify.c) ---- */

/* One webhook delivery of a job (notify/notify.h); url is already redacted. */
struct store_delivery {
	double time;
	char *event, *url;
	bool ok;
	int tries;
	long status;  /* the last HTTP status, 0 = none */
	char *error;  /* NULL when delivered */
};
int store_delivery_add(struct store *st, const char *job, const struct store_delivery *d,
		       struct tc_err *err);
/* A job's deliveries, oldest first. */
int store_deliveries(struct store *st, const char *job, struct store_delivery **out, size_t *nr,
		     struct tc_err *err);
void store_deliveries_free(struct store_delivery *v, size_t nr);

/*
 * A device that failed its health check (devices/health.h): one of this
 * machine's (node "") or one a node of a multi-node job found on its own
 * host (node: its name, job: the job that found it; hub/sink.h).
 */
struct store_sick {
	char *type;
	int id;
	char *reason;
	double since;
	char *node; /* "" for this machine */
	char *job;  /* a node's: the job that found it; else NULL */
};
/* Mark a device of this machine unhealthy (reason replaces an older one), or healthy again (reason NULL). */
int store_device_health_set(struct store *st, const char *type, int id, const char *reason,
			    struct tc_err *err);
/* The same for a device of node (a name, never ""), found by job. */
int store_node_health_set(struct store *st, const char *node, const char *type, int id,
			  const char *reason, const char *job, struct tc_err *err);
/* Every row: this machine's first (node ""), then each node's. */
int store_devices_unhealthy(struct store *st, struct store_sick **out, size_t *nr,
			    struct tc_err *err);
void store_sick_free(struct store_sick *v, size_t nr);

#endif
