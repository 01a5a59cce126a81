/* test_exec.c -- jobs/exec.h: the worker a job's record names, and what /proc says of it */
#include "test.h"

#include "core/proc.h"
#include "core/util.h"
#include "jobs/exec.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static json_t *job(const char *state, int world, const char *history)
{
	json_t *o = json_pack("{s:s, s:s, s:i}", "id", "J1", "state", state, "workers", world);
	json_object_set_new(o, "workers_history", json_loads(history, 0, NULL));
	return o;
}

TEST(pick_worker_newest_attempt)
{
	json_t *j = job("running", 2,
			"[{\"attempt\":0,\"rank\":1,\"pid\":11,\"ended\":5.0},"
			" {\"attempt\":1,\"rank\":1,\"pid\":22,\"ended\":null},"
			" {\"attempt\":1,\"rank\":0,\"pid\":21,\"ended\":null}]");
	struct tc_err err = TC_ERR_INIT;
	pid_t pid = -1;
	int attempt = -1;
	CHECK_INT(exec_pick_worker(j, 1, &pid, &attempt, &err), 0);
	CHECK_INT(pid, 22);
	CHECK_INT(attempt, 1);
	CHECK_INT(exec_pick_worker(j, -1, &pid, NULL, &err), 0); /* rank 0 by default */
	CHECK_INT(pid, 21);
	CHECK_INT(exec_pick_worker(j, 2, &pid, NULL, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "has ranks 0-1 (not 2)");
	json_decref(j);
	tc_err_release(&err);
}

TEST(pick_worker_refusals)
{
	struct tc_err err = TC_ERR_INIT;
	pid_t pid = -1;
	json_t *j = job("succeeded", 1, "[{\"attempt\":0,\"rank\":0,\"pid\":11,\"ended\":5.0}]");
	CHECK_INT(exec_pick_worker(j, 0, &pid, NULL, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "has ended (succeeded)");
	json_decref(j);
	/* between attempts: the newest row of the rank has ended */
	j = job("restarting", 1, "[{\"attempt\":0,\"rank\":0,\"pid\":11,\"ended\":5.0}]");
	CHECK_INT(exec_pick_worker(j, 0, &pid, NULL, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "rank 0 has no running worker now");
	json_decref(j);
	j = job("starting", 1, "[]");
	CHECK_INT(exec_pick_worker(j, 0, &pid, NULL, &err), TC_EUSAGE);
	json_decref(j);
	j = job("running", 1, "[]");
	CHECK_INT(exec_pick_worker(j, 3, &pid, NULL, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "has one rank, 0 (not 3)");
	json_decref(j);
	tc_err_release(&err);
}

/* A child that sleeps with the job's variables: the worker exec reads. */
static pid_t fake_worker(const char *rank)
{
	struct proc p = PROC_INIT;
	struct tc_err err = TC_ERR_INIT;
	strvec_push(&p.args, "sleep");
	strvec_push(&p.args, "30");
	strvec_push(&p.env, "PATH=/bin:/usr/bin");
	strvec_push(&p.env, "TRAINCTL_JOB_ID=J1");
	strvec_pushf(&p.env, "RANK=%s", rank);
	p.cwd = "/tmp";
	p.wait_exec = true;
	CHECK_INT(proc_start(&p, &err), 0);
	pid_t pid = p.pid;
	p.pid = -1; /* reaped by the test */
	proc_clear(&p);
	return pid;
}

static void end(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

TEST(target_read_and_run)
{
	pid_t w = fake_worker("1");
	struct exec_target t = EXEC_TARGET_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(exec_target_read(w, "J1", 1, &t, &err), 0);
	CHECK_STR(t.cwd, "/tmp");
	CHECK_STR(env_get(&t.env, "RANK"), "1");
	CHECK_INT(t.uid, getuid());
	char *argv[] = { "sh", "-c", "[ \"$RANK$X\" = 1y ] && [ \"$PWD\" = /tmp ] && exit 5", NULL };
	const char *extra[] = { "X=y", NULL };
	struct exec_opts o = { .extra_env = extra };
	int status = -1;
	CHECK_INT(exec_run(&t, argv, &o, &status, &err), 0);
	CHECK_INT(status, 5);
	exec_target_release(&t);
	/* another rank, another job: that pid is not the worker asked for */
	CHECK_INT(exec_target_read(w, "J1", 0, &t, &err), TC_EUSAGE);
	exec_target_release(&t);
	CHECK_INT(exec_target_read(w, "J2", 1, &t, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "is not rank 1 of job J2");
	exec_target_release(&t);
	end(w);
	CHECK_INT(exec_target_read(w, "J1", 1, &t, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "does not run on this host");
	exec_target_release(&t);
	tc_err_release(&err);
}

TEST(find_child_of_parent)
{
	pid_t a = fake_worker("0"), b = fake_worker("1"), got = -1;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(exec_find_child(getpid(), "J1", 1, &got, &err), 0);
	CHECK_INT(got, b);
	CHECK_INT(exec_find_child(getpid(), "J1", 0, &got, &err), 0);
	CHECK_INT(got, a);
	CHECK_INT(exec_find_child(getpid(), "J1", 2, &got, &err), TC_EUSAGE);
	CHECK_INT(exec_find_child(getppid(), "J1", 1, &got, &err), TC_EUSAGE);
	end(a);
	end(b);
	tc_err_release(&err);
}

TEST(run_watch_ends_the_command)
{
	/* the watched process goes: the command is ended (SIGHUP) */
	pid_t w = fake_worker("0");
	struct exec_target t = EXEC_TARGET_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(exec_target_read(w, "J1", 0, &t, &err), 0);
	pid_t watched = fork();
	if (watched == 0) {
		usleep(300 * 1000);
		_exit(0);
	}
	char *argv[] = { "sleep", "30", NULL };
	struct exec_opts o = { .watch_pid = watched, .watch_ticks = proc_start_ticks(watched) };
	int status = -1;
	CHECK_INT(exec_run(&t, argv, &o, &status, &err), 0);
	CHECK_INT(status, 128 + SIGHUP);
	waitpid(watched, NULL, 0);
	exec_target_release(&t);
	end(w);
	tc_err_release(&err);
}
