/*
 * exec.c -- a command in a running worker's environment (exec.h): find the
 * rank's worker, read what /proc says of it, run the command there.
 */
#include "jobs/exec.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/state.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int exec_pick_worker(json_t *job, long rank, pid_t *pid, int *attempt, struct tc_err *err)
{
	const char *id = json_string_value(json_object_get(job, "id"));
	const char *state = json_string_value(json_object_get(job, "state"));
	json_int_t world = json_integer_value(json_object_get(job, "workers"));
	enum job_state s;
	if (!id || !state || !job_state_parse(state, strlen(state), &s))
		return tc_error(err, TC_EBACKEND, "exec: the job's record has no id or state");
	if (rank < 0)
		rank = 0;
	if (job_state_terminal(s))
		return tc_error(err, TC_EUSAGE, "exec: job %s has ended (%s): nothing runs to exec into",
				id, state);
	if (world > 0 && rank >= world) {
		if (world == 1)
			return tc_error(err, TC_EUSAGE, "exec: job %s has one rank, 0 (not %ld)", id, rank);
		return tc_error(err, TC_EUSAGE, "exec: job %s has ranks 0-%lld (not %ld)", id,
				(long long)world - 1, rank);
	}
	/* the newest attempt's row of the rank; it must not have ended */
	json_t *hist = json_object_get(job, "workers_history"), *w, *best = NULL;
	size_t i;
	json_int_t best_attempt = -1;
	json_array_foreach(hist, i, w) {
		json_int_t a = json_integer_value(json_object_get(w, "attempt"));
		if (json_integer_value(json_object_get(w, "rank")) == rank && a >= best_attempt) {
			best = w;
			best_attempt = a;
		}
	}
	if (!best || !json_is_null(json_object_get(best, "ended")) ||
	    json_integer_value(json_object_get(best, "pid")) <= 0)
		return tc_error(err, TC_EUSAGE,
				"exec: job %s is %s: rank %ld has no running worker now (try again once it runs)",
				id, state, rank);
	*pid = (pid_t)json_integer_value(json_object_get(best, "pid"));
	if (attempt)
		*attempt = (int)best_attempt;
	return 0;
}

/* The value of key in the NUL-separated environ text, or NULL. */
static const char *environ_get(const struct sbuf *text, const char *key)
{
	size_t klen = strlen(key);
	for (size_t off = 0; off < text->len;) {
		const char *kv = text->buf + off;
		size_t n = strnlen(kv, text->len - off);
		if (n > klen && !strncmp(kv, key, klen) && kv[klen] == '=')
			return kv + klen + 1;
		off += n + 1;
	}
	return NULL;
}

/* Is the NUL-separated environ text that of job_id's rank? */
static bool environ_is_worker(const struct sbuf *text, const char *job_id, int rank)
{
	const char *j = environ_get(text, "TRAINCTL_JOB_ID"), *r = environ_get(text, "RANK");
	long got;
	return j && r && !strcmp(j, job_id) && parse_long(r, 0, INT_MAX, &got) && got == rank;
}

/* The numbers of a "Name:\t1\t2 ..." line of /proc/PID/status (heap *v). */
static int status_numbers(const char *status, const char *name, unsigned long **v, size_t *n)
{
	size_t nlen = strlen(name);
	*v = NULL;
	*n = 0;
	for (const char *line = status; line && *line;) {
		const char *end = strchr(line, '\n');
		if (!strncmp(line, name, nlen) && line[nlen] == ':') {
			const char *p = line + nlen + 1;
			size_t alloc = 0;
			for (;;) {
				while (*p == ' ' || *p == '\t')
					p++;
				if (!*p || *p == '\n')
					break;
				char *e;
				errno = 0;
				unsigned long x = strtoul(p, &e, 10);
				if (e == p || errno)
					return -1;
				if (*n == alloc) {
					alloc = alloc ? 2 * alloc : 8;
					*v = xrealloc(*v, alloc * sizeof(**v));
				}
				(*v)[(*n)++] = x;
				p = e;
			}
			return 0;
		}
		line = end ? end + 1 : NULL;
	}
	return -1;
}

/* The worker's account: real uid and gid, supplementary groups. */
static int read_account(pid_t pid, struct exec_target *t, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	unsigned long *uids = NULL, *gids = NULL, *groups = NULL;
	size_t nu = 0, ng = 0, ngr = 0;
	sbuf_addf(&path, "/proc/%d/status", (int)pid);
	int rc = read_file(path.buf, &text, err);
	if (!rc && (status_numbers(text.buf, "Uid", &uids, &nu) || nu < 1 ||
		    status_numbers(text.buf, "Gid", &gids, &ng) || ng < 1 ||
		    status_numbers(text.buf, "Groups", &groups, &ngr)))
		rc = tc_error(err, TC_ESYS, "exec: cannot read the account of pid %d in %s", (int)pid,
			      path.buf);
	if (!rc) {
		t->uid = (uid_t)uids[0];
		t->gid = (gid_t)gids[0];
		t->groups = xcalloc(ngr ? ngr : 1, sizeof(*t->groups));
		for (size_t i = 0; i < ngr; i++)
			t->groups[i] = (gid_t)groups[i];
		t->ngroups = ngr;
	}
	free(uids);
	free(gids);
	free(groups);
	sbuf_release(&path);
	sbuf_release(&text);
	return rc;
}

int exec_target_read(pid_t pid, const char *job_id, int rank, struct exec_target *t,
		     struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	struct tc_err ignored = TC_ERR_INIT;
	int rc = 0;
	t->job_id = xstrdup(job_id);
	t->rank = rank;
	t->pid = pid;
	if ((rc = read_account(pid, t, &ignored))) {
		rc = tc_error(err, TC_EUSAGE,
			      "exec: rank %d of job %s (pid %d) does not run on this host: exec works on the "
			      "job's host only",
			      rank, job_id, (int)pid);
		goto out;
	}
	/* (1): a user enters only its own workers; root drops to theirs */
	uid_t me = getuid();
	if (me != 0 && t->uid != me) {
		rc = tc_error(err, TC_EUSAGE,
			      "exec: rank %d of job %s runs as uid %u: only that user or root may exec into it",
			      rank, job_id, (unsigned)t->uid);
		goto out;
	}
	sbuf_addf(&path, "/proc/%d/environ", (int)pid);
	if (read_file(path.buf, &text, &ignored) || !environ_is_worker(&text, job_id, rank)) {
		rc = tc_error(err, TC_EUSAGE,
			      "exec: pid %d is not rank %d of job %s on this host (it ended, or the job runs "
			      "elsewhere): exec works on the job's host only",
			      (int)pid, rank, job_id);
		goto out;
	}
	for (size_t off = 0; off < text.len;) {
		const char *kv = text.buf + off;
		size_t n = strnlen(kv, text.len - off);
		if (n && strchr(kv, '='))
			strvec_push(&t->env, kv);
		off += n + 1;
	}
	sbuf_reset(&path);
	sbuf_addf(&path, "/proc/%d/cwd", (int)pid);
	struct sbuf cwd = SBUF_INIT;
	for (size_t cap = 256;; cap *= 2) {
		sbuf_grow(&cwd, cap);
		ssize_t n = readlink(path.buf, cwd.buf, cap);
		if (n < 0) {
			sbuf_release(&cwd);
			rc = tc_error_errno(err, TC_EUSAGE, "exec: cannot read the working folder of pid %d",
					    (int)pid);
			goto out;
		}
		if ((size_t)n < cap) {
			cwd.len = (size_t)n; /* sbuf_setlen only shortens */
			cwd.buf[n] = '\0';
			break;
		}
	}
	t->cwd = sbuf_detach(&cwd);
out:
	tc_err_release(&ignored);
	sbuf_release(&path);
	sbuf_release(&text);
	return rc;
}

int exec_find_child(pid_t parent, const char *job_id, int rank, pid_t *pid, struct tc_err *err)
{
	DIR *d = opendir("/proc");
	if (!d)
		return tc_error_errno(err, TC_ESYS, "exec: cannot list /proc");
	*pid = -1;
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	for (struct dirent *e; *pid < 0 && (e = readdir(d));) {
		long p;
		struct proc_stat ps;
		if (!parse_long(e->d_name, 1, INT_MAX, &p) || proc_stat_read((pid_t)p, &ps) ||
		    ps.ppid != parent || ps.state == 'Z')
			continue;
		sbuf_reset(&path);
		sbuf_reset(&text);
		sbuf_addf(&path, "/proc/%ld/environ", p);
		struct tc_err ignored = TC_ERR_INIT;
		if (!read_file(path.buf, &text, &ignored) && environ_is_worker(&text, job_id, rank))
			*pid = (pid_t)p;
		tc_err_release(&ignored);
	}
	closedir(d);
	sbuf_release(&path);
	sbuf_release(&text);
	if (*pid < 0)
		return tc_error(err, TC_EUSAGE, "rank %d of job %s has no running worker on this host now",
				rank, job_id);
	return 0;
}

/* pid's command line, one argument per entry (empty when it cannot be read) */
static void read_cmdline(pid_t pid, struct strvec *args)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	struct tc_err ignored = TC_ERR_INIT;
	sbuf_addf(&path, "/proc/%d/cmdline", (int)pid);
	if (!read_file(path.buf, &text, &ignored))
		for (size_t off = 0; off < text.len;) {
			const char *arg = text.buf + off;
			strvec_push(args, arg);
			off += strnlen(arg, text.len - off) + 1;
		}
	tc_err_release(&ignored);
	sbuf_release(&path);
	sbuf_release(&text);
}

/* Is arg "--name=" and the container name of job_id's rank (container.h's scheme), any attempt? */
static const char *container_arg(const char *arg, const char *job_id, int rank)
{
	static const char pre[] = "--name=trainctl-";
	size_t jl = strlen(job_id);
	if (strncmp(arg, pre, sizeof(pre) - 1) || strncmp(arg + sizeof(pre) - 1, job_id, jl))
		return NULL;
	const char *p = arg + sizeof(pre) - 1 + jl, *q;
	if (strncmp(p, "-a", 2))
		return NULL;
	for (q = p + 2; *q >= '0' && *q <= '9'; q++)
		;
	long r;
	if (q == p + 2 || strncmp(q, "-r", 2) || !parse_long(q + 2, 0, INT_MAX, &r) || r != rank)
		return NULL;
	return arg + 7; /* the name */
}

/* The argument of args that starts with prefix, past it, or NULL. */
static const char *arg_value(const struct strvec *args, const char *prefix)
{
	size_t n = strlen(prefix);
	for (size_t i = 1; i < args->nr; i++)
		if (!strncmp(args->v[i], prefix, n))
			return args->v[i] + n;
	return NULL;
}

static const char *container_of(const struct strvec *args, const char *job_id, int rank)
{
	const char *name = NULL;
	for (size_t i = 1; !name && i < args->nr; i++)
		name = container_arg(args->v[i], job_id, rank);
	/* the client: `RUNTIME run ... --name=...` */
	return args->nr > 1 && !strcmp(args->v[1], "run") ? name : NULL;
}

int exec_find_container_child(pid_t parent, const char *job_id, int rank, pid_t *pid,
			      struct tc_err *err)
{
	DIR *d = opendir("/proc");
	if (!d)
		return tc_error_errno(err, TC_ESYS, "exec: cannot list /proc");
	*pid = -1;
	for (struct dirent *e; *pid < 0 && (e = readdir(d));) {
		long p;
		struct proc_stat ps;
		if (!parse_long(e->d_name, 1, INT_MAX, &p) || proc_stat_read((pid_t)p, &ps) ||
		    ps.ppid != parent || ps.state == 'Z')
			continue;
		struct strvec args = STRVEC_INIT;
		read_cmdline((pid_t)p, &args);
		if (container_of(&args, job_id, rank))
			*pid = (pid_t)p;
		strvec_clear(&args);
	}
	closedir(d);
	if (*pid < 0)
		return tc_error(err, TC_EUSAGE, "rank %d of job %s has no running container on this host now",
				rank, job_id);
	return 0;
}

int exec_container_client(pid_t pid, const char *job_id, int rank, bool tty,
			  struct exec_target *t, struct strvec *argv, struct tc_err *err)
{
	struct strvec args = STRVEC_INIT;
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	struct tc_err ignored = TC_ERR_INIT;
	const char *name = NULL;
	int rc = 0;
	t->job_id = xstrdup(job_id);
	t->rank = rank;
	t->pid = pid;
	read_cmdline(pid, &args);
	if (read_account(pid, t, &ignored) || !(name = container_of(&args, job_id, rank))) {
		rc = tc_error(err, TC_EUSAGE,
			      "exec: rank %d of job %s: pid %d is not the client of its container on this "
			      "host: exec works on the job's host only",
			      rank, job_id, (int)pid);
		goto out;
	}
	/* (1): the client runs as the supervisor's account, whose containers they are */
	if (getuid() != 0 && t->uid != getuid()) {
		rc = tc_error(err, TC_EUSAGE,
			      "exec: rank %d of job %s runs in a container of uid %u's runtime: only that "
			      "user or root may exec into it",
			      rank, job_id, (unsigned)t->uid);
		goto out;
	}
	sbuf_addf(&path, "/proc/%d/environ", (int)pid);
	if ((rc = read_file(path.buf, &text, err)))
		goto out;
	for (size_t off = 0; off < text.len;) {
		const char *kv = text.buf + off;
		size_t n = strnlen(kv, text.len - off);
		if (n && strchr(kv, '='))
			strvec_push(&t->env, kv);
		off += n + 1;
	}
	const char *user = arg_value(&args, "--user="), *wd = arg_value(&args, "--workdir=");
	strvec_push(argv, args.v[0]);
	strvec_push(argv, "exec");
	strvec_push(argv, "-i");
	if (tty)
		strvec_push(argv, "-t");
	/* inside, the container's user: the job's (a rootless one: the client's own) */
	if (user)
		strvec_pushf(argv, "--user=%s", user);
	else
		strvec_pushf(argv, "--user=%u:%u", (unsigned)t->uid, (unsigned)t->gid);
	if (wd)
		strvec_pushf(argv, "--workdir=%s", wd);
	strvec_push(argv, name);
out:
	tc_err_release(&ignored);
	strvec_clear(&args);
	sbuf_release(&path);
	sbuf_release(&text);
	return rc;
}

/* The running command, for the handlers that pass signals on. */
static volatile sig_atomic_t child_pid;

static void pass_on(int sig)
{
	int saved = errno;
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
	errno = saved;
}

/* Is the watched process there (a zombie is gone: it only waits to be reaped)? */
static bool watched_alive(const struct exec_opts *o)
{
	struct proc_stat ps;
	return proc_alive(o->watch_pid, o->watch_ticks) && proc_stat_read(o->watch_pid, &ps) == 0 &&
	       ps.state != 'Z';
}

/*
 * Signal every process of our group but us: the command and what it
 * started (an ssh session's command runs in the session's group, which it
 * must keep: the terminal's foreground group is that one).
 */
static void signal_our_group(int sig)
{
	DIR *d = opendir("/proc");
	pid_t me = getpid(), grp = getpgrp();
	for (struct dirent *e; d && (e = readdir(d));) {
		long p;
		struct proc_stat ps;
		if (parse_long(e->d_name, 1, INT_MAX, &p) && (pid_t)p != me &&
		    proc_stat_read((pid_t)p, &ps) == 0 && ps.pgrp == grp)
			kill((pid_t)p, sig);
	}
	if (d)
		closedir(d);
}

/* Wait for p, polling watch (every 200 ms) when it is set. */
static int wait_watching(struct proc *p, const struct exec_opts *o, int *status,
			 struct tc_err *err)
{
	if (!o || o->watch_pid <= 0)
		return proc_wait(p, status, err);
	for (;;) {
		pid_t r = waitpid(p->pid, status, WNOHANG);
		if (r == p->pid) {
			p->pid = -1;
			return 0;
		}
		if (r < 0 && errno != EINTR)
			return tc_error_errno(err, TC_ESYS, "exec: cannot wait for the command");
		if (!watched_alive(o)) {
			/* the session is gone: a hang-up, and SIGKILL 2 s later */
			struct proc_stopping cmd = { .pid = p->pid };
			signal_our_group(SIGHUP);
			proc_stop_all(&cmd, 1, SIGHUP, 2000, NULL, NULL);
			if (cmd.killed)
				signal_our_group(SIGKILL);
			p->pid = -1;
			*status = cmd.status;
			return 0;
		}
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

int exec_run(const struct exec_target *t, char *const *argv, const struct exec_opts *o,
	     int *status, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_pushv(&p.args, (const char *const *)argv);
	strvec_pushv(&p.env, (const char *const *)t->env.v);
	for (const char *const *kv = o ? o->extra_env : NULL; kv && *kv; kv++) {
		const char *eq = strchr(*kv, '=');
		if (!eq)
			continue;
		char *key = xstrndup(*kv, (size_t)(eq - *kv));
		env_set(&p.env, key, eq + 1);
		free(key);
	}
	p.cwd = t->cwd;
	p.default_sigs = PROC_SIG(SIGINT) | PROC_SIG(SIGQUIT) | PROC_SIG(SIGTERM) |
			 PROC_SIG(SIGHUP) | PROC_SIG(SIGPIPE);
	if (getuid() == 0 && (t->uid != 0 || t->gid != 0)) {
		/* root enters as the worker's account, never as itself */
		p.set_groups = p.set_gid = p.set_uid = true;
		p.groups = t->groups;
		p.ngroups = t->ngroups;
		p.gid = t->gid;
		p.uid = t->uid;
	}
	struct sigaction ign = { .sa_handler = SIG_IGN }, fwd = { .sa_handler = pass_on };
	struct sigaction old_int, old_quit, old_term, old_hup;
	sigemptyset(&ign.sa_mask);
	sigemptyset(&fwd.sa_mask);
	fwd.sa_flags = SA_RESTART;
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	sigaction(SIGTERM, &fwd, &old_term);
	sigaction(SIGHUP, &fwd, &old_hup);
	int rc = proc_start(&p, err), ws = 0;
	if (!rc) {
		child_pid = p.pid;
		rc = wait_watching(&p, o, &ws, err);
		child_pid = 0;
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	if (!rc) {
		struct proc_exit x = proc_exit_of(ws);
		*status = x.exited ? x.code : 128 + x.sig;
	}
	proc_clear(&p);
	return rc;
}

void exec_target_release(struct exec_target *t)
{
	free(t->job_id);
	strvec_clear(&t->env);
	free(t->cwd);
	free(t->groups);
	*t = (struct exec_target)EXEC_TARGET_INIT;
}
