/*
 * lease.c -- the devices of a `trainctl run` job, leased in the store
 * (store.h: device leases) before anything of the job exists, so that a
 * server on the same state folder and other runs never hand them out
 * while it runs.  The lease is the supervisor's: released at its end, and
 * by its death when it is killed.
 */
#include "launch/supervisor_int.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The ids a run may take: the spec's (named, or the first ones), else
 * (wide) every one of its type here, lowest first.
 */
static int *candidates(const struct spec *s, bool wide, int *n)
{
	int *v = NULL;
	*n = 0;
	if (wide) {
		struct device_list l = DEVICE_LIST_INIT;
		devices_discover(&l);
		size_t alloc = 0;
		for (size_t i = 0; i < l.nr; i++)
			if (!strcmp(l.v[i].type, s->device_type)) {
				XGROW(v, (size_t)*n + 1, alloc);
				v[(*n)++] = l.v[i].id;
			}
		device_list_release(&l);
	}
	if (*n < s->per_node) {
		/* named, or a type this machine cannot list: exactly the spec's ids */
		free(v);
		v = xcalloc((size_t)s->per_node, sizeof(int));
		memcpy(v, s->device_ids, (size_t)s->per_node * sizeof(int));
		*n = s->per_node;
	}
	return v;
}

static void say_holder(struct sbuf *out, const struct store_lease *b)
{
	sbuf_addf(out, "%s %d is held by job %s", b->type, b->id, b->job_id);
	if (b->job_name)
		sbuf_addf(out, " (%s", b->job_name);
	if (b->user && *b->user)
		sbuf_addf(out, "%s%s", b->job_name ? ", user " : " (user ", b->user);
	if (b->job_name || (b->user && *b->user))
		sbuf_addch(out, ')');
	if (b->managed)
		sbuf_adds(out, " of trainctl server");
	else
		sbuf_addf(out, ", `trainctl run` pid %ld", (long)b->pid);
}

int sup_lease_devices(struct sup *sp, struct tc_err *err)
{
	const struct spec *s = sp->s;
	/* the server leased a supervised job's devices; Slurm allocates a node's; cpus are slots */
	if (sp->o->job_id || sp->o->node || !strcmp(s->device_type, "cpu"))
		return 0;
	int *got = xcalloc((size_t)s->per_node, sizeof(int));
	struct store_lease busy;
	unsigned long long ticks = proc_start_ticks(getpid());
	int rc = TC_EBUSY;
	/* the spec's ids first: discovery (NVML) again only when they are taken */
	for (int wide = 0; rc == TC_EBUSY && wide <= !s->device_ids_given; wide++) {
		int ncand = 0;
		int *cand = candidates(s, wide, &ncand);
		if (wide) {
			store_lease_release(&busy);
			tc_err_release(err);
		}
		/* a `trainctl run`: its sink is direct, over the machine's database */
		rc = store_lease_take(sink_store(sp->sink), sp->job_id, s->device_type, cand, ncand,
				      s->per_node, getpid(), ticks, got, &busy, err);
		free(cand);
	}
	if (rc == TC_EBUSY && busy.job_id) {
		struct sbuf msg = SBUF_INIT;
		say_holder(&msg, &busy);
		sbuf_adds(&msg, s->device_ids_given
					? ": wait for it to end, or name other devices (devices.ids)"
					: ": no other free set of them here; wait for it to end");
		rc = tc_error(err, TC_EBUSY, "%s", msg.buf);
		sbuf_release(&msg);
	}
	store_lease_release(&busy);
	if (rc) {
		free(got);
		return rc;
	}
	sp->leased = true;
	if (memcmp(got, s->device_ids, (size_t)s->per_node * sizeof(int)) != 0) {
		/* the lowest free ids, not the first ones: the workers see these */
		if (sp->s == &sp->own)
			free(sp->own.device_ids); /* chosen by the health check (health_hook.c) */
		else
			sp->own = *s;
		sp->own.device_ids = got;
		sp->s = &sp->own;
	} else {
		free(got);
	}
	return 0;
}

void sup_lease_end(struct sup *sp)
{
	if (!sp->leased)
		return;
	struct tc_err err = TC_ERR_INIT;
	if (store_lease_drop(sink_store(sp->sink), sp->job_id, &err))
		sup_say(sp, "warning: %s (the lease ends with this process anyway)", err.msg);
	tc_err_release(&err);
	sp->leased = false;
	if (sp->s == &sp->own) {
		free(sp->own.device_ids);
		sp->own.device_ids = NULL;
	}
}
