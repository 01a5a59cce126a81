/*
 * report.c -- report.json, the Ais-Bench files and the tester POST; the
 * telemetry sampler that feeds them.  Field by field in docs/report.md.
 */
#include "report/report.h"
#include "jobs/runpath.h"
#include "core/http.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/jobs.h"
#include "metrics/query.h"
#include "spec/spec.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- telemetry sampler ---- */

struct report_sampler {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t wake;
	bool stop;
	char *type;
	int *ids;
	int n;
	int interval_ms;
	/* results, owned by the thread until it is joined */
	double t_first, t_last;
	size_t samples;
	double util_sum;
	size_t util_n;
	const char *util_source;
	double util_last; /* the latest sample, NaN before one; read under mu (report_sampler_last_util) */
	const char *util_last_source;
	double power_sum, power_peak, energy, power_t, power_last;
	size_t power_n;
	unsigned long long cpu_busy, cpu_total;
	bool cpu_have;
};

/* Busy and total jiffies of all CPUs from the first line of /proc/stat. */
static bool proc_stat(unsigned long long *busy, unsigned long long *total)
{
	struct sbuf text = SBUF_INIT;
	bool ok = false;
	if (read_file("/proc/stat", &text, NULL) == 0 && !strncmp(text.buf, "cpu ", 4)) {
		unsigned long long v[8] = { 0 };
		char *p = text.buf + 4, *end;
		int k;
		for (k = 0; k < 8; k++) {
			errno = 0;
			v[k] = strtoull(p, &end, 10);
			if (end == p || errno)
				break;
			p = end;
		}
		if (k >= 4) {
			*total = 0;
			for (int i = 0; i < 8; i++)
				*total += v[i];
			*busy = *total - v[3] - v[4]; /* idle, iowait */
			ok = true;
		}
	}
	sbuf_release(&text);
	return ok;
}

static bool wanted(const struct report_sampler *s, const struct device *d)
{
	if (strcmp(d->type, s->type))
		return false;
	for (int i = 0; i < s->n; i++)
		if (s->ids[i] == d->id)
			return true;
	return false;
}

static void sample(struct report_sampler *s)
{
	double now = now_wall();
	if (!s->samples)
		s->t_first = now;
	s->t_last = now;
	s->samples++;
	if (!strcmp(s->type, "cpu")) {
		unsigned long long busy, total;
		if (!proc_stat(&busy, &total))
			return;
		if (s->cpu_have && total > s->cpu_total) {
			double u = 100.0 * (double)(busy - s->cpu_busy) / (double)(total - s->cpu_total);
			s->util_sum += u;
			s->util_n++;
			pthread_mutex_lock(&s->mu);
			s->util_last = u;
			s->util_last_source = "proc_stat";
			pthread_mutex_unlock(&s->mu);
			s->util_source = "proc_stat";
		}
		s->cpu_busy = busy;
		s->cpu_total = total;
		s->cpu_have = true;
		return;
	}
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	double util = 0, power = 0;
	int nu = 0, np = 0;
	for (size_t i = 0; i < l.nr; i++) {
		if (!wanted(s, &l.v[i]))
			continue;
		if (l.v[i].util_percent >= 0) {
			util += l.v[i].util_percent;
			nu++;
			s->util_source = l.v[i].source;
		}
		if (l.v[i].power_w >= 0) {
			power += l.v[i].power_w;
			np++;
		}
	}
	device_list_release(&l);
	if (nu) {
		s->util_sum += util / nu;
		s->util_n++;
		pthread_mutex_lock(&s->mu);
		s->util_last = util / nu;
		s->util_last_source = s->util_source;
		pthread_mutex_unlock(&s->mu);
	}
	if (np) {
		if (s->power_n)
			s->energy += (power + s->power_last) / 2 * (now - s->power_t);
		s->power_sum += power;
		s->power_n++;
		if (power > s->power_peak)
			s->power_peak = power;
		s->power_t = now;
		s->power_last = power;
	}
}

static void *sampler_main(void *arg)
{
	struct report_sampler *s = arg;
	for (;;) {
		sample(s);
		pthread_mutex_lock(&s->mu);
		if (!s->stop) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += s->interval_ms / 1000;
			ts.tv_nsec += (long)(s->interval_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			while (!s->stop && pthread_cond_timedwait(&s->wake, &s->mu, &ts) == 0)
				;
		}
		bool stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
	}
	sample(s); /* the end of the job: a short job still gets a CPU delta */
	return NULL;
}

struct report_sampler *report_sampler_start(const char *device_type, const int *ids, int n,
					    int interval_ms)
{
	struct report_sampler *s = xcalloc(1, sizeof(*s));
	const char *env = getenv("TRAINCTL_SAMPLE_MS");
	long ms;
	if (interval_ms <= 0)
		interval_ms = env && parse_long(env, 10, 3600000, &ms) ? (int)ms : 1000;
	s->interval_ms = interval_ms;
	s->type = xstrdup(device_type ? device_type : "cpu");
	s->util_last = NAN;
	s->n = n > 0 ? n : 0;
	s->ids = xcalloc((size_t)s->n + 1, sizeof(int));
	for (int i = 0; i < s->n; i++)
		s->ids[i] = ids ? ids[i] : i;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->wake, NULL);
	if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->wake);
		free(s->type);
		free(s->ids);
		free(s);
		return NULL;
	}
	return s;
}

double report_sampler_last_util(struct report_sampler *s, const char **source)
{
	double u = NAN;
	if (source)
		*source = NULL;
	if (!s)
		return u;
	pthread_mutex_lock(&s->mu);
	u = s->util_last;
	if (source)
		*source = s->util_last_source;
	pthread_mutex_unlock(&s->mu);
	return u;
}

int report_sampler_stop(struct report_sampler *s, const char *run_dir, struct tc_err *err)
{
	json_t *t = json_object();
	if (s) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
		json_object_set_new(t, "device_type", json_string(s->type));
		json_t *ids = json_array();
		for (int i = 0; i < s->n; i++)
			json_array_append_new(ids, json_integer(s->ids[i]));
		json_object_set_new(t, "device_ids", ids);
		json_object_set_new(t, "interval_s", json_real(s->interval_ms / 1000.0));
		json_object_set_new(t, "samples", json_integer((json_int_t)s->samples));
		json_object_set_new(t, "start", json_real_or_null(s->samples ? s->t_first : NAN));
		json_object_set_new(t, "end", json_real_or_null(s->samples ? s->t_last : NAN));
		json_object_set_new(t, "utilization_avg", json_real_or_null(s->util_n ? s->util_sum / (double)s->util_n : NAN));
		json_object_set_new(t, "utilization_source", json_string_or_null(s->util_source));
		json_object_set_new(t, "power_avg_w", json_real_or_null(s->power_n ? s->power_sum / (double)s->power_n : NAN));
		json_object_set_new(t, "power_peak_w", json_real_or_null(s->power_n ? s->power_peak : NAN));
		json_object_set_new(t, "energy_j", json_real_or_null(s->power_n ? s->energy : NAN));
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->wake);
		free(s->type);
		free(s->ids);
		free(s);
	}
	json_object_set_new(t, "finished", json_real(now_wall()));
	if (!run_dir) {
		json_decref(t);
		return 0;
	}
	char *text = json_dumps(t, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(t);
	struct sbuf path = SBUF_INIT;
	run_path(&path, run_dir, NULL, RUN_TELEMETRY, 0);
	int rc = write_file_atomic(path.buf, text, strlen(text), err);
	sbuf_release(&path);
	free(text);
	return rc;
}

/* ---- building the report ---- */

static json_t *phase(double start, double end)
{
	if (!(start > 0) || !(end > 0))
		return json_null();
	json_t *p = json_object();
	struct sbuf a = SBUF_INIT, b = SBUF_INIT;
	format_time_utc(&a, start);
	format_time_utc(&b, end);
	json_object_set_new(p, "start", json_real(start));
	json_object_set_new(p, "end", json_real(end));
	json_object_set_new(p, "start_utc", json_string(a.buf));
	json_object_set_new(p, "end_utc", json_string(b.buf));
	json_object_set_new(p, "seconds", json_real(end - start));
	sbuf_release(&a);
	sbuf_release(&b);
	return p;
}

static double tel_num(json_t *tel, const char *key)
{
	json_t *v = json_object_get(tel, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Phases from the job's events (docs/report.md): staging, training, upload, total. */
static json_t *phases(const struct job_row *job, const struct event_row *ev, size_t nev,
		      const struct spec *spec, json_t *tel)
{
	double staging = 0, running = 0, last = 0;
	for (size_t i = 0; i < nev; i++) {
		if (!staging && ev[i].state == JOB_STARTING && strstr(ev[i].reason, "staging"))
			staging = ev[i].time;
		if (!running && ev[i].state == JOB_RUNNING)
			running = ev[i].time;
		last = ev[i].time;
	}
	double ended = job->ended > 0 ? job->ended : 0;
	double finished = tel_num(tel, "finished");
	bool uploads = spec && spec->upload_to;
	json_t *p = json_object();
	json_object_set_new(p, "staging", staging ? phase(staging, running ? running : (ended ? ended : last)) : json_null());
	json_object_set_new(p, "training", running ? phase(running, ended ? ended : last) : json_null());
	json_object_set_new(p, "upload", uploads && ended && isfinite(finished) ? phase(ended, finished) : json_null());
	double end = isfinite(finished) ? finished : ended;
	json_object_set_new(p, "total", end > 0 ? phase(job->created, end) : json_null());
	return p;
}

struct server {
	int id;
	double tput;  /* sum of its ranks with a number */
	int nt;
	json_t *ranks;
};

/*
 * The summary's accuracy rule within ranks [lo, hi): the last number of the
 * metric, any kind, on the lowest rank that logs it (series come by rank).
 */
static double accuracy_of_ranks(const struct store_mseries *v, size_t nv, int lo, int hi)
{
	for (size_t i = 0; i < nv; i++) {
		if (v[i].rank < lo || v[i].rank >= hi)
			continue;
		for (size_t j = v[i].n; j-- > 0;)
			if (!v[i].v[j].text)
				return v[i].v[j].value;
		return NAN;
	}
	return NAN;
}

static json_t *jcopy(json_t *v)
{
	return v ? json_incref(v) : json_null();
}

/* A JSON file of the run folder, which the job's account owns: never one a link points at. */
static json_t *load_nofollow(const char *path)
{
	struct sbuf text = SBUF_INIT;
	json_t *o = read_file_nofollow(path, &text, NULL) == 0 ? json_loadb(text.buf, text.len, 0, NULL)
							       : NULL;
	sbuf_release(&text);
	return o;
}

int report_build(struct store *st, const struct job_row *job, bool single_server,
		 json_t **out, struct tc_err *err)
{
	struct metrics_job_summary ms = { 0 };
	struct event_row *ev = NULL;
	struct store_mseries *acc = NULL;
	size_t nev = 0, nacc = 0;
	*out = NULL;
	int rc = metrics_job_summary(st, job, &ms, err);
	if (!rc)
		rc = store_events(st, job->id, &ev, &nev, err);
	if (!rc && ms.settings.accuracy)
		rc = store_metric_series(st, job->id, ms.settings.accuracy, -1, &acc, &nacc, err);
	if (rc)
		goto out;
	struct spec *spec = NULL;
	struct tc_err spec_err = TC_ERR_INIT;
	if (spec_from_json(job->spec_json, &spec, &spec_err))
		tc_err_release(&spec_err); /* a report without the spec's part is still a report */
	struct sbuf tp = SBUF_INIT;
	run_path(&tp, job->run_dir, NULL, RUN_TELEMETRY, 0);
	json_t *tel = load_nofollow(tp.buf);
	sbuf_release(&tp);
	int nodes = spec ? spec->nodes : 1;
	if (nodes < 1)
		nodes = 1;
	/* a run file that starts its own workers (zoo) has more ranks than trainctl workers */
	int world = job->world_size > 0 ? job->world_size : 1;
	if (ms.nranks && ms.ranks[ms.nranks - 1].rank >= world)
		world = ms.ranks[ms.nranks - 1].rank + 1;
	int per_server = world / nodes > 0 ? world / nodes : world;

	json_t *r = json_object();
	json_object_set_new(r, "job", json_string(job->id));
	json_object_set_new(r, "name", json_string(job->name));
	json_object_set_new(r, "state", json_string(job_state_name(job->state)));
	json_object_set_new(r, "exit_code", job->ended > 0 ? json_integer(job->exit_code) : json_null());
	json_object_set_new(r, "restarts", json_integer(job->restarts));
	int lost, worker;
	job_restart_causes(ev, nev, job->restarts, &lost, &worker);
	json_object_set_new(r, "restarts_node_lost", json_integer(lost));
	json_object_set_new(r, "restarts_worker_failed", json_integer(worker));
	/* a multi-node job's rounds, as show has them (docs/slurm.md "Rounds") */
	json_t *rounds = job_rounds_json(ev, nev);
	job_rounds_first_step(st, job->id, &ms, rounds);
	json_object_set_new(r, "rounds", rounds);
	/* a watched job's stragglers and hangs (docs/diagnostics.md): the job
	 * wrote diagnostics.json, read and typed by the one reader show uses */
	json_t *diag = jobs_diagnostics(job->run_dir);
	if (json_is_object(diag)) {
		json_t *sg = json_object_get(diag, "stragglers");
		json_object_set_new(r, "stragglers", json_is_array(sg) ? json_incref(sg) : json_array());
		json_object_set_new(r, "hangs", json_integer((json_int_t)json_array_size(
							 json_object_get(diag, "hangs"))));
	}
	json_decref(diag);
	json_object_set_new(r, "ranksize", json_integer(world));
	json_object_set_new(r, "servers_count", json_integer(nodes));
	json_object_set_new(r, "mode", json_string(single_server ? "single-server" : "cluster"));
	json_object_set_new(r, "generated", json_real(now_wall()));

	/* throughput per rank, per server */
	struct server *sv = xcalloc((size_t)nodes, sizeof(*sv));
	for (int i = 0; i < nodes; i++) {
		sv[i].id = i;
		sv[i].ranks = json_array();
	}
	json_t *per_rank = json_array();
	for (size_t i = 0; i < ms.nranks; i++) {
		const struct metrics_rank_sum *rs = &ms.ranks[i];
		json_t *x = json_object();
		json_object_set_new(x, "rank", json_integer(rs->rank));
		json_object_set_new(x, "throughput", json_real_or_null(rs->throughput));
		json_object_set_new(x, "method", json_string_or_null(rs->method));
		json_object_set_new(x, "source", json_string_or_null(rs->source));
		json_array_append_new(per_rank, x);
		int s = rs->rank / per_server;
		if (s >= nodes)
			s = nodes - 1;
		json_array_append_new(sv[s].ranks, json_integer(rs->rank));
		if (isfinite(rs->throughput)) {
			sv[s].tput += rs->throughput;
			sv[s].nt++;
		}
	}
	json_t *servers = json_array();
	double server_sum = 0;
	int server_n = 0;
	for (int i = 0; i < nodes; i++) {
		double sacc = accuracy_of_ranks(acc, nacc, i * per_server,
						i == nodes - 1 ? 1 << 30 : (i + 1) * per_server);
		json_t *x = json_object();
		json_object_set_new(x, "id", json_integer(i));
		json_object_set_new(x, "ranks", sv[i].ranks);
		json_object_set_new(x, "throughput", sv[i].nt ? json_real(sv[i].tput) : json_null());
		json_object_set_new(x, "accuracy", json_real_or_null(sacc));
		json_array_append_new(servers, x);
		if (sv[i].nt) {
			server_sum += sv[i].tput;
			server_n++;
		}
	}
	free(sv);
	json_t *t = json_object();
	double total = single_server ? (server_n ? server_sum / server_n : NAN) : ms.throughput;
	json_object_set_new(t, "total", json_real_or_null(total));
	json_object_set_new(t, "unit", json_string("samples/s"));
	json_object_set_new(t, "rule", json_string(single_server ? "mean over servers of the sum over their ranks"
								  : "sum over ranks"));
	json_object_set_new(t, "warmup_steps", json_integer(ms.settings.warmup_steps));
	json_object_set_new(t, "batch_size", ms.settings.batch_size ? json_integer(ms.settings.batch_size) : json_null());
	json_object_set_new(t, "per_rank", per_rank);
	json_object_set_new(r, "throughput", t);
	json_t *a = json_object();
	json_object_set_new(a, "metric", json_string_or_null(ms.settings.accuracy));
	json_object_set_new(a, "value", json_real_or_null(ms.accuracy));
	json_object_set_new(r, "accuracy", a);
	json_object_set_new(r, "servers", servers);
	json_object_set_new(r, "phases", phases(job, ev, nev, spec, tel));

	json_t *d = json_object();
	json_object_set_new(d, "type", spec ? json_string(spec->device_type) : json_null());
	json_object_set_new(d, "count", json_integer(world));
	json_object_set_new(d, "samples", json_integer(json_integer_value(json_object_get(tel, "samples"))));
	json_object_set_new(d, "utilization_avg", json_real_or_null(tel_num(tel, "utilization_avg")));
	json_object_set_new(d, "utilization_source", jcopy(json_object_get(tel, "utilization_source")));
	json_object_set_new(d, "power_avg_w", json_real_or_null(tel_num(tel, "power_avg_w")));
	json_object_set_new(d, "power_peak_w", json_real_or_null(tel_num(tel, "power_peak_w")));
	json_object_set_new(d, "energy_j", json_real_or_null(tel_num(tel, "energy_j")));
	json_object_set_new(r, "devices", d);
	spec_free(spec);
	json_decref(tel);
	*out = r;
out:
	store_mseries_free(acc, nacc);
	event_rows_free(ev, nev);
	metrics_job_summary_release(&ms);
	return rc;
}

/* ---- writing ---- */

static int put_number(report_put_fn put, void *ctx, const char *rel, double v, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	char num[40];
	fmt_shortest(num, sizeof(num), v); /* 1606.1, not 1606.0999999999999 */
	sbuf_adds(&text, num);
	sbuf_addch(&text, '\n');
	int rc = put(ctx, rel, text.buf, text.len, err);
	sbuf_release(&text);
	return rc;
}

int report_put_files(const json_t *report, report_put_fn put, void *ctx, struct tc_err *err)
{
	struct sbuf rel = SBUF_INIT;
	/* numbers as 61.2, not 61.200000000000003 */
	char *text = json_dumps_shortest(report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text)
		xdie_oom(0);
	run_leaf(&rel, RUN_REPORT, 0); /* the run folder's name, in any folder */
	int rc = put(ctx, rel.buf, text, strlen(text), err);
	if (rc)
		goto out;
	const char *mode = json_string_value(json_object_get(report, "mode"));
	bool single = mode && !strcmp(mode, "single-server");
	if ((rc = put_number(put, ctx, "aisbench/ranksize.json",
			     (double)json_integer_value(json_object_get(report, "ranksize")), err)))
		goto out;
	json_t *acc = json_object_get(json_object_get(report, "accuracy"), "value");
	if (!single && json_is_number(acc) &&
	    (rc = put_number(put, ctx, "aisbench/accuracy.json", json_number_value(acc), err)))
		goto out;
	json_t *per_rank = json_object_get(json_object_get(report, "throughput"), "per_rank");
	json_t *servers = json_object_get(report, "servers");
	size_t i;
	json_t *x;
	json_array_foreach(servers, i, x) {
		long long id = json_integer_value(json_object_get(x, "id"));
		json_t *sacc = json_object_get(x, "accuracy");
		if (single && json_is_number(sacc)) {
			sbuf_reset(&rel);
			sbuf_addf(&rel, "aisbench/accuracy_%lld.json", id);
			if ((rc = put_number(put, ctx, rel.buf, json_number_value(sacc), err)))
				goto out;
		}
		size_t k;
		json_t *rk;
		json_array_foreach(json_object_get(x, "ranks"), k, rk) {
			size_t m;
			json_t *pr;
			json_array_foreach(per_rank, m, pr) {
				json_t *tv = json_object_get(pr, "throughput");
				if (json_integer_value(json_object_get(pr, "rank")) != json_integer_value(rk) ||
				    !json_is_number(tv))
					continue;
				sbuf_reset(&rel);
				if (single)
					sbuf_addf(&rel, "aisbench/%lld/", id);
				else
					sbuf_adds(&rel, "aisbench/");
				sbuf_addf(&rel, "throughput_%lld.json", (long long)json_integer_value(rk));
				if ((rc = put_number(put, ctx, rel.buf, json_number_value(tv), err)))
					goto out;
			}
		}
	}
out:
	free(text);
	sbuf_release(&rel);
	return rc;
}

/* report_put_fn for a folder: dir/rel, its folders made, written atomically */
static int put_in_dir(void *ctx, const char *rel, const char *text, size_t len,
		      struct tc_err *err)
{
	struct sbuf path = SBUF_INIT;
	sbuf_addf(&path, "%s/%s", (const char *)ctx, rel);
	char *slash = strrchr(path.buf, '/');
	*slash = '\0';
	int rc = mkdir_p(path.buf, err);
	*slash = '/';
	if (!rc)
		rc = write_file_atomic(path.buf, text, len, err);
	sbuf_release(&path);
	return rc;
}

int report_write(const json_t *report, const char *dir, struct tc_err *err)
{
	return report_put_files(report, put_in_dir, (void *)dir, err);
}

/* ---- the tester ---- */

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

int report_post(const char *url, const char *body, int tries, struct sbuf *log, struct tc_err *err)
{
	/* 0.5 s doubling (docs/report.md); the ceiling keeps --tries 100 sane */
	static const struct http_backoff backoff = { 500, 60000, false };
	int rc = http_init(err);
	if (rc)
		return rc;
	struct sbuf why = SBUF_INIT;
	struct curl_slist *hdrs = NULL;
	CURL *h = curl_easy_init();
	rc = TC_EBACKEND;
	if (!h) {
		sbuf_adds(&why, "cannot start libcurl");
		goto out;
	}
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	struct curl_slist *h2 = hdrs ? curl_slist_append(hdrs, "Expect:") : NULL;
	if (!h2) {
		sbuf_adds(&why, "out of memory for headers");
		goto out;
	}
	hdrs = h2;
	char ebuf[CURL_ERROR_SIZE];
	bool ok = curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_POST, 1L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body)) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf) == CURLE_OK;
	if (!ok) {
		sbuf_adds(&why, "cannot set up the request (bad URL?)");
		goto out;
	}
	for (int t = 1; t <= tries; t++) {
		ebuf[0] = '\0';
		CURLcode cc = curl_easy_perform(h);
		long code = 0;
		bool final = false;
		sbuf_reset(&why);
		if (cc != CURLE_OK) {
			sbuf_adds(&why, ebuf[0] ? ebuf : curl_easy_strerror(cc));
			final = !http_retryable_curl(cc);
		} else if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK) {
			sbuf_adds(&why, "no response code");
		} else if (code >= 200 && code < 300) {
			if (log)
				sbuf_addf(log, "tester %s: HTTP %ld (try %d of %d)\n", url, code, t, tries);
			rc = 0;
			goto out;
		} else {
			sbuf_addf(&why, "HTTP %ld", code);
			final = !http_retryable_status(code);
		}
		if (log)
			sbuf_addf(log, "tester %s: %s (try %d of %d)\n", url, why.buf, t, tries);
		if (final)
			break;
		if (t < tries)
			http_sleep_ms(http_backoff_ms(&backoff, t));
	}
out:
	if (rc)
		tc_error(err, TC_EBACKEND, "tester %s: %s", url, why.buf);
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	sbuf_release(&why);
	return rc;
}

/* ---- the supervisor's step ---- */

void report_job_end(struct store *st, const char *job_id, struct report_sampler *s,
		    void (*warn)(void *ctx, const char *msg), void *warn_ctx)
{
	struct tc_err err = TC_ERR_INIT;
	struct job_row j = { 0 };
	json_t *r = NULL;
	int rc = store_job_get(st, job_id, &j, &err);
	if (rc)
		report_sampler_stop(s, NULL, NULL); /* stops and frees, writes nothing */
	else
		rc = report_sampler_stop(s, j.run_dir, &err);
	if (!rc)
		rc = report_build(st, &j, false, &r, &err);
	if (!rc)
		rc = report_write(r, j.run_dir, &err);
	if (rc && warn) {
		struct sbuf m = SBUF_INIT;
		sbuf_addf(&m, "warning: report: %s", err.msg ? err.msg : tc_code_name(rc));
		warn(warn_ctx, m.buf);
		sbuf_release(&m);
	}
	json_decref(r);
	job_row_release(&j);
	tc_err_release(&err);
}
