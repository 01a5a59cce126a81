/*
 * health_hook.c -- the job's devices checked (devices/health.h) before its
 * first attempt and before each restart: a device that fails is marked in
 * the store (the server schedules around it) and is not handed to the job;
 * the job runs on fewer only when its spec allows (devices.min_per_node).
 */
#include "launch/supervisor_int.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "devices/health.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every device of type this machine lists (heap), or NULL with *n 0. */
static int *machine_ids(const char *type, int *n)
{
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	int *v = xcalloc(l.nr + 1, sizeof(int));
	*n = 0;
	for (size_t i = 0; i < l.nr; i++)
		if (!strcmp(l.v[i].type, type))
			v[(*n)++] = l.v[i].id;
	device_list_release(&l);
	return v;
}

/* This node's name as Slurm knows it (SLURMD_NODENAME), else its host name (heap). */
static char *node_name_of(void)
{
	const char *name = getenv("SLURMD_NODENAME");
	char host[256] = "";
	if (name && *name)
		return xstrdup(name);
	if (gethostname(host, sizeof(host) - 1) < 0 || !*host)
		return xstrdup("node");
	return xstrdup(host);
}

/* The job runs on ids[0..n) from now on (sp->s becomes sp->own, which owns ids). */
static void use_devices(struct sup *sp, int *ids, int n, bool pinned)
{
	if (sp->s != &sp->own)
		sp->own = *sp->s;
	else
		free(sp->own.device_ids);
	sp->own.device_ids = ids;
	sp->own.per_node = n;
	/* the lease must not widen onto the devices just refused */
	sp->own.device_ids_given = sp->own.device_ids_given || pinned;
	sp->s = &sp->own;
	sp->n = n;
}

int sup_health_check(struct sup *sp, bool first, bool *changed, struct tc_err *err)
{
	const struct spec *s = sp->s;
	*changed = false;
	if (!health_checked(s->device_type))
		return 0;
	if (!sp->hw)
		sp->hw = health_open(s->device_type);
	/* a first `trainctl run` that named no ids may take any healthy device of the machine */
	bool any = first && !s->device_ids_given && !sp->o->job_id && !sp->o->node;
	int nc = 0;
	int *cand = any ? machine_ids(s->device_type, &nc) : NULL;
	if (nc < sp->n) {
		free(cand);
		cand = xcalloc((size_t)sp->n, sizeof(int));
		memcpy(cand, s->device_ids, (size_t)sp->n * sizeof(int));
		nc = sp->n;
	}
	char **why = xcalloc((size_t)nc, sizeof(char *));
	int bad = health_check(sp->hw, cand, nc, why);
	/*
	 * The job's records learn every device checked, healthy ones too (a
	 * reset GPU comes back): this host's, or a node's by its name.
	 */
	char *node_name = sp->o->node ? node_name_of() : NULL;
	for (int i = 0; i < nc; i++) {
		struct tc_err e2 = TC_ERR_INIT;
		if (sink_device_health(sp->sink, sp->job_id, node_name, s->device_type, cand[i],
				       why[i], &e2))
			sup_say(sp, "warning: %s", e2.msg);
		tc_err_release(&e2);
	}
	free(node_name);
	int *keep = xcalloc((size_t)nc, sizeof(int));
	int nkeep = 0;
	for (int i = 0; i < nc && nkeep < sp->n; i++)
		if (!why[i])
			keep[nkeep++] = cand[i];
	struct sbuf list = SBUF_INIT;
	for (int i = 0; i < nc; i++)
		if (why[i])
			sbuf_addf(&list, "%s%s %d failed its health check: %s", list.len ? "; " : "",
				  s->device_type, cand[i], why[i]);
	if (bad && !sink_store(sp->sink)) {
		/*
		 * A node that reports to a hub has no store of its own: the
		 * device_health table is the hub host's, so the job records it
		 * as a note, with the node it was found on (show, the API).
		 */
		struct sbuf text = SBUF_INIT;
		const char *name = getenv("SLURMD_NODENAME");
		if (sp->o->node)
			sbuf_addf(&text, "node %d%s%s%s: ", sp->o->node->node_rank,
				  name && *name ? " (" : "", name && *name ? name : "",
				  name && *name ? ")" : "");
		sbuf_adds(&text, list.buf);
		struct tc_err e2 = TC_ERR_INIT;
		if (sink_note(sp->sink, sp->job_id, JOB_NOTE_UNHEALTHY, text.buf, &e2))
			sup_say(sp, "warning: %s", e2.msg);
		tc_err_release(&e2);
		sbuf_release(&text);
	}
	int min = s->min_per_node ? s->min_per_node : sp->n;
	int rc = 0;
	if (nkeep < min) {
		rc = tc_error(err, TC_EDEVICE, "%s%s; the job needs %d%s", list.buf,
			      first ? "" : " (before the restart)", min,
			      s->min_per_node ? " (devices.min_per_node)"
					      : " (devices.min_per_node lets it run on fewer)");
		free(keep);
	} else if (bad && !any && nkeep == sp->n) {
		free(keep); /* failures only among devices the job does not use */
	} else if (bad || memcmp(keep, s->device_ids, (size_t)nkeep * sizeof(int)) != 0 ||
		   nkeep != sp->n) {
		if (bad) {
			sup_event(sp, "warning: %s: running on %d %s device%s", list.buf, nkeep,
				  s->device_type, nkeep == 1 ? "" : "s");
			sup_notify(sp, NOTIFY_UNHEALTHY, NULL, list.buf, -1);
		}
		use_devices(sp, keep, nkeep, bad > 0);
		*changed = true;
	} else {
		free(keep);
	}
	if (bad && rc == 0 && !*changed)
		sup_say(sp, "warning: %s (not one of the job's)", list.buf);
	sbuf_release(&list);
	health_reasons_release(why, nc);
	free(why);
	free(cand);
	return rc;
}

void sup_health_end(struct sup *sp)
{
	health_close(sp->hw);
	sp->hw = NULL;
	if (sp->s == &sp->own && !sp->leased) {
		/* ids chosen here and never leased (lease.c frees its own) */
		free(sp->own.device_ids);
		sp->own.device_ids = NULL;
	}
}
