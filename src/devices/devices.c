/* devices.c -- the kind table and discovery; see devices.h. */
#include "devices/devices.h"
#include "core/lazylib.h"
#include "core/sbuf.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
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

/* ---- NVML, through core/lazylib's table ---- */

static void discover_nvml(struct device_list *l)
{
	const struct tc_nvml *nv = tc_nvml();
	unsigned int n = 0;
	if (!nv || nv->init() != 0)
		return;
	if (nv->count(&n) != 0)
		n = 0;
	for (unsigned int i = 0; i < n; i++) {
		void *h = NULL;
		if (nv->handle(i, &h) != 0)
			continue;
		struct device *d = add_device(l, "gpu", (int)i, "nvml");
		char buf[96];
		if (nv->name && nv->name(h, buf, sizeof(buf)) == 0) {
			buf[sizeof(buf) - 1] = '\0';
			d->name = xstrdup(buf);
		}
		if (nv->uuid && nv->uuid(h, buf, sizeof(buf)) == 0) {
			buf[sizeof(buf) - 1] = '\0';
			d->uuid = xstrdup(buf);
		}
		struct tc_nvml_memory m;
		if (nv->memory && nv->memory(h, &m) == 0) {
			d->mem_total = m.total;
			d->mem_used = m.used;
		}
		struct tc_nvml_utilization u;
		if (nv->utilization && nv->utilization(h, &u) == 0)
			d->util_percent = (int)u.gpu;
		unsigned int mw;
		if (nv->power && nv->power(h, &mw) == 0)
			d->power_w = mw / 1000.0;
		unsigned int t;
		if (nv->temperature && nv->temperature(h, 0 /* NVML_TEMPERATURE_GPU */, &t) == 0)
			d->temp_c = t;
	}
	nv->shutdown();
}

/* ---- Ascend: the `npu-smi info` table, else `npu-smi info -l` ---- */

/* The three trimmed cells of a "| a | b | c |" row, or false. */
static bool npu_cells(const char *line, size_t len, struct sbuf cell[3])
{
	if (!len || line[0] != '|')
		return false;
	int n = 0;
	const char *p = line + 1, *end = line + len;
	while (p < end) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		if (!bar)
			break;
		if (n == 3)
			return false; /* a fourth cell: the process table */
		sbuf_reset(&cell[n]);
		sbuf_add(&cell[n], p, (size_t)(bar - p));
		sbuf_rtrim(&cell[n]);
		size_t lead = 0;
		while (lead < cell[n].len && (cell[n].buf[lead] == ' ' || cell[n].buf[lead] == '\t'))
			lead++;
		sbuf_remove_front(&cell[n], lead);
		n++;
		p = bar + 1;
	}
	return n == 3;
}

/* Split s on blanks and '/' ("3380/ 65536" is two numbers and a slash). */
static size_t npu_words(char *s, char **w, size_t max)
{
	size_t n = 0;
	for (char *c = s; *c;) {
		while (*c == ' ' || *c == '\t')
			c++;
		if (!*c || n == max)
			break;
		if (*c == '/') {
			w[n++] = (char *)"/";
			c++;
			continue;
		}
		w[n++] = c;
		while (*c && *c != ' ' && *c != '\t' && *c != '/')
			c++;
		if (*c == '/') {
			/* end the word here, keep the slash as its own word */
			if (n < max) {
				*c++ = '\0';
				w[n++] = (char *)"/";
			}
		} else if (*c) {
			*c++ = '\0';
		}
	}
	return n;
}

/* A figure of the table, or -1 (NA, -, garbage); at most 1e12 so that MB in bytes fit 64 bits. */
static double npu_num(const char *w)
{
	double v;
	return w && parse_double(w, &v) && v >= 0 && v <= 1e12 ? v : -1;
}

size_t devices_parse_npu_smi(const char *text, struct device_list *out)
{
	struct sbuf cell[3] = { SBUF_INIT, SBUF_INIT, SBUF_INIT };
	size_t added = 0;
	long npu = -1;
	char *name = NULL, *health = NULL;
	double power = -1, temp = -1;
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *next = nl ? nl + 1 : NULL;
		if (len >= 10 && memmem(line, len, "Process", 7))
			break; /* the process table */
		if (!npu_cells(line, len, cell)) {
			line = next;
			continue;
		}
		char *w0[4], *w2[12];
		size_t n0 = npu_words(cell[0].buf, w0, 4), n2 = npu_words(cell[2].buf, w2, 12);
		long a, b = -1;
		bool bus = strchr(cell[1].buf, ':') != NULL;
		if (n0 >= 1 && parse_long(w0[0], 0, 65535, &a) && !bus && n0 >= 2 &&
		    !parse_long(w0[1], 0, 65535, &b) && n2 >= 2) {
			/* the first row: NPU, name | health | power temp ... */
			npu = a;
			free(name);
			name = xstrdup(w0[1]);
			free(health);
			health = cell[1].len ? xstrdup(cell[1].buf) : NULL;
			power = npu_num(w2[0]);
			temp = npu_num(w2[1]);
		} else if (n0 >= 1 && parse_long(w0[0], 0, 65535, &a) && bus && npu >= 0 && n2 >= 4) {
			/* the second row: chip [id] | bus | aicore used / total [used / total] */
			long id = npu;
			if (n0 >= 2 && parse_long(w0[1], 0, 65535, &b))
				id = b;
			struct device *d = add_device(out, "npu", (int)id, "npu-smi");
			d->name = name ? xstrdup(name) : NULL;
			d->health = health ? xstrdup(health) : NULL;
			d->power_w = power;
			d->temp_c = temp;
			double util = npu_num(w2[0]);
			d->util_percent = util >= 0 && util <= 100 ? (int)util : -1;
			double mu = -1, mt = -1;
			if (n2 >= 7 && !strcmp(w2[5], "/") && npu_num(w2[6]) > 0) {
				mu = npu_num(w2[4]);
				mt = npu_num(w2[6]);
			} else if (!strcmp(w2[2], "/")) {
				mu = npu_num(w2[1]);
				mt = npu_num(w2[3]);
			}
			if (mu >= 0 && mt > 0) {
				d->mem_used = (uint64_t)(mu * 1048576.0);
				d->mem_total = (uint64_t)(mt * 1048576.0);
			}
			added++;
			npu = -1; /* a chip row belongs to the row just above it */
		}
		line = next;
	}
	free(name);
	free(health);
	for (int i = 0; i < 3; i++)
		sbuf_release(&cell[i]);
	return added;
}

/*
 * `npu-smi info [ARG] 2>/dev/null` without a shell: 0 with its stdout and
 * wait status, or -1 when it could not be started or waited for (out holds
 * what it printed).
 */
static int npu_smi(const char *args, struct sbuf *out, int *status)
{
	struct proc p = PROC_INIT;
	strvec_push(&p.args, "npu-smi");
	strvec_push(&p.args, "info");
	if (args)
		strvec_push(&p.args, args);
	proc_env_inherit(&p.env);
	p.err.how = PROC_IO_NULL;
	struct proc_capture c = { .out = out };
	struct tc_err err = TC_ERR_INIT;
	int rc = proc_capture(&p, &c, &err);
	*status = c.status;
	tc_err_release(&err); /* no npu-smi, no NPUs: not an error */
	proc_clear(&p);
	return rc ? -1 : 0;
}

/* The "NPU ID : <n>" lines of `npu-smi info -l`. */
static void parse_npu_list(const char *text, struct device_list *l)
{
	for (const char *line = text; *line;) {
		const char *nl = strchrnul(line, '\n');
		struct sbuf one = SBUF_INIT;
		sbuf_add(&one, line, (size_t)(nl - line));
		line = *nl ? nl + 1 : nl;
		char *s = strstr(one.buf, "NPU ID");
		s = s ? strchr(s, ':') : NULL;
		long id;
		struct sbuf v = SBUF_INIT;
		if (s) {
			sbuf_adds(&v, s + 1);
			sbuf_rtrim(&v);
			const char *t = v.buf;
			while (*t == ' ')
				t++;
			if (parse_long(t, 0, 4096, &id))
				add_device(l, "npu", (int)id, "npu-smi");
		}
		sbuf_release(&v);
		sbuf_release(&one);
	}
}

static void discover_npu(struct device_list *l)
{
	char *tool = which("npu-smi");
	if (!tool)
		return;
	free(tool);
	/* the table first: it carries the telemetry */
	struct sbuf out = SBUF_INIT;
	int st = 0;
	if (npu_smi(NULL, &out, &st) == 0) {
		size_t found = st == 0 ? devices_parse_npu_smi(out.buf, l) : 0;
		if (found) {
			sbuf_release(&out);
			return;
		}
	}
	sbuf_reset(&out);
	/* what it listed counts, whatever its exit status (or a lost wait status) */
	if (npu_smi("-l", &out, &st) == 0 || out.len)
		parse_npu_list(out.buf, l);
	sbuf_release(&out);
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
			struct sbuf u = SBUF_INIT;
			sbuf_addf(&u, "fake-%s-%ld", item, i); /* stable, so a test can join on it */
			d->uuid = sbuf_detach(&u);
		}
	}
	free(copy);
	return true;
}

/* Host memory in use: MemTotal - MemAvailable of /proc/meminfo (what free(1) calls used), or 0. */
static uint64_t cpu_mem_used(uint64_t total)
{
	struct sbuf text = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	uint64_t used = 0;
	if (read_file("/proc/meminfo", &text, &err) == 0) {
		const char *a = strstr(text.buf, "MemAvailable:");
		unsigned long long kib;
		if (a && sscanf(a + 13, "%llu", &kib) == 1 && kib * 1024ull <= total)
			used = total - kib * 1024ull;
	}
	tc_err_release(&err); /* no /proc: the use is unknown, not an error */
	sbuf_release(&text);
	return used;
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
	cpu->mem_used = cpu_mem_used(cpu->mem_total);
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
		free(l->v[i].health);
		free(l->v[i].uuid);
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

void devices_why_none(const char *type, struct sbuf *out)
{
	const char *fake = getenv("TRAINCTL_FAKE_DEVICES");
	if (fake && *fake) {
		sbuf_addf(out, "TRAINCTL_FAKE_DEVICES is '%s'", fake);
		return;
	}
	if (!strcmp(type, "gpu")) {
		const struct tc_nvml *nv = tc_nvml();
		if (!nv) {
			sbuf_adds(out, "NVML is not present (no libnvidia-ml.so.1: no NVIDIA driver)");
			return;
		}
		int r = nv->init();
		unsigned int n = 0;
		if (r != 0)
			sbuf_addf(out, "NVML did not start (error %d)", r);
		else if (nv->count(&n) != 0)
			sbuf_adds(out, "NVML cannot count the GPUs");
		else
			sbuf_addf(out, "NVML reports %u GPUs", n);
		if (r == 0)
			nv->shutdown();
	} else if (!strcmp(type, "npu")) {
		char *tool = which("npu-smi");
		sbuf_adds(out, tool ? "npu-smi lists no NPUs" : "npu-smi is not on PATH (no Ascend driver)");
		free(tool);
	} else {
		sbuf_addf(out, "trainctl cannot discover %s devices", type);
	}
}

/* ---- device ids as text ---- */

char *device_ids_text(const int *ids, int n)
{
	struct sbuf sb = SBUF_INIT;
	for (int i = 0; i < n; i++)
		sbuf_addf(&sb, "%s%d", i ? "," : "", ids[i]);
	return sbuf_detach(&sb);
}

int device_ids_parse(const char *text, int **ids, int *n, struct tc_err *err)
{
	*ids = NULL;
	*n = 0;
	int *v = NULL, nv = 0;
	size_t alloc = 0;
	for (const char *p = text ? text : ""; *p;) {
		char *end;
		errno = 0;
		long x = strtol(p, &end, 10);
		if (end == p || errno || x < 0 || x > 65535 || (*end && *end != ',')) {
			free(v);
			return tc_error(err, TC_EUSAGE, "device ids '%s': not numbers 0..65535 "
					"separated by commas", text);
		}
		XGROW(v, (size_t)nv + 1, alloc);
		v[nv++] = (int)x;
		p = *end ? end + 1 : end;
	}
	*ids = v;
	*n = nv;
	return 0;
}
