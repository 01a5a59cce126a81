/* health.c -- device health checks, one row per device type; see health.h. */
#include "devices/health.h"
#include "devices/devices.h"
#include "core/lazylib.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- NVML (core/lazylib's table; the values health needs, nvml.h's names) ---- */

#define NVML_SUCCESS 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_EVENT_XID_CRITICAL 0x8ULL
#define MAX_GPUS 64
#define MAX_EVENTS 256 /* drained per check; more are left for the next */
/*
 * A device XID keeps the GPU unhealthy this long after the last one: a
 * watch checked every few seconds (the server) must not hand the GPU out
 * again at the next check.
 */
#define XID_HOLD_MS (10 * 60 * 1000)

struct nvml {
	const struct tc_nvml *api; /* NULL: no NVML */
	void *set;
	unsigned int n;
	void *h[MAX_GPUS];
	struct sbuf xids[MAX_GPUS]; /* "79, 48": device XIDs seen within XID_HOLD_MS */
	int64_t xid_at[MAX_GPUS];   /* monotonic ms of the last one */
};

struct health_watch {
	const struct health_row *row;
	struct nvml nv; /* gpu */
};

bool health_xid_is_device(unsigned long long xid)
{
	/*
	 * NVIDIA's XID catalogue: these are the application's doing (a bad
	 * kernel, a page fault, a killed context), not the device's.
	 */
	static const unsigned long long app[] = { 13, 31, 43, 45, 68 };
	for (size_t i = 0; i < sizeof(app) / sizeof(app[0]); i++)
		if (xid == app[i])
			return false;
	return true;
}

static bool nvml_open(struct nvml *nv)
{
	memset(nv, 0, sizeof(*nv));
	const struct tc_nvml *api = tc_nvml();
	if (!api || api->init() != NVML_SUCCESS)
		return false;
	nv->api = api;
	if (api->count(&nv->n) != NVML_SUCCESS)
		nv->n = 0;
	if (nv->n > MAX_GPUS)
		nv->n = MAX_GPUS;
	for (unsigned int i = 0; i < nv->n; i++) {
		sbuf_init(&nv->xids[i], 0);
		if (api->handle(i, &nv->h[i]) != NVML_SUCCESS)
			nv->h[i] = NULL;
	}
	/* XIDs: an event set kept open from one check to the next */
	if (api->set_create && api->set_free && api->register_events && api->wait &&
	    api->set_create(&nv->set) == NVML_SUCCESS) {
		for (unsigned int i = 0; i < nv->n; i++)
			if (nv->h[i]) /* a device that cannot report them is not checked for them */
				(void)api->register_events(nv->h[i], NVML_EVENT_XID_CRITICAL, nv->set);
	} else {
		nv->set = NULL;
	}
	return true;
}

static void nvml_close(struct nvml *nv)
{
	if (!nv->api)
		return;
	if (nv->set)
		nv->api->set_free(nv->set);
	for (unsigned int i = 0; i < nv->n; i++)
		sbuf_release(&nv->xids[i]);
	nv->api->shutdown();
	nv->api = NULL;
}

/* The XID events waiting in the set, each added to its device's list. */
static void nvml_drain(struct nvml *nv)
{
	if (!nv->set)
		return;
	for (int k = 0; k < MAX_EVENTS; k++) {
		struct tc_nvml_event e;
		memset(&e, 0, sizeof(e));
		if (nv->api->wait(nv->set, &e, 0) != NVML_SUCCESS)
			break; /* NVML_ERROR_TIMEOUT: none left */
		if (!(e.type & NVML_EVENT_XID_CRITICAL) || !health_xid_is_device(e.data))
			continue;
		for (unsigned int i = 0; i < nv->n; i++)
			if (nv->h[i] && nv->h[i] == e.device) {
				if (nv->xids[i].len < 200) /* a storm of them: the first few say it */
					sbuf_addf(&nv->xids[i], "%s%llu", nv->xids[i].len ? ", " : "",
						  e.data);
				nv->xid_at[i] = now_mono_ms();
				break;
			}
	}
}

static char *nvml_reason(struct nvml *nv, int id)
{
	if (id < 0 || (unsigned int)id >= nv->n || !nv->h[id])
		return xstrdup("not found by NVML");
	void *h = nv->h[id];
	struct sbuf why = SBUF_INIT;
	int pending = 0;
	const struct tc_nvml *api = nv->api;
	if (api->retired_pending && api->retired_pending(h, &pending) == NVML_SUCCESS && pending)
		sbuf_adds(&why, "retired pages pending (reset the GPU)");
	unsigned int corr = 0, unc = 0, rpending = 0, failed = 0;
	if (api->remapped && api->remapped(h, &corr, &unc, &rpending, &failed) == NVML_SUCCESS) {
		if (rpending)
			sbuf_addf(&why, "%srow remapping pending (reset the GPU)", why.len ? "; " : "");
		if (failed)
			sbuf_addf(&why, "%srow remapping failed", why.len ? "; " : "");
	}
	unsigned long long ecc = 0;
	if (api->ecc &&
	    api->ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) == NVML_SUCCESS &&
	    ecc)
		sbuf_addf(&why, "%s%llu uncorrectable ECC error%s", why.len ? "; " : "", ecc,
			  ecc == 1 ? "" : "s");
	if (nv->xids[id].len && now_mono_ms() - nv->xid_at[id] >= XID_HOLD_MS)
		sbuf_reset(&nv->xids[id]);
	if (nv->xids[id].len)
		sbuf_addf(&why, "%sXID %s in the last 10 minutes", why.len ? "; " : "",
			  nv->xids[id].buf);
	if (!why.len) {
		sbuf_release(&why);
		return NULL;
	}
	return sbuf_detach(&why);
}

/* ---- Ascend: the Health cell of `npu-smi info` ---- */

char *health_npu_reason(const char *health)
{
	if (health && !strcmp(health, "OK"))
		return NULL;
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "npu-smi health %s", health && *health ? health : "unknown");
	return sbuf_detach(&sb);
}

static int npu_check(const int *ids, int n, char **reasons)
{
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	int bad = 0;
	for (int i = 0; i < n; i++) {
		const struct device *d = NULL;
		for (size_t k = 0; k < l.nr && !d; k++)
			if (!strcmp(l.v[k].type, "npu") && l.v[k].id == ids[i])
				d = &l.v[k];
		if (!d)
			reasons[i] = xstrdup("not listed by npu-smi");
		else if (!d->health) /* npu-smi info -l lists ids only: nothing to judge */
			reasons[i] = NULL;
		else
			reasons[i] = health_npu_reason(d->health);
		bad += reasons[i] != NULL;
	}
	device_list_release(&l);
	return bad;
}

/* ---- the table ---- */

struct health_row {
	const char *type;
	const char *checks; /* for messages and docs */
};

static const struct health_row rows[] = {
	{ "gpu", "NVML: retired pages pending, row remapping pending or failed, uncorrectable ECC "
		 "errors (volatile), a device XID event in the last 10 minutes" },
	{ "npu", "npu-smi info: a Health other than OK" },
};

static const struct health_row *row_of(const char *type)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (!strcmp(rows[i].type, type))
			return &rows[i];
	return NULL;
}

const char *health_checks_of(const char *type)
{
	const struct health_row *r = row_of(type);
	return r ? r->checks : "nothing (trainctl reads no health interface of this type)";
}

bool health_checked(const char *type)
{
	const char *fake = getenv("TRAINCTL_FAKE_DEVICES");
	return row_of(type) && !(fake && *fake);
}

struct health_watch *health_open(const char *type)
{
	if (!health_checked(type))
		return NULL;
	struct health_watch *w = xcalloc(1, sizeof(*w));
	w->row = row_of(type);
	if (!strcmp(type, "gpu"))
		(void)nvml_open(&w->nv); /* no NVML: every GPU is "not found" */
	return w;
}

void health_close(struct health_watch *w)
{
	if (!w)
		return;
	nvml_close(&w->nv);
	free(w);
}

int health_check(struct health_watch *w, const int *ids, int n, char **reasons)
{
	for (int i = 0; i < n; i++)
		reasons[i] = NULL;
	if (!w)
		return 0;
	if (!strcmp(w->row->type, "npu"))
		return npu_check(ids, n, reasons);
	if (!w->nv.api) {
		for (int i = 0; i < n; i++)
			reasons[i] = xstrdup("NVML is not available");
		return n;
	}
	nvml_drain(&w->nv);
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += (reasons[i] = nvml_reason(&w->nv, ids[i])) != NULL;
	return bad;
}

void health_reasons_release(char **reasons, int n)
{
	for (int i = 0; i < n; i++) {
		free(reasons[i]);
		reasons[i] = NULL;
	}
}
