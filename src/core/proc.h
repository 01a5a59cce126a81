/*
 * proc.h -- the one way trainctl starts a child process (after git's
 * run-command.h), and the /proc/PID/stat reader.
 *
 * One struct proc describes the child completely.  Nothing comes from the
 * parent unless the struct says so: the environment is exactly the list in
 * env (empty means empty; proc_env_inherit() copies ours for a caller that
 * wants it), and in the child every descriptor other than 0, 1 and 2 is
 * closed before the program runs.
 *
 * THE CALLER'S STEPS
 *  1. struct proc p = PROC_INIT;
 *  2. Fill it: p.args (argv; args.v[0] is looked up on the PATH of p.env,
 *     "/bin:/usr/bin" when it has none, unless it holds a '/'), p.env, and
 *     what else the child needs: cwd, ids, rlimits, group, death_sig,
 *     signals, the three standard streams, wrapper.
 *  3. proc_start(&p, err): p.pid is the child; the PIPE streams' parent
 *     ends are in p.in.fd, p.out.fd, p.err.fd.
 *     (proc_capture() does steps 3 to 5 for a child whose output is
 *     wanted; proc_start_detached() starts one that is nobody's child.)
 *  4. Write to / read from the pipe ends; close each when done with it.
 *  5. proc_wait(&p, &status, err), then decode status with proc_exit_of(),
 *     proc_exit_ok() or proc_describe_exit().
 *     (proc_stop() ends a child that must go: SIGTERM, a grace, SIGKILL.)
 *  6. proc_clear(&p): frees the vectors and closes pipe ends still open.
 *
 * WHO OWNS AND CLOSES EACH FD
 *  - PROC_IO_FD: the fd stays the caller's.  proc dups it onto 0, 1 or 2
 *    in the child and never closes it; the caller closes its copy after
 *    proc_start (the child holds its own).
 *  - PROC_IO_PIPE: proc makes the pipe.  After proc_start the struct's fd
 *    is the parent's end (the write end for stdin, the read end for stdout
 *    and stderr), O_CLOEXEC, and the caller's: it closes it, or leaves it
 *    to proc_clear().  To keep an end beyond proc_clear(), take it (copy
 *    the fd and set the struct's to -1).  The child's ends are closed in
 *    the parent by proc_start.  After a failed start none is open.
 *  - /dev/null (PROC_IO_NULL) is opened in the child.
 *  - Every other descriptor is closed in the child (close_range).
 *
 * IN THE CHILD, UNTIL ITS PROGRAM RUNS
 *  The child makes only async-signal-safe calls: whatever allocates (the
 *  PATH lookup, the argv with the wrapper, the /bin/sh fallback for a
 *  script without #!) is done before the child exists.  In it, in order:
 *  new session or group, death signal, signal dispositions and an empty
 *  signal mask, standard streams, other fds closed, rlimits, groups, gid,
 *  uid, cwd, then exec (or fn).
 *
 * FAILURES IN THE CHILD
 *  When cwd, the ids, an rlimit or the exec fail, the child writes one line
 *  to its stderr ("trainctl: cannot run 'prog': No such file or
 *  directory") and exits 127, like a shell.  With wait_exec set it writes
 *  nothing; proc_start instead waits until the program runs and, when it
 *  does not, reaps the child and returns TC_ESYS saying what failed, with
 *  p.exec_errno set.  wait_exec costs the parent the child's exec time, so
 *  the workers' path leaves it off.
 */
#ifndef TC_CORE_PROC_H
#define TC_CORE_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"

/* Where one standard stream of the child goes. */
enum proc_io_how {
	PROC_IO_INHERIT = 0, /* the parent's own */
	PROC_IO_NULL,        /* /dev/null */
	PROC_IO_FD,          /* fd, the caller's (see above) */
	PROC_IO_PIPE,        /* a new pipe; fd becomes the parent's end */
	PROC_IO_STDOUT,      /* stderr only: wherever stdout goes */
};
struct proc_io {
	enum proc_io_how how;
	int fd;
};

enum proc_group {
	PROC_GROUP_SAME = 0, /* the parent's process group */
	PROC_GROUP_NEW,      /* its own group (set in child and parent: no race) */
	PROC_SESSION_NEW,    /* a new session, so also a new group */
};

struct proc_rlimit {
	int resource; /* RLIMIT_* */
	struct rlimit lim;
};

/* Signal sets for default_sigs / ignore_sigs: one bit per signal number. */
#define PROC_SIG(sig) (1ULL << (sig))
#define PROC_SIGS_CLASSIC 0xfffffffeULL /* 1..31 (SIGKILL and SIGSTOP are skipped) */

struct proc {
	struct strvec args;    /* argv */
	struct strvec wrapper; /* prepended to args (a container runtime, a profiler) */
	struct strvec env;     /* exactly the child's environment, "K=V" */
	const char *cwd;       /* NULL: the parent's */

	/* the account: each is applied only when its flag is set (groups, gid, uid) */
	bool set_groups, set_gid, set_uid;
	const gid_t *groups;
	size_t ngroups;
	gid_t gid;
	uid_t uid;

	const struct proc_rlimit *rlimits;
	size_t nrlimits;

	enum proc_group group;
	int death_sig; /* PR_SET_PDEATHSIG; 0: none.  Parent already gone: the child gets it at once */
	unsigned long long default_sigs; /* put back to SIG_DFL (exec keeps ignored ones) */
	unsigned long long ignore_sigs;  /* set to SIG_IGN */

	struct proc_io in, out, err;

	bool wait_exec; /* see FAILURES IN THE CHILD */
	/*
	 * Run fn(fn_arg) in the child instead of a program, then _exit with
	 * its result; args stays empty.  fn may only make async-signal-safe
	 * calls (the child of a threaded parent has one thread).
	 */
	int (*fn)(void *arg);
	void *fn_arg;

	/* set by proc_start */
	pid_t pid;      /* -1 before the start and after a failed one */
	int exec_errno; /* with wait_exec: why the child could not run the program */
};
#define PROC_INIT                                                                          \
	{                                                                                  \
		.args = STRVEC_INIT, .wrapper = STRVEC_INIT, .env = STRVEC_INIT, .pid = -1, \
		.in = { PROC_IO_INHERIT, -1 }, .out = { PROC_IO_INHERIT, -1 },             \
		.err = { PROC_IO_INHERIT, -1 },                                            \
	}

/* Append our own environment to env, for children that ran with it so far. */
void proc_env_inherit(struct strvec *env);

/* Start the child described by p (steps above).  0 or TC_ESYS/TC_EUSAGE. */
int proc_start(struct proc *p, struct tc_err *err);

/*
 * Start the child detached: an intermediate child makes a new session,
 * starts p's child, passes its pid back through a pipe and exits, so the
 * child is nobody's child here (init reaps it) and outlives us.  p.group
 * and p.death_sig are ignored (the child is in the new session, not its
 * leader, and its parent is gone at once); proc_wait() cannot be used on
 * it.
 */
int proc_start_detached(struct proc *p, struct tc_err *err);

/*
 * Start a guard: a child that outlives us to clean up after us (a job's
 * worker groups killed, its containers removed).  Its stdin is a pipe from
 * us, and EOF there means we are gone, by SIGKILL too; *fd is the pipe's
 * write end (close-on-exec), ours to write the guard's messages to.  It
 * runs in its own group, deaf to the terminal's signals, so that a Ctrl-C
 * meant for us does not end it first, and holds none of our streams, so
 * that nobody waits on it for their EOF.  p says what it runs (args or
 * fn, env); its streams, group and signals are set here.  0 or
 * proc_start's error; p.pid is the guard, p can be cleared at once.
 */
int proc_start_guard(struct proc *p, int *fd, struct tc_err *err);
/*
 * Let the guard go: msg (n bytes: "all is cleaned up" in its language)
 * written, *fd closed and set to -1, and the guard reaped if it has exited
 * already; else init reaps it (not waiting keeps a scheduling round trip
 * out of every job's end).  0, or -1 with errno when msg could not be
 * written (the guard ended early).
 */
int proc_guard_end(int *fd, pid_t pid, const void *msg, size_t n);

/* Wait for the child (EINTR retried); *status is the wait status. */
int proc_wait(struct proc *p, int *status, struct tc_err *err);

/* Free the vectors and close the pipe ends still held; p can be reused after PROC_INIT. */
void proc_clear(struct proc *p);

/* ---- the wait status ---- */

struct proc_exit {
	bool exited; /* by exit(): code is valid */
	int code;    /* exit code, or -1 */
	int sig;     /* the signal that ended it, or 0 */
};
struct proc_exit proc_exit_of(int status);
/* Exited with code 0? */
bool proc_exit_ok(int status);
/* "exited with code 3", "was killed by signal 9 (Killed)". */
void proc_describe_exit(struct sbuf *sb, int status);
/*
 * What a stop signal the supervisor got means to its user: "SIGINT,
 * Ctrl-C", "SIGTERM, from trainctl stop or kill", else "SIGNAME": never
 * strsignal's "Terminated", which reads like a state.
 */
void proc_describe_stop_signal(struct sbuf *sb, int sig);

/* ---- run and capture ---- */

/*
 * What proc_capture feeds and collects.  input (or NULL) becomes stdin
 * through a pipe; out and err (or NULL) collect stdout and stderr through
 * pipes.  A NULL one leaves that stream as p says (e.g. p.err.how =
 * PROC_IO_STDOUT sends stderr into out, PROC_IO_NULL drops it).
 */
struct proc_capture {
	const char *input;
	struct sbuf *out, *err;
	int timeout_ms; /* SIGKILL after this long; 0: no limit */
	size_t max;     /* keep at most this many bytes per stream (the rest is read and dropped); 0: all */
	/* results */
	int status; /* wait status */
	bool timed_out;
};

/*
 * Run p to its end, feeding and collecting as c says.  0 when it ran (the
 * outcome is c->status), or the error of proc_start/proc_wait.  Replaces
 * running a command through a shell: the argv is never parsed by one.
 */
int proc_capture(struct proc *p, struct proc_capture *c, struct tc_err *err);

/* ---- stopping ---- */

/* One child proc_stop_all stops, and what became of it. */
struct proc_stopping {
	pid_t pid;  /* the child; <= 0: nothing to stop */
	bool group; /* signal its whole group (it leads one: PROC_GROUP_NEW) */
	/* results */
	int status;  /* its wait status; 0 when it was not ours to reap (ECHILD) */
	bool killed; /* still there when the grace ended: it got SIGKILL */
};

/*
 * Stop children the one way: sig (SIGTERM; SIGHUP for a terminal's
 * command) to each at once, SIGKILL to those still there grace_ms later
 * (grace_ms < 0: never; they are trusted to end), each reaped as it ends,
 * with ended(arg, i, status) called for v[i] then (NULL: nobody is told).
 * Returns when every one has ended (each pid is -1 then); looks every 20 ms.
 */
void proc_stop_all(struct proc_stopping *v, size_t n, int sig, int grace_ms,
		   void (*ended)(void *arg, size_t i, int status), void *arg);

/*
 * proc_stop_all for the started child p alone, with SIGTERM: to its group
 * when p.group gave it one.  *status (status may be NULL) is its wait
 * status and p.pid is -1 after.  True when it needed the SIGKILL.
 */
bool proc_stop(struct proc *p, int grace_ms, int *status);

/* ---- /proc/PID/stat ---- */

struct proc_stat {
	char state; /* R, S, D, Z, ... */
	pid_t ppid, pgrp, session;
	unsigned long long utime, stime; /* clock ticks */
	unsigned long long start_ticks;  /* clock ticks after boot: with the pid, names a process */
	long long rss_pages;
};
/* 0, or -1 when the process is gone or its stat cannot be read. */
int proc_stat_read(pid_t pid, struct proc_stat *st);

/*
 * A thread's file ids (the one other change of privileges, per thread):
 * on a root process, this thread's filesystem uid and gid become uid:gid
 * (setfsuid and setfsgid are per thread on Linux), so what it opens is
 * opened as that account, until proc_fs_restore.  false when they could
 * not be set (refuse what was to follow).  Nothing changes for uid 0 or a
 * process that is not root.  proc_fs_restore always follows.
 */
struct fs_ids {
	bool changed;
	uid_t uid;
	gid_t gid;
};
bool proc_fs_as(uid_t uid, gid_t gid, struct fs_ids *save);
void proc_fs_restore(const struct fs_ids *save);

#endif
