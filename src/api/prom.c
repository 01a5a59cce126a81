/*
 * prom.c -- GET /metrics, the Prometheus text exposition (format 0.0.4):
 * the server's series, one set per device of the scheduler with the
 * latest telemetry, the allocation join series for DCGM-style exporters,
 * and per running job its step, throughput and loss-like metric.  The
 * series table is docs/monitoring.md.
 *
 * Cost: a scrape reads memory (the queue, the devices, the running jobs),
 * one indexed count per state and, per running job, its row and metric
 * summaries; never the whole jobs table.  Counters and histograms of job
 * ends, hangs, restarts and waits are kept as the server reads each event
 * (srv_prom_event), since the server started.
 *
 * Who sees what: the series that name a job or a user (job, user, name
 * labels) go to admins and the server's operator only, as the devices
 * page names a job's holder to its owner and admins (docs/security.md);
 * anyone else gets the rest.
 */
#include "server/server_int.h"
#include "api/api_int.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "metrics/query.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Fixed buckets, in seconds (le), of the two histograms. */
static const double wait_le[] = { 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 86400 };
static const double run_le[] = { 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800 };
#define NLE(a) (sizeof(a) / sizeof((a)[0]))

#define JOB_SERIES_DEFAULT 500
#define JOB_SERIES_EACH 5 /* the most series one running job has */

static void hist_add(struct srv_hist *h, const double *le, size_t n, double v)
{
	if (!(v >= 0)) /* a clock that went back: 0, never negative */
		v = 0;
	size_t b = 0;
	while (b < n && v > le[b])
		b++;
	h->count[b]++;
	h->sum += v;
}

void srv_prom_event(struct srv *s, const struct store_event *ev, struct sjob *j)
{
	struct srv_prom *p = &s->prom;
	if (job_note_of_reason(ev->reason) != JOB_NOTE_NONE) {
		if (job_note_of_reason(ev->reason) == JOB_NOTE_HANG)
			p->hangs++;
		return; /* a note is no change of state */
	}
	if (ev->state == JOB_RESTARTING)
		p->restarts++;
	/* a lost job the server queues again has not ended: that is a restart (server.c) */
	if (ev->state == JOB_LOST && j && !srv_external(j) &&
	    (j->st == SJ_RUNNING || j->st == SJ_STOPPING) && srv_lost_requeues(j)) {
		p->restarts++;
		return;
	}
	if (job_state_terminal(ev->state)) {
		p->ends[ev->state]++;
		if (j && j->started_at > 0)
			hist_add(&p->run, run_le, NLE(run_le), ev->time - j->started_at);
		return;
	}
	if (!j)
		return;
	if (ev->state == JOB_QUEUED) {
		j->queued_at = ev->time;
		j->started_at = 0;
	} else if ((ev->state == JOB_STARTING || ev->state == JOB_RUNNING) && j->queued_at > 0) {
		hist_add(&p->wait, wait_le, NLE(wait_le), ev->time - j->queued_at);
		j->queued_at = 0;
		if (j->started_at <= 0)
			j->started_at = ev->time;
	}
}

/* A label value as the exposition format wants it: \\, \" and \n escaped. */
static void add_label(struct sbuf *b, const char *name, const char *v)
{
	sbuf_addf(b, "%s=\"", name);
	for (const char *c = v ? v : ""; *c; c++) {
		if (*c == '\\')
			sbuf_adds(b, "\\\\");
		else if (*c == '"')
			sbuf_adds(b, "\\\"");
		else if (*c == '\n')
			sbuf_adds(b, "\\n");
		else
			sbuf_addch(b, *c);
	}
	sbuf_addch(b, '"');
}

static void head(struct sbuf *b, const char *name, const char *type, const char *help)
{
	sbuf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A sample value: integers as such, others with enough digits; NaN and Inf spelled as Prometheus reads them. */
static void add_value(struct sbuf *b, double v)
{
	if (isnan(v))
		sbuf_adds(b, " NaN\n");
	else if (isinf(v))
		sbuf_adds(b, v > 0 ? " +Inf\n" : " -Inf\n");
	else
		sbuf_addf(b, " %.17g\n", v);
}

static void hist_out(struct sbuf *b, const char *name, const char *help, const struct srv_hist *h,
		     const double *le, size_t n)
{
	head(b, name, "histogram", help);
	long long cum = 0;
	for (size_t i = 0; i < n; i++) {
		cum += h->count[i];
		sbuf_addf(b, "%s_bucket{le=\"%g\"} %lld\n", name, le[i], cum);
	}
	cum += h->count[n];
	sbuf_addf(b, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum", name, cum, name);
	add_value(b, h->sum);
	sbuf_addf(b, "%s_count %lld\n", name, cum);
}

/* ---- what is copied out of the server under mu ---- */

struct pdev {
	char *type;
	int id;
	bool healthy;
	char *job, *user; /* the running job holding it, or NULL */
};

struct pjob {
	char *id;
};

struct snap {
	char *devices_json;
	struct pdev *devs;
	size_t ndevs;
	struct pjob *jobs;
	size_t njobs;
};

static void snap_take(struct srv *s, struct snap *n, bool full)
{
	n->devices_json = s->devices_json ? xstrdup(s->devices_json) : NULL;
	n->ndevs = s->ndevs;
	n->devs = xcalloc(s->ndevs + 1, sizeof(*n->devs));
	for (size_t i = 0; i < s->ndevs; i++) {
		struct pdev *d = &n->devs[i];
		d->type = xstrdup(s->devs[i].type);
		d->id = s->devs[i].id;
		d->healthy = srv_health_of(s, i) == NULL;
		int o = s->devs[i].owner;
		if (full && o >= 0 && (size_t)o < s->njobs && s->jobs[o].st == SJ_RUNNING) {
			d->job = xstrdup(s->jobs[o].id);
			d->user = xstrdup(s->jobs[o].user ? s->jobs[o].user : "");
		}
	}
	n->jobs = xcalloc(s->njobs + 1, sizeof(*n->jobs));
	for (size_t i = 0; full && i < s->njobs; i++)
		if (s->jobs[i].st == SJ_RUNNING)
			n->jobs[n->njobs++].id = xstrdup(s->jobs[i].id);
}

static void snap_release(struct snap *n)
{
	free(n->devices_json);
	for (size_t i = 0; i < n->ndevs; i++) {
		free(n->devs[i].type);
		free(n->devs[i].job);
		free(n->devs[i].user);
	}
	free(n->devs);
	for (size_t i = 0; i < n->njobs; i++)
		free(n->jobs[i].id);
	free(n->jobs);
}

/* ---- the server's own series (mu held) ---- */

static int server_series(struct srv *s, struct sbuf *b, struct tc_err *err)
{
	long long counts[JOB_NSTATES] = { 0 };
	int rc = store_state_counts(s->st, counts, err);
	if (rc)
		return rc;
	head(b, "trainctl_jobs", "gauge", "Jobs by state.");
	for (int i = 0; i < JOB_NSTATES; i++)
		sbuf_addf(b, "trainctl_jobs{state=\"%s\"} %lld\n", job_state_name((enum job_state)i),
			  counts[i]);
	head(b, "trainctl_queue_length", "gauge", "Jobs waiting for devices.");
	sbuf_addf(b, "trainctl_queue_length %zu\n", s->nqueue);
	head(b, "trainctl_devices", "gauge", "Devices the scheduler hands out.");
	head(b, "trainctl_devices_allocated", "gauge", "Devices held by jobs.");
	for (size_t i = 0; i < s->ndevs; i++) {
		bool first = true;
		for (size_t k = 0; k < i && first; k++)
			first = strcmp(s->devs[k].type, s->devs[i].type) != 0;
		if (!first)
			continue;
		int total = 0, used = 0;
		for (size_t k = 0; k < s->ndevs; k++)
			if (!strcmp(s->devs[k].type, s->devs[i].type)) {
				total++;
				used += s->devs[k].owner != SCHED_FREE;
			}
		sbuf_addf(b, "trainctl_devices{type=\"%s\"} %d\ntrainctl_devices_allocated{type=\"%s\"} %d\n",
			  s->devs[i].type, total, s->devs[i].type, used);
	}
	head(b, "trainctl_submissions_total", "counter", "Jobs submitted since the server started.");
	sbuf_addf(b, "trainctl_submissions_total %lld\n", s->submitted);
	head(b, "trainctl_http_requests_total", "counter", "HTTP requests served.");
	sbuf_addf(b, "trainctl_http_requests_total %lld\n", s->requests);
	head(b, "trainctl_scheduler_decision_seconds", "gauge", "Mean time of one scheduling decision.");
	sbuf_addf(b, "trainctl_scheduler_decision_seconds %.9f\n",
		  s->sched_calls ? s->sched_ns_total / (double)s->sched_calls / 1e9 : 0.0);
	head(b, "trainctl_scheduler_decisions_total", "counter",
	     "Scheduling decisions since the server started.");
	sbuf_addf(b, "trainctl_scheduler_decisions_total %lld\n", s->sched_calls);

	const struct srv_prom *p = &s->prom;
	head(b, "trainctl_job_ends_total", "counter",
	     "Jobs that ended since the server started, by outcome (final state).");
	for (int i = 0; i < JOB_NSTATES; i++)
		if (job_state_terminal((enum job_state)i))
			sbuf_addf(b, "trainctl_job_ends_total{outcome=\"%s\"} %lld\n",
				  job_state_name((enum job_state)i), p->ends[i]);
	head(b, "trainctl_job_hangs_total", "counter",
	     "Hangs the jobs' watchdogs detected since the server started.");
	sbuf_addf(b, "trainctl_job_hangs_total %lld\n", p->hangs);
	head(b, "trainctl_job_restarts_total", "counter",
	     "Attempts of jobs restarted since the server started.");
	sbuf_addf(b, "trainctl_job_restarts_total %lld\n", p->restarts);
	hist_out(b, "trainctl_job_queue_wait_seconds", "Time from queued to started, per start.",
		 &p->wait, wait_le, NLE(wait_le));
	hist_out(b, "trainctl_job_run_seconds", "Time from started to ended, per job that ended.",
		 &p->run, run_le, NLE(run_le));
	return 0;
}

/* ---- usage (mu held): the queue's oldest wait; devices in use per user (full only) ---- */

struct in_use {
	const char *user, *type;
	long long n;
};

static void usage_series(struct srv *s, struct sbuf *b, bool full)
{
	double now = now_wall(), oldest = 0;
	for (size_t i = 0; i < s->nqueue; i++) {
		const struct sjob *j = &s->jobs[s->queue[i]];
		double since = j->queued_at > 0 ? j->queued_at : j->created;
		if (since > 0 && now - since > oldest)
			oldest = now - since;
	}
	head(b, "trainctl_queue_oldest_wait_seconds", "gauge",
	     "How long the job waiting longest has waited (0: none waits).");
	sbuf_addf(b, "trainctl_queue_oldest_wait_seconds %.3f\n", oldest);
	if (!full)
		return;
	/* (user, type) pairs are few: a list searched for each job */
	struct in_use *v = NULL;
	size_t n = 0, alloc = 0;
	for (size_t i = 0; i < s->njobs; i++) {
		const struct sjob *j = &s->jobs[i];
		if ((j->st != SJ_RUNNING && j->st != SJ_STOPPING) || j->count <= 0)
			continue;
		size_t k = 0;
		while (k < n && (strcmp(v[k].user, j->user ? j->user : "") ||
				 strcmp(v[k].type, j->type ? j->type : "")))
			k++;
		if (k == n) {
			XGROW(v, n + 1, alloc);
			v[n++] = (struct in_use){ j->user ? j->user : "", j->type ? j->type : "", 0 };
		}
		v[k].n += j->count;
	}
	head(b, "trainctl_user_devices_in_use", "gauge", "Devices held by a user's jobs, by type.");
	for (size_t k = 0; k < n; k++) {
		sbuf_adds(b, "trainctl_user_devices_in_use{");
		add_label(b, "user", v[k].user);
		sbuf_addch(b, ',');
		add_label(b, "type", v[k].type);
		sbuf_addf(b, "} %lld\n", v[k].n);
	}
	free(v);
}

/* ---- teams (mu held): devices in use, borrowed and guaranteed; the queue ---- */

static void team_gauge(struct sbuf *b, const char *name, const char *team, const char *type,
		       double v)
{
	sbuf_adds(b, name);
	sbuf_addch(b, '{');
	add_label(b, "team", team);
	if (type) {
		sbuf_addch(b, ',');
		add_label(b, "type", type);
	}
	sbuf_addch(b, '}');
	add_value(b, v);
}

static void team_series(struct srv *s, struct sbuf *b)
{
	if (!s->teams.n)
		return;
	struct team_counts *c = xcalloc(s->teams.n, sizeof(*c));
	for (size_t a = 0; a < s->teams.n; a++)
		srv_team_counts(s, &s->teams.t[a], &c[a]);
	static const struct {
		const char *name, *help;
	} per_type[] = {
		{ "trainctl_team_devices_in_use", "Devices held by a team's jobs, by type." },
		{ "trainctl_team_devices_borrowed", "Devices a team holds beyond its guarantee." },
		{ "trainctl_team_devices_guaranteed", "A team's guaranteed devices (the settings file)." },
	};
	for (size_t m = 0; m < sizeof(per_type) / sizeof(per_type[0]); m++) {
		head(b, per_type[m].name, "gauge", per_type[m].help);
		for (size_t a = 0; a < s->teams.n; a++)
			for (size_t i = 0; i < c[a].ntypes; i++)
				team_gauge(b, per_type[m].name, s->teams.t[a].name, c[a].types[i],
					   m == 0 ? c[a].in_use[i] : m == 1 ? c[a].borrowed[i]
					   : c[a].guarantee[i]);
	}
	head(b, "trainctl_team_queue_length", "gauge", "A team's jobs waiting in the queue.");
	for (size_t a = 0; a < s->teams.n; a++)
		team_gauge(b, "trainctl_team_queue_length", s->teams.t[a].name, NULL, c[a].queued);
	head(b, "trainctl_team_queue_oldest_wait_seconds", "gauge",
	     "How long a team's longest-waiting job has waited (0: none waits).");
	for (size_t a = 0; a < s->teams.n; a++)
		team_gauge(b, "trainctl_team_queue_oldest_wait_seconds", s->teams.t[a].name, NULL,
			   c[a].oldest_wait);
	free(c);
}

/* ---- devices ---- */

static void dev_labels(struct sbuf *b, const struct pdev *d, const char *uuid, const char *node)
{
	sbuf_addch(b, '{');
	add_label(b, "type", d->type);
	sbuf_addf(b, ",index=\"%d\",", d->id);
	add_label(b, "uuid", uuid);
	sbuf_addch(b, ',');
	add_label(b, "node", node);
	sbuf_addch(b, '}');
}

/* One gauge per device: the telemetry field key, scaled; a device without it is left out. */
static void dev_gauge(struct sbuf *b, const struct snap *n, json_t *tele, const char *node,
		      const char *name, const char *help, const char *key, double scale)
{
	head(b, name, "gauge", help);
	for (size_t i = 0; i < n->ndevs; i++) {
		json_t *t = json_array_get(tele, i);
		json_t *v = json_object_get(t, key);
		if (!json_is_number(v))
			continue;
		/* memory 0 is what a device that does not report it says (devices.h) */
		if (!strncmp(key, "mem_", 4) && json_number_value(v) <= 0)
			continue;
		if (!strcmp(n->devs[i].type, "cpu") && !strncmp(key, "mem_", 4))
			continue;
		sbuf_adds(b, name);
		dev_labels(b, &n->devs[i], json_string_value(json_object_get(t, "uuid")), node);
		add_value(b, json_number_value(v) * scale);
	}
}

static void device_series(struct sbuf *b, const struct snap *n, const char *node, bool full)
{
	json_t *tele = json_loads(n->devices_json ? n->devices_json : "[]", 0, NULL);
	/* the snapshot is made in the scheduler's device order; one of another size is not this one */
	if (!json_is_array(tele) || json_array_size(tele) != n->ndevs) {
		json_decref(tele);
		tele = json_array();
	}
	dev_gauge(b, n, tele, node, "trainctl_device_utilization_ratio",
		  "Device utilisation, 0 to 1, as the driver reports it.", "util", 0.01);
	dev_gauge(b, n, tele, node, "trainctl_device_memory_used_bytes", "Device memory in use.",
		  "mem_used", 1);
	dev_gauge(b, n, tele, node, "trainctl_device_memory_total_bytes", "Device memory in all.",
		  "mem_total", 1);
	dev_gauge(b, n, tele, node, "trainctl_device_power_watts", "Device power draw.", "power", 1);
	dev_gauge(b, n, tele, node, "trainctl_device_temperature_celsius", "Device temperature.",
		  "temp", 1);
	head(b, "trainctl_device_healthy", "gauge",
	     "1 when the device passes its health check (or has none), 0 when it failed it.");
	for (size_t i = 0; i < n->ndevs; i++) {
		json_t *t = json_array_get(tele, i);
		sbuf_adds(b, "trainctl_device_healthy");
		dev_labels(b, &n->devs[i], json_string_value(json_object_get(t, "uuid")), node);
		sbuf_addf(b, " %d\n", n->devs[i].healthy ? 1 : 0);
	}
	if (full) {
		head(b, "trainctl_device_allocation_info", "gauge",
		     "1 for each device a running job holds: join on uuid with a device exporter's series.");
		for (size_t i = 0; i < n->ndevs; i++) {
			const struct pdev *d = &n->devs[i];
			if (!d->job)
				continue;
			json_t *t = json_array_get(tele, i);
			sbuf_adds(b, "trainctl_device_allocation_info{");
			add_label(b, "uuid", json_string_value(json_object_get(t, "uuid")));
			sbuf_addf(b, ",index=\"%d\",", d->id);
			add_label(b, "type", d->type);
			sbuf_addch(b, ',');
			add_label(b, "node", node);
			sbuf_addch(b, ',');
			add_label(b, "job", d->job);
			sbuf_addch(b, ',');
			add_label(b, "user", d->user);
			sbuf_adds(b, ",team=\"\"} 1\n");
		}
	}
	json_decref(tele);
}

/* ---- running jobs (list_mu held) ---- */

/* The loss-like metric of a summary: a "loss" name of rank 0 (the lowest rank), the shortest name first. */
static const struct metrics_metric_sum *loss_of(const struct metrics_job_summary *m)
{
	const struct metrics_metric_sum *best = NULL;
	for (size_t i = 0; i < m->nmetrics; i++) {
		const struct metrics_metric_sum *x = &m->metrics[i];
		if (!x->name || !strstr(x->name, "loss") || !x->n || x->text)
			continue;
		if (!best || x->rank < best->rank ||
		    (x->rank == best->rank && strlen(x->name) < strlen(best->name)))
			best = x;
	}
	return best;
}

struct jobvals {
	char *id, *name, *user;
	double restarts, step, tput, loss; /* NaN: not known */
	char *loss_name;
};

/* A gauge with a job label: the double at off of each job's values, those that are known. */
static void job_gauge(struct sbuf *b, const struct jobvals *v, size_t nv, const char *name,
		      const char *help, size_t off)
{
	head(b, name, "gauge", help);
	for (size_t i = 0; i < nv; i++) {
		double x;
		memcpy(&x, (const char *)&v[i] + off, sizeof(x));
		if (isnan(x))
			continue;
		sbuf_adds(b, name);
		sbuf_addch(b, '{');
		add_label(b, "job", v[i].id);
		sbuf_addch(b, '}');
		add_value(b, x);
	}
}

static void job_series(struct srv *s, struct sbuf *b, const struct snap *n, long budget)
{
	struct jobvals *v = xcalloc(n->njobs + 1, sizeof(*v));
	size_t nv = 0;
	pthread_mutex_lock(&s->list_mu);
	struct tc_err terr = TC_ERR_INIT;
	/* one snapshot: the file locks once, not per read of each job */
	bool txn = n->njobs && store_read_begin(s->list_st, &terr) == 0;
	for (size_t i = 0; i < n->njobs && (long)(nv + 1) * JOB_SERIES_EACH <= budget; i++) {
		struct job_row r = { 0 };
		struct tc_err err = TC_ERR_INIT;
		if (store_job_get(s->list_st, n->jobs[i].id, &r, &err)) {
			tc_err_release(&err); /* gone meanwhile: not running any more */
			continue;
		}
		struct jobvals *x = &v[nv++];
		x->id = xstrdup(r.id);
		x->name = xstrdup(r.name ? r.name : "");
		x->user = xstrdup(r.user ? r.user : "");
		x->restarts = r.restarts;
		x->step = x->tput = x->loss = NAN;
		struct metrics_job_summary m;
		if (metrics_job_summary(s->list_st, &r, &m, &err) == 0) {
			x->tput = m.throughput;
			const struct metrics_metric_sum *l = loss_of(&m);
			if (l) {
				x->loss = l->last;
				x->loss_name = xstrdup(l->name);
			}
			metrics_job_summary_release(&m);
		}
		tc_err_release(&err);
		/* the step: seq, the count of step lines that charts and TensorBoard use (docs/metrics.md) */
		struct store_msteps *st = NULL;
		size_t nst = 0;
		if (store_metric_steps(s->list_st, r.id, &st, &nst, &err) == 0)
			for (size_t k = 0; k < nst; k++)
				if (!(st[k].last_seq <= x->step))
					x->step = (double)st[k].last_seq;
		free(st);
		tc_err_release(&err); /* no metrics yet: its series are left out */
		job_row_release(&r);
	}
	if (txn)
		(void)store_commit(s->list_st, 0, &terr); /* reads only: nothing to lose */
	tc_err_release(&terr); /* no snapshot: each read takes its own locks */
	pthread_mutex_unlock(&s->list_mu);

	head(b, "trainctl_job_info", "gauge", "1 for each running job: its name and user.");
	for (size_t i = 0; i < nv; i++) {
		sbuf_adds(b, "trainctl_job_info{");
		add_label(b, "job", v[i].id);
		sbuf_addch(b, ',');
		add_label(b, "name", v[i].name);
		sbuf_addch(b, ',');
		add_label(b, "user", v[i].user);
		sbuf_adds(b, ",team=\"\"} 1\n");
	}
	job_gauge(b, v, nv, "trainctl_job_restarts", "Restarts of a running job so far.",
		  offsetof(struct jobvals, restarts));
	job_gauge(b, v, nv, "trainctl_job_step", "The step count of a running job (its step lines).",
		  offsetof(struct jobvals, step));
	job_gauge(b, v, nv, "trainctl_job_samples_per_second",
		  "Throughput of a running job, summed over its ranks.", offsetof(struct jobvals, tput));
	head(b, "trainctl_job_metric", "gauge",
	     "The last value of a running job's loss-like metric (metric names it).");
	for (size_t i = 0; i < nv; i++)
		if (v[i].loss_name && isfinite(v[i].loss)) {
			sbuf_adds(b, "trainctl_job_metric{");
			add_label(b, "job", v[i].id);
			sbuf_addch(b, ',');
			add_label(b, "metric", v[i].loss_name);
			sbuf_adds(b, "}");
			add_value(b, v[i].loss);
		}
	for (size_t i = 0; i < nv; i++) {
		free(v[i].id);
		free(v[i].name);
		free(v[i].user);
		free(v[i].loss_name);
	}
	free(v);
}

/* ---- the hub: how long since each node of a running job was heard ---- */

struct heard_ctx {
	const struct snap *n;
	struct heardv { const char *job; char *node; double at; } *v;
	size_t nv, alloc;
};

static void heard_one(void *arg, const char *job, const char *stream, double at)
{
	struct heard_ctx *c = arg;
	const char *id = NULL;
	for (size_t i = 0; i < c->n->njobs && !id; i++)
		if (!strcmp(c->n->jobs[i].id, job))
			id = c->n->jobs[i].id;
	if (!id)
		return; /* not running: no lag to speak of */
	/* a stream is "NODE.aN" (a node's attempt) or "driver.PID": the node is before the dot */
	size_t len = strcspn(stream, ".");
	for (size_t i = 0; i < c->nv; i++)
		if (c->v[i].job == id && strlen(c->v[i].node) == len &&
		    !strncmp(c->v[i].node, stream, len)) {
			if (at > c->v[i].at)
				c->v[i].at = at;
			return;
		}
	XGROW(c->v, c->nv + 1, c->alloc);
	c->v[c->nv++] = (struct heardv){ id, xstrndup(stream, len), at };
}

static void hub_series(struct srv *s, struct sbuf *b, const struct snap *n)
{
	struct tc_err err = TC_ERR_INIT;
	struct hub *h = srv_hub(s, &err);
	struct heard_ctx c = { .n = n };
	if (h)
		hub_heard_each(h, heard_one, &c);
	tc_err_release(&err); /* no hub: nothing heard */
	head(b, "trainctl_hub_node_lag_seconds", "gauge",
	     "Seconds since the hub last heard from a node of a running job.");
	double now = now_wall();
	for (size_t i = 0; i < c.nv; i++) {
		sbuf_adds(b, "trainctl_hub_node_lag_seconds{");
		add_label(b, "job", c.v[i].job);
		sbuf_addch(b, ',');
		add_label(b, "node", c.v[i].node);
		sbuf_adds(b, "}");
		add_value(b, now > c.v[i].at ? now - c.v[i].at : 0);
		free(c.v[i].node);
	}
	free(c.v);
}

int h_prometheus(struct srv *s, struct MHD_Connection *con, bool full)
{
	struct sbuf b = SBUF_INIT;
	struct snap n = { 0 };
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = server_series(s, &b, &err);
	if (!rc) {
		usage_series(s, &b, full);
		team_series(s, &b);
	}
	snap_take(s, &n, full);
	long budget = s->o.metrics_job_series > 0 ? s->o.metrics_job_series
		      : s->o.metrics_job_series < 0 ? 0 : JOB_SERIES_DEFAULT;
	pthread_mutex_unlock(&s->mu);
	char node[256];
	if (gethostname(node, sizeof(node)) != 0)
		snprintf(node, sizeof(node), "localhost");
	node[sizeof(node) - 1] = '\0';
	if (!rc) {
		device_series(&b, &n, node, full);
		if (full) {
			job_series(s, &b, &n, budget);
			hub_series(s, &b, &n);
		}
	}
	snap_release(&n);
	int ret = rc ? reply_tc(con, &err) : reply_raw(con, 200, "text/plain; version=0.0.4", b.buf, b.len);
	tc_err_release(&err);
	sbuf_release(&b);
	return ret;
}
