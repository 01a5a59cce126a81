/*
 * fake_nvml.c -- a stand-in libnvidia-ml.so.1 for the tests (built by the
 * test build into <build>/fake-nvml/; put that folder on LD_LIBRARY_PATH).
 * It exports the NVML functions trainctl dlopens (src/devices/) and takes
 * its GPUs and their faults from the file named by $TRAINCTL_FAKE_NVML,
 * read again at every call so that a test (or a job's worker) can break a
 * GPU while trainctl runs.  Lines:
 *
 *   count N            N GPUs (default 2)
 *   I retired_pending  GPU I has retired pages pending
 *   I remap_pending    GPU I has row remapping pending
 *   I remap_failed     GPU I's row remapping failed
 *   I ecc N            GPU I has N uncorrectable ECC errors (volatile)
 *   I xid N            an XID N event on GPU I (each such line is delivered
 *                      once per process, in order, by nvmlEventSetWait_v2)
 *   no_remap           nvmlDeviceGetRemappedRows is "not supported"
 *
 * "{node}" in the file's name is replaced by $SLURMD_NODENAME (empty when
 * unset): each node of the test Slurm cluster can have GPUs of its own.
 * No file, or no variable: 2 healthy GPUs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK 0
#define ERR_INVALID 2
#define ERR_NOT_SUPPORTED 3
#define ERR_TIMEOUT 10
#define MAXG 16

struct gpu {
	int retired, remap, remap_failed;
	unsigned long long ecc;
};

static struct gpu gpus[MAXG];
static int ngpus, no_remap;
static unsigned long long xid_dev[64], xid_val[64];
static int nxid;
static int xid_delivered; /* per process */
static int handles[MAXG]; /* a handle is &handles[i] */

/*
 * The conf file's state, parsed afresh and published whole under a lock:
 * the supervisor calls NVML from two threads (the health check, the device
 * sampler), and two parses into the same counters at once made one XID
 * line count twice ("XID 79, 79").
 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct conf {
	struct gpu gpus[MAXG];
	int ngpus, no_remap, nxid;
	unsigned long long xid_dev[64], xid_val[64];
};

static void parse(struct conf *c)
{
	memset(c, 0, sizeof(*c));
	c->ngpus = 2;
	/* "{node}" in the path: the Slurm node's name, so that nodes differ */
	const char *path = getenv("TRAINCTL_FAKE_NVML");
	char full[4096];
	const char *node = getenv("SLURMD_NODENAME");
	const char *at = path ? strstr(path, "{node}") : NULL;
	if (at) {
		snprintf(full, sizeof(full), "%.*s%s%s", (int)(at - path), path, node ? node : "",
			 at + 6);
		path = full;
	}
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		int i;
		unsigned long long v;
		char what[64];
		if (sscanf(line, "count %d", &i) == 1 && i >= 0 && i <= MAXG) {
			c->ngpus = i;
		} else if (!strncmp(line, "no_remap", 8)) {
			c->no_remap = 1;
		} else if (sscanf(line, "%d %63s %llu", &i, what, &v) == 3 && i >= 0 && i < MAXG) {
			if (!strcmp(what, "ecc"))
				c->gpus[i].ecc = v;
			else if (!strcmp(what, "xid") && c->nxid < 64) {
				c->xid_dev[c->nxid] = (unsigned long long)i;
				c->xid_val[c->nxid++] = v;
			}
		} else if (sscanf(line, "%d %63s", &i, what) == 2 && i >= 0 && i < MAXG) {
			if (!strcmp(what, "retired_pending"))
				c->gpus[i].retired = 1;
			else if (!strcmp(what, "remap_pending"))
				c->gpus[i].remap = 1;
			else if (!strcmp(what, "remap_failed"))
				c->gpus[i].remap_failed = 1;
		}
	}
	fclose(f);
}

static void load(void)
{
	struct conf c;
	parse(&c);
	pthread_mutex_lock(&mu);
	memcpy(gpus, c.gpus, sizeof(gpus));
	ngpus = c.ngpus;
	no_remap = c.no_remap;
	memcpy(xid_dev, c.xid_dev, sizeof(xid_dev));
	memcpy(xid_val, c.xid_val, sizeof(xid_val));
	nxid = c.nxid;
	pthread_mutex_unlock(&mu);
}

static int index_of(void *h)
{
	load();
	for (int i = 0; i < ngpus; i++)
		if (h == &handles[i])
			return i;
	return -1;
}

int nvmlInit_v2(void) { load(); return OK; }
int nvmlShutdown(void) { return OK; }

int nvmlDeviceGetCount_v2(unsigned int *n)
{
	load();
	*n = (unsigned int)ngpus;
	return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h)
{
	load();
	if (i >= (unsigned int)ngpus)
		return ERR_INVALID;
	*h = &handles[i];
	return OK;
}

int nvmlDeviceGetName(void *h, char *buf, unsigned int len)
{
	if (index_of(h) < 0 || len < 1)
		return ERR_INVALID;
	snprintf(buf, len, "Fake GPU");
	return OK;
}

int nvmlDeviceGetUUID(void *h, char *buf, unsigned int len)
{
	int i = index_of(h);
	if (i < 0 || len < 1)
		return ERR_INVALID;
	snprintf(buf, len, "GPU-fake0000-0000-0000-0000-%012d", i);
	return OK;
}

struct mem { unsigned long long total, free, used; };
int nvmlDeviceGetMemoryInfo(void *h, struct mem *m)
{
	if (index_of(h) < 0)
		return ERR_INVALID;
	m->total = 80ULL << 30;
	m->used = 1ULL << 30;
	m->free = m->total - m->used;
	return OK;
}

struct util { unsigned int gpu, memory; };
int nvmlDeviceGetUtilizationRates(void *h, struct util *u)
{
	if (index_of(h) < 0)
		return ERR_INVALID;
	u->gpu = 0;
	u->memory = 0;
	return OK;
}

int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw)
{
	if (index_of(h) < 0)
		return ERR_INVALID;
	*mw = 60000;
	return OK;
}

int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *t)
{
	(void)sensor;
	if (index_of(h) < 0)
		return ERR_INVALID;
	*t = 40;
	return OK;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void *h, int *pending)
{
	int i = index_of(h);
	if (i < 0)
		return ERR_INVALID;
	*pending = gpus[i].retired;
	return OK;
}

int nvmlDeviceGetRemappedRows(void *h, unsigned int *corr, unsigned int *unc,
			      unsigned int *pending, unsigned int *failed)
{
	int i = index_of(h);
	if (i < 0)
		return ERR_INVALID;
	if (no_remap)
		return ERR_NOT_SUPPORTED;
	*corr = 0;
	*unc = gpus[i].remap ? 1 : 0;
	*pending = (unsigned int)gpus[i].remap;
	*failed = (unsigned int)gpus[i].remap_failed;
	return OK;
}

int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *n)
{
	int i = index_of(h);
	if (i < 0)
		return ERR_INVALID;
	*n = type == 1 && counter == 0 ? gpus[i].ecc : 0;
	return OK;
}

static int the_set;

int nvmlEventSetCreate(void **set)
{
	*set = &the_set;
	return OK;
}

int nvmlEventSetFree(void *set)
{
	return set == &the_set ? OK : ERR_INVALID;
}

int nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set)
{
	(void)types;
	return index_of(h) >= 0 && set == &the_set ? OK : ERR_INVALID;
}

struct event { void *device; unsigned long long type, data; unsigned int gi, ci; };
int nvmlEventSetWait_v2(void *set, struct event *e, unsigned int timeout_ms)
{
	(void)timeout_ms;
	if (set != &the_set)
		return ERR_INVALID;
	load();
	pthread_mutex_lock(&mu);
	if (xid_delivered >= nxid) {
		pthread_mutex_unlock(&mu);
		return ERR_TIMEOUT;
	}
	int i = xid_delivered++;
	e->device = &handles[xid_dev[i] < MAXG ? xid_dev[i] : 0];
	e->type = 0x8; /* nvmlEventTypeXidCriticalError */
	e->data = xid_val[i];
	e->gi = e->ci = 0;
	pthread_mutex_unlock(&mu);
	return OK;
}
