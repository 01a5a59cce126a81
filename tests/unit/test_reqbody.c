/* test_reqbody.c -- request bodies under one memory budget (core/reqbody.h). */
#include "test.h"
#include "core/reqbody.h"

TEST(reqbody_declared_lengths)
{
	CHECK_INT(reqbody_declared(NULL, NULL), 0);
	CHECK_INT(reqbody_declared("67108864", NULL), 67108864);
	CHECK_INT(reqbody_declared("12", "chunked"), -1);
	CHECK_INT(reqbody_declared(NULL, "chunked"), -1);
	CHECK_INT(reqbody_declared("-1", NULL), -1);
	CHECK_INT(reqbody_declared("1x", NULL), -1);
	CHECK(reqbody_drains(0));
	CHECK(reqbody_drains(REQBODY_DRAIN_MAX));
	CHECK(!reqbody_drains(REQBODY_DRAIN_MAX + 1));
	CHECK(!reqbody_drains(-1));
}

TEST(reqbody_caps_a_body)
{
	reqbody_set_budget(1 << 20);
	struct reqbody b = REQBODY_INIT;
	CHECK_INT(reqbody_open(&b, 10, 11), 413);
	CHECK_INT(reqbody_in_use(), 0);
	CHECK_INT(reqbody_open(&b, 10, -1), 0);
	CHECK_INT(reqbody_add(&b, "hello", 5), 0);
	CHECK_INT(reqbody_add(&b, "world", 5), 0);
	CHECK_STR(b.data.buf, "helloworld");
	CHECK_INT(reqbody_in_use(), 11); /* the cap and its NUL, not more */
	CHECK_INT(reqbody_add(&b, "!", 1), 413);
	CHECK_INT(b.data.len, 0); /* what it held is dropped with its room */
	CHECK_INT(reqbody_in_use(), 0);
	reqbody_release(&b);
	/* a route without a body */
	CHECK_INT(reqbody_open(&b, 0, 0), 0);
	CHECK_INT(reqbody_add(&b, "x", 1), 413);
	reqbody_release(&b);
}

TEST(reqbody_shares_one_budget)
{
	reqbody_set_budget(1000);
	struct reqbody a = REQBODY_INIT, b = REQBODY_INIT, c = REQBODY_INIT;
	/* a declared length takes its room at once */
	CHECK_INT(reqbody_open(&a, 4096, 599), 0);
	CHECK_INT(reqbody_in_use(), 600);
	CHECK_INT(reqbody_open(&b, 4096, 400), 503);
	CHECK_INT(reqbody_in_use(), 600);
	CHECK_INT(reqbody_open(&b, 4096, 399), 0);
	CHECK_INT(reqbody_in_use(), 1000);
	/* a chunked one is refused as it grows past the budget */
	CHECK_INT(reqbody_open(&c, 4096, -1), 0);
	CHECK_INT(reqbody_add(&c, "x", 1), 503);
	CHECK_INT(reqbody_in_use(), 1000);
	/* the declared bytes fit without growing */
	char buf[599];
	memset(buf, 'y', sizeof(buf));
	CHECK_INT(reqbody_add(&a, buf, sizeof(buf)), 0);
	CHECK_INT(reqbody_in_use(), 1000);
	reqbody_release(&a);
	CHECK_INT(reqbody_in_use(), 400);
	/* a handler that took the buffer leaves the room to be given back */
	char *taken = sbuf_detach(&b.data);
	free(taken);
	reqbody_release(&b);
	CHECK_INT(reqbody_in_use(), 0);
	CHECK_INT(reqbody_add(&c, "x", 1), 0);
	CHECK(reqbody_in_use() > 0 && reqbody_in_use() <= 4097);
	reqbody_release(&c);
	CHECK_INT(reqbody_in_use(), 0);
	reqbody_set_budget(0);
	CHECK_INT(reqbody_budget(), REQBODY_BUDGET_DEFAULT);
}

TEST(reqbody_take_keeps_or_drops)
{
	reqbody_set_budget(1 << 20);
	struct reqbody b = REQBODY_INIT;
	size_t dropped = 0;
	CHECK_INT(reqbody_open(&b, 4, -1), 0);
	CHECK_INT(reqbody_take(&b, true, "ab", 2, &dropped), 0);
	CHECK_INT(dropped, 0);
	CHECK_STR(b.data.buf, "ab");
	/* a refused request's bytes are read and dropped, not kept */
	CHECK_INT(reqbody_take(&b, false, "cd", 2, &dropped), 0);
	CHECK_INT(dropped, 2);
	CHECK_INT(b.data.len, 2);
	/* past the cap: 413, the piece dropped with what was kept */
	CHECK_INT(reqbody_take(&b, true, "cdefg", 5, &dropped), 413);
	CHECK_INT(dropped, 7);
	CHECK_INT(b.data.len, 0);
	/* more than 64 times the cap dropped: the connection is to end */
	char buf[256];
	memset(buf, 'x', sizeof(buf));
	CHECK_INT(reqbody_take(&b, false, buf, sizeof(buf), &dropped), -1);
	reqbody_release(&b);
	/* a route without a body drops everything, up to 64 times REQBODY_DRAIN_MAX */
	dropped = 0;
	CHECK_INT(reqbody_open(&b, 0, -1), 0);
	CHECK_INT(reqbody_take(&b, true, "x", 1, &dropped), 0);
	CHECK_INT(dropped, 1);
	dropped = 64 * REQBODY_DRAIN_MAX;
	CHECK_INT(reqbody_take(&b, true, "x", 1, &dropped), -1);
	reqbody_release(&b);
	CHECK_INT(reqbody_in_use(), 0);
}

/* The decision every listener makes on the headers (api, hub, endpoint hosts). */
TEST(reqbody_admit_decides_when_to_answer)
{
	reqbody_set_budget(1 << 20);
	struct reqbody b = REQBODY_INIT;
	bool now = true;
	CHECK_INT(reqbody_admit(&b, 10, 5, &now), 0);
	CHECK(!now);
	reqbody_release(&b);
	/* over the cap: 413, read and dropped unless absurd (64 times the cap) */
	CHECK_INT(reqbody_admit(&b, 10, 11, &now), 413);
	CHECK(!now);
	CHECK_INT(reqbody_admit(&b, 10, 641, &now), 413);
	CHECK(now);
	/* a route without a body: a short one is read and dropped, a long one refused */
	CHECK_INT(reqbody_admit(&b, 0, 3, &now), 0);
	CHECK(!now);
	reqbody_release(&b);
	CHECK_INT(reqbody_admit(&b, 0, (long long)REQBODY_DRAIN_MAX + 1, &now), 413);
	CHECK(now);
	/* an unsaid (chunked) one is dropped as it comes, up to reqbody_take's limit */
	CHECK_INT(reqbody_admit(&b, 0, -1, &now), 0);
	CHECK(!now);
	/* over the budget: 503, a short body drained first */
	reqbody_set_budget(100);
	CHECK_INT(reqbody_admit(&b, 1000, 200, &now), 503);
	CHECK(!now);
	CHECK_INT(reqbody_admit(&b, 1 << 20, (long long)REQBODY_DRAIN_MAX + 1, &now), 503);
	CHECK(now);
	reqbody_release(&b);
	reqbody_set_budget(0);
	CHECK_INT(reqbody_in_use(), 0);
}
