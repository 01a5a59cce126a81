/* test_store_lease.c -- device leases (store.h): all or none, the lowest free
 * candidates, a live lease refuses naming its job, a dead holder or an ended
 * job leaves a stale one the next taker replaces, hand-over at launch, drop. */
#include "test.h"

#include "core/util.h"
#include "store/store.h"

#include <sys/wait.h>
#include <unistd.h>

static struct store *open_store(void)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	return st;
}

static int take(struct store *st, const char *job, const int *cand, int ncand, int n, pid_t pid,
		int *got, struct store_lease *busy)
{
	struct tc_err err = TC_ERR_INIT;
	int rc = store_lease_take(st, job, "gpu", cand, ncand, n, pid, proc_start_ticks(pid), got,
				  busy, &err);
	if (rc == TC_EBUSY)
		CHECK_CONTAINS(err.msg, "is held by job ");
	tc_err_release(&err);
	return rc;
}

/* A process that is gone (forked, exited, reaped): its pid no longer names it. */
static pid_t dead_pid(unsigned long long *ticks)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char c;
		close(fds[1]);
		if (read(fds[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[0]);
	*ticks = proc_start_ticks(pid);
	CHECK(*ticks != 0);
	close(fds[1]);
	CHECK(waitpid(pid, NULL, 0) == pid);
	return pid;
}

TEST(lease_all_or_none_and_lowest_free)
{
	struct store *st = open_store();
	static const int all[] = { 0, 1, 2, 3 };
	int got[4];
	struct store_lease busy;
	/* exactly ids 1 and 2 */
	CHECK_INT(take(st, "A", (const int[]){ 1, 2 }, 2, 2, getpid(), got, &busy), 0);
	CHECK_INT(got[0], 1);
	CHECK_INT(got[1], 2);
	store_lease_release(&busy);
	/* any two of four: the lowest free */
	CHECK_INT(take(st, "B", all, 4, 2, getpid(), got, &busy), 0);
	CHECK_INT(got[0], 0);
	CHECK_INT(got[1], 3);
	store_lease_release(&busy);
	/* nothing left: refused, naming the holder of the first one in the way, nothing taken */
	CHECK_INT(take(st, "C", all, 4, 1, getpid(), got, &busy), TC_EBUSY);
	CHECK_STR(busy.job_id, "B");
	CHECK_INT(busy.id, 0);
	CHECK_INT(busy.pid, getpid());
	CHECK(busy.job_name == NULL); /* no job row yet */
	store_lease_release(&busy);
	struct store_lease *v;
	size_t n;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_leases_held(st, &v, &n, &err), 0);
	CHECK_INT(n, 4);
	store_leases_free(v, n);
	/* a job may take its own devices again */
	CHECK_INT(take(st, "A", (const int[]){ 1 }, 1, 1, getpid(), got, NULL), 0);
	/* dropped: free for others */
	CHECK_INT(store_lease_drop(st, "B", &err), 0);
	CHECK_INT(take(st, "C", all, 4, 2, getpid(), got, NULL), 0);
	CHECK_INT(got[0], 0);
	CHECK_INT(got[1], 3);
	store_close(st);
}

TEST(lease_of_a_dead_holder_or_an_ended_job_is_stale)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	unsigned long long ticks;
	pid_t gone = dead_pid(&ticks);
	int got[1];
	CHECK_INT(store_lease_take(st, "dead", "gpu", (const int[]){ 0 }, 1, 1, gone, ticks, got,
				   NULL, &err),
		  0);
	/* its holder is gone: not held, and the next taker replaces it */
	struct store_lease *v;
	size_t n;
	CHECK_INT(store_leases_held(st, &v, &n, &err), 0);
	CHECK_INT(n, 0);
	store_leases_free(v, n);
	CHECK_INT(take(st, "alive", (const int[]){ 0 }, 1, 1, getpid(), got, NULL), 0);

	/* a live holder whose job ended holds nothing either */
	struct job_row row = { .id = "alive", .name = "r", .state = JOB_RUNNING, .run_dir = "/tmp",
			       .spec_json = "{}", .created = 1.0, .world_size = 1, .user = "u",
			       .device_type = "gpu", .device_count = 1, .devices = "0" };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	struct store_lease busy;
	CHECK_INT(take(st, "next", (const int[]){ 0 }, 1, 1, getpid(), got, &busy), TC_EBUSY);
	CHECK_STR(busy.job_name, "r");
	CHECK_STR(busy.user, "u");
	CHECK(!busy.managed);
	store_lease_release(&busy);
	CHECK_INT(store_job_finish(st, "alive", JOB_SUCCEEDED, 0, NULL, "done", &err), 0);
	CHECK_INT(take(st, "next", (const int[]){ 0 }, 1, 1, getpid(), got, NULL), 0);

	/* the row of a `run` job carries who ran it on what */
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "alive", &j, &err), 0);
	CHECK_STR(j.user, "u");
	CHECK_STR(j.device_type, "gpu");
	CHECK_INT(j.device_count, 1);
	CHECK_STR(j.devices, "0");
	job_row_release(&j);
	store_close(st);
}

TEST(lease_handed_to_the_supervisor_at_launch)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	struct job_row row = { .id = "S", .name = "s", .run_dir = "/tmp", .spec_json = "{}",
			       .created = 1.0, .world_size = 1, .user = "u", .priority = 100,
			       .device_type = "gpu", .device_count = 1, .backend = "local" };
	CHECK_INT(store_job_submit(st, &row, &err), 0);
	int got[1];
	/* the server holds it while it starts the supervisor */
	CHECK_INT(take(st, "S", (const int[]){ 0 }, 1, 1, getpid(), got, NULL), 0);
	/* a supervisor that is gone at once: after the hand-over, the lease goes with it */
	unsigned long long ticks;
	pid_t gone = dead_pid(&ticks);
	CHECK_INT(store_job_launch(st, "S", "0", gone, ticks, "scheduled", &err), 0);
	struct store_lease *v;
	size_t n;
	CHECK_INT(store_leases_held(st, &v, &n, &err), 0);
	CHECK_INT(n, 0);
	store_leases_free(v, n);
	/* handed to a live one, it holds */
	CHECK_INT(store_job_launch(st, "S", "0", getpid(), proc_start_ticks(getpid()), "again", &err), 0);
	CHECK_INT(store_leases_held(st, &v, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(v[0].job_id, "S");
	CHECK(v[0].managed);
	store_leases_free(v, n);
	/* deleting the job drops them */
	CHECK_INT(store_job_delete(st, "S", &err), 0);
	CHECK_INT(store_leases_held(st, &v, &n, &err), 0);
	CHECK_INT(n, 0);
	store_leases_free(v, n);
	store_close(st);
}

TEST(launch_keeps_an_end_the_supervisor_recorded_first)
{
	struct store *st = open_store();
	struct tc_err err = TC_ERR_INIT;
	struct job_row row = { .id = "F", .name = "f", .run_dir = "/tmp", .spec_json = "{}",
			       .created = 1.0, .world_size = 1, .user = "u", .priority = 100,
			       .device_type = "cpu", .device_count = 1, .backend = "local" };
	CHECK_INT(store_job_submit(st, &row, &err), 0);
	/* the supervisor fails in staging before the server records its launch */
	CHECK_INT(store_job_finish(st, "F", JOB_FAILED, 3, "input missing", "staging failed", &err), 0);
	CHECK_INT(store_job_launch(st, "F", "0", getpid(), proc_start_ticks(getpid()), "scheduled", &err), 0);
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "F", &j, &err), 0);
	CHECK_STR(job_state_name(j.state), "failed");
	CHECK_STR(j.root_cause, "input missing");
	CHECK(j.ended > 0);
	job_row_release(&j);
	store_close(st);
}
