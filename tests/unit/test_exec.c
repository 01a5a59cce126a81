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
	/* the watched process goes: the command is ended (SIGHUP), and our group's other processes */
	CHECK(setpgid(0, 0) == 0); /* not the runner's group */
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

/* A process whose command line reads as a runtime's client: `/bin/sh run --name=... ...` */
static pid_t fake_client(const char *dir, const char *name_arg)
{
	struct sbuf script = SBUF_INIT;
	sbuf_addf(&script, "%s/run", dir);
	FILE *f = fopen(script.buf, "w");
	CHECK(f);
	fputs("sleep 30\n", f);
	CHECK(fclose(f) == 0);
	struct proc p = PROC_INIT;
	struct tc_err err = TC_ERR_INIT;
	strvec_pushv(&p.args, (const char *const[]){ "/bin/sh", "run", name_arg, "--user=5:6",
						     "--workdir=/w", "IMAGE", NULL });
	strvec_push(&p.env, "PATH=/bin:/usr/bin");
	strvec_push(&p.env, "CONTAINERS_CONF=/x.conf");
	p.cwd = dir;
	p.group = PROC_GROUP_NEW; /* its sleep goes with it */
	p.wait_exec = true;
	CHECK_INT(proc_start(&p, &err), 0);
	pid_t pid = p.pid;
	p.pid = -1;
	proc_clear(&p);
	sbuf_release(&script);
	return pid;
}

TEST(container_client)
{
	char dir[] = "/tmp/tc-exec-XXXXXX";
	CHECK(mkdtemp(dir));
	pid_t c = fake_client(dir, "--name=trainctl-J1-a12-r1"), got = -1;
	usleep(100 * 1000); /* sh reads its script: its command line stays */
	struct exec_target t = EXEC_TARGET_INIT;
	struct strvec argv = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(exec_find_container_child(getpid(), "J1", 1, &got, &err), 0);
	CHECK_INT(got, c);
	CHECK_INT(exec_find_container_child(getpid(), "J1", 0, &got, &err), TC_EUSAGE);
	CHECK_INT(exec_find_container_child(getpid(), "J", 1, &got, &err), TC_EUSAGE);
	CHECK_INT(exec_container_client(c, "J1", 1, true, &t, &argv, &err), 0);
	CHECK_INT(argv.nr, 7);
	CHECK_STR(argv.v[0], "/bin/sh");
	CHECK_STR(argv.v[1], "exec");
	CHECK_STR(argv.v[2], "-i");
	CHECK_STR(argv.v[3], "-t");
	CHECK_STR(argv.v[4], "--user=5:6");
	CHECK_STR(argv.v[5], "--workdir=/w");
	CHECK_STR(argv.v[6], "trainctl-J1-a12-r1");
	CHECK_STR(env_get(&t.env, "CONTAINERS_CONF"), "/x.conf");
	exec_target_release(&t);
	strvec_clear(&argv);
	CHECK_INT(exec_container_client(c, "J1", 2, false, &t, &argv, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "is not the client of its container");
	exec_target_release(&t);
	strvec_clear(&argv);
	kill(-c, SIGKILL);
	end(c);
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/run", dir);
	unlink(p.buf);
	rmdir(dir);
	sbuf_release(&p);
	tc_err_release(&err);
}
