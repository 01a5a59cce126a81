/*
 * health_srv.c -- the server's devices checked (devices/health.h) when it
 * starts and every telemetry period: a device that fails is recorded in the
 * store, shown on the devices page, and left out of scheduling (sched.h,
 * rule 7) until it passes again.  A device a running job holds is not
 * taken from it: its supervisor checks again before a restart.
 */
#include "server/server_int.h"
#include "core/xalloc.h"
#include "devices/health.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TYPES 8

struct srv_health {
	const char *type[MAX_TYPES];
	struct health_watch *w[MAX_TYPES];
	size_t ntypes;
	char **why; /* per scheduler device: why it is unhealthy, or NULL */
};

static struct health_watch *watch_of(struct srv_health *h, const char *type)
{
	for (size_t t = 0; t < h->ntypes; t++)
		if (!strcmp(h->type[t], type))
			return h->w[t];
	if (h->ntypes == MAX_TYPES)
		return NULL;
	h->type[h->ntypes] = type;
	return h->w[h->ntypes++] = health_open(type);
}

void srv_health_refresh(struct srv *s)
{
	if (!s->health) {
		s->health = xcalloc(1, sizeof(*s->health));
		s->health->why = xcalloc(s->ndevs ? s->ndevs : 1, sizeof(char *));
	}
	struct srv_health *h = s->health;
	int *ids = xcalloc(s->ndevs ? s->ndevs : 1, sizeof(int));
	size_t *at = xcalloc(s->ndevs ? s->ndevs : 1, sizeof(size_t));
	char **why = xcalloc(s->ndevs ? s->ndevs : 1, sizeof(char *));
	for (size_t i = 0; i < s->ndevs; i++) {
		const char *type = s->devs[i].type;
		bool first = true; /* each type once, all its devices in one check */
		for (size_t k = 0; k < i && first; k++)
			first = strcmp(s->devs[k].type, type) != 0;
		if (!first || !health_checked(type))
			continue;
		int n = 0;
		for (size_t k = i; k < s->ndevs; k++)
			if (!strcmp(s->devs[k].type, type)) {
				at[n] = k;
				ids[n++] = s->devs[k].id;
			}
		health_check(watch_of(h, type), ids, n, why);
		for (int k = 0; k < n; k++) {
			size_t d = at[k];
			bool was = h->why[d] != NULL, is = why[k] != NULL;
			if (was != is || (is && strcmp(h->why[d], why[k]) != 0)) {
				struct tc_err err = TC_ERR_INIT;
				struct sbuf msg = SBUF_INIT;
				if (is)
					sbuf_addf(&msg, "warning: %s %d is unhealthy (%s): no job gets it",
						  type, ids[k], why[k]);
				else
					sbuf_addf(&msg, "%s %d passes its health check again", type, ids[k]);
				srv_say(s, msg.buf);
				sbuf_release(&msg);
				if (store_device_health_set(s->st, type, ids[k], why[k], &err)) {
					srv_say(s, err.msg);
					tc_err_release(&err);
				}
			}
			free(h->why[d]);
			h->why[d] = why[k];
			why[k] = NULL;
		}
	}
	free(why);
	free(at);
	free(ids);
}

void srv_health_apply(struct srv *s)
{
	for (size_t i = 0; s->health && i < s->ndevs; i++) {
		int *o = &s->devs[i].owner;
		if (s->health->why[i] && *o == SCHED_FREE)
			*o = SCHED_UNHEALTHY;
		else if (!s->health->why[i] && *o == SCHED_UNHEALTHY)
			*o = SCHED_FREE;
	}
}

const char *srv_health_of(const struct srv *s, size_t dev)
{
	return s->health && dev < s->ndevs ? s->health->why[dev] : NULL;
}

void srv_health_end(struct srv *s)
{
	struct srv_health *h = s->health;
	if (!h)
		return;
	for (size_t t = 0; t < h->ntypes; t++)
		health_close(h->w[t]);
	for (size_t i = 0; i < s->ndevs; i++)
		free(h->why[i]);
	free(h->why);
	free(h);
	s->health = NULL;
}
