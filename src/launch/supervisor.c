/*
 * supervisor.c -- one job on this node: spawn, watch, log, stop, restart.
 * The invariants are listed in launch.h.
 *
 * The loop is a single poll() over a signalfd (SIGCHLD, SIGINT, SIGTERM,
 * SIGHUP) and every worker's stdout and stderr pipes.  An attempt ends when
 * every worker has been reaped and every pipe has reached EOF (or a short
 * drain window has passed after the last worker died).
 */
#include "launch/launch.h"
#include "launch/jobio_int.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "metrics/ingest.h"
#include "report/report.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LINE (1u << 20)  /* a longer line is written in 1 MiB pieces */
#define READ_CHUNK (1u << 16)
#define DRAIN_MS 2000        /* how long pipes may stay open after all workers died */
#define TAIL_LINES 20

struct stream {
	int fd; /* -1 once at EOF */
	struct sbuf partial;
};

struct worker {
	int local_rank, rank;
	pid_t pid;
	struct stream out, err;
	int logfd;
	bool reaped;
	int status; /* wait status */
};

struct sup {
	const struct spec *s;
	const struct launch_opts *o;
	struct store *st;
	char *job_id, *run_dir, *log_dir, *output_dir, *ckpt_dir, *data_dir, *tb_dir;
	int suplog_fd, sigfd, watchdog_fd;
	pid_t watchdog_pid;
	sigset_t old_mask;
	struct worker *w;
	int n;
	int attempt;
	/* the attempt's outcome */
	bool failed;
	int fail_rank, fail_status;
	bool stopping;
	int user_signal; /* SIGINT/SIGTERM/SIGHUP that asked us to stop, or 0 */
	int64_t kill_at; /* monotonic ms for SIGKILL, 0 = none */
	struct sbuf console;
	struct metrics_ingest *mi; /* NULL with --no-metrics or metrics.format none */
	struct jobio *io;          /* inputs, checkpoints, uploads (jobio_int.h) */
};

/* ---- messages: stderr and logs/supervisor.log ---- */

void launch_vsay(int logfd, const char *fmt, va_list ap)
{
	struct sbuf msg = SBUF_INIT, line = SBUF_INIT;
	sbuf_vaddf(&msg, fmt, ap);
	sbuf_addf(&line, "trainctl: %s\n", msg.buf);
	/* the console copy is best effort: a closed terminal must not stop the job */
	if (write_all(STDERR_FILENO, line.buf, line.len) < 0)
		errno = 0;
	if (logfd >= 0) {
		sbuf_reset(&line);
		format_time_utc(&line, now_wall());
		sbuf_addf(&line, " %s\n", msg.buf);
		if (write_all(logfd, line.buf, line.len) < 0)
			errno = 0;
	}
	sbuf_release(&msg);
	sbuf_release(&line);
}

static void say(struct sup *sp, const char *fmt, ...) TC_PRINTF(2, 3);

static void say(struct sup *sp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	launch_vsay(sp->suplog_fd, fmt, ap);
	va_end(ap);
}

/* ---- watchdog: kills every worker group if the supervisor dies ---- */

/*
 * The watchdog's whole life, in its own process: stdin is the pipe from the
 * supervisor, which writes each worker group's pid, or 0 once it has
 * cleaned up the groups itself.  EOF means the supervisor is gone: kill
 * every group still listed.  Only async-signal-safe calls (proc.h: fn).
 */
static int watchdog_main(void *arg)
{
	(void)arg;
	pid_t groups[4096];
	int ng = 0;
	int32_t msg;
	for (;;) {
		ssize_t r = read(STDIN_FILENO, &msg, sizeof(msg));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof(msg))
			break;
		if (msg > 0 && ng < 4096)
			groups[ng++] = msg;
		else if (msg == 0)
			ng = 0; /* the supervisor cleaned up these groups itself */
	}
	for (int i = 0; i < ng; i++)
		kill(-groups[i], SIGKILL);
	return 0;
}

static int watchdog_start(struct sup *sp, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	p.fn = watchdog_main;
	/* own group, deaf to the terminal's signals: it must outlive us */
	p.group = PROC_GROUP_NEW;
	p.ignore_sigs = PROC_SIG(SIGINT) | PROC_SIG(SIGTERM) | PROC_SIG(SIGHUP) | PROC_SIG(SIGQUIT);
	/* holding none of our streams, so nobody waits on it for their EOF */
	p.in.how = PROC_IO_PIPE;
	p.out.how = p.err.how = PROC_IO_NULL;
	int rc = proc_start(&p, err);
	if (!rc) {
		sp->watchdog_fd = p.in.fd;
		sp->watchdog_pid = p.pid;
		p.in.fd = -1;
	}
	proc_clear(&p);
	return rc;
}

static void watchdog_tell(struct sup *sp, int32_t msg)
{
	if (sp->watchdog_fd >= 0 && write_all(sp->watchdog_fd, &msg, sizeof(msg)) < 0)
		say(sp, "warning: watchdog unreachable: %s", strerror(errno));
}

static void watchdog_stop(struct sup *sp)
{
	if (sp->watchdog_fd < 0)
		return;
	watchdog_tell(sp, 0);
	close(sp->watchdog_fd);
	sp->watchdog_fd = -1;
	/*
	 * It exits as soon as it reads EOF; not waiting for that keeps a
	 * scheduling round trip out of every job's end (init reaps it when we
	 * are gone, or this reaps it if it was quick).
	 */
	while (waitpid(sp->watchdog_pid, NULL, WNOHANG) < 0 && errno == EINTR)
		;
}

/* ---- run folder ---- */

static char *join(const char *a, const char *b)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/%s", a, b);
	return sbuf_detach(&sb);
}

static int write_text(const char *dir, const char *name, const char *text, struct tc_err *err)
{
	char *path = join(dir, name);
	int rc = write_file_atomic(path, text, strlen(text), err);
	free(path);
	return rc;
}

static int make_run_folder(struct sup *sp, struct tc_err *err)
{
	int rc;
	struct sbuf runs = SBUF_INIT;
	sbuf_addf(&runs, "%s/runs", sp->o->home);
	sp->run_dir = join(runs.buf, sp->job_id);
	sbuf_release(&runs);
	sp->log_dir = join(sp->run_dir, "logs");
	sp->output_dir = join(sp->run_dir, "output");
	sp->data_dir = join(sp->run_dir, "data");
	sp->tb_dir = join(sp->output_dir, "tensorboard");
	sp->ckpt_dir = sp->s->ckpt_dir[0] == '/' ? xstrdup(sp->s->ckpt_dir)
						  : join(sp->output_dir, sp->s->ckpt_dir);
	const char *dirs[] = { sp->log_dir, sp->output_dir, sp->data_dir, sp->tb_dir, sp->ckpt_dir };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if ((rc = mkdir_p(dirs[i], err)))
			return rc;
		/* workers running as another account write their outputs here */
		if (sp->o->run_as_uid &&
		    chown(dirs[i], (uid_t)sp->o->run_as_uid, (gid_t)sp->o->run_as_gid) < 0)
			return tc_error_errno(err, TC_ESYS, "cannot hand %s to uid %u", dirs[i],
					      sp->o->run_as_uid);
	}
	/* a node of a multi-node job runs the job.yaml its submitter wrote */
	char *yaml = sp->o->node ? NULL : spec_to_yaml(sp->s);
	rc = yaml ? write_text(sp->run_dir, "job.yaml", yaml, err) : 0;
	free(yaml);
	if (rc)
		return rc;
	struct sbuf sln = SBUF_INIT;
	if (sp->o->node)
		sbuf_addf(&sln, "supervisor-node%d.log", sp->o->node->node_rank);
	else
		sbuf_adds(&sln, "supervisor.log");
	char *sl = join(sp->log_dir, sln.buf);
	sbuf_release(&sln);
	sp->suplog_fd = open(sl, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	free(sl);
	if (sp->suplog_fd < 0)
		return tc_error_errno(err, TC_ESYS, "cannot open supervisor log");
	return 0;
}

/* ---- output: whole lines to the rank log and the console ---- */

static void emit_lines(struct sup *sp, struct worker *w, const char *data, size_t len)
{
	if (!len)
		return;
	if (write_all(w->logfd, data, len) < 0)
		say(sp, "warning: cannot write rank %d log: %s", w->rank, strerror(errno));
	metrics_ingest_lines(sp->mi, w->rank, data, len);
	if (sp->o->quiet)
		return;
	struct sbuf *c = &sp->console;
	sbuf_reset(c);
	const char *p = data, *end = data + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		sbuf_addf(c, "[%d] ", w->rank);
		sbuf_add(c, p, n);
		p += n;
	}
	/* best effort: the log already holds every line */
	if (write_all(STDOUT_FILENO, c->buf, c->len) < 0)
		errno = 0;
	if (c->alloc > (4u << 20))
		sbuf_release(c);
}

/* Feed bytes from one stream; complete lines go out, the rest waits. */
static void stream_feed(struct sup *sp, struct worker *w, struct stream *s, const char *buf,
			size_t n, bool eof)
{
	sbuf_add(&s->partial, buf, n);
	const char *last_nl = s->partial.len ? memrchr(s->partial.buf, '\n', s->partial.len) : NULL;
	size_t whole = last_nl ? (size_t)(last_nl - s->partial.buf) + 1 : 0;
	if (whole) {
		emit_lines(sp, w, s->partial.buf, whole);
		sbuf_remove_front(&s->partial, whole);
	}
	/* a line longer than MAX_LINE goes out in MAX_LINE pieces */
	while (s->partial.len > MAX_LINE) {
		struct sbuf piece = SBUF_INIT;
		sbuf_add(&piece, s->partial.buf, MAX_LINE);
		sbuf_addch(&piece, '\n');
		emit_lines(sp, w, piece.buf, piece.len);
		sbuf_release(&piece);
		sbuf_remove_front(&s->partial, MAX_LINE);
	}
	if (eof && s->partial.len) {
		sbuf_addch(&s->partial, '\n');
		emit_lines(sp, w, s->partial.buf, s->partial.len);
		sbuf_reset(&s->partial);
	}
	if (eof)
		sbuf_release(&s->partial);
}

static void stream_read(struct sup *sp, struct worker *w, struct stream *s)
{
	char buf[READ_CHUNK];
	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t r = read(s->fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			stream_feed(sp, w, s, NULL, 0, true);
			close(s->fd);
			s->fd = -1;
			return;
		}
		stream_feed(sp, w, s, buf, (size_t)r, false);
		if ((size_t)r < sizeof(buf))
			return;
	}
}

/* ---- spawning ---- */

/* Can a listener bind port (0 = any) on every address?  Returns the port or -1. */
static int try_port(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t len = sizeof(a);
	int got = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		got = ntohs(a.sin_port);
	close(fd);
	return got;
}

int launch_free_port(void)
{
	unsigned int x = (unsigned int)now_mono_ms() ^ ((unsigned int)getpid() * 2654435761u);
	for (int i = 0; i < 64; i++) {
		x = x * 1103515245u + 12345u;
		int port = try_port(20000 + (int)((x >> 8) % 12000));
		if (port > 0)
			return port;
	}
	return try_port(0);
}

static void build_argv(const struct spec *s, struct strvec *argv)
{
	if (s->shell) {
		/*
		 * args reach the script as "$@", never through the shell's parser;
		 * a command that uses "$@" itself places them, others get them
		 * appended.
		 */
		struct sbuf cmd = SBUF_INIT;
		bool places_args = strstr(s->shell, "$@") || strstr(s->shell, "$*");
		sbuf_addf(&cmd, places_args || !s->nargs ? "%s" : "%s \"$@\"", s->shell);
		strvec_push(argv, "/bin/sh");
		strvec_push(argv, "-c");
		strvec_push(argv, cmd.buf);
		strvec_push(argv, "trainctl-job");
		sbuf_release(&cmd);
	} else {
		strvec_pushv(argv, (const char *const *)s->argv.v);
	}
	for (size_t i = 0; i < s->nargs; i++) {
		strvec_pushf(argv, "--%s", s->args[i].key);
		if (s->args[i].val)
			strvec_push(argv, s->args[i].val);
	}
}

/* A worker's output pipe, as the poll loop reads it. */
static void tune_pipe(int fd)
{
	/* a bigger pipe absorbs bursts; the default 64 KiB also works */
	if (fcntl(fd, F_SETPIPE_SZ, 1 << 20) < 0)
		errno = 0;
	/* the loop reads each stream until EAGAIN; F_SETFL cannot fail on our own pipe */
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		errno = 0;
}

/* Start rank w: its own group, killed with us, output into two pipes. */
static int start_worker(struct sup *sp, struct worker *w, const struct strvec *argv,
			struct strvec *env, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	gid_t gid = (gid_t)sp->o->run_as_gid;
	strvec_pushv(&p.args, (const char *const *)argv->v);
	p.env = *env; /* taken over: proc_clear frees it */
	*env = (struct strvec)STRVEC_INIT;
	p.cwd = sp->s->workdir;
	p.group = PROC_GROUP_NEW;
	p.death_sig = SIGKILL;
	p.default_sigs = PROC_SIG(SIGPIPE); /* we ignore it; exec would keep that */
	p.in.how = PROC_IO_NULL;
	p.out.how = p.err.how = PROC_IO_PIPE;
	if (sp->o->run_as_uid) {
		/* a root server runs a user's job as that user's account */
		p.set_groups = p.set_gid = p.set_uid = true;
		p.groups = &gid;
		p.ngroups = 1;
		p.gid = gid;
		p.uid = (uid_t)sp->o->run_as_uid;
	}
	int rc = proc_start(&p, err);
	if (!rc) {
		w->pid = p.pid;
		w->out.fd = p.out.fd;
		w->err.fd = p.err.fd;
		p.out.fd = p.err.fd = -1;
		tune_pipe(w->out.fd);
		tune_pipe(w->err.fd);
	}
	proc_clear(&p);
	return rc;
}

static int spawn_workers(struct sup *sp, const struct env_plan *plan, struct tc_err *err)
{
	struct strvec argv = STRVEC_INIT, common = STRVEC_INIT;
	int rc = 0;
	build_argv(sp->s, &argv);
	proc_env_inherit(&common);
	env_common(plan, &common);
	for (int i = 0; i < sp->n; i++) {
		struct worker *w = &sp->w[i];
		struct strvec env = STRVEC_INIT;
		strvec_pushv(&env, (const char *const *)common.v);
		env_rank(plan, i, &env);
		/* a stale error file would be blamed on this attempt */
		const char *ef = env_get(&env, "TORCHELASTIC_ERROR_FILE");
		if (ef)
			unlink(ef);
		struct sbuf lp = SBUF_INIT;
		sbuf_addf(&lp, "%s/rank-%d.log", sp->log_dir, w->rank);
		w->logfd = open(lp.buf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		sbuf_release(&lp);
		if (w->logfd < 0)
			rc = tc_error_errno(err, TC_ESYS, "cannot start rank %d", w->rank);
		else if ((rc = start_worker(sp, w, &argv, &env, err)))
			tc_error_prefix(err, "rank %d", w->rank);
		strvec_clear(&env);
		if (rc)
			break;
		watchdog_tell(sp, (int32_t)w->pid);
		w->reaped = false;
		w->status = 0;
		sbuf_init(&w->out.partial, 0);
		sbuf_init(&w->err.partial, 0);
		struct tc_err e2 = TC_ERR_INIT;
		if (store_worker_start(sp->st, sp->job_id, sp->attempt, w->rank, w->local_rank, w->pid,
				       &e2))
			say(sp, "warning: %s", e2.msg);
		tc_err_release(&e2);
	}
	strvec_clear(&argv);
	strvec_clear(&common);
	return rc;
}

/* ---- stopping and reaping ---- */

static void signal_groups(struct sup *sp, int sig)
{
	for (int i = 0; i < sp->n; i++)
		if (sp->w[i].pid > 0)
			kill(-sp->w[i].pid, sig);
}

static void begin_stop(struct sup *sp)
{
	if (sp->stopping)
		return;
	sp->stopping = true;
	signal_groups(sp, SIGTERM);
	sp->kill_at = now_mono_ms() + (int64_t)sp->s->grace_seconds * 1000;
}

static void reap(struct sup *sp)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == sp->watchdog_pid) {
			sp->watchdog_pid = -1;
			if (sp->watchdog_fd >= 0)
				close(sp->watchdog_fd);
			sp->watchdog_fd = -1;
			say(sp, "warning: the watchdog process ended early");
			continue;
		}
		struct worker *w = NULL;
		for (int i = 0; i < sp->n; i++)
			if (sp->w[i].pid == pid && !sp->w[i].reaped)
				w = &sp->w[i];
		if (!w)
			continue;
		w->reaped = true;
		w->status = status;
		struct tc_err e2 = TC_ERR_INIT;
		if (store_worker_end(sp->st, sp->job_id, sp->attempt, w->rank,
				     WIFEXITED(status) ? WEXITSTATUS(status) : -1,
				     WIFSIGNALED(status) ? WTERMSIG(status) : 0, &e2))
			say(sp, "warning: %s", e2.msg);
		tc_err_release(&e2);
		bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (!ok && !sp->failed && !sp->user_signal) {
			sp->failed = true;
			sp->fail_rank = w->rank;
			sp->fail_status = status;
			struct sbuf d = SBUF_INIT;
			proc_describe_exit(&d, status);
			say(sp, "rank %d %s; stopping the other workers", w->rank, d.buf);
			sbuf_release(&d);
			begin_stop(sp);
		}
	}
}

static bool all_reaped(struct sup *sp)
{
	for (int i = 0; i < sp->n; i++)
		if (!sp->w[i].reaped)
			return false;
	return true;
}

/* Run one attempt to its end (all reaped, pipes drained). */
static void attempt_loop(struct sup *sp)
{
	struct pollfd *pfd = xcalloc((size_t)sp->n * 2 + 1, sizeof(*pfd));
	struct stream **which = xcalloc((size_t)sp->n * 2 + 1, sizeof(*which));
	struct worker **owner = xcalloc((size_t)sp->n * 2 + 1, sizeof(*owner));
	int64_t drain_until = 0;
	for (;;) {
		bool reaped_all = all_reaped(sp);
		int np = 0;
		pfd[np].fd = sp->sigfd;
		pfd[np].events = POLLIN;
		np++;
		for (int i = 0; i < sp->n; i++) {
			struct stream *ss[2] = { &sp->w[i].out, &sp->w[i].err };
			for (int k = 0; k < 2; k++)
				if (ss[k]->fd >= 0) {
					pfd[np].fd = ss[k]->fd;
					pfd[np].events = POLLIN;
					which[np] = ss[k];
					owner[np] = &sp->w[i];
					np++;
				}
		}
		if (reaped_all && np == 1)
			break;
		if (reaped_all && !drain_until) {
			/* leftovers of a finished worker's group must not hold its pipes */
			signal_groups(sp, SIGKILL);
			drain_until = now_mono_ms() + DRAIN_MS;
		}
		int64_t now = now_mono_ms();
		int timeout = sp->mi ? metrics_ingest_tick(sp->mi, now) : -1;
		if (sp->kill_at && (timeout < 0 || sp->kill_at - now < timeout))
			timeout = sp->kill_at > now ? (int)(sp->kill_at - now) : 0;
		if (drain_until) {
			int t = drain_until > now ? (int)(drain_until - now) : 0;
			timeout = timeout < 0 || t < timeout ? t : timeout;
		}
		int r = poll(pfd, (nfds_t)np, timeout);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (pfd[0].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(sp->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					continue;
				if (si.ssi_signo == SIGUSR1 || si.ssi_signo == SIGUSR2) {
					/* e.g. Slurm's --signal warning: the workers checkpoint */
					say(sp, "%s received: passing it to the workers",
					    strsignal((int)si.ssi_signo));
					signal_groups(sp, (int)si.ssi_signo);
					continue;
				}
				if (sp->user_signal) {
					say(sp, "second %s: killing the workers now",
					    strsignal((int)si.ssi_signo));
					sp->kill_at = now_mono_ms();
					continue;
				}
				sp->user_signal = (int)si.ssi_signo;
				say(sp, "%s received: stopping the workers (SIGKILL in %d s)",
				    strsignal((int)si.ssi_signo), sp->s->grace_seconds);
				begin_stop(sp);
			}
			reap(sp);
		}
		for (int i = 1; r > 0 && i < np; i++)
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
				stream_read(sp, owner[i], which[i]);
		now = now_mono_ms();
		if (sp->kill_at && now >= sp->kill_at) {
			signal_groups(sp, SIGKILL);
			sp->kill_at = 0;
		}
		if (drain_until && now >= drain_until) {
			for (int i = 0; i < sp->n; i++) {
				struct stream *ss[2] = { &sp->w[i].out, &sp->w[i].err };
				for (int k = 0; k < 2; k++)
					if (ss[k]->fd >= 0) {
						stream_feed(sp, &sp->w[i], ss[k], NULL, 0, true);
						close(ss[k]->fd);
						ss[k]->fd = -1;
					}
			}
		}
		reap(sp); /* SIGCHLD may have been coalesced with another signal */
	}
	for (int i = 0; i < sp->n; i++) {
		if (sp->w[i].logfd >= 0)
			close(sp->w[i].logfd);
		sp->w[i].logfd = -1;
	}
	watchdog_tell(sp, 0);
	free(pfd);
	free(which);
	free(owner);
}

/* ---- root cause ---- */

static void append_log_tail(struct sup *sp, struct sbuf *out, int rank)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	sbuf_addf(&path, "%s/rank-%d.log", sp->log_dir, rank);
	if (read_file(path.buf, &text, NULL) == 0 && text.len) {
		sbuf_rtrim(&text);
		size_t start = text.len;
		int lines = 0;
		while (start > 0 && lines < TAIL_LINES) {
			start--;
			if (text.buf[start] == '\n')
				lines++;
		}
		if (text.buf[start] == '\n')
			start++;
		sbuf_addf(out, "\n--- last %d lines of rank %d (%s) ---\n", lines < TAIL_LINES ? lines + 1 : TAIL_LINES,
			  rank, path.buf);
		sbuf_add(out, text.buf + start, text.len - start);
	}
	sbuf_release(&path);
	sbuf_release(&text);
}

/* torch's @record writes {"message": {"message": ..., "extraInfo": {"py_callstack": ...}}} */
static void append_error_file(struct sup *sp, struct sbuf *out, int rank)
{
	struct sbuf path = SBUF_INIT;
	sbuf_addf(&path, "%s/error-rank-%d.json", sp->log_dir, rank);
	json_t *root = json_load_file(path.buf, 0, NULL);
	if (root) {
		json_t *m = json_object_get(root, "message");
		const char *stack = NULL, *msg = NULL;
		if (json_is_object(m)) {
			msg = json_string_value(json_object_get(m, "message"));
			stack = json_string_value(
				json_object_get(json_object_get(m, "extraInfo"), "py_callstack"));
		} else {
			msg = json_string_value(m);
		}
		if (stack || msg) {
			sbuf_addf(out, "\n--- error reported by rank %d (%s) ---\n", rank, path.buf);
			sbuf_adds(out, stack ? stack : msg);
			sbuf_rtrim(out);
		}
		json_decref(root);
	}
	sbuf_release(&path);
}

/* jobio's messages (from its thread too: say() writes each line at once) */
static void jobio_say(void *ctx, const char *msg)
{
	say(ctx, "%s", msg);
}

/* ---- metrics: never a reason to fail the job (metrics/ingest.h) ---- */

static void metrics_warn(void *ctx, const char *msg)
{
	say(ctx, "warning: metrics: %s", msg);
}

static void metrics_start(struct sup *sp)
{
	const char *fmt = sp->s->metrics_format;
	if (sp->o->no_metrics || (fmt && !strcmp(fmt, "none")))
		return;
	struct strvec files = STRVEC_INIT;
	for (size_t i = 0; i < sp->s->metrics_files.nr; i++)
		strvec_push_nodup(&files, path_absolute(sp->s->metrics_files.v[i], sp->s->workdir));
	struct metrics_ingest_opts mo = {
		.st = sp->st, .job_id = sp->job_id, .format = fmt, .tb_dir = sp->tb_dir,
		.files = (const char *const *)files.v, .nfiles = files.nr, .nranks = sp->n,
		.warn = metrics_warn, .warn_ctx = sp,
	};
	sp->mi = metrics_ingest_new(&mo);
	strvec_clear(&files);
}

static void metrics_end(struct sup *sp)
{
	if (!sp->mi)
		return;
	metrics_ingest_finish(sp->mi);
	long long lines, records, malformed;
	metrics_ingest_counts(sp->mi, &lines, &records, &malformed);
	if (lines || malformed)
		say(sp, "metrics: %lld lines, %lld records, %lld malformed lines (trainctl show %s)",
		    lines, records, malformed, sp->job_id);
	metrics_ingest_free(sp->mi);
	sp->mi = NULL;
}

/* ---- the job ---- */

static int setup_signals(struct sup *sp, struct tc_err *err)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &set, &sp->old_mask) < 0)
		return tc_error_errno(err, TC_ESYS, "sigprocmask");
	sp->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sp->sigfd < 0)
		return tc_error_errno(err, TC_ESYS, "signalfd");
	signal(SIGPIPE, SIG_IGN); /* a closed console must not kill the supervisor */
	return 0;
}

static int prepare_rank_table(struct sup *sp, char **path, struct tc_err *err)
{
	*path = NULL;
	if (strcmp(sp->s->device_type, "npu") != 0)
		return 0;
	const char *conf = sp->s->hccn_conf ? sp->s->hccn_conf : "/etc/hccn.conf";
	char **ips = xcalloc((size_t)sp->n, sizeof(char *));
	int rc = ranktable_device_ips(conf, sp->s->device_ids, sp->n, ips, err);
	if (!rc) {
		char *server = host_ipv4();
		char *text = ranktable_json(server, sp->s->device_ids, ips, sp->n, 0);
		rc = write_text(sp->run_dir, "hccl.json", text, err);
		free(text);
		free(server);
		if (!rc)
			*path = join(sp->run_dir, "hccl.json");
	}
	for (int i = 0; i < sp->n; i++)
		free(ips[i]);
	free(ips);
	return rc;
}

static int node_attempt(struct sup *sp, int *exit_status, struct tc_err *err);

static int run_attempts(struct sup *sp, int *exit_status, struct tc_err *err)
{
	int rc = 0;
	int *ports = NULL;
	char *rank_table = NULL;
	if (sp->o->node)
		return node_attempt(sp, exit_status, err);
	char *resume = jobio_resume(sp->io, !sp->o->resume_newest, err);
	if (!resume && err->code)
		return err->code;
	if ((rc = prepare_rank_table(sp, &rank_table, err)))
		goto out;
	for (sp->attempt = 0;; sp->attempt++) {
		int port = sp->s->master_port ? sp->s->master_port : launch_free_port();
		if (port < 0) {
			rc = tc_error_errno(err, TC_ESYS, "cannot find a free port");
			goto out;
		}
		if (env_needs_rank_ports(sp->s->framework)) {
			free(ports);
			ports = xcalloc((size_t)sp->n, sizeof(int));
			for (int i = 0; i < sp->n; i++)
				ports[i] = launch_free_port();
		}
		struct env_plan plan = {
			.spec = sp->s, .job_id = sp->job_id, .output_dir = sp->output_dir,
			.ckpt_dir = sp->ckpt_dir, .data_dir = sp->data_dir, .log_dir = sp->log_dir,
			.tb_dir = sp->tb_dir, .resume_from = resume, .master_addr = "127.0.0.1",
			.master_port = port, .node_rank = 0, .nnodes = 1,
			.restart_count = sp->attempt, .rank_table = rank_table, .extra_ports = ports,
		};
		char *envtext = env_file_text(&plan);
		rc = write_text(sp->run_dir, "job.env", envtext, err);
		free(envtext);
		if (rc)
			goto out;
		sp->failed = false;
		sp->stopping = false;
		sp->kill_at = 0;
		if ((rc = spawn_workers(sp, &plan, err))) {
			begin_stop(sp);
			sp->kill_at = now_mono_ms();
			attempt_loop(sp);
			goto out;
		}
		struct sbuf why = SBUF_INIT;
		if (sp->attempt == 0)
			sbuf_addf(&why, "%d workers started", sp->n);
		else
			sbuf_addf(&why, "restart %d of %d: %d workers started%s%s", sp->attempt,
				  sp->s->max_restarts, sp->n, resume ? ", resuming from " : "",
				  resume ? resume : "");
		say(sp, "job %s: %s", sp->job_id, why.buf);
		rc = store_job_set_state(sp->st, sp->job_id, "running", why.buf, err);
		sbuf_release(&why);
		if (rc) {
			begin_stop(sp);
			attempt_loop(sp);
			goto out;
		}
		attempt_loop(sp);

		if (sp->user_signal) {
			/* the server says why it stopped us: preempted and paused jobs run again */
			char *asked = NULL;
			struct tc_err e3 = TC_ERR_INIT;
			if (sp->o->job_id && store_job_stop_reason(sp->st, sp->job_id, &asked, &e3))
				say(sp, "warning: %s", e3.msg);
			tc_err_release(&e3);
			struct sbuf why2 = SBUF_INIT;
			if (asked && (!strcmp(asked, "preempted") || !strcmp(asked, "paused"))) {
				sbuf_addf(&why2, "%s by the server (workers stopped by %s)", asked,
					  strsignal(sp->user_signal));
				rc = store_job_set_state(sp->st, sp->job_id, asked, why2.buf, err);
				say(sp, "job %s %s", sp->job_id, why2.buf);
			} else {
				if (asked)
					sbuf_addf(&why2, "stopped through the server (%s)", asked);
				else
					sbuf_addf(&why2, "stopped by %s", strsignal(sp->user_signal));
				rc = store_job_finish(sp->st, sp->job_id, "killed", 1, why2.buf, why2.buf, err);
				say(sp, "job %s killed (%s)", sp->job_id, why2.buf);
			}
			free(asked);
			sbuf_release(&why2);
			*exit_status = 1;
			goto out;
		}
		if (!sp->failed) {
			rc = store_job_finish(sp->st, sp->job_id, "succeeded", 0, NULL,
					      "every worker exited 0", err);
			say(sp, "job %s succeeded", sp->job_id);
			*exit_status = 0;
			goto out;
		}
		struct sbuf cause = SBUF_INIT;
		sbuf_addf(&cause, "rank %d ", sp->fail_rank);
		proc_describe_exit(&cause, sp->fail_status);
		if (sp->attempt < sp->s->max_restarts) {
			free(resume);
			resume = jobio_resume(sp->io, false, err);
			struct sbuf why3 = SBUF_INIT;
			sbuf_addf(&why3, "%s; restarting the group (%d of %d)", cause.buf,
				  sp->attempt + 1, sp->s->max_restarts);
			rc = store_job_set_state(sp->st, sp->job_id, "restarting", why3.buf, err);
			if (!rc)
				rc = store_job_set_restarts(sp->st, sp->job_id, sp->attempt + 1, err);
			say(sp, "%s", why3.buf);
			sbuf_release(&why3);
			sbuf_release(&cause);
			if (rc)
				goto out;
			continue;
		}
		struct sbuf full = SBUF_INIT;
		sbuf_addf(&full, "%s", cause.buf);
		if (sp->s->max_restarts)
			sbuf_addf(&full, " (after %d restarts)", sp->attempt);
		append_error_file(sp, &full, sp->fail_rank);
		append_log_tail(sp, &full, sp->fail_rank);
		rc = store_job_finish(sp->st, sp->job_id, "failed", 1, full.buf, cause.buf, err);
		say(sp, "job %s failed: %s", sp->job_id, full.buf);
		sbuf_release(&full);
		sbuf_release(&cause);
		*exit_status = 1;
		goto out;
	}
out:
	free(ports);
	free(rank_table);
	free(resume);
	return rc;
}

/* More than one node is the slurm backend's (backend.h), never one supervisor's. */
static int one_node_only(struct sup *sp, struct tc_err *err)
{
	if (sp->o->node || sp->s->nodes <= 1)
		return 0;
	return tc_error(err, TC_EUSAGE,
			"%d nodes need backend: slurm, started by `trainctl run` (docs/slurm.md)",
			sp->s->nodes);
}

int launch_run(const struct spec *s, const struct launch_opts *o, char **job_id,
	       int *exit_status, struct tc_err *err)
{
	struct sup sp = { 0 };
	int rc;
	sp.s = s;
	sp.o = o;
	sp.suplog_fd = sp.sigfd = sp.watchdog_fd = -1;
	sp.watchdog_pid = -1;
	sp.n = s->per_node;
	*exit_status = 1;
	*job_id = NULL;
	sbuf_init(&sp.console, 0);

	if ((rc = store_open(o->home, &sp.st, err)))
		goto out;
	sp.job_id = o->job_id ? xstrdup(o->job_id) : store_new_job_id();
	*job_id = xstrdup(sp.job_id);
	if ((rc = make_run_folder(&sp, err)))
		goto out;
	sp.w = xcalloc((size_t)sp.n, sizeof(*sp.w));
	for (int i = 0; i < sp.n; i++) {
		sp.w[i].local_rank = i;
		sp.w[i].rank = (o->node ? o->node->node_rank * sp.n : 0) + i;
		sp.w[i].out.fd = sp.w[i].err.fd = sp.w[i].logfd = -1;
		sp.w[i].reaped = true;
	}
	if (o->node) {
		/* one node of a multi-node job: its driver records the job */
		rc = o->job_id ? 0 : tc_error(err, TC_EUSAGE, "a node supervisor needs a job id");
	} else if (o->job_id) {
		/* the server created the job; this supervisor takes it over */
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "supervisor started (pid %ld)", (long)getpid());
		rc = store_job_set_supervisor(sp.st, sp.job_id, getpid(), proc_start_ticks(getpid()), err);
		if (!rc)
			rc = store_job_set_state(sp.st, sp.job_id, "starting", why.buf, err);
		sbuf_release(&why);
	} else {
		char *spec_json = spec_to_json(s);
		struct job_row row = {
			.id = sp.job_id, .name = s->name, .state = "starting", .run_dir = sp.run_dir,
			.spec_json = spec_json, .created = now_wall(), .world_size = sp.n,
			.sup_pid = getpid(), .sup_ticks = proc_start_ticks(getpid()),
		};
		rc = store_job_create(sp.st, &row, err);
		free(spec_json);
	}
	if (rc)
		goto out;
	say(&sp, "job %s (%s): %d %s worker%s, run folder %s", sp.job_id, s->name, sp.n,
	    s->device_type, sp.n == 1 ? "" : "s", sp.run_dir);
	if ((rc = one_node_only(&sp, err)) || (rc = setup_signals(&sp, err)) ||
	    (rc = watchdog_start(&sp, err))) {
		struct tc_err e2 = TC_ERR_INIT;
		if (!o->node)
			store_job_finish(sp.st, sp.job_id, "failed", 3, err->msg, err->msg, &e2);
		tc_err_release(&e2);
		goto out;
	}
	metrics_start(&sp);
	/* device telemetry for report.json (report/report.h) */
	struct report_sampler *rsamp =
		o->node ? NULL : report_sampler_start(s->device_type, s->device_ids, sp.n, 0);
	struct jobio_ctx ioc = {
		.s = s, .home = o->home, .job_id = sp.job_id, .run_dir = sp.run_dir,
		.data_dir = sp.data_dir, .output_dir = sp.output_dir, .ckpt_dir = sp.ckpt_dir,
		.world = sp.n, .say = jobio_say, .say_arg = &sp,
	};
	/* a node of a multi-node job: its driver stages, watches and uploads */
	rc = o->node ? 0 : jobio_begin(&ioc, sp.st, &sp.io, err);
	if (!rc)
		rc = run_attempts(&sp, exit_status, err);
	jobio_end(sp.io); /* the final upload, whatever the outcome */
	metrics_end(&sp);
	if (rc && sp.st && !o->node) {
		/* record why, so the job does not look alive forever */
		struct tc_err e2 = TC_ERR_INIT;
		store_job_finish(sp.st, sp.job_id, "failed", tc_exit_status(rc), err->msg, err->msg,
				 &e2);
		tc_err_release(&e2);
	}
	/* report.json and the Ais-Bench files: a warning at worst, never the job's result */
	if (!o->node)
		report_job_end(sp.st, sp.job_id, rsamp, jobio_say, &sp);
out:
	watchdog_stop(&sp);
	if (sp.sigfd >= 0) {
		close(sp.sigfd);
		sigprocmask(SIG_SETMASK, &sp.old_mask, NULL);
	}
	for (int i = 0; sp.w && i < sp.n; i++) {
		sbuf_release(&sp.w[i].out.partial);
		sbuf_release(&sp.w[i].err.partial);
	}
	free(sp.w);
	if (sp.suplog_fd >= 0)
		close(sp.suplog_fd);
	sbuf_release(&sp.console);
	store_close(sp.st);
	free(sp.job_id);
	free(sp.run_dir);
	free(sp.log_dir);
	free(sp.output_dir);
	free(sp.ckpt_dir);
	free(sp.data_dir);
	free(sp.tb_dir);
	return rc;
}

/* ---- one node of a multi-node job (launch.h: struct launch_node) ---- */

/* Node n's part of an npu job's rank table, merged by node 0 (ranktable.c). */
static int node_rank_table(struct sup *sp, char **path, struct tc_err *err)
{
	const struct launch_node *nd = sp->o->node;
	*path = NULL;
	if (strcmp(sp->s->device_type, "npu") != 0)
		return 0;
	struct sbuf conf = SBUF_INIT, dir = SBUF_INIT;
	const char *c = sp->s->hccn_conf ? sp->s->hccn_conf : "/etc/hccn.conf";
	const char *at = strstr(c, "{node}");
	if (at)
		sbuf_addf(&conf, "%.*s%d%s", (int)(at - c), c, nd->node_rank, at + 6);
	else
		sbuf_adds(&conf, c);
	char **ips = xcalloc((size_t)sp->n, sizeof(char *));
	int rc = ranktable_device_ips(conf.buf, sp->s->device_ids, sp->n, ips, err);
	if (!rc) {
		char *server = host_ipv4();
		char *part = ranktable_json(server, sp->s->device_ids, ips, sp->n,
					    nd->node_rank * sp->n);
		sbuf_addf(&dir, "%s/ranktable/attempt-%d", sp->run_dir, nd->attempt);
		rc = ranktable_exchange(dir.buf, nd->node_rank, nd->nnodes, part,
					nd->ranktable_timeout > 0 ? nd->ranktable_timeout : 300, err);
		free(part);
		free(server);
		if (!rc) {
			sbuf_adds(&dir, "/hccl.json");
			*path = sbuf_detach(&dir);
		}
	}
	for (int i = 0; i < sp->n; i++)
		free(ips[i]);
	free(ips);
	sbuf_release(&conf);
	sbuf_release(&dir);
	return rc;
}

/* The attempt's outcome for the driver: attempts/<a>/node-<n>.json. */
static int node_result(struct sup *sp, const char *state, const char *cause, const char *detail,
		       struct tc_err *err)
{
	const struct launch_node *nd = sp->o->node;
	char *path = launch_node_result_path(sp->run_dir, nd->attempt, nd->node_rank);
	char *dir = path_dirname(path);
	char *host = host_ipv4();
	char hostname[256] = "";
	if (gethostname(hostname, sizeof(hostname) - 1) < 0)
		hostname[0] = '\0';
	json_t *o = json_pack("{s:i, s:i, s:s, s:s, s:s, s:f}", "node", nd->node_rank, "attempt",
			      nd->attempt, "state", state, "host", host, "hostname", hostname, "time",
			      now_wall());
	if (cause)
		json_object_set_new(o, "cause", json_string(cause));
	if (detail)
		json_object_set_new(o, "detail", json_string(detail));
	if (sp->failed)
		json_object_set_new(o, "rank", json_integer(sp->fail_rank));
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(o);
	int rc = mkdir_p(dir, err);
	if (!rc)
		rc = write_file_atomic(path, text, strlen(text), err);
	free(text);
	free(host);
	free(dir);
	free(path);
	return rc;
}

/*
 * Slurm signals every process of a step, workers included: a worker killed
 * by SIGTERM may be reaped before the supervisor's own SIGTERM is read.
 * Wait a moment for it, so a stop is not taken for a failure.
 */
static int late_stop_signal(struct sup *sp, int ms)
{
	int64_t until = now_mono_ms() + ms;
	for (;;) {
		int64_t left = until - now_mono_ms();
		struct pollfd pf = { sp->sigfd, POLLIN, 0 };
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return 0;
		struct signalfd_siginfo si;
		while (read(sp->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
				return (int)si.ssi_signo;
	}
}

static int node_attempt(struct sup *sp, int *exit_status, struct tc_err *err)
{
	const struct launch_node *nd = sp->o->node;
	int *ports = NULL;
	char *rank_table = NULL;
	int rc;
	sp->attempt = nd->attempt;
	if ((rc = node_rank_table(sp, &rank_table, err))) {
		struct tc_err e2 = TC_ERR_INIT;
		node_result(sp, "failed", err->msg, NULL, &e2);
		tc_err_release(&e2);
		return rc;
	}
	if (env_needs_rank_ports(sp->s->framework)) {
		ports = xcalloc((size_t)sp->n, sizeof(int));
		for (int i = 0; i < sp->n; i++)
			ports[i] = launch_free_port();
	}
	struct env_plan plan = {
		.spec = sp->s, .job_id = sp->job_id, .output_dir = sp->output_dir,
		.ckpt_dir = sp->ckpt_dir, .data_dir = sp->data_dir, .log_dir = sp->log_dir,
		.tb_dir = sp->tb_dir, .resume_from = nd->resume_from, .master_addr = nd->master_addr,
		.master_port = nd->master_port, .node_rank = nd->node_rank, .nnodes = nd->nnodes,
		.restart_count = nd->attempt, .rank_table = rank_table, .extra_ports = ports,
	};
	char *envtext = env_file_text(&plan);
	struct sbuf envname = SBUF_INIT;
	if (nd->node_rank)
		sbuf_addf(&envname, "job-node%d.env", nd->node_rank);
	else
		sbuf_adds(&envname, "job.env");
	rc = write_text(sp->run_dir, envname.buf, envtext, err);
	sbuf_release(&envname);
	free(envtext);
	if (rc)
		goto out;
	sp->failed = false;
	sp->stopping = false;
	sp->kill_at = 0;
	if ((rc = spawn_workers(sp, &plan, err))) {
		begin_stop(sp);
		sp->kill_at = now_mono_ms();
		attempt_loop(sp);
		goto out;
	}
	say(sp, "job %s node %d of %d, attempt %d: ranks %d-%d started (master %s:%d)%s%s",
	    sp->job_id, nd->node_rank, nd->nnodes, nd->attempt, sp->w[0].rank,
	    sp->w[sp->n - 1].rank, nd->master_addr, nd->master_port,
	    nd->resume_from ? ", resuming from " : "", nd->resume_from ? nd->resume_from : "");
	attempt_loop(sp);
	if (!sp->user_signal && sp->failed && WIFSIGNALED(sp->fail_status) &&
	    WTERMSIG(sp->fail_status) == SIGTERM)
		sp->user_signal = late_stop_signal(sp, 1000);
	struct sbuf cause = SBUF_INIT, detail = SBUF_INIT;
	const char *state = "succeeded";
	if (sp->user_signal) {
		state = "killed";
		sbuf_addf(&cause, "node %d stopped by %s", nd->node_rank, strsignal(sp->user_signal));
		*exit_status = 128 + sp->user_signal;
	} else if (sp->failed) {
		state = "failed";
		sbuf_addf(&cause, "rank %d ", sp->fail_rank);
		proc_describe_exit(&cause, sp->fail_status);
		append_error_file(sp, &detail, sp->fail_rank);
		append_log_tail(sp, &detail, sp->fail_rank);
		*exit_status = 1;
	} else {
		*exit_status = 0;
	}
	say(sp, "node %d: %s%s%s", nd->node_rank, state, cause.len ? ": " : "", cause.buf);
	rc = node_result(sp, state, cause.len ? cause.buf : NULL, detail.len ? detail.buf : NULL, err);
	sbuf_release(&cause);
	sbuf_release(&detail);
out:
	free(ports);
	free(rank_table);
	return rc;
}
