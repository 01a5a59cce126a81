/*
 * cmd_rdzv.c -- `trainctl rdzv-sim`, hidden: the rendezvous of a
 * multi-node job (hub/rdzv.h) without Slurm, for bench/rdzv_bench.sh and
 * tests/e2e/test_rdzv.py.  Three parts:
 *
 *   rdzv-sim hub JOB [--port P]   a hub over the state folder (the job's row
 *       made when missing, keyed to $TRAINCTL_HUB_SECRET), on 127.0.0.1:P;
 *       prints {"port":P}, serves until SIGTERM or SIGINT, then prints its
 *       CPU seconds and peak RSS;
 *   rdzv-sim open JOB --round R --min A --max B [--window-s S --beat-s S --lost-s S]
 *       the driver's open (the hub of $TRAINCTL_HUB_URL);
 *   rdzv-sim nodes JOB --count N [--first K] [--round R]
 *       N simulated node supervisors, one thread each, running the real
 *       client (rdzv_client.c): join, wait for the round to close, one line
 *       {"node","round","rank","world","t"}, heartbeat; told their round
 *       ended, they join the next (stream "node<K>.a<round>.sim").
 */
#include "cmd/cmd.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "hub/rdzv.h"
#include "jobs/jobs.h"
#include "store/store.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
	"usage: trainctl rdzv-sim hub JOB [--port P] | open JOB --round R --min A --max B"
	" [--window-s S] [--beat-s S] [--lost-s S] | nodes JOB --count N [--first K] [--round R]";

/* --name VALUE among argv[3...]; NULL when absent */
static const char *opt(int argc, char **argv, const char *name)
{
	for (int i = 3; i + 1 < argc; i++)
		if (!strcmp(argv[i], name))
			return argv[i + 1];
	return NULL;
}

static int num(int argc, char **argv, const char *name, double dflt, double *out,
	       struct tc_err *err)
{
	const char *v = opt(argc, argv, name);
	char *end = NULL;
	*out = dflt;
	if (!v)
		return 0;
	*out = strtod(v, &end);
	if (end == v || *end)
		return tc_error(err, TC_EUSAGE, "rdzv-sim: %s takes a number, not '%s'", name, v);
	return 0;
}

static int wait_signal(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	int sig = 0;
	sigwait(&set, &sig);
	return sig;
}

static void say_warn(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "%s\n", msg);
}

static int sim_hub(const char *home, const char *job, int port, struct tc_err *err)
{
	char *secret = hub_env_secret(err);
	if (!secret)
		return err->code;
	struct store *st = NULL;
	struct job_row j = { 0 };
	int rc = store_open(home, &st, err);
	if (!rc && store_job_get(st, job, &j, err) == TC_ENOTFOUND) {
		tc_err_release(err);
		struct job_row nj = { .id = (char *)job, .name = "rdzv-sim", .state = JOB_QUEUED,
				      .run_dir = "/nonexistent", .spec_json = "{}",
				      .created = now_wall() };
		rc = store_job_create(st, &nj, err);
	}
	job_row_release(&j);
	struct hub *h = NULL;
	struct hub_daemon *d = NULL;
	int bound = 0;
	if (!rc)
		rc = hub_new(home, &h, err);
	if (!rc) {
		hub_set_warn(h, say_warn, NULL);
		char url[64];
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
		rc = hub_rekey(h, job, secret, url, err);
	}
	if (!rc)
		rc = hub_daemon_start(h, "127.0.0.1", port, &d, &bound, err);
	if (!rc) {
		printf("{\"port\":%d}\n", bound);
		fflush(stdout);
		wait_signal();
		hub_daemon_stop(d);
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		printf("{\"cpu_s\":%.3f,\"maxrss_kb\":%ld}\n",
		       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
		       ru.ru_maxrss);
		fflush(stdout);
	}
	hub_free(h);
	store_close(st);
	free(secret);
	return rc;
}

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

struct sim_node {
	const char *job;
	int index;
	long long round;
	pthread_t th;
};

static void *sim_node_main(void *arg)
{
	struct sim_node *n = arg;
	char name[32], stream[64];
	snprintf(name, sizeof(name), "sim-%d", n->index);
	long long round = n->round;
	struct rdzv_reply a = { .why = SBUF_INIT };
	for (;;) {
		snprintf(stream, sizeof(stream), "node%d.a%lld.sim", n->index, round);
		struct tc_err e = TC_ERR_INIT;
		struct rdzv_client *c = NULL;
		int rc = rdzv_client_from_env(n->job, name, "127.0.0.1", stream, -1, &c, &e);
		if (!rc && !c)
			rc = tc_error(&e, TC_EUSAGE, "rdzv-sim: TRAINCTL_HUB_URL is not set");
		if (!rc)
			rc = rdzv_client_rendezvous(c, round, 600, &a, &e);
		if (rc == TC_EJOB && a.status == 409) {
			/* not admitted (the round closed without it): wait for the next, as a spare */
			tc_err_release(&e);
			rdzv_client_free(c);
			struct timespec ts = { 1, 0 };
			nanosleep(&ts, NULL);
			round = a.round > round ? a.round : round;
			continue;
		}
		pthread_mutex_lock(&out_mu);
		if (rc)
			fprintf(stderr, "rdzv-sim: %s: %s\n", name, e.msg);
		else
			printf("{\"node\":\"%s\",\"round\":%lld,\"rank\":%d,\"world\":%d,\"t\":%.6f}\n",
			       name, round, a.rank, a.world, now_wall());
		fflush(stdout);
		pthread_mutex_unlock(&out_mu);
		tc_err_release(&e);
		if (rc) {
			rdzv_client_free(c);
			break;
		}
		/* heartbeat until the hub says the round is over: then the next one */
		int poll = a.poll_ms;
		for (;;) {
			struct timespec ts = { poll / 1000, (long)(poll % 1000) * 1000000L };
			nanosleep(&ts, NULL);
			if (rdzv_client_beat(c, round, &a, &e) == 0 && a.status == 409) {
				round = a.round;
				break;
			}
			tc_err_release(&e);
		}
		tc_err_release(&e);
		rdzv_client_free(c);
	}
	rdzv_reply_release(&a);
	return NULL;
}

static int sim_nodes(const char *job, int count, int first, long long round, struct tc_err *err)
{
	struct sim_node *v = xcalloc((size_t)count, sizeof(*v));
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* the threads too: the main one waits */
	int rc = 0;
	for (int i = 0; i < count; i++) {
		v[i] = (struct sim_node){ .job = job, .index = first + i, .round = round };
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 256 << 10);
		if (pthread_create(&v[i].th, &at, sim_node_main, &v[i]) != 0)
			rc = tc_error_errno(err, TC_ESYS, "rdzv-sim: cannot start node thread %d", i);
		pthread_attr_destroy(&at);
		if (rc)
			break;
		pthread_detach(v[i].th);
	}
	if (!rc)
		wait_signal();
	/* the threads are cut off with the process, as a node's supervisor that dies */
	fflush(stdout);
	_exit(rc ? 3 : 0);
}

int cmd_rdzv_sim(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (argc < 3)
		return tc_error(err, TC_EUSAGE, "%s", usage);
	const char *mode = argv[1], *job = argv[2];
	double port, round, count, first, min, max, window, beat, lost;
	int rc = num(argc, argv, "--port", 0, &port, err);
	if (!rc)
		rc = num(argc, argv, "--round", 0, &round, err);
	if (!rc)
		rc = num(argc, argv, "--count", 1, &count, err);
	if (!rc)
		rc = num(argc, argv, "--first", 0, &first, err);
	if (!rc)
		rc = num(argc, argv, "--min", 1, &min, err);
	if (!rc)
		rc = num(argc, argv, "--max", 1, &max, err);
	if (!rc)
		rc = num(argc, argv, "--window-s", 0, &window, err);
	if (!rc)
		rc = num(argc, argv, "--beat-s", 0, &beat, err);
	if (!rc)
		rc = num(argc, argv, "--lost-s", 0, &lost, err);
	if (rc)
		return rc;
	if (!strcmp(mode, "hub"))
		return sim_hub(ctx->home, job, (int)port, err);
	if (!strcmp(mode, "nodes")) {
		if (count < 1 || count > 100000)
			return tc_error(err, TC_EUSAGE, "rdzv-sim: --count takes 1 to 100000");
		return sim_nodes(job, (int)count, (int)first, (long long)round, err);
	}
	if (strcmp(mode, "open") != 0)
		return tc_error(err, TC_EUSAGE, "%s", usage);
	struct rdzv_client *c = NULL;
	struct rdzv_conf conf = { .min = (int)min, .max = (int)max, .window_s = window,
				  .beat_s = beat, .lost_s = lost };
	struct rdzv_reply a = { .why = SBUF_INIT };
	rc = rdzv_client_from_env(job, "driver", NULL, NULL, -1, &c, err);
	if (!rc && !c)
		rc = tc_error(err, TC_EUSAGE, "rdzv-sim: TRAINCTL_HUB_URL is not set");
	if (!rc)
		rc = rdzv_client_open(c, (long long)round, &conf, &a, err);
	if (!rc && a.status != 200)
		rc = tc_error(err, TC_EJOB, "rdzv-sim: %s", a.why.buf);
	if (!rc)
		printf("{\"round\":%lld,\"state\":\"%s\"}\n", a.round, rdzv_state_name(a.state));
	rdzv_reply_release(&a);
	rdzv_client_free(c);
	return rc;
}
