/* test_slurm_watch.c -- the batch driver's reading of the hub's verdict
 * (backend/slurm_watch.h) from the status route's "rdzv", as the hub's
 * real round state machine (hub/rdzv.h) writes it on a clock of the test's. */
#include "test.h"

#include "backend/slurm_watch.h"
#include "hub/rdzv.h"

/* The status route's "rdzv" of r at now. */
static json_t *status_of(struct rdzv *r, double now)
{
	struct sbuf t = SBUF_INIT;
	rdzv_tick(r, now);
	rdzv_json(r, true, now, &t);
	json_t *o = json_loads(t.buf, 0, NULL);
	CHECK(o);
	sbuf_release(&t);
	return o;
}

static void open_round(struct rdzv *r, long long round, int nodes, double now)
{
	struct rdzv_conf c = { .min = nodes, .max = nodes, .beat_s = 1, .lost_s = 3 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(rdzv_conf_check(&c, &err), 0);
	struct rdzv_reply a = { .why = SBUF_INIT };
	rdzv_open(r, round, &c, now, &a);
	CHECK_INT(a.status, 200);
	rdzv_reply_release(&a);
}

static void join(struct rdzv *r, long long round, const char *node, int rank, double now)
{
	struct rdzv_reply a = { .why = SBUF_INIT };
	rdzv_join(r, round, node, NULL, NULL, rank, now, &a);
	CHECK_INT(a.status, 200);
	rdzv_reply_release(&a);
}

static void beat(struct rdzv *r, long long round, const char *node, double now)
{
	struct rdzv_reply a = { .why = SBUF_INIT };
	rdzv_beat(r, round, node, now, &a);
	CHECK_INT(a.status, 200);
	rdzv_reply_release(&a);
}

static bool update(struct watch_round *w, struct rdzv *r, double now)
{
	json_t *o = status_of(r, now);
	bool ended = watch_round_update(w, o);
	json_decref(o);
	return ended;
}

TEST(watch_names_the_silent_member_with_the_hubs_cause)
{
	struct rdzv *r = rdzv_new();
	struct watch_round w;
	watch_round_init(&w, 0);
	open_round(r, 0, 3, 0);
	CHECK(!update(&w, r, 0.1)); /* joining: nothing to say */
	join(r, 0, "c1", 0, 0.2);
	join(r, 0, "c2", 1, 0.3);
	join(r, 0, "c3", 2, 0.4);
	CHECK(!update(&w, r, 0.5)); /* closed: its members are remembered */
	beat(r, 0, "c1", 2.5);
	beat(r, 0, "c3", 2.5);
	CHECK(!update(&w, r, 3.0)); /* c2 silent 2.7 s of 3: not yet */
	CHECK(!w.ended);
	CHECK(update(&w, r, 4.0)); /* c2 silent 3.7 s: the hub ended round 0 */
	CHECK(w.ended);
	CHECK_CONTAINS(w.why.buf, "round 0 ended: node c2 (rank 1) lost");
	CHECK_STR(w.cause.buf, "no heartbeat for 3 s");
	CHECK_INT(w.nlost, 1);
	CHECK_INT(w.lost[0], 1);
	CHECK(!update(&w, r, 5.0)); /* said once */
	CHECK_INT(w.nlost, 1);
	watch_round_release(&w);
	rdzv_free(r);
}

TEST(watch_of_a_later_round_ignores_the_ones_before_and_a_hub_behind)
{
	struct rdzv *r = rdzv_new();
	struct watch_round w;
	watch_round_init(&w, 1);
	json_t *none = json_object();
	CHECK(!watch_round_update(&w, none)); /* a hub without a round */
	CHECK(!watch_round_update(&w, NULL));
	json_decref(none);
	open_round(r, 0, 2, 0);
	join(r, 0, "c1", 0, 0);
	join(r, 0, "c2", 1, 0);
	CHECK(!update(&w, r, 0.5)); /* round 0 is the attempt before: not ours */
	open_round(r, 1, 2, 1); /* the driver opens our round */
	join(r, 1, "c1", 0, 1.1);
	join(r, 1, "c2", 1, 1.1);
	CHECK(!update(&w, r, 1.2));
	/* both silent: both lost, the hub's reason names both */
	CHECK(update(&w, r, 5.0));
	CHECK_INT(w.nlost, 2);
	CHECK_CONTAINS(w.why.buf, "node c1 (rank 0), c2 (rank 1) lost");
	CHECK_STR(w.cause.buf, "no heartbeat for 3 s");
	watch_round_release(&w);
	rdzv_free(r);
}

TEST(watch_that_never_saw_the_round_closed_names_no_member)
{
	/* the round ended before the driver first asked: a verdict, no names (the
	 * driver then counts the nodes that left no outcome as lost) */
	struct rdzv *r = rdzv_new();
	struct watch_round w;
	watch_round_init(&w, 0);
	open_round(r, 0, 2, 0);
	join(r, 0, "c1", 0, 0);
	join(r, 0, "c2", 1, 0);
	beat(r, 0, "c1", 2.9);
	CHECK(update(&w, r, 4.0));
	CHECK_INT(w.nlost, 0);
	CHECK_STR(w.cause.buf, "no heartbeat for 3 s");
	watch_round_release(&w);
	rdzv_free(r);
}

TEST(watch_leaves_a_dead_supervisor_to_srun)
{
	/* a member whose connection closed (killed: rdzv_con_closed) ends the round too, but
	 * srun sees its task end by itself: the driver acts only on a silent member, so the
	 * attempt's cause is the same whichever comes first */
	struct rdzv *r = rdzv_new();
	struct watch_round w;
	int con;
	watch_round_init(&w, 0);
	open_round(r, 0, 2, 0);
	join(r, 0, "c1", 0, 0.1);
	join(r, 0, "c2", 1, 0.2);
	rdzv_hold(r, "c2", &con);
	CHECK(!update(&w, r, 0.5));
	CHECK(rdzv_con_closed(r, &con, 1.0));
	CHECK(!update(&w, r, 1.1));
	CHECK(!w.ended);
	watch_round_release(&w);
	rdzv_free(r);
}
