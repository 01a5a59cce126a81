/* test_attempt.c -- src/launch/attempt.c: what follows an attempt, as a table */
#include "test.h"

#include "launch/attempt.h"

#include <signal.h>
#include <string.h>

struct row {
	struct attempt_outcome o;
	bool again, ends;
	enum job_state state;
	int exit_code, restarts;
	bool notify;
	enum notify_event event;
	const char *why, *cause;
};

static void check_row(const struct row *r, int line)
{
	struct attempt_verdict v;
	attempt_decide(&r->o, &v);
	fprintf(stderr, "row at line %d: %s\n", line, v.why.buf);
	CHECK_INT(v.again, r->again);
	CHECK_INT(attempt_again(&r->o), r->again);
	CHECK_INT(v.ends, r->ends);
	CHECK_INT(v.state, r->state);
	CHECK_INT(v.exit_code, r->exit_code);
	CHECK_INT(v.restarts, r->restarts);
	CHECK_INT(v.notify, r->notify);
	if (r->notify)
		CHECK_INT(v.event, r->event);
	CHECK_STR(v.why.buf, r->why);
	CHECK_STR(v.cause.buf, r->cause ? r->cause : r->why);
	attempt_verdict_release(&v);
}

#define ROW(...) check_row(&(struct row){ __VA_ARGS__ }, __LINE__)

TEST(success_and_upload)
{
	ROW(.o = { .end = ATTEMPT_OK, .max_restarts = 2 }, .ends = true, .state = JOB_SUCCEEDED,
	    .notify = true, .event = NOTIFY_SUCCEEDED, .why = "every worker exited 0");
	ROW(.o = { .end = ATTEMPT_OK, .scope = ATTEMPT_EVERY_NODE, .restarts = 1 }, .ends = true,
	    .state = JOB_SUCCEEDED, .restarts = 1, .notify = true, .event = NOTIFY_SUCCEEDED,
	    .why = "every worker on every node exited 0");
	ROW(.o = { .end = ATTEMPT_UPLOAD_FAILED, .cause = "upload of output/ failed", .max_restarts = 3 },
	    .ends = true, .state = JOB_FAILED, .exit_code = 1, .notify = true,
	    .event = NOTIFY_FAILED, .why = "upload of output/ failed");
}

TEST(failure_within_and_past_the_budget)
{
	/* within the budget: again, one restart more, the group or every node */
	ROW(.o = { .end = ATTEMPT_FAILED, .cause = "rank 1 exited with code 1", .restarts = 0,
		   .max_restarts = 2 },
	    .again = true, .state = JOB_RESTARTING, .exit_code = -1, .restarts = 1, .notify = true,
	    .event = NOTIFY_RESTARTED,
	    .why = "rank 1 exited with code 1; restarting the group (1 of 2)");
	ROW(.o = { .end = ATTEMPT_FAILED, .scope = ATTEMPT_EVERY_NODE, .cause = "node 1: x",
		   .restarts = 0, .max_restarts = 1 },
	    .again = true, .state = JOB_RESTARTING, .exit_code = -1, .restarts = 1, .notify = true,
	    .event = NOTIFY_RESTARTED, .why = "node 1: x; restarting every node (1 of 1)");
	/* spent: the end, with the count */
	ROW(.o = { .end = ATTEMPT_FAILED, .cause = "rank 0 exited with code 3", .restarts = 2,
		   .max_restarts = 2 },
	    .ends = true, .state = JOB_FAILED, .exit_code = 1, .restarts = 2, .notify = true,
	    .event = NOTIFY_FAILED, .why = "rank 0 exited with code 3 (after 2 restarts)",
	    .cause = "rank 0 exited with code 3");
	ROW(.o = { .end = ATTEMPT_FAILED, .cause = "c", .restarts = 1, .max_restarts = 1 },
	    .ends = true, .state = JOB_FAILED, .exit_code = 1, .restarts = 1, .notify = true,
	    .event = NOTIFY_FAILED, .why = "c (after 1 restart)", .cause = "c");
	/* no budget at all: the cause alone */
	ROW(.o = { .end = ATTEMPT_FAILED, .cause = "c" }, .ends = true, .state = JOB_FAILED,
	    .exit_code = 1, .notify = true, .event = NOTIFY_FAILED, .why = "c", .cause = "c");
}

TEST(failure_that_must_not_restart)
{
	ROW(.o = { .end = ATTEMPT_FAILED, .final = ATTEMPT_FINAL_FIRST_STEP, .cause = "c",
		   .max_restarts = 2 },
	    .ends = true, .state = JOB_FAILED, .exit_code = 1, .notify = true,
	    .event = NOTIFY_FAILED,
	    .why = "c (restart.policy first_step: no restart for a failure before the first step)",
	    .cause = "c");
	ROW(.o = { .end = ATTEMPT_FAILED, .final = ATTEMPT_FINAL_ON_LOG, .cause = "c",
		   .restarts = 1, .max_restarts = 2 },
	    .ends = true, .state = JOB_FAILED, .exit_code = 1, .restarts = 1, .notify = true,
	    .event = NOTIFY_FAILED, .why = "c (no restart: the on_log action says so)", .cause = "c");
	ROW(.o = { .end = ATTEMPT_FAILED, .scope = ATTEMPT_EVERY_NODE,
		   .final = ATTEMPT_FINAL_EITHER, .cause = "c", .max_restarts = 1 },
	    .ends = true, .state = JOB_FAILED, .exit_code = 1, .notify = true,
	    .event = NOTIFY_FAILED,
	    .why = "c (no restart: the on_log action or restart.policy first_step says so)",
	    .cause = "c");
	/* final with the budget spent anyway: the count, as for any failure */
	ROW(.o = { .end = ATTEMPT_FAILED, .final = ATTEMPT_FINAL_ON_LOG, .cause = "c",
		   .restarts = 2, .max_restarts = 2 },
	    .ends = true, .state = JOB_FAILED, .exit_code = 1, .restarts = 2, .notify = true,
	    .event = NOTIFY_FAILED, .why = "c (after 2 restarts)", .cause = "c");
}

TEST(stopped)
{
	ROW(.o = { .end = ATTEMPT_STOPPED, .signal = SIGINT, .max_restarts = 3 }, .ends = true,
	    .state = JOB_KILLED, .exit_code = 1, .notify = true, .event = NOTIFY_KILLED,
	    .why = "stopped by SIGINT, Ctrl-C");
	ROW(.o = { .end = ATTEMPT_STOPPED, .signal = SIGTERM, .asked = JOB_STOP_STOPPED },
	    .ends = true, .state = JOB_KILLED, .exit_code = 1, .notify = true,
	    .event = NOTIFY_KILLED, .why = "stopped through the server (stopped)");
	ROW(.o = { .end = ATTEMPT_STOPPED, .signal = SIGTERM, .asked = JOB_STOP_PREEMPTED },
	    .state = JOB_PREEMPTED, .exit_code = -1, .notify = true, .event = NOTIFY_PREEMPTED,
	    .why = "preempted by the server (workers stopped by SIGTERM, from trainctl stop or kill)");
	ROW(.o = { .end = ATTEMPT_STOPPED, .signal = SIGTERM, .asked = JOB_STOP_PAUSED },
	    .state = JOB_PAUSED, .exit_code = -1,
	    .why = "paused by the server (workers stopped by SIGTERM, from trainctl stop or kill)");
}

TEST(lost_supervisor)
{
	ROW(.o = { .end = ATTEMPT_LOST, .restarts = 0, .max_restarts = 2 }, .again = true,
	    .state = JOB_QUEUED, .exit_code = -1, .restarts = 1,
	    .why = "requeued after its supervisor was lost (restart 1 of 2)");
	ROW(.o = { .end = ATTEMPT_LOST, .restarts = 2, .max_restarts = 2 }, .ends = true,
	    .state = JOB_LOST, .exit_code = -1, .restarts = 2, .why = "");
	/* asked to stop, preempt or pause: never requeued as lost */
	ROW(.o = { .end = ATTEMPT_LOST, .asked = JOB_STOP_PREEMPTED, .max_restarts = 2 },
	    .ends = true, .state = JOB_LOST, .exit_code = -1, .why = "");
}
