/* test_jobs.c -- src/jobs/: the state table and its diagram, the transitions
 * over a real store, the one JSON form of a job, show's text, and the
 * actions' checks (stop, pause, resume, delete, clone). */
#include "test.h"

#include "backend/backend.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "jobs/jobs.h"
#include "store/store.h"
#include "store/store_metrics.h"
#include "sweep/sweep.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const names[] = { "queued", "starting", "running", "restarting", "paused",
				     "preempted", "succeeded", "failed", "killed", "lost" };

TEST(state_names)
{
	CHECK_INT(sizeof(names) / sizeof(names[0]), JOB_NSTATES);
	for (int i = 0; i < JOB_NSTATES; i++) {
		enum job_state s;
		CHECK_STR(job_state_name((enum job_state)i), names[i]);
		CHECK(job_state_parse(names[i], strlen(names[i]), &s));
		CHECK_INT(s, i);
	}
	enum job_state s = JOB_QUEUED;
	CHECK(!job_state_parse("runnin", 6, &s));
	CHECK(!job_state_parse("running2", 8, &s));
	CHECK(!job_state_parse("", 0, &s));
	/* a prefix of a longer list ("running,lost") parses by length */
	CHECK(job_state_parse("running,lost", 7, &s) && s == JOB_RUNNING);
	CHECK_STR(job_state_name((enum job_state)99), "?");
}

TEST(state_kinds)
{
	/* every state is exactly one of active, waiting, terminal */
	for (int i = 0; i < JOB_NSTATES; i++) {
		enum job_state s = (enum job_state)i;
		CHECK_INT(job_state_active(s) + job_state_waiting(s) + job_state_terminal(s), 1);
	}
	CHECK(job_state_active(JOB_STARTING) && job_state_active(JOB_RUNNING) &&
	      job_state_active(JOB_RESTARTING));
	CHECK(job_state_waiting(JOB_QUEUED) && job_state_waiting(JOB_PAUSED) &&
	      job_state_waiting(JOB_PREEMPTED));
	CHECK(job_state_terminal(JOB_SUCCEEDED) && job_state_terminal(JOB_FAILED) &&
	      job_state_terminal(JOB_KILLED) && job_state_terminal(JOB_LOST));
	CHECK(!job_state_terminal((enum job_state)99) && !job_state_active((enum job_state)-1));
}

TEST(state_diagram)
{
	/* the edges state.h draws */
	CHECK(job_state_can(JOB_QUEUED, JOB_STARTING));
	CHECK(job_state_can(JOB_STARTING, JOB_RUNNING));
	CHECK(job_state_can(JOB_RUNNING, JOB_RESTARTING));
	CHECK(job_state_can(JOB_RESTARTING, JOB_RUNNING));
	CHECK(job_state_can(JOB_RUNNING, JOB_PAUSED) && job_state_can(JOB_RUNNING, JOB_PREEMPTED));
	CHECK(job_state_can(JOB_PAUSED, JOB_QUEUED) && job_state_can(JOB_PREEMPTED, JOB_QUEUED));
	CHECK(job_state_can(JOB_LOST, JOB_QUEUED));
	CHECK(job_state_can(JOB_QUEUED, JOB_PAUSED) && job_state_can(JOB_QUEUED, JOB_KILLED));
	for (int i = 0; i < JOB_NSTATES; i++)
		if (job_state_active((enum job_state)i))
			for (int e = JOB_SUCCEEDED; e <= JOB_LOST; e++)
				CHECK(job_state_can((enum job_state)i, (enum job_state)e));
	/* an end is final, but for the server's requeue of a lost job */
	for (int i = JOB_SUCCEEDED; i <= JOB_KILLED; i++)
		for (int k = 0; k < JOB_NSTATES; k++)
			CHECK(!job_state_can((enum job_state)i, (enum job_state)k));
	for (int k = 0; k < JOB_NSTATES; k++)
		CHECK_INT(job_state_can(JOB_LOST, (enum job_state)k), k == JOB_QUEUED);
	CHECK(job_state_can(JOB_QUEUED, JOB_RUNNING)); /* a Slurm driver ahead of the poll */
	CHECK(job_state_can(JOB_RUNNING, JOB_RUNNING)); /* a requeue ahead of the poll */
	CHECK(!job_state_can(JOB_QUEUED, JOB_RESTARTING));
	CHECK(!job_state_can(JOB_PREEMPTED, JOB_RUNNING));
	CHECK(job_state_can(JOB_PREEMPTED, JOB_PAUSED)); /* paused while it waits */
	CHECK(!job_state_can((enum job_state)99, JOB_QUEUED));
}

/* Sweeps, trials and endpoints: one name table each, the ends, the edges (state.h). */
TEST(sweep_trial_endpoint_states)
{
	for (int i = 0; i < SWEEP_NSTATES; i++) {
		enum sweep_state s = SWEEP_DONE;
		CHECK(sweep_state_parse(sweep_state_name((enum sweep_state)i), &s));
		CHECK_INT(s, i);
		CHECK(sweep_state_is(sweep_state_name(s), s));
		CHECK_INT(sweep_state_final(s), i != SWEEP_RUNNING);
	}
	for (int i = 0; i < TRIAL_NSTATES; i++) {
		enum trial_state t = TRIAL_PENDING;
		CHECK(trial_state_parse(trial_state_name((enum trial_state)i), &t));
		CHECK_INT(t, i);
		CHECK_INT(trial_state_final(t), t != TRIAL_PENDING && t != TRIAL_RUNNING);
	}
	for (int i = 0; i < ENDPOINT_NSTATES; i++) {
		enum endpoint_state e = ENDPOINT_RUNNING;
		CHECK(endpoint_state_parse(endpoint_state_name((enum endpoint_state)i), &e));
		CHECK_INT(e, i);
		CHECK_INT(endpoint_state_final(e), e != ENDPOINT_RUNNING);
	}
	CHECK_STR(sweep_state_name(SWEEP_DONE), "done");
	CHECK_STR(trial_state_name(TRIAL_FAILED_OBJECTIVE), "failed-objective");
	CHECK_STR(endpoint_state_name(ENDPOINT_EXITED), "exited");
	CHECK_STR(sweep_state_name((enum sweep_state)99), "?");
	enum sweep_state s;
	CHECK(!sweep_state_parse("exploded", &s) && !sweep_state_parse(NULL, &s));
	CHECK(!trial_state_is(NULL, TRIAL_PENDING) && !endpoint_state_is("runnin", ENDPOINT_RUNNING));
	/* the edges drawn */
	CHECK(sweep_state_can(SWEEP_RUNNING, SWEEP_DONE) && !sweep_state_can(SWEEP_DONE, SWEEP_RUNNING));
	CHECK(trial_state_can(TRIAL_PENDING, TRIAL_RUNNING) && trial_state_can(TRIAL_PENDING, TRIAL_FAILED));
	CHECK(trial_state_can(TRIAL_RUNNING, TRIAL_STOPPED) && !trial_state_can(TRIAL_PENDING, TRIAL_SUCCEEDED));
	CHECK(trial_state_can(TRIAL_SUCCEEDED, TRIAL_FAILED_OBJECTIVE));
	CHECK(!trial_state_can(TRIAL_KILLED, TRIAL_RUNNING));
	CHECK(endpoint_state_can(ENDPOINT_RUNNING, ENDPOINT_EXITED));
	CHECK(!endpoint_state_can(ENDPOINT_STOPPED, ENDPOINT_RUNNING));
	/* sweep.h's test of an ended trial reads the same table */
	CHECK(sweep_trial_ended("failed-objective") && !sweep_trial_ended("pending"));
	CHECK(!sweep_trial_ended(NULL) && !sweep_trial_ended("exploded"));
	/* what the store asks before a write */
	CHECK_INT(trial_word_edge("pending", "running"), WORD_WRITE);
	CHECK_INT(trial_word_edge("running", "running"), WORD_WRITE);
	CHECK_INT(trial_word_edge(NULL, "pending"), WORD_WRITE);
	CHECK_INT(trial_word_edge("succeeded", "failed-objective"), WORD_WRITE);
	CHECK_INT(trial_word_edge("failed", "killed"), WORD_KEEP);
	CHECK_INT(trial_word_edge("failed", "pending"), WORD_REFUSE);
	CHECK_INT(trial_word_edge("running", "bogus"), WORD_REFUSE);
	CHECK_INT(sweep_word_edge("done", "stopped"), WORD_KEEP);
	CHECK_INT(sweep_word_edge("done", "running"), WORD_REFUSE);
	CHECK_INT(endpoint_word_edge("running", "exited"), WORD_WRITE);
}

TEST(stop_reasons)
{
	CHECK(job_stop_name(JOB_STOP_NONE) == NULL);
	CHECK_STR(job_stop_name(JOB_STOP_STOPPED), "stopped");
	CHECK_STR(job_stop_name(JOB_STOP_PAUSED), "paused");
	CHECK_STR(job_stop_name(JOB_STOP_PREEMPTED), "preempted");
	CHECK_INT(job_stop_parse("paused"), JOB_STOP_PAUSED);
	CHECK_INT(job_stop_parse(NULL), JOB_STOP_NONE);
	CHECK_INT(job_stop_parse("bogus"), JOB_STOP_NONE);
	CHECK_INT(job_stop_state(JOB_STOP_STOPPED), JOB_KILLED);
	CHECK_INT(job_stop_state(JOB_STOP_PAUSED), JOB_PAUSED);
	CHECK_INT(job_stop_state(JOB_STOP_PREEMPTED), JOB_PREEMPTED);
}

static struct store *open_store(void)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	return st;
}

#define SPEC_JSON                                                                                 \
	"{\"name\": \"j\", \"command\": [\"true\"], \"devices\": {\"type\": \"cpu\", \"per_node\": 2," \
	" \"ids\": [0, 1]}, \"restart\": {\"max_restarts\": 2, \"grace_seconds\": 7},"               \
	" \"parallel\": {\"strategy\": \"auto\", \"model\": \"m\", \"global_batch\": 8,"            \
	" \"plan\": {\"dp\": 2, \"tp\": 1, \"pp\": 1, \"micro_batch\": 4, \"partition\": \"2\","    \
	" \"step_time\": 0.5}}}"

static void create(struct store *st, const char *id, enum job_state state)
{
	struct tc_err err = TC_ERR_INIT;
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/runs/%s", test_tmpdir(), id);
	CHECK_INT(mkdir_p(dir.buf, &err), 0);
	struct job_row row = { .id = (char *)id, .name = "j", .state = state, .run_dir = dir.buf,
			       .spec_json = SPEC_JSON, .created = 1700000000.0, .world_size = 2,
			       .sup_pid = getpid() };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	sbuf_release(&dir);
}

static struct job_row get(struct store *st, const char *id)
{
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_job_get(st, id, &j, &err), 0);
	return j;
}

TEST(transitions_over_the_store)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_STARTING);
	struct job_row j = get(st, "A");
	CHECK_INT(j.state, JOB_STARTING);
	CHECK(j.started == 0);
	job_row_release(&j);
	CHECK_INT(jobs_mark_running(st, "A", "2 workers started", &err), 0);
	CHECK_INT(jobs_mark_restarting(st, "A", "rank 1 exited", &err), 0);
	CHECK_INT(jobs_mark_running(st, "A", "restart 1", &err), 0);
	j = get(st, "A");
	CHECK_INT(j.state, JOB_RUNNING);
	CHECK(j.started > 0 && j.ended == 0);
	job_row_release(&j);
	/* jobs_finish only takes an end */
	CHECK_INT(jobs_finish(st, "A", JOB_RUNNING, 0, NULL, "x", &err), TC_EUSAGE);
	tc_err_release(&err);
	CHECK_INT(jobs_mark_held(st, "A", JOB_STOP_STOPPED, "x", &err), TC_EUSAGE);
	tc_err_release(&err);
	CHECK_INT(jobs_finish(st, "A", JOB_FAILED, 1, "rank 1 exited with code 3", "cause", &err), 0);
	j = get(st, "A");
	CHECK_INT(j.state, JOB_FAILED);
	CHECK_INT(j.exit_code, 1);
	CHECK_STR(j.root_cause, "rank 1 exited with code 3");
	CHECK(j.ended > 0);
	job_row_release(&j);
	struct event_row *ev = NULL;
	size_t n = 0;
	CHECK_INT(store_events(st, "A", &ev, &n, &err), 0);
	CHECK_INT(n, 5);
	enum job_state want[] = { JOB_STARTING, JOB_RUNNING, JOB_RESTARTING, JOB_RUNNING, JOB_FAILED };
	for (size_t i = 0; i < n; i++)
		CHECK_INT(ev[i].state, want[i]);
	CHECK_STR(ev[2].reason, "rank 1 exited");
	event_rows_free(ev, n);
	/* the lost edge records exit 3 and why */
	create(st, "B", JOB_STARTING);
	CHECK_INT(jobs_mark_lost(st, "B", "supervisor gone", &err), 0);
	j = get(st, "B");
	CHECK_INT(j.state, JOB_LOST);
	CHECK_INT(j.exit_code, 3);
	CHECK_STR(j.root_cause, "supervisor gone");
	job_row_release(&j);
	/* held, then requeued (the server's edges) */
	create(st, "C", JOB_RUNNING);
	CHECK_INT(store_job_set_stop_reason(st, "C", JOB_STOP_PREEMPTED, &err), 0);
	enum job_stop why = JOB_STOP_NONE;
	CHECK_INT(store_job_stop_reason(st, "C", &why, &err), 0);
	CHECK_INT(why, JOB_STOP_PREEMPTED);
	CHECK_INT(jobs_mark_held(st, "C", JOB_STOP_PREEMPTED, "preempted by the server", &err), 0);
	CHECK_INT(jobs_requeue(st, "C", JOB_QUEUED, true, "requeued", &err), 0);
	CHECK_INT(jobs_requeue(st, "C", JOB_RUNNING, false, "no", &err), TC_EUSAGE);
	tc_err_release(&err);
	j = get(st, "C");
	CHECK_INT(j.state, JOB_QUEUED);
	CHECK_INT(j.restarts, 1);
	CHECK_INT(j.stop_reason, JOB_STOP_NONE);
	job_row_release(&j);
	store_close(st);
}

/* Two processes may record the same job's end (a Slurm job's driver and whoever reads Slurm). */
TEST(the_first_end_recorded_stays)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_RUNNING);
	CHECK_INT(jobs_finish(st, "A", JOB_KILLED, 1, "Slurm job 7 ended CANCELLED", "first", &err), 0);
	CHECK_INT(jobs_finish(st, "A", JOB_FAILED, 1, "a node ended", "second", &err), 0);
	CHECK_INT(jobs_mark_lost(st, "A", "gone", &err), 0);
	struct job_row j = get(st, "A");
	CHECK_INT(j.state, JOB_KILLED);
	CHECK_INT(j.exit_code, 1);
	CHECK_STR(j.root_cause, "Slurm job 7 ended CANCELLED");
	job_row_release(&j);
	struct event_row *ev = NULL;
	size_t n = 0;
	CHECK_INT(store_events(st, "A", &ev, &n, &err), 0);
	CHECK_INT(n, 2); /* created running, killed: nothing for the later two */
	CHECK_INT(ev[n - 1].state, JOB_KILLED);
	event_rows_free(ev, n);
	/* a lost job the server requeues can end again */
	create(st, "B", JOB_RUNNING);
	CHECK_INT(jobs_mark_lost(st, "B", "supervisor gone", &err), 0);
	CHECK_INT(jobs_requeue(st, "B", JOB_QUEUED, true, "requeued", &err), 0);
	CHECK_INT(jobs_finish(st, "B", JOB_SUCCEEDED, 0, NULL, "every worker exited 0", &err), 0);
	j = get(st, "B");
	CHECK_INT(j.state, JOB_SUCCEEDED);
	CHECK_INT(j.exit_code, 0);
	job_row_release(&j);
	store_close(st);
}

/* The store writes only the edges of the diagram (state.h); a refusal names both states. */
TEST(the_store_refuses_an_undrawn_edge)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_QUEUED);
	CHECK_INT(jobs_mark_restarting(st, "A", "it never ran", &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "job A: cannot go from queued to restarting");
	tc_err_release(&err);
	struct job_row j = get(st, "A");
	CHECK_INT(j.state, JOB_QUEUED);
	job_row_release(&j);
	struct event_row *ev = NULL;
	size_t n = 0;
	CHECK_INT(store_events(st, "A", &ev, &n, &err), 0);
	CHECK_INT(n, 1); /* created: the refused write left no event */
	event_rows_free(ev, n);
	/* an end is left only by the server's requeue of a lost job */
	CHECK_INT(jobs_finish(st, "A", JOB_KILLED, 1, NULL, "stopped before it ran", &err), 0);
	CHECK_INT(jobs_mark_restarting(st, "A", "rank 0 exited", &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "from killed to restarting");
	tc_err_release(&err);
	CHECK_INT(jobs_requeue(st, "A", JOB_QUEUED, false, "resumed", &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "from killed to queued");
	tc_err_release(&err);
	/* the launch of a job whose end is recorded writes nothing, as before */
	CHECK_INT(jobs_launch(st, "A", "0", getpid(), 0, "launched", &err), 0);
	j = get(st, "A");
	CHECK_INT(j.state, JOB_KILLED);
	job_row_release(&j);
	/* a held job goes back to the queue, not on to running */
	create(st, "B", JOB_RUNNING);
	CHECK_INT(jobs_mark_held(st, "B", JOB_STOP_PAUSED, "paused", &err), 0);
	CHECK_INT(jobs_mark_running(st, "B", "up", &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "job B: cannot go from paused to running");
	tc_err_release(&err);
	CHECK_INT(jobs_requeue(st, "B", JOB_QUEUED, false, "resumed", &err), 0);
	j = get(st, "B");
	CHECK_INT(j.state, JOB_QUEUED);
	job_row_release(&j);
	/* a preempted job may be paused before the server requeues it (local_pause) */
	create(st, "C", JOB_RUNNING);
	CHECK_INT(jobs_mark_held(st, "C", JOB_STOP_PREEMPTED, "preempted", &err), 0);
	CHECK_INT(jobs_requeue(st, "C", JOB_PAUSED, false, "paused before it ran", &err), 0);
	j = get(st, "C");
	CHECK_INT(j.state, JOB_PAUSED);
	job_row_release(&j);
	store_close(st);
}

TEST(unknown_state_word_is_an_error)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_RUNNING);
	store_close(st);
	struct sbuf cmd = SBUF_INIT;
	sbuf_addf(&cmd, "sqlite3 '%s/trainctl.db' \"UPDATE jobs SET state='exploded'\" 2>/dev/null",
		  test_tmpdir());
	if (system(cmd.buf) != 0) {
		/* no sqlite3 shell: nothing more to check here */
		sbuf_release(&cmd);
		return;
	}
	sbuf_release(&cmd);
	st = open_store();
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "A", &j, &err), TC_ESTORE);
	CHECK_CONTAINS(err.msg, "state 'exploded'");
	tc_err_release(&err);
	store_close(st);
}

TEST(job_to_json_form)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_STARTING);
	struct job_row j = get(st, "A");
	json_t *o = job_to_json(&j, 0);
	CHECK_STR(json_string_value(json_object_get(o, "state")), "starting");
	CHECK_STR(json_string_value(json_object_get(o, "backend")), "local");
	/* not started yet: null, as the API has always said (not 0) */
	CHECK(json_is_null(json_object_get(o, "started")));
	CHECK(json_is_null(json_object_get(o, "ended")));
	CHECK(json_is_null(json_object_get(o, "root_cause")));
	CHECK(json_is_null(json_object_get(o, "stop_reason")));
	CHECK(json_real_value(json_object_get(o, "created")) == 1700000000.0);
	CHECK_INT(json_integer_value(json_object_get(o, "workers")), 2);
	CHECK_INT(json_integer_value(json_object_get(o, "exit_code")), -1);
	CHECK(json_is_false(json_object_get(o, "managed")));
	CHECK_STR(json_string_value(json_object_get(o, "user")), "");
	CHECK(json_is_object(json_object_get(o, "spec")));
	CHECK(!json_object_get(o, "slurm"));
	json_decref(o);
	job_row_release(&j);

	/* a listing: no spec; a long root cause cut at 300 characters, not bytes */
	struct sbuf cause = SBUF_INIT;
	for (int i = 0; i < 400; i++)
		sbuf_adds(&cause, "\xc3\xa9"); /* é */
	CHECK_INT(jobs_mark_running(st, "A", "up", &err), 0);
	CHECK_INT(jobs_finish(st, "A", JOB_FAILED, 1, cause.buf, "x", &err), 0);
	CHECK_INT(store_slurm_set(st, "A", "4711", "n[1-2]", "COMPLETED", &err), 0);
	j = get(st, "A");
	o = job_to_json(&j, JOB_JSON_BRIEF);
	CHECK(!json_object_get(o, "spec"));
	CHECK(json_is_real(json_object_get(o, "started")));
	CHECK(json_is_real(json_object_get(o, "ended")));
	CHECK_INT(json_string_length(json_object_get(o, "root_cause")), 600);
	CHECK_STR(json_string_value(json_object_get(o, "backend")), "slurm");
	json_t *sl = json_object_get(o, "slurm");
	CHECK_STR(json_string_value(json_object_get(sl, "job")), "4711");
	CHECK_STR(json_string_value(json_object_get(sl, "nodes")), "n[1-2]");
	CHECK_STR(json_string_value(json_object_get(sl, "state")), "COMPLETED");
	json_decref(o);
	o = job_to_json(&j, 0);
	CHECK_INT(json_string_length(json_object_get(o, "root_cause")), 800);
	json_decref(o);
	job_row_release(&j);
	sbuf_release(&cause);
	store_close(st);
}

TEST(show_json_and_text)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_STARTING);
	CHECK_INT(store_worker_start(st, "A", 0, 0, 0, 4242, &err), 0);
	CHECK_INT(jobs_mark_running(st, "A", "1 workers started", &err), 0);
	json_t *o = NULL;
	/* our own pid is the supervisor: reconcile leaves it running */
	CHECK_INT(jobs_show(st, "A", true, &o, &err), 0);
	CHECK_STR(json_string_value(json_object_get(o, "state")), "running");
	CHECK_INT(json_array_size(json_object_get(o, "events")), 2);
	json_t *w = json_array_get(json_object_get(o, "workers_history"), 0);
	CHECK_INT(json_integer_value(json_object_get(w, "pid")), 4242);
	CHECK(json_is_null(json_object_get(w, "ended")));
	CHECK(json_is_object(json_object_get(o, "metrics")));
	CHECK(json_is_array(json_object_get(o, "checkpoints")));
	struct sbuf text = SBUF_INIT;
	jobs_show_text(o, &text);
	CHECK_CONTAINS(text.buf, "job        A\n");
	CHECK_CONTAINS(text.buf, "state      running\n");
	CHECK_CONTAINS(text.buf, "ended      -\n");
	CHECK_CONTAINS(text.buf, "plan       dp=2 tp=1 pp=1 micro-batch=4, layers per stage 2"
				 " (estimated step 0.500 s)\n");
	CHECK_CONTAINS(text.buf, "\nspec:\n{\n  \"name\": \"j\",");
	CHECK_CONTAINS(text.buf, "  running    1 workers started\n");
	CHECK_CONTAINS(text.buf, "  0       0     4242     running\n");
	CHECK_CONTAINS(text.buf, "metrics:   none recorded\n");
	CHECK(!strstr(text.buf, "root cause"));
	CHECK(!strstr(text.buf, "\nexit "));
	CHECK(!strstr(text.buf, "priority")); /* not the server's */
	sbuf_release(&text);
	json_decref(o);
	CHECK_INT(jobs_show(st, "nosuch", false, &o, &err), TC_ENOTFOUND);
	tc_err_release(&err);
	store_close(st);
}

/* A multi-node job's round notes come back as show's rounds, with the time to each first step. */
TEST(rounds_in_show)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "R", JOB_STARTING);
	CHECK_INT(jobs_mark_running(st, "R", "4 workers started on 2 nodes", &err), 0);
	double lost = now_wall() - 2;
	json_t *r0 = json_pack("{s:i, s:i, s:[s,s], s:[], s:[], s:n}", "attempt", 0, "nodes", 2,
			       "members", "n1", "n2", "left_out", "spares", "lost_at");
	/* a host and a cause with a newline and a tag stay data */
	json_t *r1 = json_pack("{s:i, s:i, s:[s,s], s:[{s:i, s:s, s:s, s:s}],"
			       " s:[{s:i, s:s, s:s}], s:f}", "attempt", 1, "nodes", 2, "members",
			       "n1", "n3", "left_out", "node", 1, "host", "n2\n<b>x</b>", "why",
			       job_round_why_name(JOB_ROUND_LOST), "cause", "gone\nroot cause: no",
			       "spares", "node", 1, "host", "n3", "in_place_of", "n2", "lost_at", lost);
	char *t0 = job_round_text(r0), *t1 = job_round_text(r1);
	CHECK_STR(t0, "attempt 0: 2 nodes n1,n2\n{\"attempt\":0,\"nodes\":2,\"members\":[\"n1\",\"n2\"],"
		      "\"left_out\":[],\"spares\":[],\"lost_at\":null}");
	CHECK(!strncmp(t1, "attempt 1: 2 nodes n1,n3; node 1 (n2 <b>x</b>) lost: gone root cause: no;"
			   " spare n3 takes node 1\n{", 93));
	CHECK_INT(jobs_note(st, "R", JOB_NOTE_ROUND, t0, &err), 0);
	CHECK_INT(jobs_note(st, "R", JOB_NOTE_ROUND, t1, &err), 0);
	/* a point before round 1 started is round 0's; the first after it is round 1's step */
	struct store_mbatch *b = store_mbatch_new("R");
	struct store_mpoint p = { .kind = STORE_MPOINT, .seq = 1, .epoch = -1, .iter = -1,
				  .step = "1", .value = 2.0, .wall_time = lost - 1 };
	store_mbatch_point(b, 0, "loss", &p);
	double first = now_wall() + 1;
	p.seq = 2, p.step = "2", p.wall_time = first;
	store_mbatch_point(b, 0, "loss", &p);
	p.seq = 3, p.step = "3", p.wall_time = first + 1;
	store_mbatch_point(b, 0, "loss", &p);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	store_mbatch_free(b);
	json_t *o = NULL;
	CHECK_INT(jobs_show(st, "R", false, &o, &err), 0);
	json_t *rounds = json_object_get(o, "rounds");
	CHECK_INT(json_array_size(rounds), 2);
	json_t *a = json_array_get(rounds, 0), *c = json_array_get(rounds, 1);
	CHECK(json_is_null(json_object_get(a, "loss_to_first_step_s")));
	CHECK(json_number_value(json_object_get(c, "loss_to_first_step_s")) == first - lost);
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(c, "left_out"), 0),
						    "host")), "n2\n<b>x</b>");
	struct sbuf text = SBUF_INIT;
	jobs_show_text(o, &text);
	CHECK_CONTAINS(text.buf, "\nround 1    2 nodes n1,n3  n2 <b>x</b> lost (gone root cause: no)"
				 "  spare n3 -> node 1  first step 3.0 s after the loss\n");
	CHECK(!strstr(text.buf, "round 0"));
	/* the events list shows a round note's first line, not its JSON */
	CHECK_CONTAINS(text.buf, "  running    round: attempt 0: 2 nodes n1,n2\n");
	sbuf_release(&text);
	json_decref(o);
	json_decref(r0);
	json_decref(r1);
	free(t0);
	free(t1);
	tc_err_release(&err);
	store_close(st);
}

TEST(reconcile_marks_a_vanished_supervisor_lost)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_RUNNING);
	CHECK_INT(store_job_set_supervisor(st, "A", 999999, 1, &err), 0);
	struct job_row j = get(st, "A");
	CHECK_INT(backend_reconcile(st, &j, &err), 0);
	CHECK_INT(j.state, JOB_LOST);
	CHECK_CONTAINS(j.root_cause, "is gone without recording an end");
	job_row_release(&j);
	store_close(st);
}

/*
 * A finished Slurm job shows without Slurm (no scontrol on PATH), even when
 * its last Slurm state seen is not final: only the server, settling it,
 * asks Slurm about an ended job.
 */
TEST(finished_slurm_job_needs_no_slurm)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	create(st, "A", JOB_QUEUED);
	CHECK_INT(store_slurm_set(st, "A", "4711", "n1", "RUNNING", &err), 0);
	CHECK_INT(jobs_mark_starting(st, "A", "Slurm job 4711 is RUNNING", &err), 0);
	CHECK_INT(jobs_finish(st, "A", JOB_SUCCEEDED, 0, NULL, "every worker exited 0", &err), 0);
	char *path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	CHECK_INT(setenv("PATH", "/nonexistent", 1), 0);
	json_t *o = NULL;
	CHECK_INT(jobs_show(st, "A", true, &o, &err), 0);
	CHECK_STR(json_string_value(json_object_get(o, "state")), "succeeded");
	CHECK_STR(json_string_value(json_object_get(json_object_get(o, "slurm"), "job")), "4711");
	struct sbuf text = SBUF_INIT;
	jobs_show_text(o, &text);
	CHECK_CONTAINS(text.buf, "slurm job  4711 (RUNNING) on n1\n");
	sbuf_release(&text);
	json_decref(o);
	struct job_row a = get(st, "A");
	bool done = true;
	CHECK_INT(backend_slurm.settle(st, &a, &done, &err), TC_EBACKEND);
	tc_err_release(&err);
	job_row_release(&a);
	CHECK_INT(store_slurm_set(st, "A", NULL, NULL, "COMPLETED", &err), 0);
	a = get(st, "A");
	CHECK_INT(backend_slurm.settle(st, &a, &done, &err), 0);
	CHECK(done);
	job_row_release(&a);
	/* an active one does need Slurm: its state is Slurm's to tell */
	create(st, "B", JOB_QUEUED);
	CHECK_INT(store_slurm_set(st, "B", "4712", NULL, "PENDING", &err), 0);
	struct job_row j = get(st, "B");
	CHECK_INT(backend_reconcile(st, &j, &err), TC_EBACKEND);
	CHECK_CONTAINS(err.msg, "cannot run scontrol");
	tc_err_release(&err);
	job_row_release(&j);
	store_close(st);
	CHECK_INT(setenv("PATH", path, 1), 0); /* the runner's clean-up needs rm */
	free(path);
}

static void collect(void *arg, const char *line)
{
	sbuf_addf(arg, "%s\n", line);
}

TEST(actions_checks)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	struct sbuf said = SBUF_INIT;
	struct backend_env env = { .home = test_tmpdir(), .say = collect, .say_arg = &said };
	create(st, "A", JOB_QUEUED);
	struct job_row j = get(st, "A");
	/* without a server nothing can stop a queued job */
	CHECK_INT(jobs_stop(&env, st, &j, JOB_STOP_NONE, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "a queued job needs its server");
	tc_err_release(&err);
	CHECK_INT(jobs_resume(&env, st, &j, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "only a paused job can be resumed");
	tc_err_release(&err);
	/* the server's pause of a queued job holds it; resume queues it again */
	CHECK_INT(jobs_pause(&env, st, &j, &err), 0);
	job_row_release(&j);
	j = get(st, "A");
	CHECK_INT(j.state, JOB_PAUSED);
	CHECK_INT(jobs_pause(&env, st, &j, &err), 0); /* already: nothing to do */
	CHECK_INT(jobs_resume(&env, st, &j, &err), 0);
	job_row_release(&j);
	j = get(st, "A");
	CHECK_INT(j.state, JOB_QUEUED);
	CHECK_INT(jobs_delete(st, &j, &err), TC_EUSAGE);
	tc_err_release(&err);
	/* the server's stop of a queued job ends it */
	CHECK_INT(jobs_stop(&env, st, &j, JOB_STOP_STOPPED, &err), 0);
	job_row_release(&j);
	j = get(st, "A");
	CHECK_INT(j.state, JOB_KILLED);
	CHECK_STR(j.root_cause, "stopped before it ran");
	CHECK_INT(jobs_stop(&env, st, &j, JOB_STOP_NONE, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "already ended (killed)");
	tc_err_release(&err);
	CHECK(path_exists(j.run_dir));
	CHECK_INT(jobs_delete(st, &j, &err), 0);
	CHECK(!path_exists(j.run_dir));
	job_row_release(&j);
	CHECK_INT(store_job_get(st, "A", &j, &err), TC_ENOTFOUND);
	tc_err_release(&err);

	/* a running job: its supervisor gets SIGTERM (a child that waits for it here) */
	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	create(st, "B", JOB_RUNNING);
	CHECK_INT(store_job_set_supervisor(st, "B", child, proc_start_ticks(child), &err), 0);
	j = get(st, "B");
	CHECK_INT(jobs_stop(&env, st, &j, JOB_STOP_PAUSED, &err), 0);
	CHECK_CONTAINS(said.buf, "job B: paused (SIGTERM to supervisor");
	int status = 0;
	CHECK_INT(waitpid(child, &status, 0), child);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	enum job_stop why = JOB_STOP_NONE;
	CHECK_INT(store_job_stop_reason(st, "B", &why, &err), 0);
	CHECK_INT(why, JOB_STOP_PAUSED);
	job_row_release(&j);

	/* Slurm jobs are stopped, never paused */
	create(st, "C", JOB_RUNNING);
	CHECK_INT(store_slurm_set(st, "C", "1", NULL, "RUNNING", &err), 0);
	j = get(st, "C");
	CHECK_INT(jobs_pause(&env, st, &j, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "it can be stopped, not paused");
	tc_err_release(&err);
	job_row_release(&j);
	sbuf_release(&said);
	store_close(st);
}

TEST(clone_spec)
{
	struct job_row j = { .id = "A", .spec_json = SPEC_JSON };
	char *text = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(jobs_clone_spec(&j, &text, &err), 0);
	/* the allocator's ids and the planner's choice go; the rest stays */
	CHECK(!strstr(text, "\"ids\""));
	CHECK(!strstr(text, "\"plan\""));
	CHECK_CONTAINS(text, "\"grace_seconds\":7");
	free(text);
	j.device_want = "0,1"; /* the spec named them: a requirement */
	CHECK_INT(jobs_clone_spec(&j, &text, &err), 0);
	CHECK_CONTAINS(text, "\"ids\":[0,1]");
	free(text);
	j.spec_json = NULL;
	CHECK_INT(jobs_clone_spec(&j, &text, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "its spec is not stored");
	tc_err_release(&err);
}

TEST(backend_names)
{
	CHECK_INT(backend_lookup("local"), BACKEND_LOCAL);
	CHECK_INT(backend_lookup("slurm"), BACKEND_SLURM);
	CHECK_INT(backend_lookup("kubernetes"), -1);
	CHECK_INT(backend_lookup(NULL), -1);
	CHECK(backend_find("slurm") == &backend_slurm);
	CHECK_STR(backend_name(&backend_local), "local");
	struct sbuf sb = SBUF_INIT;
	backend_names_add(&sb);
	CHECK_STR(sb.buf, "local, slurm");
	sbuf_release(&sb);
	struct job_row j = { .backend = NULL };
	CHECK(backend_of(&j) == &backend_local);
	j.backend = "slurm";
	CHECK(backend_of(&j) == &backend_slurm);
}
