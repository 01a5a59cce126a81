/* test_spare.c -- a hot spare's health lines: what the watch says, what the driver reads */
#include "test.h"

#include "core/strvec.h"
#include "core/xalloc.h"
#include "launch/spare.h"

#include <string.h>

/* The watch's tell: keeps the lines; the second one is the last (false: nobody reads more). */
static bool keep_two(void *ctx, const char *line)
{
	struct strvec *v = ctx;
	strvec_push(v, line);
	return v->nr < 2;
}

TEST(watch_tells_each_check_and_the_driver_reads_it)
{
	static volatile sig_atomic_t stop;
	int ids[] = { 0, 1 };
	struct strvec lines = STRVEC_INIT;
	struct launch_spare_watch w = { .node_name = "n3", .type = "cpu", .ids = ids, .n = 2,
					.interval = 1, .tell = keep_two, .tell_ctx = &lines,
					.stop = &stop };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(launch_spare_watch(&w, &err), 0);
	CHECK_INT(lines.nr, 2); /* at once, then after the interval; a refused tell ends it */
	for (size_t i = 0; i < lines.nr; i++) {
		const char *l = lines.v[i];
		size_t len = strlen(l);
		CHECK(len && l[len - 1] == '\n');
		struct launch_spare_health h;
		CHECK(launch_spare_parse(l, len - 1, &h));
		CHECK(!strcmp(h.node_name, "n3") && h.ok && !h.reason && h.time > 0);
		launch_spare_health_release(&h);
	}
	strvec_clear(&lines);
	/* nothing to check without a node name or an interval */
	w.node_name = "";
	CHECK_INT(launch_spare_watch(&w, &err), TC_EUSAGE);
	tc_err_release(&err);
}

TEST(parse_takes_only_whole_health_lines)
{
	struct launch_spare_health h;
	const char *bad =
		LAUNCH_SPARE_TAG "{\"node_name\":\"n4\",\"ok\":false,\"reason\":\"gpu 0: ecc\",\"time\":5}";
	CHECK(launch_spare_parse(bad, strlen(bad), &h));
	CHECK(!strcmp(h.node_name, "n4") && !h.ok && !strcmp(h.reason, "gpu 0: ecc"));
	launch_spare_health_release(&h);
	launch_spare_health_release(&h); /* twice is harmless */
	const char *noreason = LAUNCH_SPARE_TAG "{\"node_name\":\"n4\",\"ok\":false}";
	CHECK(launch_spare_parse(noreason, strlen(noreason), &h) && !strcmp(h.reason, "no reason given"));
	launch_spare_health_release(&h);
	const char *refused[] = {
		"srun: error: something else",
		"trainctl-node-result: {\"node\":0}",
		LAUNCH_SPARE_TAG "{\"ok\":true}",               /* no node */
		LAUNCH_SPARE_TAG "{\"node_name\":\"n3\"}",      /* no verdict */
		LAUNCH_SPARE_TAG "{\"node_name\":\"n3\",\"ok\":", /* cut */
		LAUNCH_SPARE_TAG,
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		CHECK(!launch_spare_parse(refused[i], strlen(refused[i]), &h));
		CHECK(!h.node_name && !h.reason);
	}
}
