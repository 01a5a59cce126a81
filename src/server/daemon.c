/*
 * daemon.c -- `trainctl server` from its start to its stop (server_run):
 * one server per state folder, the devices and the active jobs it finds,
 * its listeners (api/listen.c), and the loop that runs a round
 * (server.c) every TICK_MS or when a request wakes it.
 */
#include "server/server_int.h"
#include "backend/backend.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/jobs.h"
#include "server/srvlog.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 200
/*
 * Rounds woken by requests (a submission, a stop) come at most this often:
 * a burst of submissions is scheduled in batches instead of one round each,
 * which with 10,000 jobs queued would take the lock for a sort per request.
 */
#define MIN_ROUND_MS 20

static int load_devices(struct srv *s)
{
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	size_t alloc = 0;
	int cpus = s->o.cpu_slots > 0 ? s->o.cpu_slots : devices_count(&l, "cpu");
	for (int i = 0; i < cpus; i++) {
		XGROW(s->devs, s->ndevs + 1, alloc);
		s->devs[s->ndevs++] = (struct sched_dev){ "cpu", i, SCHED_FREE };
	}
	for (size_t i = 0; i < l.nr; i++) {
		if (!strcmp(l.v[i].type, "cpu"))
			continue;
		const struct device_kind *k = device_kind_find(l.v[i].type);
		if (!k)
			continue;
		XGROW(s->devs, s->ndevs + 1, alloc);
		s->devs[s->ndevs++] = (struct sched_dev){ k->name, l.v[i].id, SCHED_FREE };
	}
	device_list_release(&l);
	s->lease_job = xcalloc(s->ndevs ? s->ndevs : 1, sizeof(char *));
	return 0;
}

static int load_jobs(struct srv *s, struct tc_err *err)
{
	struct job_row *v = NULL;
	size_t n = 0;
	int rc = store_events_last(s->st, &s->last_event, err);
	if (!rc)
		rc = store_job_active_managed(s->st, &v, &n, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = srv_load_job(s, &v[i]);
		if (srv_external(j) && j->st != SJ_QUEUED) {
			srvlog_act(s->o.quiet, "job %s: %s, followed through %s", j->id,
				   job_state_name(j->state), backend_name(j->be));
			j->pull = true; /* its supervisors may have given up on us meanwhile */
		}
		else if (j->st == SJ_RUNNING || j->st == SJ_STOPPING)
			srvlog_act(s->o.quiet, "job %s: %s, supervisor pid %ld %s", j->id,
				   job_state_name(j->state), (long)j->pid,
				   proc_alive(j->pid, j->ticks) ? "still running" : "is gone");
	}
	job_rows_free(v, n);
	return 0;
}

/*
 * One server per state folder: an exclusive flock on $home/server.lock,
 * which holds "PID ADDRESS" for the next one to name.  The kernel drops the
 * lock when the process dies, however it dies; the fd is close-on-exec and
 * proc_start closes every fd above 2 in children, so a supervisor that
 * outlives the server never keeps it.
 */
/* Is the server that path (server.lock) names alive?  Unknown: yes. */
static bool holder_alive(const char *path)
{
	struct sbuf who = SBUF_INIT;
	long pid = read_file(path, &who, NULL) == 0 && who.len ? strtol(who.buf, NULL, 10) : 0;
	sbuf_release(&who);
	return pid <= 0 || kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/*
 * flock fd.  A server SIGKILLed just after a fork leaves its child holding
 * the lock until the child closes its fds or execs, which on a loaded
 * machine can be a while: while the server the file names is gone, try
 * again for up to 5 s instead of refusing the restart (errno EWOULDBLOCK
 * when it stays locked).
 */
static int lock_or_wait(int fd, const char *path)
{
	for (int i = 0;; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return -1;
		if (i == 500 || holder_alive(path)) {
			errno = EWOULDBLOCK;
			return -1;
		}
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static int lock_state(struct srv *s, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, who = SBUF_INIT;
	int rc = mkdir_p(s->home, err), fd = -1;
	sbuf_addf(&path, "%s/server.lock", s->home);
	if (!rc && (fd = open(path.buf, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		rc = tc_error_errno(err, TC_ESYS, "server: cannot open %s", path.buf);
	if (rc)
		goto out;
	if (lock_or_wait(fd, path.buf) == 0) {
		sbuf_addf(&who, "%ld %s\n", (long)getpid(), s->o.listen);
		if (ftruncate(fd, 0) < 0 || pwrite(fd, who.buf, who.len, 0) != (ssize_t)who.len) {
			rc = tc_error_errno(err, TC_ESYS, "server: cannot write %s", path.buf);
			goto out;
		}
		s->lock_fd = fd;
		fd = -1;
		goto out;
	}
	if (errno != EWOULDBLOCK) {
		rc = tc_error_errno(err, TC_ESYS, "server: cannot lock %s", path.buf);
		goto out;
	}
	/* the holder writes its line right after locking: give it a moment */
	for (int i = 0; i < 100; i++) {
		sbuf_reset(&who);
		if (read_file(path.buf, &who, NULL) == 0 && who.len && who.buf[who.len - 1] == '\n')
			break;
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	long pid = 0;
	char *end = NULL;
	if (who.len)
		pid = strtol(who.buf, &end, 10);
	if (pid > 0 && end && *end == ' ') {
		sbuf_rtrim(&who);
		rc = tc_error(err, TC_EUSAGE,
			      "server: another server (pid %ld, listening on %s) already uses the state"
			      " folder %s: stop it first, or give this one its own --state",
			      pid, end + 1, s->home);
	} else {
		rc = tc_error(err, TC_EUSAGE,
			      "server: another server already uses the state folder %s (%s is locked)",
			      s->home, path.buf);
	}
out:
	if (fd >= 0)
		close(fd);
	sbuf_release(&path);
	sbuf_release(&who);
	return rc;
}

static bool is_loopback(const char *listen)
{
	return !strncmp(listen, "127.", 4) || !strncmp(listen, "localhost:", 10) ||
	       !strncmp(listen, "[::1]:", 6);
}

static volatile sig_atomic_t got_signal, got_hup;

static void on_signal(int sig)
{
	got_signal = sig;
}

static void on_hup(int sig)
{
	(void)sig;
	got_hup = 1;
}

/*
 * The server is the hub of its Slurm jobs (backend_set_hub): nodes reach it
 * at TRAINCTL_HUB_ADVERTISE (http://ADDR:PORT), else at its --listen
 * address (this host's address for 0.0.0.0).
 */
static void server_hub_url(struct srv *s)
{
	const char *adv = getenv("TRAINCTL_HUB_ADVERTISE");
	struct sbuf url = SBUF_INIT;
	if (adv && *adv) {
		sbuf_adds(&url, adv);
	} else {
		const char *colon = strrchr(s->o.listen, ':');
		char *host = xstrndup(s->o.listen, colon ? (size_t)(colon - s->o.listen) : 0);
		if (!strcmp(host, "0.0.0.0") || !*host) {
			free(host);
			host = host_ipv4();
		} else if (!strcmp(host, "localhost")) {
			free(host);
			host = xstrdup("127.0.0.1");
		}
		sbuf_addf(&url, "http://%s%s", host ? host : "127.0.0.1", colon ? colon : ":8470");
		free(host);
	}
	backend_set_hub(url.buf);
	sbuf_release(&url);
}

int server_run(const struct server_opts *o, struct tc_err *err)
{
	struct srv *s = xcalloc(1, sizeof(*s));
	int rc = 0;
	s->o = *o;
	s->lock_fd = -1;
	s->unix_fd = -1;
	s->self_ticks = proc_start_ticks(getpid());
	s->home = path_absolute(o->home, NULL);
	s->exe = xstrdup(o->exe);
	s->loopback = is_loopback(o->listen);
	struct passwd *pw = getpwuid(getuid());
	s->os_user = xstrdup(pw && pw->pw_name ? pw->pw_name : "local");
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->list_mu, NULL);
	pthread_cond_init(&s->wake, NULL);
	s->quotas = xcalloc((size_t)o->nquotas + 1, sizeof(*s->quotas));
	for (int i = 0; i < o->nquotas; i++)
		s->quotas[s->nquotas++] = (struct sched_quota){ o->quotas[i].user, o->quotas[i].max_devices };
	if ((rc = lock_state(s, err)) || (rc = store_open(s->home, &s->st, err)) ||
	    (rc = store_runs_private(s->home, err)) ||
	    (rc = store_keep_pages(s->st, 64, err)) ||
	    (rc = store_open_unlocked(s->home, &s->list_st, err)) ||
	    (rc = store_keep_pages(s->list_st, 64, err)))
		goto out;
	load_devices(s);
	if ((rc = srv_teams_load(s, err)) || (rc = load_jobs(s, err)))
		goto out;
	srv_health_refresh(s); /* before the first round hands any device out */
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { 0 };
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	struct sigaction hup = { 0 };
	hup.sa_handler = on_hup; /* reload the settings file's teams (teams_srv.c) */
	sigaction(SIGHUP, &hup, NULL);
	srv_notify_start(s);
	char *login = NULL;
	if ((rc = api_start(s, &login, err))) {
		api_stop(s);
		goto out;
	}
	server_hub_url(s);
	srvlog_act(s->o.quiet,
		   "listening on http://%s/ and %s (state %s, %zu device%s, %zu active job%s)",
		   o->listen, s->socket_path, s->home, s->ndevs, plural_s((long long)s->ndevs),
		   s->njobs, plural_s((long long)s->njobs));
	/* like Jupyter's token URL: one use, for the operator who reads this log */
	srvlog(SRVLOG_NOTICE, "open the web UI (one use): http://%s%s", o->listen, login);
	free(login);
	double period = o->sample_seconds > 0 ? o->sample_seconds : 5;
	pthread_mutex_lock(&s->mu);
	while (!got_signal) {
		if (got_hup) {
			got_hup = 0;
			struct tc_err herr = TC_ERR_INIT;
			(void)srv_teams_reload(s, &herr); /* it logs why when it keeps the old */
			tc_err_release(&herr);
		}
		srv_round(s, period);
		struct timespec ts, gap;
		clock_gettime(CLOCK_REALTIME, &ts);
		gap = ts;
		ts.tv_nsec += TICK_MS * 1000000L;
		gap.tv_nsec += MIN_ROUND_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (gap.tv_nsec >= 1000000000L) {
			gap.tv_sec++;
			gap.tv_nsec -= 1000000000L;
		}
		/* wake-ups in the first MIN_ROUND_MS wait for its end (woken keeps them) */
		while (!got_signal && pthread_cond_timedwait(&s->wake, &s->mu, &gap) != ETIMEDOUT)
			;
		while (!got_signal && !got_hup && !s->woken && pthread_cond_timedwait(&s->wake, &s->mu, &ts) != ETIMEDOUT)
			;
		s->woken = false;
	}
	s->stopping = 1;
	pthread_mutex_unlock(&s->mu);
	if (!s->o.quiet)
		srvlog(SRVLOG_NOTICE, "%s: stopping (jobs keep running)", strsignal(got_signal));
	api_stop(s);
out:
	srv_privsep_end(s);
	srv_notify_end(s);
	srv_health_end(s);
	srv_teams_end(s);
	store_close(s->st);
	store_close(s->list_st);
	for (size_t i = 0; i < s->njobs; i++)
		sjob_release(&s->jobs[i]);
	free(s->jobs);
	for (size_t i = 0; i < s->nsettling; i++) {
		free(s->settling[i].id);
		backend_pull_free(s->settling[i].pulling);
	}
	free(s->settling);
	free(s->queue);
	for (size_t i = 0; s->lease_job && i < s->ndevs; i++)
		free(s->lease_job[i]);
	free(s->lease_job);
	free(s->devs);
	free(s->quotas);
	free(s->devices_json);
	free(s->home);
	free(s->exe);
	free(s->os_user);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->list_mu);
	pthread_cond_destroy(&s->wake);
	if (s->lock_fd >= 0)
		close(s->lock_fd); /* the next server may start */
	free(s);
	return rc;
}
