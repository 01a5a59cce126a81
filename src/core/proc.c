/*
 * proc.c -- starting child processes and reading /proc/PID/stat (proc.h).
 *
 * Everything that allocates happens in prepare() before the fork; the child
 * side (child_run and what it calls) uses only async-signal-safe calls and
 * the memory prepare() filled in.
 */
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define DEFAULT_PATH "/bin:/usr/bin" /* execvp's, for an environment without PATH */
#define QUIET_AFTER_KILL_MS 1000     /* proc_capture: grandchildren may hold the pipes */
#define CHUNK 65536

/* The child's step that failed, as it reports it. */
enum step { STEP_STDIO = 1, STEP_RLIMIT, STEP_IDS, STEP_CWD, STEP_EXEC };

struct report {
	int step, errnum;
};

#define SRC_LEAVE (-1) /* the stream stays as inherited */
#define SRC_NULL (-2)  /* /dev/null, opened in the child */

/* Everything the child needs, made before the fork. */
struct prep {
	char **argv;     /* wrapper + args, NULL-terminated (NULL for fn) */
	char **sh_argv;  /* /bin/sh PATH ARGS...: a program without #! */
	char *path;      /* what to exec; NULL: not found, see lookup_errno */
	int lookup_errno;
	int src[3];      /* the fd that goes onto 0, 1, 2, or SRC_* */
	bool err_to_out; /* stderr follows stdout */
	int pipes[3][2]; /* -1 where no pipe */
	int notify[2];   /* wait_exec: the child's report, closed by exec */
	bool detached;
	pid_t parent; /* for the death signal check */
};

static const char *name_of(const struct proc *p, const struct prep *pp)
{
	if (pp->argv && pp->argv[0])
		return pp->argv[0];
	return p->fn ? "(function)" : "(nothing)";
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void prep_release(struct prep *pp)
{
	for (int i = 0; i < 3; i++) {
		close_fd(&pp->pipes[i][0]);
		close_fd(&pp->pipes[i][1]);
	}
	close_fd(&pp->notify[0]);
	close_fd(&pp->notify[1]);
	free(pp->argv);
	free(pp->sh_argv);
	free(pp->path);
	pp->argv = pp->sh_argv = NULL;
	pp->path = NULL;
}

/* execvp's search, done in the parent: the PATH of the child's environment. */
static char *path_lookup(const struct proc *p, const char *name, int *errnum)
{
	const char *search = env_get(&p->env, "PATH");
	if (!search)
		search = DEFAULT_PATH;
	bool denied = false;
	struct sbuf cand = SBUF_INIT;
	for (const char *d = search; *name;) {
		const char *end = strchrnul(d, ':');
		sbuf_reset(&cand);
		if (d[0] != '/' && p->cwd) /* relative entries follow the child's cwd */
			sbuf_addf(&cand, "%s/", p->cwd);
		if (end == d)
			sbuf_addch(&cand, '.');
		else
			sbuf_add(&cand, d, (size_t)(end - d));
		sbuf_addf(&cand, "/%s", name);
		struct stat st;
		if (stat(cand.buf, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(cand.buf, X_OK) == 0)
				return sbuf_detach(&cand);
			denied = true;
		}
		if (!*end)
			break;
		d = end + 1;
	}
	sbuf_release(&cand);
	*errnum = denied ? EACCES : ENOENT;
	return NULL;
}

static int make_pipe(int fds[2], struct tc_err *err)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return tc_error_errno(err, TC_ESYS, "pipe");
	/* the child's copies are dup'ed onto 0-2: keep the originals above them */
	for (int k = 0; k < 2; k++)
		if (fds[k] < 3) {
			int moved = fcntl(fds[k], F_DUPFD_CLOEXEC, 3);
			if (moved < 0)
				return tc_error_errno(err, TC_ESYS, "fcntl");
			close(fds[k]);
			fds[k] = moved;
		}
	return 0;
}

static int prepare(struct proc *p, struct prep *pp, bool detached, struct tc_err *err)
{
	memset(pp, 0, sizeof(*pp));
	for (int i = 0; i < 3; i++)
		pp->pipes[i][0] = pp->pipes[i][1] = -1;
	pp->notify[0] = pp->notify[1] = -1;
	pp->detached = detached;
	p->pid = -1;
	p->exec_errno = 0;
	size_t n = p->wrapper.nr + p->args.nr;
	if (!p->fn && !n)
		return tc_error(err, TC_EUSAGE, "proc: no program to run");
	if (p->fn && n)
		return tc_error(err, TC_EUSAGE, "proc: a function child takes no argv");
	const struct proc_io *io[3] = { &p->in, &p->out, &p->err };
	if (p->in.how == PROC_IO_STDOUT || p->out.how == PROC_IO_STDOUT)
		return tc_error(err, TC_EUSAGE, "proc: only stderr can follow stdout");
	for (int i = 0; i < 3; i++)
		if (io[i]->how == PROC_IO_FD && io[i]->fd < 0)
			return tc_error(err, TC_EUSAGE, "proc: stream %d has no fd", i);
	if (!p->fn) {
		pp->argv = xcalloc(n + 1, sizeof(char *));
		memcpy(pp->argv, p->wrapper.v, p->wrapper.nr * sizeof(char *));
		memcpy(pp->argv + p->wrapper.nr, p->args.v, p->args.nr * sizeof(char *));
		const char *name = pp->argv[0];
		pp->path = strchr(name, '/') ? xstrdup(name) : path_lookup(p, name, &pp->lookup_errno);
		if (pp->path) {
			pp->sh_argv = xcalloc(n + 2, sizeof(char *));
			pp->sh_argv[0] = "/bin/sh";
			pp->sh_argv[1] = pp->path;
			memcpy(pp->sh_argv + 2, pp->argv + 1, (n - 1) * sizeof(char *));
		}
	}
	int rc = 0;
	for (int i = 0; i < 3 && !rc; i++) {
		switch (io[i]->how) {
		case PROC_IO_INHERIT:
			pp->src[i] = SRC_LEAVE;
			break;
		case PROC_IO_NULL:
			pp->src[i] = SRC_NULL;
			break;
		case PROC_IO_FD:
			pp->src[i] = io[i]->fd;
			break;
		case PROC_IO_PIPE:
			rc = make_pipe(pp->pipes[i], err);
			/* stdin: the child reads [0]; stdout, stderr: the child writes [1] */
			pp->src[i] = pp->pipes[i][i == 0 ? 0 : 1];
			break;
		case PROC_IO_STDOUT:
			pp->src[i] = SRC_LEAVE;
			pp->err_to_out = true;
			break;
		}
	}
	if (!rc && p->wait_exec && !p->fn)
		rc = make_pipe(pp->notify, err);
	pp->parent = getpid();
	return rc;
}

/* ---- the child: async-signal-safe from here to exec ---- */

static void put(char *buf, size_t *len, size_t cap, const char *s)
{
	while (*s && *len + 1 < cap)
		buf[(*len)++] = *s++;
}

static void put_num(char *buf, size_t *len, size_t cap, unsigned long v)
{
	char d[24];
	int n = 0;
	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v && n < (int)sizeof(d));
	while (n > 0 && *len + 1 < cap)
		buf[(*len)++] = d[--n];
}

static _Noreturn void child_fail(const struct proc *p, const struct prep *pp, int step, int e)
{
	if (pp->notify[1] >= 0) {
		struct report r = { step, e };
		/* the parent reads EOF instead when this fails: it still sees exit 127 */
		if (write(pp->notify[1], &r, sizeof(r)) < 0)
			_exit(127);
		_exit(127);
	}
	char msg[1024];
	size_t n = 0;
	put(msg, &n, sizeof(msg), "trainctl: ");
	switch (step) {
	case STEP_STDIO:
		put(msg, &n, sizeof(msg), "cannot set up the standard streams");
		break;
	case STEP_RLIMIT:
		put(msg, &n, sizeof(msg), "cannot set a resource limit");
		break;
	case STEP_IDS:
		put(msg, &n, sizeof(msg), p->set_uid ? "cannot switch to uid " : "cannot switch to gid ");
		put_num(msg, &n, sizeof(msg), p->set_uid ? (unsigned long)p->uid : (unsigned long)p->gid);
		break;
	case STEP_CWD:
		put(msg, &n, sizeof(msg), "cannot enter workdir '");
		put(msg, &n, sizeof(msg), p->cwd);
		put(msg, &n, sizeof(msg), "'");
		break;
	default:
		put(msg, &n, sizeof(msg), "cannot run '");
		put(msg, &n, sizeof(msg), pp->argv[0]);
		put(msg, &n, sizeof(msg), "'");
		break;
	}
	/* strerrordesc_np: strerror's C-locale text from a constant table, no locale lookup */
	const char *desc = strerrordesc_np(e);
	put(msg, &n, sizeof(msg), ": ");
	put(msg, &n, sizeof(msg), desc ? desc : "unknown error");
	msg[n++] = '\n';
	if (write(STDERR_FILENO, msg, n) < 0)
		_exit(127);
	_exit(127);
}

/* Close every fd from 3 up except keep (-1: none). */
static void close_others(int keep)
{
	int rc;
	if (keep >= 3) {
		rc = keep > 3 ? close_range(3, (unsigned int)keep - 1, 0) : 0;
		if (!rc)
			rc = close_range((unsigned int)keep + 1, ~0U, 0);
	} else {
		rc = close_range(3, ~0U, 0);
	}
	if (!rc)
		return;
	/* a kernel without close_range (before 5.9) */
	struct rlimit rl;
	long top = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < top)
		top = (long)rl.rlim_cur;
	for (long fd = 3; fd < top; fd++)
		if (fd != keep)
			close((int)fd);
}

static void child_stdio(const struct proc *p, const struct prep *pp)
{
	int src[3] = { pp->src[0], pp->src[1], pp->src[2] };
	int devnull = -1;
	for (int i = 0; i < 3; i++)
		if (src[i] == SRC_NULL) {
			if (devnull < 0 && (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
				child_fail(p, pp, STEP_STDIO, errno);
			src[i] = devnull;
		}
	/* a source among 0-2 could be overwritten before its turn: move it up first */
	for (int i = 0; i < 3; i++)
		if (src[i] >= 0 && src[i] < 3) {
			int old = src[i], moved = fcntl(old, F_DUPFD_CLOEXEC, 3);
			if (moved < 0)
				child_fail(p, pp, STEP_STDIO, errno);
			for (int k = 0; k < 3; k++)
				if (src[k] == old)
					src[k] = moved;
		}
	for (int i = 0; i < 3; i++)
		if (src[i] >= 0 && dup2(src[i], i) < 0)
			child_fail(p, pp, STEP_STDIO, errno);
	if (pp->err_to_out && dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
		child_fail(p, pp, STEP_STDIO, errno);
}

static _Noreturn void child_run(const struct proc *p, const struct prep *pp)
{
	if (!pp->detached && p->group == PROC_GROUP_NEW)
		setpgid(0, 0); /* the parent does it too; whoever runs first wins */
	else if (!pp->detached && p->group == PROC_SESSION_NEW)
		setsid();
	if (p->death_sig && !pp->detached) {
		prctl(PR_SET_PDEATHSIG, p->death_sig);
		if (getppid() != pp->parent) { /* the parent died before the prctl */
			kill(getpid(), p->death_sig);
			_exit(128 + p->death_sig);
		}
	}
	for (int sig = 1; sig < 64; sig++) {
		struct sigaction cur;
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (p->ignore_sigs & PROC_SIG(sig))
			signal(sig, SIG_IGN);
		else if (p->default_sigs & PROC_SIG(sig))
			signal(sig, SIG_DFL);
		else if (sigaction(sig, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN &&
			 cur.sa_handler != SIG_DFL)
			signal(sig, SIG_DFL); /* as exec will: the parent's handler means nothing here */
	}
	/* signals were blocked since before the fork (fork_blocked): one that came
	 * in between is delivered now, to the dispositions just set */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	child_stdio(p, pp);
	close_others(pp->notify[1]);
	for (size_t i = 0; i < p->nrlimits; i++)
		if (setrlimit(p->rlimits[i].resource, &p->rlimits[i].lim) < 0)
			child_fail(p, pp, STEP_RLIMIT, errno);
	if (p->set_groups && setgroups(p->ngroups, p->groups) < 0)
		child_fail(p, pp, STEP_IDS, errno);
	if (p->set_gid && setgid(p->gid) < 0)
		child_fail(p, pp, STEP_IDS, errno);
	if (p->set_uid && setuid(p->uid) < 0)
		child_fail(p, pp, STEP_IDS, errno);
	if (p->cwd && chdir(p->cwd) < 0)
		child_fail(p, pp, STEP_CWD, errno);
	if (p->fn)
		_exit(p->fn(p->fn_arg));
	if (!pp->path)
		child_fail(p, pp, STEP_EXEC, pp->lookup_errno);
	execve(pp->path, pp->argv, p->env.v);
	int e = errno;
	if (e == ENOEXEC) /* no #!: a shell script, as execvp runs it */
		execve("/bin/sh", pp->sh_argv, p->env.v);
	child_fail(p, pp, STEP_EXEC, e);
}

/* ---- the parent ---- */

/*
 * fork() with every signal blocked until the child has set its own
 * dispositions (child_run): a signal sent to the new pid before that would
 * run the parent's handler in the child and be lost -- a server's stop of a
 * supervisor that had not reached exec yet ran the job to its end.
 */
static pid_t fork_blocked(void)
{
	sigset_t all, old;
	sigfillset(&all);
	int masked = pthread_sigmask(SIG_BLOCK, &all, &old);
	pid_t pid = fork();
	if (pid != 0 && masked == 0) {
		int e = errno;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		errno = e;
	}
	return pid;
}

static int report_error(struct proc *p, const struct prep *pp, const struct report *r,
			struct tc_err *err)
{
	p->exec_errno = r->errnum;
	errno = r->errnum;
	switch (r->step) {
	case STEP_STDIO:
		return tc_error_errno(err, TC_ESYS, "cannot start '%s': standard streams", pp->argv[0]);
	case STEP_RLIMIT:
		return tc_error_errno(err, TC_ESYS, "cannot start '%s': resource limit", pp->argv[0]);
	case STEP_IDS:
		return tc_error_errno(err, TC_ESYS, "cannot start '%s' as uid %u gid %u", pp->argv[0],
				      (unsigned)p->uid, (unsigned)p->gid);
	case STEP_CWD:
		return tc_error_errno(err, TC_ESYS, "cannot enter '%s' to run '%s'", p->cwd,
				      pp->argv[0]);
	default:
		return tc_error_errno(err, TC_ESYS, "cannot run '%s'", pp->argv[0]);
	}
}

/* After the fork: hand the pipe ends over, and with wait_exec wait for the exec. */
static int finish_start(struct proc *p, struct prep *pp, pid_t pid, struct tc_err *err)
{
	struct proc_io *io[3] = { &p->in, &p->out, &p->err };
	for (int i = 0; i < 3; i++) {
		if (pp->pipes[i][0] < 0)
			continue;
		int mine = i == 0 ? 1 : 0;
		close_fd(&pp->pipes[i][1 - mine]);
		io[i]->fd = pp->pipes[i][mine];
		pp->pipes[i][mine] = -1;
	}
	if (!pp->detached && p->group == PROC_GROUP_NEW)
		setpgid(pid, pid); /* also in the child: whoever runs first wins the race */
	int rc = 0;
	if (pp->notify[0] >= 0) {
		close_fd(&pp->notify[1]);
		struct report r;
		ssize_t got;
		while ((got = read(pp->notify[0], &r, sizeof(r))) < 0 && errno == EINTR)
			;
		if (got == (ssize_t)sizeof(r)) {
			/* it exits 127 at once; detached, init reaps it */
			while (!pp->detached && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			for (int i = 0; i < 3; i++)
				if (io[i]->how == PROC_IO_PIPE)
					close_fd(&io[i]->fd);
			rc = report_error(p, pp, &r, err);
			pid = -1;
		}
	}
	p->pid = pid;
	prep_release(pp);
	return rc;
}

int proc_start(struct proc *p, struct tc_err *err)
{
	struct prep pp;
	int rc = prepare(p, &pp, false, err);
	if (!rc && p->wait_exec && !p->fn && !pp.path) {
		/* not found: nothing to start */
		struct report r = { STEP_EXEC, pp.lookup_errno };
		rc = report_error(p, &pp, &r, err);
	}
	if (rc) {
		prep_release(&pp);
		return rc;
	}
	pid_t pid = fork_blocked();
	if (pid < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot start '%s'", name_of(p, &pp));
		prep_release(&pp);
		return rc;
	}
	if (pid == 0)
		child_run(p, &pp);
	return finish_start(p, &pp, pid, err);
}

int proc_start_detached(struct proc *p, struct tc_err *err)
{
	struct prep pp;
	int pidp[2] = { -1, -1 };
	int rc = prepare(p, &pp, true, err);
	if (!rc)
		rc = make_pipe(pidp, err);
	if (rc) {
		prep_release(&pp);
		return rc;
	}
	pid_t mid = fork_blocked(); /* the intermediate keeps them blocked for the child */
	if (mid < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot start '%s'", name_of(p, &pp));
		close_fd(&pidp[0]);
		close_fd(&pidp[1]);
		prep_release(&pp);
		return rc;
	}
	if (mid == 0) {
		/* the intermediate: a new session, the child, its pid to the parent, gone */
		setsid();
		pp.parent = getpid();
		pid_t child = fork();
		if (child == 0)
			child_run(p, &pp);
		int32_t v = child > 0 ? (int32_t)child : -(int32_t)errno;
		ssize_t w = write(pidp[1], &v, sizeof(v));
		_exit(w == (ssize_t)sizeof(v) && child > 0 ? 0 : 1);
	}
	close_fd(&pidp[1]);
	int32_t v = 0;
	ssize_t r;
	while ((r = read(pidp[0], &v, sizeof(v))) < 0 && errno == EINTR)
		;
	int saved = errno;
	close_fd(&pidp[0]);
	while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
		;
	if (r != (ssize_t)sizeof(v) || v <= 0) {
		errno = r == (ssize_t)sizeof(v) && v < 0 ? -v : r < 0 ? saved : ECHILD;
		rc = tc_error_errno(err, TC_ESYS, "cannot start '%s'", name_of(p, &pp));
		prep_release(&pp);
		return rc;
	}
	return finish_start(p, &pp, (pid_t)v, err);
}

int proc_start_guard(struct proc *p, int *fd, struct tc_err *err)
{
	/* own group, deaf to the terminal's signals: it must outlive us */
	p->group = PROC_GROUP_NEW;
	p->ignore_sigs |= PROC_SIG(SIGINT) | PROC_SIG(SIGTERM) | PROC_SIG(SIGHUP) | PROC_SIG(SIGQUIT);
	/* holding none of our streams, so nobody waits on it for their EOF */
	p->in.how = PROC_IO_PIPE;
	p->out.how = p->err.how = PROC_IO_NULL;
	int rc = proc_start(p, err);
	if (!rc) {
		*fd = p->in.fd;
		p->in.fd = -1;
	}
	return rc;
}

int proc_guard_end(int *fd, pid_t pid, const void *msg, size_t n)
{
	if (*fd < 0)
		return 0;
	int rc = write_all(*fd, msg, n) < 0 ? -1 : 0;
	int saved = errno;
	close(*fd);
	*fd = -1;
	while (pid > 0 && waitpid(pid, NULL, WNOHANG) < 0 && errno == EINTR)
		;
	errno = saved;
	return rc;
}

int proc_wait(struct proc *p, int *status, struct tc_err *err)
{
	int st = 0;
	pid_t r;
	if (p->pid <= 0)
		return tc_error(err, TC_EUSAGE, "proc: no child to wait for");
	while ((r = waitpid(p->pid, &st, 0)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return tc_error_errno(err, TC_ESYS, "waitpid %ld", (long)p->pid);
	*status = st;
	return 0;
}

void proc_clear(struct proc *p)
{
	strvec_clear(&p->args);
	strvec_clear(&p->wrapper);
	strvec_clear(&p->env);
	struct proc_io *io[3] = { &p->in, &p->out, &p->err };
	for (int i = 0; i < 3; i++)
		if (io[i]->how == PROC_IO_PIPE)
			close_fd(&io[i]->fd);
}

void proc_env_inherit(struct strvec *env)
{
	for (char **e = environ; *e; e++)
		strvec_push(env, *e);
}

/* ---- the wait status ---- */

struct proc_exit proc_exit_of(int status)
{
	struct proc_exit x = { false, -1, 0 };
	if (WIFEXITED(status)) {
		x.exited = true;
		x.code = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		x.sig = WTERMSIG(status);
	}
	return x;
}

bool proc_exit_ok(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void proc_describe_exit(struct sbuf *sb, int status)
{
	if (WIFEXITED(status))
		sbuf_addf(sb, "exited with code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		sbuf_addf(sb, "was killed by signal %d (%s)", WTERMSIG(status),
			  strsignal(WTERMSIG(status)));
	else
		sbuf_addf(sb, "ended with status %d", status);
}

void proc_describe_stop_signal(struct sbuf *sb, int sig)
{
	switch (sig) {
	case SIGINT: sbuf_adds(sb, "SIGINT, Ctrl-C"); return;
	case SIGTERM: sbuf_adds(sb, "SIGTERM, from trainctl stop or kill"); return;
	case SIGHUP: sbuf_adds(sb, "SIGHUP, the terminal closed"); return;
	default: break;
	}
	const char *abbrev = sigabbrev_np(sig);
	if (abbrev)
		sbuf_addf(sb, "SIG%s", abbrev);
	else
		sbuf_addf(sb, "signal %d", sig);
}

/* ---- run and capture ---- */

/* Read what is there; false at EOF or an error (the fd is closed then). */
static bool drain(int *fd, struct sbuf *dst, size_t max)
{
	char buf[CHUNK];
	ssize_t n = read(*fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) {
		close_fd(fd);
		return false;
	}
	size_t keep = (size_t)n;
	if (max)
		keep = dst->len >= max ? 0 : max - dst->len < keep ? max - dst->len : keep;
	sbuf_add(dst, buf, keep);
	return true;
}

static void feed(int *fd, const char *input, size_t len, size_t *off)
{
	size_t left = len - *off;
	ssize_t w = write(*fd, input + *off, left < CHUNK ? left : CHUNK);
	if (w > 0)
		*off += (size_t)w;
	else if (w < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (w <= 0 || *off == len)
		close_fd(fd); /* done, or the child stopped reading: fine */
}

static void pump(struct proc *p, struct proc_capture *c)
{
	size_t in_len = c->input ? strlen(c->input) : 0, in_off = 0;
	if (p->in.how == PROC_IO_PIPE && c->input && !in_len)
		close_fd(&p->in.fd);
	int64_t deadline = c->timeout_ms > 0 ? now_mono_ms() + c->timeout_ms : 0, quiet_until = 0;
	for (;;) {
		struct pollfd pf[3];
		int *fds[3];
		int n = 0;
		if (c->input && p->in.fd >= 0) {
			pf[n] = (struct pollfd){ p->in.fd, POLLOUT, 0 };
			fds[n++] = &p->in.fd;
		}
		if (c->out && p->out.fd >= 0) {
			pf[n] = (struct pollfd){ p->out.fd, POLLIN, 0 };
			fds[n++] = &p->out.fd;
		}
		if (c->err && p->err.fd >= 0) {
			pf[n] = (struct pollfd){ p->err.fd, POLLIN, 0 };
			fds[n++] = &p->err.fd;
		}
		if (!n)
			return;
		int64_t now = now_mono_ms();
		int timeout = -1;
		if (deadline && !c->timed_out && now >= deadline) {
			kill(p->pid, SIGKILL);
			c->timed_out = true;
			quiet_until = now + QUIET_AFTER_KILL_MS;
		}
		if (c->timed_out) {
			if (now >= quiet_until)
				return;
			timeout = (int)(quiet_until - now);
		} else if (deadline) {
			timeout = (int)(deadline - now);
		}
		int r = poll(pf, (nfds_t)n, timeout);
		if (r < 0 && errno != EINTR)
			return;
		for (int i = 0; r > 0 && i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (fds[i] == &p->in.fd)
				feed(fds[i], c->input, in_len, &in_off);
			else if (drain(fds[i], fds[i] == &p->out.fd ? c->out : c->err, c->max) &&
				 c->timed_out)
				quiet_until = now_mono_ms() + QUIET_AFTER_KILL_MS;
		}
	}
}

int proc_capture(struct proc *p, struct proc_capture *c, struct tc_err *err)
{
	if (c->input)
		p->in.how = PROC_IO_PIPE;
	if (c->out)
		p->out.how = PROC_IO_PIPE;
	if (c->err)
		p->err.how = PROC_IO_PIPE;
	c->status = 0;
	c->timed_out = false;
	int rc = proc_start(p, err);
	if (rc)
		return rc;
	/*
	 * A child that exits without reading all its input is fine: SIGPIPE is
	 * blocked in this thread while feeding it and a pending one taken back.
	 */
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	bool masked = c->input && pthread_sigmask(SIG_BLOCK, &pipe_set, &old) == 0;
	if (p->in.fd >= 0 && c->input && fcntl(p->in.fd, F_SETFL, O_NONBLOCK) < 0)
		close_fd(&p->in.fd); /* cannot feed it without blocking: it gets EOF */
	pump(p, c);
	if (masked) {
		if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
			struct timespec zero = { 0, 0 };
			while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
				;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	close_fd(&p->in.fd);
	if (c->out)
		close_fd(&p->out.fd);
	if (c->err)
		close_fd(&p->err.fd);
	return proc_wait(p, &c->status, err);
}

/* ---- stopping ---- */

#define STOP_STEP_MS 20

static void stop_signal(const struct proc_stopping *s, int sig)
{
	/* a group whose leader is reaped may still hold the rest: kill reaches them too */
	kill(s->group ? -s->pid : s->pid, sig);
}

void proc_stop_all(struct proc_stopping *v, size_t n, int sig, int grace_ms,
		   void (*ended)(void *arg, size_t i, int status), void *arg)
{
	size_t left = 0;
	for (size_t i = 0; i < n; i++) {
		v[i].status = 0;
		v[i].killed = false;
		if (v[i].pid > 0) {
			stop_signal(&v[i], sig);
			left++;
		}
	}
	int64_t kill_at = grace_ms < 0 ? -1 : now_mono_ms() + grace_ms;
	bool killed = false;
	while (left) {
		for (size_t i = 0; i < n; i++) {
			if (v[i].pid <= 0)
				continue;
			int status = 0;
			pid_t r = waitpid(v[i].pid, &status, WNOHANG);
			if (r == 0 || (r < 0 && errno == EINTR))
				continue;
			/* reaped, or not ours to wait for (ECHILD): it has ended for us */
			v[i].status = r == v[i].pid ? status : 0;
			v[i].pid = -1;
			left--;
			if (ended)
				ended(arg, i, v[i].status);
		}
		if (!left)
			break;
		if (!killed && kill_at >= 0 && now_mono_ms() >= kill_at) {
			for (size_t i = 0; i < n; i++)
				if (v[i].pid > 0) {
					stop_signal(&v[i], SIGKILL);
					v[i].killed = true;
				}
			killed = true;
		}
		struct timespec ts = { 0, STOP_STEP_MS * 1000L * 1000L };
		nanosleep(&ts, NULL);
	}
}

bool proc_stop(struct proc *p, int grace_ms, int *status)
{
	struct proc_stopping s = { .pid = p->pid, .group = p->group != PROC_GROUP_SAME };
	proc_stop_all(&s, 1, SIGTERM, grace_ms, NULL, NULL);
	p->pid = -1;
	if (status)
		*status = s.status;
	return s.killed;
}

/* ---- /proc/PID/stat ---- */

int proc_stat_read(pid_t pid, struct proc_stat *st)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf) - 1)
			break;
	}
	close(fd);
	buf[len] = '\0';
	/* comm may hold spaces and parens: the fields restart after the last ')' */
	char *q = strrchr(buf, ')');
	if (!q || q[1] != ' ' || !q[2])
		return -1;
	q += 2;
	memset(st, 0, sizeof(*st));
	st->state = *q;
	long long f[25] = { 0 };
	int k = 4;
	for (q = strchr(q, ' '); q && k <= 24; k++) {
		char *end;
		f[k] = strtoll(q + 1, &end, 10);
		if (end == q + 1)
			return -1;
		q = strchr(end, ' ');
	}
	if (k <= 24)
		return -1;
	st->ppid = (pid_t)f[4];
	st->pgrp = (pid_t)f[5];
	st->session = (pid_t)f[6];
	st->utime = (unsigned long long)f[14];
	st->stime = (unsigned long long)f[15];
	st->start_ticks = (unsigned long long)f[22];
	st->rss_pages = f[24];
	return 0;
}

/* ---- a thread's file ids ---- */

bool proc_fs_as(uid_t uid, gid_t gid, struct fs_ids *save)
{
	memset(save, 0, sizeof(*save));
	if (geteuid() != 0 || uid == 0)
		return true;
	save->gid = (gid_t)setfsgid(gid);
	save->uid = (uid_t)setfsuid(uid);
	save->changed = true;
	/* setfsuid says the old id whatever happens: ask again to know it took */
	return (uid_t)setfsuid((uid_t)-1) == uid && (gid_t)setfsgid((gid_t)-1) == gid;
}

void proc_fs_restore(const struct fs_ids *save)
{
	if (!save->changed)
		return;
	setfsuid(save->uid);
	setfsgid(save->gid);
}
