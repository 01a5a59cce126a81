/* test_proc.c -- core/proc: starting children, their fds, env, groups, status. */
#include "test.h"
#include "core/proc.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run argv (sh -c when sh) with the given env, collect stdout; returns the wait status. */
static int capture(struct proc *p, const char *input, struct sbuf *out, struct sbuf *err)
{
	struct tc_err e = TC_ERR_INIT;
	struct proc_capture c = { .input = input, .out = out, .err = err };
	int rc = proc_capture(p, &c, &e);
	if (rc)
		fprintf(stderr, "proc_capture: %s\n", e.msg);
	CHECK_INT(rc, 0);
	tc_err_release(&e);
	return c.status;
}

static void sh(struct proc *p, const char *script)
{
	strvec_push(&p->args, "/bin/sh");
	strvec_push(&p->args, "-c");
	strvec_push(&p->args, script);
}

TEST(env_is_exactly_the_list)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	setenv("TC_TEST_LEAK", "1", 1);
	strvec_push(&p.args, "env"); /* found on the default PATH: the list has none */
	strvec_push(&p.env, "A=1");
	strvec_push(&p.env, "B=two words");
	CHECK(proc_exit_ok(capture(&p, NULL, &out, NULL)));
	CHECK_STR(out.buf, "A=1\nB=two words\n");
	proc_clear(&p);
	/* an empty list is an empty environment, not ours */
	struct proc q = PROC_INIT;
	sbuf_reset(&out);
	strvec_push(&q.args, "/usr/bin/env");
	CHECK(proc_exit_ok(capture(&q, NULL, &out, NULL)));
	CHECK_STR(out.buf, "");
	proc_clear(&q);
	/* the helper for callers that inherit */
	struct strvec env = STRVEC_INIT;
	proc_env_inherit(&env);
	CHECK_STR(env_get(&env, "TC_TEST_LEAK"), "1");
	strvec_clear(&env);
	sbuf_release(&out);
}

TEST(other_fds_are_closed)
{
	int extra = open("/dev/null", O_RDONLY); /* no O_CLOEXEC: it would leak */
	CHECK(extra > 2);
	struct proc p = PROC_INIT;
	struct tc_err e = TC_ERR_INIT;
	/*
	 * Looked at once the child says it is up: right after the exec its
	 * dynamic loader still opens (and closes) libraries and locale files.
	 */
	sh(&p, "echo ready; read x");
	strvec_push(&p.env, "PATH=/usr/bin:/bin");
	p.in.how = p.out.how = PROC_IO_PIPE;
	CHECK_INT(proc_start(&p, &e), 0);
	struct sbuf got = SBUF_INIT;
	while (!strchr(got.buf, '\n')) {
		char buf[64];
		ssize_t r = read(p.out.fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		sbuf_add(&got, buf, (size_t)r);
	}
	CHECK_STR(got.buf, "ready\n");
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/fd", (long)p.pid);
	DIR *d = opendir(path);
	CHECK(d != NULL);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		CHECK(!strcmp(de->d_name, "0") || !strcmp(de->d_name, "1") || !strcmp(de->d_name, "2"));
		n++;
	}
	closedir(d);
	CHECK_INT(n, 3);
	kill(p.pid, SIGKILL);
	int st;
	CHECK_INT(proc_wait(&p, &st, &e), 0);
	CHECK_INT(proc_exit_of(st).sig, SIGKILL);
	proc_clear(&p);
	sbuf_release(&got);
	close(extra);
}

TEST(stdio_plan)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT, err = SBUF_INIT;
	sh(&p, "echo out; echo err >&2; cat");
	CHECK(proc_exit_ok(capture(&p, "from stdin\n", &out, &err)));
	CHECK_STR(out.buf, "out\nfrom stdin\n");
	CHECK_STR(err.buf, "err\n");
	proc_clear(&p);
	/* stderr into stdout; stdin from /dev/null */
	struct proc q = PROC_INIT;
	sbuf_reset(&out);
	sh(&q, "echo a; echo b >&2; cat; echo c");
	q.in.how = PROC_IO_NULL;
	q.err.how = PROC_IO_STDOUT;
	CHECK(proc_exit_ok(capture(&q, NULL, &out, NULL)));
	CHECK_STR(out.buf, "a\nb\nc\n");
	proc_clear(&q);
	/* a given fd: the caller's, still open after the start */
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/given.txt", test_tmpdir());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	struct proc r = PROC_INIT;
	struct tc_err e = TC_ERR_INIT;
	sh(&r, "echo to-file; echo dropped >&2");
	r.out = (struct proc_io){ PROC_IO_FD, fd };
	r.err.how = PROC_IO_NULL;
	CHECK_INT(proc_start(&r, &e), 0);
	int st;
	CHECK_INT(proc_wait(&r, &st, &e), 0);
	CHECK(proc_exit_ok(st));
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);
	sbuf_reset(&out);
	CHECK_INT(read_file(path, &out, NULL), 0);
	CHECK_STR(out.buf, "to-file\n");
	proc_clear(&r);
	sbuf_release(&out);
	sbuf_release(&err);
}

TEST(big_input_and_output_do_not_deadlock)
{
	size_t n = 4u << 20;
	char *big = malloc(n + 1);
	CHECK(big != NULL);
	memset(big, 'x', n);
	big[n] = '\0';
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	strvec_push(&p.args, "cat");
	strvec_push(&p.env, "PATH=/usr/bin:/bin");
	CHECK(proc_exit_ok(capture(&p, big, &out, NULL)));
	CHECK_INT(out.len, n);
	proc_clear(&p);
	/* a child that reads nothing: no SIGPIPE for us */
	struct proc q = PROC_INIT;
	sbuf_reset(&out);
	sh(&q, "exit 0");
	CHECK(proc_exit_ok(capture(&q, big, &out, NULL)));
	proc_clear(&q);
	sbuf_release(&out);
	free(big);
}

TEST(exit_status_and_signal)
{
	struct proc p = PROC_INIT;
	struct sbuf d = SBUF_INIT;
	sh(&p, "exit 3");
	int st = capture(&p, NULL, NULL, NULL);
	struct proc_exit x = proc_exit_of(st);
	CHECK(x.exited);
	CHECK_INT(x.code, 3);
	CHECK_INT(x.sig, 0);
	CHECK(!proc_exit_ok(st));
	proc_describe_exit(&d, st);
	CHECK_STR(d.buf, "exited with code 3");
	proc_clear(&p);
	struct proc q = PROC_INIT;
	sh(&q, "kill -TERM $$");
	st = capture(&q, NULL, NULL, NULL);
	x = proc_exit_of(st);
	CHECK(!x.exited);
	CHECK_INT(x.code, -1);
	CHECK_INT(x.sig, SIGTERM);
	sbuf_reset(&d);
	proc_describe_exit(&d, st);
	CHECK_STR(d.buf, "was killed by signal 15 (Terminated)");
	proc_clear(&q);
	sbuf_release(&d);
}

TEST(program_not_found)
{
	/* wait_exec: a clear error, no child left */
	struct proc p = PROC_INIT;
	struct tc_err e = TC_ERR_INIT;
	strvec_push(&p.args, "no-such-program-tc");
	strvec_push(&p.env, "PATH=/usr/bin:/bin");
	p.wait_exec = true;
	CHECK_INT(proc_start(&p, &e), TC_ESYS);
	CHECK_STR(e.msg, "cannot run 'no-such-program-tc': No such file or directory");
	CHECK_INT(p.exec_errno, ENOENT);
	CHECK_INT(p.pid, -1);
	proc_clear(&p);
	/* a path that does not exist: found out in the child, reported the same */
	struct proc q = PROC_INIT;
	strvec_push(&q.args, "/nonexistent/prog");
	q.wait_exec = true;
	CHECK_INT(proc_start(&q, &e), TC_ESYS);
	CHECK_STR(e.msg, "cannot run '/nonexistent/prog': No such file or directory");
	CHECK_INT(q.exec_errno, ENOENT);
	proc_clear(&q);
	/* without wait_exec: like a shell, exit 127 and a line on its stderr */
	struct proc r = PROC_INIT;
	struct sbuf err = SBUF_INIT;
	strvec_push(&r.args, "/nonexistent/prog");
	int st = capture(&r, NULL, NULL, &err);
	CHECK_INT(proc_exit_of(st).code, 127);
	CHECK_STR(err.buf, "trainctl: cannot run '/nonexistent/prog': No such file or directory\n");
	proc_clear(&r);
	sbuf_release(&err);
	tc_err_release(&e);
}

TEST(script_without_shebang_runs_in_sh)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/plain.sh", test_tmpdir());
	const char *text = "echo plain \"$1\"\n";
	CHECK_INT(write_file_atomic(path, text, strlen(text), NULL), 0);
	CHECK(chmod(path, 0755) == 0);
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	strvec_push(&p.args, "plain.sh");
	strvec_push(&p.args, "arg");
	strvec_pushf(&p.env, "PATH=/nonexistent:%s", test_tmpdir());
	CHECK(proc_exit_ok(capture(&p, NULL, &out, NULL)));
	CHECK_STR(out.buf, "plain arg\n");
	proc_clear(&p);
	sbuf_release(&out);
}

TEST(cwd)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	char real[PATH_MAX];
	CHECK(realpath(test_tmpdir(), real) != NULL);
	strvec_push(&p.args, "/bin/pwd");
	p.cwd = real;
	CHECK(proc_exit_ok(capture(&p, NULL, &out, NULL)));
	sbuf_rtrim(&out);
	CHECK_STR(out.buf, real);
	proc_clear(&p);
	struct proc q = PROC_INIT;
	struct tc_err e = TC_ERR_INIT;
	strvec_push(&q.args, "/bin/pwd");
	q.cwd = "/nonexistent-dir";
	q.wait_exec = true;
	CHECK_INT(proc_start(&q, &e), TC_ESYS);
	CHECK_CONTAINS(e.msg, "cannot enter '/nonexistent-dir'");
	proc_clear(&q);
	tc_err_release(&e);
	sbuf_release(&out);
}

TEST(wrapper_prefix)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	strvec_push(&p.wrapper, "/bin/sh");
	strvec_push(&p.wrapper, "-c");
	strvec_push(&p.wrapper, "echo wrapped \"$@\"");
	strvec_push(&p.wrapper, "sh");
	strvec_push(&p.args, "train");
	strvec_push(&p.args, "--lr");
	CHECK(proc_exit_ok(capture(&p, NULL, &out, NULL)));
	CHECK_STR(out.buf, "wrapped train --lr\n");
	proc_clear(&p);
	sbuf_release(&out);
}

TEST(process_group_and_session)
{
	struct tc_err e = TC_ERR_INIT;
	struct proc_stat ps;
	int st;
	struct proc p = PROC_INIT;
	strvec_push(&p.args, "/bin/sleep");
	strvec_push(&p.args, "300"); /* killed below: never its own end */
	p.group = PROC_GROUP_NEW;
	CHECK_INT(proc_start(&p, &e), 0);
	/* set in the parent too: true as soon as proc_start returns */
	CHECK_INT(getpgid(p.pid), p.pid);
	CHECK_INT(getsid(p.pid), getsid(0));
	kill(-p.pid, SIGKILL);
	CHECK_INT(proc_wait(&p, &st, &e), 0);
	proc_clear(&p);

	struct proc q = PROC_INIT;
	strvec_push(&q.args, "/bin/sleep");
	strvec_push(&q.args, "300");
	q.group = PROC_SESSION_NEW;
	q.wait_exec = true;
	CHECK_INT(proc_start(&q, &e), 0);
	CHECK_INT(proc_stat_read(q.pid, &ps), 0);
	CHECK_INT(ps.session, q.pid);
	CHECK_INT(ps.pgrp, q.pid);
	CHECK_INT(ps.ppid, getpid());
	CHECK(ps.start_ticks > 0);
	CHECK_INT(proc_start_ticks(q.pid), ps.start_ticks);
	kill(q.pid, SIGKILL);
	CHECK_INT(proc_wait(&q, &st, &e), 0);
	proc_clear(&q);

	/* the default: our group */
	struct proc r = PROC_INIT;
	strvec_push(&r.args, "/bin/sleep");
	strvec_push(&r.args, "300");
	r.wait_exec = true;
	CHECK_INT(proc_start(&r, &e), 0);
	CHECK_INT(getpgid(r.pid), getpgid(0));
	kill(r.pid, SIGKILL);
	CHECK_INT(proc_wait(&r, &st, &e), 0);
	proc_clear(&r);
	CHECK_INT(proc_stat_read(-5, &ps), -1);
}

TEST(death_signal)
{
	/* we adopt orphans, so the grandchild's end is ours to see */
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	int pp[2];
	CHECK(pipe(pp) == 0);
	pid_t mid = fork();
	CHECK(mid >= 0);
	if (mid == 0) {
		struct proc p = PROC_INIT;
		struct tc_err e = TC_ERR_INIT;
		strvec_push(&p.args, "/bin/sleep");
		strvec_push(&p.args, "30");
		p.death_sig = SIGUSR1;
		p.default_sigs = PROC_SIG(SIGUSR1);
		p.wait_exec = true;
		if (proc_start(&p, &e))
			_exit(1);
		int32_t v = p.pid;
		if (write(pp[1], &v, sizeof(v)) != (ssize_t)sizeof(v))
			_exit(1);
		_exit(0); /* the parent dies: the child gets SIGUSR1 */
	}
	close(pp[1]);
	int32_t child = 0;
	CHECK(read(pp[0], &child, sizeof(child)) == (ssize_t)sizeof(child));
	int st;
	CHECK(waitpid(mid, &st, 0) == mid);
	CHECK(proc_exit_ok(st));
	CHECK(waitpid(child, &st, 0) == child);
	CHECK(WIFSIGNALED(st));
	CHECK_INT(WTERMSIG(st), SIGUSR1);
}

TEST(signals_and_rlimits)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	signal(SIGUSR2, SIG_IGN); /* ignored here: kept across exec unless put back */
	struct proc_rlimit lim = { RLIMIT_NOFILE, { 64, 64 } };
	sh(&p, "ulimit -n; grep -E '^Sig(Ign|Blk)' /proc/self/status");
	p.rlimits = &lim;
	p.nrlimits = 1;
	p.default_sigs = PROC_SIG(SIGUSR2);
	p.ignore_sigs = PROC_SIG(SIGHUP);
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	CHECK(sigprocmask(SIG_BLOCK, &block, NULL) == 0);
	CHECK(proc_exit_ok(capture(&p, NULL, &out, NULL)));
	CHECK_CONTAINS(out.buf, "64\n");
	CHECK_CONTAINS(out.buf, "SigBlk:\t0000000000000000\n"); /* nothing blocked */
	const char *ign = strstr(out.buf, "SigIgn:\t");
	CHECK(ign != NULL);
	unsigned long long bits = strtoull(ign + 8, NULL, 16);
	CHECK(bits & (1ULL << (SIGHUP - 1)));
	CHECK(!(bits & (1ULL << (SIGUSR2 - 1))));
	proc_clear(&p);
	sbuf_release(&out);
}

TEST(switch_user)
{
	if (geteuid() != 0) {
		fprintf(stderr, "not root: skipped\n");
		return;
	}
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	gid_t g = 65534;
	strvec_push(&p.args, "/usr/bin/id");
	p.set_groups = p.set_gid = p.set_uid = true;
	p.groups = &g;
	p.ngroups = 1;
	p.gid = 65534;
	p.uid = 65534;
	CHECK(proc_exit_ok(capture(&p, NULL, &out, NULL)));
	CHECK_CONTAINS(out.buf, "uid=65534");
	CHECK_CONTAINS(out.buf, "gid=65534");
	proc_clear(&p);
	sbuf_release(&out);
}

TEST(timeout_kills)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	struct tc_err e = TC_ERR_INIT;
	/*
	 * The shell must have printed before the kill: on a loaded machine
	 * starting it can take a good part of a second, so the limit is far
	 * above that, and far below the sleep's own end.
	 */
	sh(&p, "echo started; exec sleep 300");
	struct proc_capture c = { .out = &out, .timeout_ms = 3000 };
	int64_t t0 = now_mono_ms();
	CHECK_INT(proc_capture(&p, &c, &e), 0);
	CHECK(now_mono_ms() - t0 < 45000);
	CHECK(c.timed_out);
	CHECK_INT(proc_exit_of(c.status).sig, SIGKILL);
	CHECK_STR(out.buf, "started\n");
	proc_clear(&p);
	/* max: the rest is read and dropped */
	struct proc q = PROC_INIT;
	sbuf_reset(&out);
	sh(&q, "echo 0123456789");
	struct proc_capture c2 = { .out = &out, .max = 4 };
	CHECK_INT(proc_capture(&q, &c2, &e), 0);
	CHECK_STR(out.buf, "0123");
	proc_clear(&q);
	sbuf_release(&out);
}

static int fn_child(void *arg)
{
	const char *msg = arg;
	return write(STDOUT_FILENO, msg, strlen(msg)) < 0 ? 1 : 7;
}

TEST(function_child)
{
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	p.fn = fn_child;
	p.fn_arg = "in the child\n";
	int st = capture(&p, NULL, &out, NULL);
	CHECK_INT(proc_exit_of(st).code, 7);
	CHECK_STR(out.buf, "in the child\n");
	proc_clear(&p);
	struct proc q = PROC_INIT;
	struct tc_err e = TC_ERR_INIT;
	CHECK_INT(proc_start(&q, &e), TC_EUSAGE); /* nothing to run */
	tc_err_release(&e);
	sbuf_release(&out);
}

TEST(detached)
{
	struct proc p = PROC_INIT;
	struct tc_err e = TC_ERR_INIT;
	strvec_push(&p.args, "/bin/sleep");
	strvec_push(&p.args, "30");
	p.wait_exec = true;
	p.in.how = p.out.how = p.err.how = PROC_IO_NULL;
	CHECK_INT(proc_start_detached(&p, &e), 0);
	CHECK(p.pid > 0);
	struct proc_stat ps;
	CHECK_INT(proc_stat_read(p.pid, &ps), 0);
	/* nobody's child here, in a session of its own that it does not lead */
	CHECK(ps.ppid != getpid());
	CHECK(ps.session != getsid(0));
	CHECK(ps.session != p.pid);
	CHECK(waitpid(p.pid, NULL, WNOHANG) < 0 && errno == ECHILD);
	kill(p.pid, SIGKILL);
	proc_clear(&p);
	/* its failure to start is still reported */
	struct proc q = PROC_INIT;
	strvec_push(&q.args, "/nonexistent/prog");
	q.wait_exec = true;
	CHECK_INT(proc_start_detached(&q, &e), TC_ESYS);
	CHECK_CONTAINS(e.msg, "cannot run '/nonexistent/prog'");
	proc_clear(&q);
	tc_err_release(&e);
}

static volatile sig_atomic_t term_handled;

static void note_term(int sig)
{
	(void)sig;
	term_handled = 1;
}

static int fn_pause(void *arg)
{
	(void)arg;
	sleep(60); /* a signal ends it: SIGTERM kills it, or the handler cuts the sleep */
	return 0;
}

/* The wait status of pid, or -1 (and pid killed) when it is still there after 5 s. */
static int wait_briefly(pid_t pid)
{
	int st;
	for (int i = 0; i < 5000; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

TEST(signal_before_the_child_is_set_up_is_not_lost)
{
	/* a stop sent the moment a child starts (a server stopping a supervisor
	 * that has not reached exec) must not run this process's handler in the
	 * child, where it is lost: the child dies of it as if it came later */
	struct sigaction sa = { .sa_handler = note_term }, old;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGTERM, &sa, &old) == 0);
	for (int i = 0; i < 100; i++) {
		struct proc p = PROC_INIT;
		struct tc_err e = TC_ERR_INIT;
		p.fn = fn_pause;
		p.default_sigs = i % 2 ? PROC_SIG(SIGTERM) : 0; /* a handler is never inherited */
		p.in.how = p.out.how = p.err.how = PROC_IO_NULL;
		CHECK_INT(proc_start(&p, &e), 0);
		CHECK(kill(p.pid, SIGTERM) == 0);
		int st = wait_briefly(p.pid);
		CHECK(st != -1);
		CHECK_INT(proc_exit_of(st).sig, SIGTERM);
		proc_clear(&p);
		if (st == -1)
			break;
	}
	CHECK(!term_handled); /* and it never ran here */
	CHECK(sigaction(SIGTERM, &old, NULL) == 0);
}

/* A child of sh -c script, up (exec done) before proc_start returns. */
static void start_sh(struct proc *p, const char *script)
{
	struct tc_err e = TC_ERR_INIT;
	sh(p, script);
	p->in.how = p->out.how = p->err.how = PROC_IO_NULL;
	p->wait_exec = true;
	CHECK_INT(proc_start(p, &e), 0);
	tc_err_release(&e);
}

TEST(stop_a_child_that_ends_on_sigterm)
{
	struct proc p = PROC_INIT;
	start_sh(&p, "exec sleep 30");
	int64_t t0 = now_mono_ms();
	int st = -1;
	CHECK(!proc_stop(&p, 10000, &st));
	CHECK(now_mono_ms() - t0 < 5000); /* not the grace */
	CHECK_INT(proc_exit_of(st).sig, SIGTERM);
	CHECK_INT(p.pid, -1);
	proc_clear(&p);
}

TEST(stop_a_child_that_ignores_sigterm)
{
	struct proc p = PROC_INIT;
	p.ignore_sigs = PROC_SIG(SIGTERM); /* set before its exec, which wait_exec awaits */
	start_sh(&p, "exec sleep 30");
	int64_t t0 = now_mono_ms();
	int st = -1;
	CHECK(proc_stop(&p, 200, &st));
	CHECK(now_mono_ms() - t0 >= 200); /* the grace was given */
	CHECK_INT(proc_exit_of(st).sig, SIGKILL);
	proc_clear(&p);
}

static void count_ended(void *arg, size_t i, int status)
{
	int *seen = arg;
	seen[i] = proc_exit_of(status).sig;
}

TEST(stop_many_and_a_whole_group)
{
	/* a group whose leader ignores SIGTERM, the other child not; one slot empty */
	struct proc a = PROC_INIT, b = PROC_INIT;
	a.group = PROC_GROUP_NEW;
	start_sh(&a, "trap '' TERM; sleep 30 & wait");
	start_sh(&b, "exec sleep 30");
	usleep(100 * 1000); /* a's trap and its member are in place */
	struct proc_stopping v[3] = { { .pid = a.pid, .group = true }, { .pid = -1 }, { .pid = b.pid } };
	int seen[3] = { -1, -1, -1 };
	proc_stop_all(v, 3, SIGTERM, 300, count_ended, seen);
	CHECK(v[0].killed && !v[2].killed);
	CHECK_INT(seen[0], SIGKILL);
	CHECK_INT(seen[1], -1); /* nothing to stop: never told */
	CHECK_INT(seen[2], SIGTERM);
	CHECK_INT(v[0].pid, -1);
	a.pid = b.pid = -1;
	proc_clear(&a);
	proc_clear(&b);
}

TEST(guard_outlives_the_terminals_signals_and_reads_our_end)
{
	/* the container reaper's shape: "done" means all is cleaned up, EOF alone that we are gone */
	const char *script = "read -r x; [ \"$x\" = done ] && exit 0; exit 7";
	for (int done = 0; done < 2; done++) {
		struct proc p = PROC_INIT;
		struct tc_err e = TC_ERR_INIT;
		int fd = -1;
		sh(&p, script);
		p.wait_exec = true; /* its signals are set before we send any */
		CHECK_INT(proc_start_guard(&p, &fd, &e), 0);
		CHECK(fd >= 0);
		CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		pid_t pid = p.pid;
		proc_clear(&p);
		CHECK(getpgid(pid) == pid); /* its own group */
		CHECK(kill(pid, SIGTERM) == 0 && kill(pid, SIGINT) == 0 && kill(pid, SIGHUP) == 0);
		if (done)
			CHECK(write_all(fd, "done\n", 5) == 5);
		close(fd);
		int st = 0;
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECK_INT(proc_exit_of(st).code, done ? 0 : 7);
	}
}

TEST(guard_end_says_when_the_guard_is_gone)
{
	struct sigaction sa = { .sa_handler = SIG_IGN }, old;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGPIPE, &sa, &old) == 0);
	struct proc p = PROC_INIT;
	struct tc_err e = TC_ERR_INIT;
	int fd = -1;
	sh(&p, "exit 0"); /* ends without reading */
	CHECK_INT(proc_start_guard(&p, &fd, &e), 0);
	pid_t pid = p.pid;
	proc_clear(&p);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK_INT(proc_guard_end(&fd, -1, "done\n", 5), -1);
	CHECK_INT(errno, EPIPE);
	CHECK_INT(fd, -1);
	CHECK_INT(proc_guard_end(&fd, -1, "done\n", 5), 0); /* ended already: nothing to do */
	CHECK(sigaction(SIGPIPE, &old, NULL) == 0);
}
