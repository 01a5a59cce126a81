/* devices.c -- the kind table and discovery; see devices.h. */
#include "devices/devices.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct device_kind kinds[] = {
	{ "cpu", NULL, DEVID_NONE, "CPU" },
	{ "gpu", "CUDA_VISIBLE_DEVICES", DEVID_LOCAL_RANK, "NVIDIA" },
	{ "npu", "ASCEND_RT_VISIBLE_DEVICES", DEVID_PHYSICAL, "Huawei Ascend" },
	{ "sdaa", "SDAA_VISIBLE_DEVICES", DEVID_LOCAL_RANK, "Tecorigin" },
	{ "mlu", "MLU_VISIBLE_DEVICES", DEVID_LOCAL_RANK, "Cambricon" },
	{ "musa", "MUSA_VISIBLE_DEVICES", DEVID_LOCAL_RANK, "Moore Threads" },
	{ "rocm", "HIP_VISIBLE_DEVICES", DEVID_LOCAL_RANK, "AMD" },
	{ "xpu", "ZE_AFFINITY_MASK", DEVID_LOCAL_RANK, "Intel" },
};

const struct device_kind *device_kind_find(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kinds[i].name, name))
			return &kinds[i];
	return NULL;
}

const char *device_kind_names(void)
{
	return "cpu, gpu, npu, sdaa, mlu, musa, rocm, xpu";
}

static struct device *add_device(struct device_list *l, const char *type, int id,
				 const char *source)
{
	XGROW(l->v, l->nr + 1, l->alloc);
	struct device *d = &l->v[l->nr++];
	memset(d, 0, sizeof(*d));
	d->type = xstrdup(type);
	d->id = id;
	d->util_percent = -1;
	d->power_w = -1;
	d->temp_c = -1;
	d->source = source;
	return d;
}

/* ---- NVML, loaded at run time ---- */

typedef int (*nvml_void_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_name_fn)(void *, char *, unsigned int);
struct nvml_memory { unsigned long long total, free, used; };
typedef int (*nvml_mem_fn)(void *, struct nvml_memory *);
struct nvml_util { unsigned int gpu, memory; };
typedef int (*nvml_util_fn)(void *, struct nvml_util *);
typedef int (*nvml_uint_fn)(void *, unsigned int *);
typedef int (*nvml_temp_fn)(void *, int, unsigned int *);

static void discover_nvml(struct device_list *l)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return;
	nvml_void_fn init = (nvml_void_fn)dlsym(lib, "nvmlInit_v2");
	nvml_void_fn shutdown = (nvml_void_fn)dlsym(lib, "nvmlShutdown");
	nvml_count_fn count = (nvml_count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
	nvml_handle_fn handle = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	nvml_name_fn name = (nvml_name_fn)dlsym(lib, "nvmlDeviceGetName");
	nvml_mem_fn mem = (nvml_mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
	nvml_util_fn util = (nvml_util_fn)dlsym(lib, "nvmlDeviceGetUtilizationRates");
	nvml_uint_fn power = (nvml_uint_fn)dlsym(lib, "nvmlDeviceGetPowerUsage");
	nvml_temp_fn temp = (nvml_temp_fn)dlsym(lib, "nvmlDeviceGetTemperature");
	unsigned int n = 0;
	if (!init || !shutdown || !count || !handle || init() != 0)
		goto out;
	if (count(&n) != 0)
		n = 0;
	for (unsigned int i = 0; i < n; i++) {
		void *h = NULL;
		if (handle(i, &h) != 0)
			continue;
		struct device *d = add_device(l, "gpu", (int)i, "nvml");
		char buf[96];
		if (name && name(h, buf, sizeof(buf)) == 0) {
			buf[sizeof(buf) - 1] = '\0';
			d->name = xstrdup(buf);
		}
		struct nvml_memory m;
		if (mem && mem(h, &m) == 0) {
			d->mem_total = m.total;
			d->mem_used = m.used;
		}
		struct nvml_util u;
		if (util && util(h, &u) == 0)
			d->util_percent = (int)u.gpu;
		unsigned int mw;
		if (power && power(h, &mw) == 0)
			d->power_w = mw / 1000.0;
		unsigned int t;
		if (temp && temp(h, 0 /* NVML_TEMPERATURE_GPU */, &t) == 0)
			d->temp_c = t;
	}
	shutdown();
out:
	dlclose(lib);
}

/* ---- Ascend: `npu-smi info -l` lists "NPU ID : N" lines ---- */

static void discover_npu(struct device_list *l)
{
	char *tool = which("npu-smi");
	if (!tool)
		return;
	free(tool);
	FILE *p = popen("npu-smi info -l 2>/dev/null", "r");
	if (!p)
		return;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, p) > 0) {
		char *s = strstr(line, "NPU ID");
		if (!s)
			continue;
		s = strchr(s, ':');
		long id;
		struct sbuf v = SBUF_INIT;
		if (s) {
			sbuf_adds(&v, s + 1);
			sbuf_rtrim(&v);
		}
		const char *t = v.buf;
		while (*t == ' ')
			t++;
		if (parse_long(t, 0, 4096, &id))
			add_device(l, "npu", (int)id, "npu-smi");
		sbuf_release(&v);
	}
	free(line);
	if (pclose(p) < 0)
		return; /* the devices found so far still stand */
}

/* ---- TRAINCTL_FAKE_DEVICES="gpu:2,npu:8" ---- */

static bool discover_fake(struct device_list *l)
{
	const char *spec = getenv("TRAINCTL_FAKE_DEVICES");
	if (!spec || !*spec)
		return false;
	char *copy = xstrdup(spec);
	char *save = NULL;
	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':');
		long n;
		if (!colon)
			continue;
		*colon = '\0';
		if (!device_kind_find(item) || !parse_long(colon + 1, 0, 4096, &n))
			continue;
		for (long i = 0; i < n; i++) {
			struct device *d = add_device(l, item, (int)i, "fake");
			d->name = xstrdup("fake device");
		}
	}
	free(copy);
	return true;
}

void devices_discover(struct device_list *l)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct device *cpu = add_device(l, "cpu", 0, "sysconf");
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%ld cores", ncpu > 0 ? ncpu : 1);
	cpu->name = sbuf_detach(&sb);
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	if (pages > 0 && psize > 0)
		cpu->mem_total = (uint64_t)pages * (uint64_t)psize;
	if (discover_fake(l))
		return;
	discover_nvml(l);
	discover_npu(l);
}

void device_list_release(struct device_list *l)
{
	for (size_t i = 0; i < l->nr; i++) {
		free(l->v[i].type);
		free(l->v[i].name);
	}
	free(l->v);
	l->v = NULL;
	l->nr = l->alloc = 0;
}

int devices_count(const struct device_list *l, const char *type)
{
	if (!strcmp(type, "cpu")) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		return n > 0 ? (int)n : 1;
	}
	int n = 0;
	bool fake = false;
	for (size_t i = 0; i < l->nr; i++) {
		if (!strcmp(l->v[i].source, "fake"))
			fake = true;
		if (!strcmp(l->v[i].type, type))
			n++;
	}
	/* gpu and npu have discovery; others are unknown unless faked */
	if (n || fake || !strcmp(type, "gpu") || !strcmp(type, "npu"))
		return n;
	return -1;
}
