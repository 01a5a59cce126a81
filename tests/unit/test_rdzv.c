/* test_rdzv.c -- rendezvous rounds in the hub (hub/rdzv.h): the state
 * machine on a clock of the test's, its JSON kept and reloaded, fencing of
 * a node of an old round through hub_receive against a real store, a hub
 * restart that keeps the round, and the client over HTTP. */
#include "test.h"

#include "core/util.h"
#include "hub/hub.h"
#include "hub/rdzv.h"
#include "jobs/jobs.h"
#include "store/store.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOB "20261129-000000-000-rdzv"
#define SECRET "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static struct rdzv_reply rep(void)
{
	return (struct rdzv_reply){ .why = SBUF_INIT };
}

static void open_round(struct rdzv *r, long long round, int min, int max, double now)
{
	struct rdzv_conf c = { .min = min, .max = max, .window_s = 5, .beat_s = 1, .lost_s = 3 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(rdzv_conf_check(&c, &err), 0);
	struct rdzv_reply a = rep();
	rdzv_open(r, round, &c, now, &a);
	CHECK_INT(a.status, 200);
	rdzv_reply_release(&a);
}

/* join node; its rank (the status must be want_status) */
static int join(struct rdzv *r, long long round, const char *node, const char *stream,
		double now, int want_status)
{
	struct rdzv_reply a = rep();
	rdzv_join(r, round, node, "10.0.0.1", stream, -1, now, &a);
	CHECK_INT(a.status, want_status);
	int rank = a.rank;
	rdzv_reply_release(&a);
	return rank;
}

static int beat(struct rdzv *r, long long round, const char *node, double now, struct sbuf *why)
{
	struct rdzv_reply a = rep();
	rdzv_beat(r, round, node, now, &a);
	if (why)
		sbuf_add(why, a.why.buf, a.why.len);
	int st = a.status;
	rdzv_reply_release(&a);
	return st;
}

TEST(rdzv_round_closes_when_max_joined_with_ranks_in_join_order)
{
	struct rdzv *r = rdzv_new();
	CHECK_INT(join(r, 0, "a", NULL, 0, 409), -1); /* nothing open yet */
	open_round(r, 0, 3, 3, 0);
	CHECK_INT(join(r, 0, "a", NULL, 0.1, 200), 0);
	CHECK_INT(join(r, 0, "b", NULL, 0.2, 200), 1);
	CHECK_INT(rdzv_state(r), RDZV_JOINING);
	CHECK_INT(join(r, 0, "a", NULL, 0.3, 200), 0); /* again: the same rank */
	CHECK_INT(join(r, 0, "c", NULL, 0.4, 200), 2);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	CHECK_INT(join(r, 0, "d", NULL, 0.5, 409), -1); /* a running round's members are fixed */
	CHECK_INT(join(r, 1, "a", NULL, 0.5, 409), -1); /* a round not open */
	rdzv_free(r);
}

TEST(rdzv_join_window_closes_a_round_with_min_nodes)
{
	struct rdzv *r = rdzv_new();
	open_round(r, 0, 2, 4, 0);
	join(r, 0, "a", NULL, 0, 200);
	CHECK_INT(beat(r, 0, "a", 2, NULL), 200);
	rdzv_tick(r, 4);
	CHECK_INT(rdzv_state(r), RDZV_JOINING); /* one is below min: no window yet */
	join(r, 0, "b", NULL, 4.5, 200);
	CHECK_INT(beat(r, 0, "a", 4.5, NULL), 200);
	CHECK_INT(beat(r, 0, "a", 7, NULL), 200);
	CHECK_INT(beat(r, 0, "b", 7, NULL), 200);
	rdzv_tick(r, 9.4);
	CHECK_INT(rdzv_state(r), RDZV_JOINING); /* the window runs 5 s from the second join */
	rdzv_tick(r, 9.6);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	struct rdzv_reply a = rep();
	rdzv_beat(r, 0, "b", 9.7, &a);
	CHECK_INT(a.world, 2);
	CHECK_INT(a.rank, 1);
	rdzv_reply_release(&a);
	/* a joiner silent for lost seconds leaves a joining round; nothing ends */
	open_round(r, 1, 3, 3, 10);
	join(r, 1, "a", NULL, 10, 200);
	join(r, 1, "b", NULL, 11, 200);
	rdzv_tick(r, 13.5);
	CHECK_INT(rdzv_round(r), 1);
	CHECK_INT(beat(r, 1, "a", 13.6, NULL), 409);
	CHECK_INT(beat(r, 1, "b", 13.6, NULL), 200);
	rdzv_free(r);
}

TEST(rdzv_lost_member_ends_the_round_survivors_keep_ranks_a_spare_takes_the_lost_one)
{
	struct rdzv *r = rdzv_new();
	open_round(r, 0, 2, 3, 0);
	join(r, 0, "a", "node0.a0.1", 0, 200);
	join(r, 0, "b", "node1.a0.1", 0, 200);
	join(r, 0, "c", "node2.a0.1", 0, 200);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	CHECK_INT(beat(r, 0, "a", 2, NULL), 200);
	CHECK_INT(beat(r, 0, "c", 2, NULL), 200);
	rdzv_tick(r, 3.5); /* b silent 3.5 s > lost 3 */
	CHECK_INT(rdzv_round(r), 1);
	CHECK_INT(rdzv_state(r), RDZV_JOINING);
	struct sbuf why = SBUF_INIT;
	CHECK_INT(beat(r, 0, "a", 3.6, &why), 409);
	CHECK_CONTAINS(why.buf, "node b (rank 1) lost");
	sbuf_release(&why);
	/* the survivors ask for their ranks back; a spare takes the lowest free one */
	CHECK_INT(join(r, 1, "c", "node2.a0.1", 3.7, 200), 2);
	CHECK_INT(join(r, 1, "spare", "node3.a0.1", 3.8, 200), 1);
	CHECK_INT(rdzv_state(r), RDZV_JOINING);
	CHECK_INT(join(r, 1, "a", "node0.a0.1", 3.9, 200), 0);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED); /* max */
	rdzv_free(r);
}

TEST(rdzv_without_a_spare_the_survivors_close_the_round_and_ranks_close_up)
{
	struct rdzv *r = rdzv_new();
	open_round(r, 0, 1, 3, 0);
	join(r, 0, "a", NULL, 0, 200);
	join(r, 0, "b", NULL, 0, 200);
	join(r, 0, "c", NULL, 0, 200);
	CHECK_INT(beat(r, 0, "b", 2, NULL), 200);
	CHECK_INT(beat(r, 0, "c", 2, NULL), 200);
	rdzv_tick(r, 3.2); /* a (rank 0) lost */
	CHECK_INT(rdzv_round(r), 1);
	CHECK_INT(join(r, 1, "c", NULL, 3.3, 200), 2);
	CHECK_INT(rdzv_state(r), RDZV_JOINING);
	/* every survivor is back: no window to wait out; contiguous ranks in order */
	CHECK_INT(join(r, 1, "b", NULL, 3.4, 200), 0);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	struct rdzv_reply a = rep();
	rdzv_beat(r, 1, "c", 3.5, &a);
	CHECK_INT(a.rank, 1);
	CHECK_INT(a.world, 2);
	rdzv_reply_release(&a);
	rdzv_free(r);
}

TEST(rdzv_driver_open_ends_the_round_and_old_streams_are_fenced)
{
	struct rdzv *r = rdzv_new();
	CHECK(!rdzv_fences(r, "node1.a0.5.0.77")); /* a job without rounds: nothing fenced */
	open_round(r, 0, 2, 2, 0);
	join(r, 0, "a", "node0.a0.5.0.10", 0, 200);
	join(r, 0, "b", "node1.a0.5.0.11", 0, 200);
	CHECK(!rdzv_fences(r, "node1.a0.5.0.11"));
	CHECK(rdzv_fences(r, "node1.a0.5.0.99")); /* not a member's */
	CHECK(!rdzv_fences(r, "driver.5.0.3"));  /* the driver is never fenced */
	open_round(r, 1, 2, 2, 1);
	open_round(r, 1, 2, 2, 1.1); /* again: the same round */
	CHECK_INT(rdzv_round(r), 1);
	struct rdzv_reply a = rep();
	struct rdzv_conf c = { .min = 2, .max = 2, .window_s = 5, .beat_s = 1, .lost_s = 3 };
	rdzv_open(r, 0, &c, 1.2, &a); /* a stale driver */
	CHECK_INT(a.status, 409);
	rdzv_reply_release(&a);
	CHECK(rdzv_fences(r, "node1.a0.5.0.11"));
	CHECK_INT(join(r, 0, "b", "node1.a0.5.0.11", 1.3, 409), -1);
	CHECK_INT(join(r, 1, "b", "node1.a1.5.0.12", 1.4, 200), 1); /* its rank kept */
	CHECK(!rdzv_fences(r, "node1.a1.5.0.12"));
	CHECK(rdzv_count_fenced(r, "node1.a0.5.0.11"));
	CHECK(!rdzv_count_fenced(r, "node1.a0.5.0.11")); /* said once */
	CHECK_INT(rdzv_fenced(r), 2);
	rdzv_free(r);
}

TEST(rdzv_json_reloads_the_same_round_with_a_grace_period)
{
	struct rdzv *r = rdzv_new();
	open_round(r, 4, 2, 2, 100);
	join(r, 4, "a", "node0.a4.1", 100, 200);
	join(r, 4, "b", "node1.a4.1", 100, 200);
	CHECK(rdzv_take_dirty(r));
	CHECK(!rdzv_take_dirty(r));
	struct sbuf t = SBUF_INIT, t2 = SBUF_INIT;
	rdzv_json(r, false, 0, &t);
	struct rdzv *r2 = rdzv_new();
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(rdzv_load(r2, t.buf, 500, &err), 0);
	rdzv_json(r2, false, 0, &t2);
	CHECK_STR(t2.buf, t.buf);
	rdzv_tick(r2, 502); /* within lost (3 s) of the reload: nobody lost */
	CHECK_INT(rdzv_round(r2), 4);
	CHECK_INT(rdzv_state(r2), RDZV_CLOSED);
	CHECK(rdzv_fences(r2, "node0.a3.1"));
	CHECK(!rdzv_fences(r2, "node0.a4.1"));
	CHECK_INT(rdzv_load(r2, "{\"round\":1}", 0, &err) != 0, 1);
	tc_err_release(&err);
	sbuf_release(&t);
	sbuf_release(&t2);
	rdzv_free(r);
	rdzv_free(r2);
}

/* ---- the hub: fencing against a real store ---- */

/* A store in home with JOB, keyed to SECRET through the hub itself (hub_rekey). */
static struct store *job_store(const char *home)
{
	struct store *st = NULL;
	struct hub *h = NULL;
	struct tc_err err = TC_ERR_INIT;
	struct job_row j = { .id = JOB, .name = "rdzv", .state = JOB_RUNNING, .run_dir = "/nowhere",
			     .spec_json = "{}", .created = now_wall() };
	CHECK_INT(store_open(home, &st, &err) || store_job_create(st, &j, &err) ||
			  hub_new(home, &h, &err) ||
			  hub_rekey(h, JOB, SECRET, "http://127.0.0.1:1", &err),
		  0);
	hub_free(h);
	return st;
}

/* POST .../rdzv's body; the answer's status */
static int hub_rdzv(struct hub *h, const char *body, struct sbuf *out)
{
	struct tc_err err = TC_ERR_INIT;
	int status = 0;
	struct sbuf o = SBUF_INIT;
	hub_rdzv_receive(h, JOB, SECRET, body, strlen(body), &status, &o, &err);
	if (out)
		sbuf_add(out, o.buf, o.len);
	sbuf_release(&o);
	tc_err_release(&err);
	return status;
}

static long long batch(struct hub *h, const char *stream, const char *body)
{
	struct tc_err err = TC_ERR_INIT;
	int status = 0;
	long long acked = -1;
	hub_receive(h, JOB, stream, SECRET, body, strlen(body), &status, &acked, &err);
	CHECK_INT(status, 200);
	tc_err_release(&err);
	return acked;
}

static size_t node_ckpts(struct store *st)
{
	struct store_ckpt *v = NULL;
	int *nodes = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_ckpt_node_list(st, JOB, &v, &nodes, &n, &err), 0);
	store_ckpt_free(v, n);
	free(nodes);
	return n;
}

static int nwarn;
static void count_warn(void *ctx, const char *msg)
{
	(void)ctx;
	if (strstr(msg, "no member of rendezvous round"))
		nwarn++;
}

#define CKPT(seq, name, step)                                                                  \
	"{\"seq\":" #seq ",\"ev\":\"ckpt\",\"node\":1,\"name\":\"" name "\",\"dir\":\"/c\","   \
	"\"step\":" #step ",\"epoch\":-1,\"layout\":0,\"nfiles\":0,\"bytes\":0,\"sum\":\"\","  \
	"\"files\":\"[]\",\"state\":\"complete\"}\n"

TEST(hub_refuses_a_fenced_nodes_late_records_and_keeps_rounds_over_a_restart)
{
	const char *home = test_tmpdir();
	struct store *st = job_store(home);
	struct hub *h = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(hub_new(home, &h, &err), 0);
	hub_set_warn(h, count_warn, NULL);
	const char *old = "node1.a0.7.0.100", *mine = "node1.a1.7.0.200";
	/* before any round: nothing is fenced */
	CHECK_INT(batch(h, old, CKPT(1, "ck-10", 10)), 1);
	CHECK_INT(node_ckpts(st), 1);
	CHECK_INT(hub_rdzv(h, "{\"op\":\"open\",\"round\":0,\"min\":2,\"max\":2}", NULL), 200);
	CHECK_INT(hub_rdzv(h, "{\"op\":\"join\",\"round\":0,\"node\":\"n0\","
			      "\"stream\":\"node0.a0.7.0.99\"}", NULL), 200);
	struct sbuf out = SBUF_INIT;
	CHECK_INT(hub_rdzv(h, "{\"op\":\"join\",\"round\":0,\"node\":\"n1\","
			      "\"stream\":\"node1.a0.7.0.100\"}", &out), 200);
	CHECK_CONTAINS(out.buf, "\"state\":\"closed\"");
	CHECK_INT(batch(h, old, CKPT(2, "ck-20", 20)), 2); /* a member: applied */
	CHECK_INT(node_ckpts(st), 2);
	/* attempt 1: the driver opens round 1; node 1 comes back as a new process */
	CHECK_INT(hub_rdzv(h, "{\"op\":\"open\",\"round\":1,\"min\":2,\"max\":2}", NULL), 200);
	CHECK_INT(hub_rdzv(h, "{\"op\":\"join\",\"round\":1,\"node\":\"n1\","
			      "\"stream\":\"node1.a1.7.0.200\"}", NULL), 200);
	/* the old process's late records: acknowledged, never applied, said once */
	CHECK_INT(batch(h, old, CKPT(3, "ck-30", 30)), 3);
	CHECK_INT(batch(h, old, CKPT(3, "ck-30", 30) CKPT(4, "ck-40", 40)), 4);
	CHECK_INT(node_ckpts(st), 2);
	CHECK_INT(nwarn, 1);
	/* its logs still arrive (history); kept events are not counted */
	CHECK_INT(batch(h, mine, CKPT(1, "ck-50", 50)), 1);
	CHECK_INT(node_ckpts(st), 3);
	/* a stale driver and a join of the old round are refused */
	sbuf_reset(&out);
	CHECK_INT(hub_rdzv(h, "{\"op\":\"join\",\"round\":0,\"node\":\"n1\"}", &out), 409);
	CHECK_CONTAINS(out.buf, "round 0 is over");
	CHECK_INT(hub_rdzv(h, "{\"op\":\"nap\",\"round\":0,\"node\":\"n1\"}", NULL), 400);
	CHECK_INT(hub_rdzv(h, "[1]", NULL), 400);
	struct tc_err e2 = TC_ERR_INIT;
	int status = 0;
	sbuf_reset(&out);
	hub_rdzv_receive(h, JOB, "wrong", "{}", 2, &status, &out, &e2);
	CHECK_INT(status, 401);
	tc_err_release(&e2);
	hub_free(h);

	/* a restarted hub: round 1 (joining, n1 in it) and the fence are still there */
	CHECK_INT(hub_new(home, &h, &err), 0);
	CHECK_INT(batch(h, old, CKPT(5, "ck-60", 60)), 5);
	CHECK_INT(node_ckpts(st), 3);
	/* a joiner the hub may have forgotten joins again (rdzv.h note 6): the same rank */
	sbuf_reset(&out);
	CHECK_INT(hub_rdzv(h, "{\"op\":\"join\",\"round\":1,\"node\":\"n1\","
			      "\"stream\":\"node1.a1.7.0.200\"}", &out), 200);
	CHECK_CONTAINS(out.buf, "\"state\":\"joining\"");
	CHECK_INT(hub_rdzv(h, "{\"op\":\"join\",\"round\":1,\"node\":\"n0\","
			      "\"stream\":\"node0.a1.7.0.201\"}", NULL), 200);
	sbuf_reset(&out);
	CHECK_INT(hub_rdzv(h, "{\"op\":\"beat\",\"round\":1,\"node\":\"n1\"}", &out), 200);
	CHECK_CONTAINS(out.buf, "\"rank\":1");
	CHECK_CONTAINS(out.buf, "\"state\":\"closed\"");
	hub_free(h);
	CHECK_INT(hub_new(home, &h, &err), 0);
	char *row = NULL;
	CHECK_INT(store_hub_rdzv_get(st, JOB, &row, &err), 0);
	CHECK(row != NULL);
	CHECK_CONTAINS(row, "\"round\":1,\"state\":\"closed\"");
	CHECK_CONTAINS(row, "\"fenced\":3");
	free(row);
	/* running members reloaded get a grace period: a beat is answered at once */
	sbuf_reset(&out);
	CHECK_INT(hub_rdzv(h, "{\"op\":\"beat\",\"round\":1,\"node\":\"n0\"}", &out), 200);
	CHECK_CONTAINS(out.buf, "\"rank\":0");
	sbuf_release(&out);
	hub_free(h);
	store_close(st);
	tc_err_release(&err);
}

/* ---- the client over HTTP ---- */

struct node_th {
	const char *url, *name;
	int rank, world;
	int rc;
	bool keep;             /* keep the client (its connection) in c, as a member does */
	struct rdzv_client *c;
};

static void *node_main(void *arg)
{
	struct node_th *n = arg;
	struct tc_err err = TC_ERR_INIT;
	struct rdzv_client_opts o = { .url = n->url, .secret = SECRET, .job = JOB,
				      .node = n->name, .want_rank = -1 };
	struct rdzv_client *c = rdzv_client_new(&o, &err);
	struct rdzv_reply a = rep();
	n->rc = c ? rdzv_client_rendezvous(c, 0, 30, &a, &err) : -1;
	n->rank = a.rank;
	n->world = a.world;
	/* a member that ends its part says so: else its client's close is its loss (note 7) */
	if (c && !n->keep && !n->rc && (rdzv_client_leave(c, 0, &a, &err) || a.status != 200))
		n->rc = -2;
	rdzv_reply_release(&a);
	if (n->keep)
		n->c = c;
	else
		rdzv_client_free(c);
	tc_err_release(&err);
	return NULL;
}

static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static char lost_why[512];

static void on_lost(void *ctx, const char *why)
{
	(void)ctx;
	pthread_mutex_lock(&lost_mu);
	snprintf(lost_why, sizeof(lost_why), "%s", why);
	pthread_mutex_unlock(&lost_mu);
}

/* Nodes x, y and z rendezvous in round 0 at once, each in a thread of its own. */
static void three_nodes(const char *url, bool keep, struct node_th n[3])
{
	static const char *const names[3] = { "x", "y", "z" };
	pthread_t th[3];
	for (int i = 0; i < 3; i++) {
		n[i] = (struct node_th){ url, names[i], -1, 0, -1, keep, NULL };
		CHECK_INT(pthread_create(&th[i], NULL, node_main, &n[i]), 0);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		CHECK_INT(n[i].rc, 0);
	}
}

/* A hub over HTTP on 127.0.0.1 for JOB, and the driver's client that opened round 0. */
struct http_hub {
	struct store *st;
	struct hub *h;
	struct hub_daemon *d;
	char url[64];
	struct rdzv_client_opts o; /* the driver's; a test may reuse it for a node */
	struct rdzv_client *drv;
};

static void http_hub_start(struct http_hub *x, const struct rdzv_conf *conf)
{
	const char *home = test_tmpdir();
	struct tc_err err = TC_ERR_INIT;
	int port = 0;
	x->st = job_store(home);
	CHECK_INT(hub_new(home, &x->h, &err), 0);
	CHECK_INT(hub_daemon_start(x->h, "127.0.0.1", 0, &x->d, &port, &err), 0);
	snprintf(x->url, sizeof(x->url), "http://127.0.0.1:%d", port);
	x->o = (struct rdzv_client_opts){ .url = x->url, .secret = SECRET, .job = JOB,
					  .node = "driver", .want_rank = -1 };
	x->drv = rdzv_client_new(&x->o, &err);
	CHECK(x->drv != NULL);
	struct rdzv_reply a = rep();
	CHECK_INT(rdzv_client_open(x->drv, 0, conf, &a, &err), 0);
	CHECK_INT(a.status, 200);
	rdzv_reply_release(&a);
	tc_err_release(&err);
}

static void http_hub_stop(struct http_hub *x)
{
	rdzv_client_free(x->drv);
	hub_daemon_stop(x->d);
	hub_free(x->h);
	store_close(x->st);
}

TEST(rdzv_client_rendezvous_over_http_and_its_keeper_hears_the_round_end)
{
	struct rdzv_conf conf = { .min = 3, .max = 3, .beat_s = 0.2, .lost_s = 30 };
	struct http_hub x = { 0 };
	http_hub_start(&x, &conf);
	const char *url = x.url;
	struct rdzv_client_opts o = x.o;
	struct rdzv_client *drv = x.drv;
	struct tc_err err = TC_ERR_INIT;
	struct rdzv_reply a = rep();
	struct node_th n[3];
	three_nodes(url, false, n);
	int seen = 0;
	for (int i = 0; i < 3; i++) {
		CHECK_INT(n[i].world, 3);
		seen |= 1 << n[i].rank;
	}
	CHECK_INT(seen, 7);
	/* x's keeper beats; the driver's next round ends x's: it is told, once */
	o.node = "x";
	struct rdzv_client *cx = rdzv_client_new(&o, &err);
	struct rdzv_keeper *k = rdzv_keep_start(cx, 0, 50, on_lost, NULL);
	CHECK(k != NULL);
	CHECK_INT(rdzv_client_open(drv, 1, &conf, &a, &err), 0);
	bool told = false;
	for (int i = 0; i < 600 && !told; i++) {
		pthread_mutex_lock(&lost_mu);
		told = lost_why[0] != 0;
		pthread_mutex_unlock(&lost_mu);
		if (!told)
			usleep(50 * 1000);
	}
	CHECK(told);
	CHECK_CONTAINS(lost_why, "the driver opened round 1");
	rdzv_keep_stop(k);
	rdzv_client_free(cx);
	rdzv_reply_release(&a);
	http_hub_stop(&x);
	tc_err_release(&err);
}

/* join node asking for rank want; its rank (the status must be 200) */
static int join_want(struct rdzv *r, long long round, const char *node, int want, double now)
{
	struct rdzv_reply a = rep();
	rdzv_join(r, round, node, "10.0.0.1", NULL, want, now, &a);
	CHECK_INT(a.status, 200);
	int rank = a.rank;
	rdzv_reply_release(&a);
	return rank;
}

TEST(rdzv_the_drivers_rank_wins_over_a_kept_one)
{
	/* the driver saw node b lost before the hub did and gave its rank to spare s:
	 * the round closes with s at rank 1 (b's rank is no longer kept for b) */
	struct rdzv *r = rdzv_new();
	open_round(r, 0, 2, 2, 0);
	CHECK_INT(join_want(r, 0, "a", 0, 0), 0);
	CHECK_INT(join_want(r, 0, "b", 1, 0), 1);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	open_round(r, 1, 2, 2, 1);
	CHECK_INT(join_want(r, 1, "a", 0, 1.1), 0);
	CHECK_INT(join_want(r, 1, "s", 1, 1.2), 1);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	/* the job shrank: c, rank 2 before, is moved down to rank 1 */
	open_round(r, 2, 3, 3, 2);
	join_want(r, 2, "a", 0, 2);
	join_want(r, 2, "s", 1, 2);
	join_want(r, 2, "c", 2, 2);
	open_round(r, 3, 2, 2, 3);
	CHECK_INT(join_want(r, 3, "a", 0, 3.1), 0);
	CHECK_INT(join_want(r, 3, "c", 1, 3.2), 1);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	rdzv_free(r);
}

/* ---- a member's connection as its lease (rdzv.h note 7) ---- */

/* join node (200), its request on connection con; its rank */
static int join_on(struct rdzv *r, long long round, const char *node, double now, const void *con)
{
	int rank = join(r, round, node, NULL, now, 200);
	rdzv_hold(r, node, con);
	return rank;
}

TEST(rdzv_a_members_closed_connection_is_its_loss_at_once)
{
	static const int con_a = 1, con_b = 2, con_c = 3, con_b2 = 4;
	struct rdzv *r = rdzv_new();
	open_round(r, 0, 2, 3, 0);
	join_on(r, 0, "a", 0, &con_a);
	join_on(r, 0, "b", 0, &con_b);
	join_on(r, 0, "c", 0, &con_c);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	/* b reconnected (its client's choice): its old connection's close is nothing */
	CHECK_INT(beat(r, 0, "b", 0.5, NULL), 200);
	rdzv_hold(r, "b", &con_b2);
	CHECK(!rdzv_con_closed(r, &con_b, 0.6));
	CHECK_INT(rdzv_round(r), 0);
	/* a connection no member holds: nothing */
	static const int other = 5;
	CHECK(!rdzv_con_closed(r, &other, 0.6));
	/* c's connection closes 0.7 s in, far before lost_s (3 s): c is lost now */
	CHECK(rdzv_con_closed(r, &con_c, 0.7));
	CHECK_INT(rdzv_round(r), 1);
	CHECK_INT(rdzv_state(r), RDZV_JOINING);
	CHECK(rdzv_take_dirty(r)); /* a restarted hub must know */
	struct sbuf why = SBUF_INIT;
	CHECK_INT(beat(r, 0, "a", 0.8, &why), 409);
	CHECK_CONTAINS(why.buf, "node c (rank 2) lost: its connection to the hub closed");
	/* the survivors keep their ranks; the round closes once both are back */
	CHECK_INT(join_on(r, 1, "b", 0.9, &con_b2), 1);
	CHECK_INT(join_on(r, 1, "a", 0.9, &con_a), 0);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	/* a leaves of its own accord: its close is no loss; the heartbeat rule still holds */
	struct rdzv_reply a = rep();
	rdzv_leave(r, 1, "a", 1.0, &a);
	CHECK_INT(a.status, 200);
	CHECK(!rdzv_con_closed(r, &con_a, 1.1));
	CHECK_INT(rdzv_round(r), 1);
	/* a node that is no member cannot leave */
	rdzv_leave(r, 1, "c", 1.2, &a);
	CHECK_INT(a.status, 409);
	rdzv_reply_release(&a);
	CHECK_INT(beat(r, 1, "b", 3.0, NULL), 200);
	rdzv_tick(r, 4.5); /* a silent 3.5 s: lost by note 4 */
	CHECK_INT(rdzv_round(r), 2);
	sbuf_release(&why);
	rdzv_free(r);
}

TEST(rdzv_a_joiners_closed_connection_takes_it_out_of_the_joining_round)
{
	static const int con_a = 1, con_b = 2;
	struct rdzv *r = rdzv_new();
	open_round(r, 0, 3, 3, 0);
	join_on(r, 0, "a", 0, &con_a);
	join_on(r, 0, "b", 0, &con_b);
	CHECK(rdzv_con_closed(r, &con_b, 0.1));
	CHECK_INT(rdzv_round(r), 0);
	CHECK_INT(rdzv_state(r), RDZV_JOINING);
	/* b is gone: two more are needed; b's rank is free again */
	CHECK_INT(join(r, 0, "c", NULL, 0.2, 200), 1);
	CHECK_INT(rdzv_state(r), RDZV_JOINING);
	CHECK_INT(join(r, 0, "d", NULL, 0.3, 200), 2);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	rdzv_free(r);
}

TEST(rdzv_no_lease_when_heartbeats_are_rarer_than_the_idle_limits)
{
	static const int con_a = 1;
	struct rdzv *r = rdzv_new();
	struct rdzv_conf c = { .min = 1, .max = 1, .beat_s = RDZV_HOLD_BEAT_MAX + 1,
			       .lost_s = 600 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(rdzv_conf_check(&c, &err), 0);
	struct rdzv_reply a = rep();
	rdzv_open(r, 0, &c, 0, &a);
	rdzv_reply_release(&a);
	join_on(r, 0, "a", 0, &con_a);
	CHECK_INT(rdzv_state(r), RDZV_CLOSED);
	CHECK(!rdzv_con_closed(r, &con_a, 1));
	CHECK_INT(rdzv_round(r), 0);
	rdzv_free(r);
}

/* The hub's answer to node's beat of round (200: a member). */
static int beat_status(struct hub *h, int round, const char *node, struct sbuf *out)
{
	char body[128];
	snprintf(body, sizeof(body), "{\"op\":\"beat\",\"round\":%d,\"node\":\"%s\"}", round, node);
	return hub_rdzv(h, body, out);
}

TEST(rdzv_over_http_a_client_gone_without_leaving_is_lost_before_its_heartbeats_run_out)
{
	/* a heartbeat rule of 300 s: a loss seen within the test's time is the close's */
	struct rdzv_conf conf = { .min = 3, .max = 3, .beat_s = 1, .lost_s = 300 };
	struct http_hub x = { 0 };
	http_hub_start(&x, &conf);
	const char *url = x.url;
	struct hub *h = x.h;
	struct tc_err err = TC_ERR_INIT;
	struct rdzv_reply a = rep();
	struct node_th m[3];
	three_nodes(url, true, m);
	/* x ends of its own accord: its keeper's stop leaves, then its connection closes */
	struct rdzv_keeper *k = rdzv_keep_start(m[0].c, 0, 200, NULL, NULL);
	CHECK(k != NULL);
	rdzv_keep_stop(k);
	rdzv_client_free(m[0].c);
	/* still round 0 once the hub has seen that close (a request after it is answered) */
	struct rdzv_client *probe = rdzv_client_new(&x.o, &err);
	CHECK_INT(rdzv_client_beat(probe, 0, &a, &err), 0);
	rdzv_client_free(probe);
	CHECK_INT(beat_status(h, 0, "y", NULL), 200);
	/* z's client goes as a killed supervisor's: no leave, the connection closes */
	rdzv_client_free(m[2].c);
	int64_t t0 = now_mono_ms();
	struct sbuf why = SBUF_INIT;
	while (beat_status(h, 0, "y", NULL) == 200 && now_mono_ms() - t0 < 60000)
		usleep(20 * 1000);
	CHECK_INT(beat_status(h, 0, "y", &why), 409);
	CHECK_CONTAINS(why.buf, "node z (rank ");
	CHECK_CONTAINS(why.buf, "its connection to the hub closed");
	rdzv_client_free(m[1].c);
	sbuf_release(&why);
	rdzv_reply_release(&a);
	http_hub_stop(&x);
	tc_err_release(&err);
}
