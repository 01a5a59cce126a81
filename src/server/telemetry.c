/*
 * telemetry.c -- resource use, sampled by the server every few seconds:
 * per job the CPU % and resident memory of its supervisor's process tree
 * (from /proc), and per device what discovery reports (NVML: utilisation,
 * memory, power, temperature).  Each running job gets one job_usage row per
 * sample; the devices page reads the latest snapshot.
 */
#include "server/server_int.h"
#include "core/json.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pinfo {
	pid_t pid, ppid;
	unsigned long long ticks; /* utime + stime */
	long long rss;            /* bytes */
};

static bool read_stat(pid_t pid, struct pinfo *p)
{
	struct proc_stat st;
	if (proc_stat_read(pid, &st) < 0)
		return false;
	p->pid = pid;
	p->ppid = st.ppid;
	p->ticks = st.utime + st.stime;
	p->rss = st.rss_pages * sysconf(_SC_PAGESIZE);
	return true;
}

static void scan_procs(struct pinfo **out, size_t *nr)
{
	size_t alloc = 0;
	*out = NULL;
	*nr = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		long pid;
		if (!parse_long(e->d_name, 1, 1L << 30, &pid))
			continue;
		struct pinfo p;
		if (!read_stat((pid_t)pid, &p))
			continue;
		XGROW(*out, *nr + 1, alloc);
		(*out)[(*nr)++] = p;
	}
	closedir(d);
}

/* Sum over root and its descendants. */
static void tree_sum(const struct pinfo *v, size_t n, pid_t root, unsigned long long *ticks,
		     long long *rss)
{
	pid_t *stack = xcalloc(n + 1, sizeof(pid_t));
	size_t sp = 0;
	stack[sp++] = root;
	*ticks = 0;
	*rss = 0;
	bool *seen = xcalloc(n + 1, sizeof(bool));
	while (sp) {
		pid_t p = stack[--sp];
		for (size_t i = 0; i < n; i++) {
			if (seen[i])
				continue;
			if (v[i].pid == p) {
				seen[i] = true;
				*ticks += v[i].ticks;
				*rss += v[i].rss;
			}
		}
		for (size_t i = 0; i < n && sp < n; i++)
			if (v[i].ppid == p && v[i].pid != p) {
				bool dup = false;
				for (size_t k = 0; k < sp && !dup; k++)
					dup = stack[k] == v[i].pid;
				if (!dup)
					stack[sp++] = v[i].pid;
			}
	}
	free(stack);
	free(seen);
}

static void device_json(struct sbuf *sb, const struct device *d, const char *holder,
			const char *unhealthy)
{
	sbuf_adds(sb, "{\"type\":");
	json_add_str(sb, d->type);
	sbuf_addf(sb, ",\"id\":%d,\"name\":", d->id);
	json_add_str(sb, d->name);
	sbuf_addf(sb, ",\"mem_total\":%llu,\"mem_used\":%llu,\"util\":", (unsigned long long)d->mem_total,
		  (unsigned long long)d->mem_used);
	if (d->util_percent >= 0)
		sbuf_addf(sb, "%d", d->util_percent);
	else
		sbuf_adds(sb, "null");
	sbuf_adds(sb, ",\"power\":");
	if (d->power_w >= 0)
		sbuf_addf(sb, "%.1f", d->power_w);
	else
		sbuf_adds(sb, "null");
	sbuf_adds(sb, ",\"temp\":");
	if (d->temp_c >= 0)
		sbuf_addf(sb, "%.0f", d->temp_c);
	else
		sbuf_adds(sb, "null");
	sbuf_adds(sb, ",\"source\":");
	json_add_str(sb, d->source);
	sbuf_adds(sb, ",\"uuid\":");
	json_add_str(sb, d->uuid);
	sbuf_adds(sb, ",\"job\":");
	json_add_str(sb, holder);
	if (unhealthy) { /* only devices that failed their health check carry it */
		sbuf_adds(sb, ",\"unhealthy\":");
		json_add_str(sb, unhealthy);
	}
	sbuf_addch(sb, '}');
}

void telemetry_sample(struct srv *s)
{
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	struct pinfo *pv;
	size_t pn;
	scan_procs(&pv, &pn);
	double now = now_wall();
	long hz = sysconf(_SC_CLK_TCK);
	/* the devices page: every scheduler device with the latest figures */
	struct sbuf all = SBUF_INIT;
	sbuf_addch(&all, '[');
	for (size_t i = 0; i < s->ndevs; i++) {
		const struct device *found = NULL;
		for (size_t k = 0; k < l.nr && !found; k++)
			if (!strcmp(l.v[k].type, s->devs[i].type) &&
			    (l.v[k].id == s->devs[i].id || !strcmp(s->devs[i].type, "cpu")))
				found = &l.v[k];
		struct device d = { 0 };
		if (found)
			d = *found;
		d.type = (char *)s->devs[i].type;
		d.id = s->devs[i].id;
		if (!found) {
			d.util_percent = -1;
			d.power_w = d.temp_c = -1;
			d.source = "scheduler";
		}
		if (!strcmp(d.type, "cpu")) {
			d.name = (char *)"cpu slot";
			d.mem_total = d.mem_used = 0;
		}
		int o = s->devs[i].owner;
		if (i)
			sbuf_addch(&all, ',');
		device_json(&all, &d, o >= 0 ? s->jobs[o].id : o == SCHED_LEASED ? s->lease_job[i] : NULL,
			    srv_health_of(s, i));
	}
	sbuf_addch(&all, ']');
	free(s->devices_json);
	s->devices_json = sbuf_detach(&all);

	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = &s->jobs[i];
		if (j->st != SJ_RUNNING && j->st != SJ_STOPPING)
			continue;
		if (!proc_alive(j->pid, j->ticks))
			continue;
		unsigned long long ticks;
		long long rss;
		tree_sum(pv, pn, j->pid, &ticks, &rss);
		double cpu = 0;
		if (j->cpu_time > 0 && now > j->cpu_time && ticks >= j->cpu_ticks)
			cpu = (double)(ticks - j->cpu_ticks) / (double)hz / (now - j->cpu_time) * 100.0;
		bool first = j->cpu_time == 0;
		j->cpu_ticks = ticks;
		j->cpu_time = now;
		if (first)
			continue; /* a rate needs two samples */
		struct sbuf dev = SBUF_INIT;
		sbuf_addch(&dev, '[');
		int n = 0;
		for (int k = 0; k < j->count && j->ids && strcmp(j->type, "cpu"); k++)
			for (size_t m = 0; m < l.nr; m++)
				if (!strcmp(l.v[m].type, j->type) && l.v[m].id == j->ids[k]) {
					if (n++)
						sbuf_addch(&dev, ',');
					device_json(&dev, &l.v[m], NULL, NULL);
				}
		sbuf_addch(&dev, ']');
		struct tc_err err = TC_ERR_INIT;
		if (store_usage_add(s->st, j->id, now, cpu, (double)rss, dev.buf, &err))
			tc_err_release(&err); /* telemetry is never a reason to stop */
		sbuf_release(&dev);
	}
	free(pv);
	device_list_release(&l);
}
