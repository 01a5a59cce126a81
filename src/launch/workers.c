/*
 * workers.c -- one attempt's workers (supervisor_int.h): start them, copy
 * their output line by line to logs/rank-<r>.log and the console, stop
 * them and reap them.  The invariants are listed in launch.h.
 *
 * The loop is a single poll() over a signalfd (SIGCHLD, SIGINT, SIGTERM,
 * SIGHUP) and every worker's stdout and stderr pipes.  An attempt ends when
 * every worker has been reaped and every pipe has reached EOF (or a short
 * drain window has passed after the last worker died).
 */
#include "launch/supervisor_int.h"
#include "launch/console_int.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/sock.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/runpath.h"
#include "metrics/ingest.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
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
/*
 * After a round of reads the pipes rest this long: ranks printing steps
 * every few ms would otherwise wake the supervisor once per line (its CPU
 * at 10,000 points/s, docs/PERFORMANCE.md).  A pipe that filled a whole
 * read is read again at once.
 */
#define COALESCE_MS 10

/* ---- output: whole lines to the rank log and the console ---- */

static void emit_masked(struct sup *sp, struct worker *w, const char *data, size_t len);

static void emit_lines(struct sup *sp, struct worker *w, const char *data, size_t len)
{
	if (!len)
		return;
	/* a secret's value printed by the job is *** in every copy of its output */
	struct sbuf masked = SBUF_INIT;
	if (secret_mask(&sp->secrets.mask, data, len, &masked)) {
		data = masked.buf;
		len = masked.len;
	}
	emit_masked(sp, w, data, len);
	sbuf_release(&masked);
}

static void emit_masked(struct sup *sp, struct worker *w, const char *data, size_t len)
{
	sup_log_write(sp, w, data, len); /* logs.max_bytes (logcap.c), a full disk (diskfull.c) */
	console_expect(sp->con, data, len);
	metrics_ingest_lines(sp->mi, w->rank, data, len);
	sup_watch_lines(sp, w->rank, data, len);
	if (sp->o->quiet)
		return;
	if (sp->con) {
		console_echo(sp->con, w->rank, data, len);
		return;
	}
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

/* Read what s has; true when a read filled the whole buffer (a busy writer). */
static bool stream_read(struct sup *sp, struct worker *w, struct stream *s)
{
	char buf[READ_CHUNK];
	bool full = false;
	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t r = read(s->fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return full;
		if (r <= 0) {
			stream_feed(sp, w, s, NULL, 0, true);
			close(s->fd);
			s->fd = -1;
			return full;
		}
		stream_feed(sp, w, s, buf, (size_t)r, false);
		if ((size_t)r < sizeof(buf))
			return full;
		full = true;
	}
	return full;
}

/* ---- spawning ---- */

int launch_free_port(void)
{
	unsigned int x = (unsigned int)now_mono_ms() ^ ((unsigned int)getpid() * 2654435761u);
	for (int i = 0; i < 64; i++) {
		x = x * 1103515245u + 12345u;
		int port = sock_free_port(20000 + (int)((x >> 8) % 12000), true);
		if (port > 0)
			return port;
	}
	return sock_free_port(0, true);
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

/* supervisor.log: exactly what rank w runs (an image job's: the runtime's command line) */
static void log_argv(struct sup *sp, const struct worker *w, const struct proc *p)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "attempt %d rank %d runs: ", sp->attempt, w->rank);
	size_t from = sb.len;
	sbuf_add_shell_argv(&sb, (const char *const *)p->wrapper.v, p->wrapper.nr);
	if (p->wrapper.nr)
		sbuf_addch(&sb, ' ');
	sbuf_add_shell_argv(&sb, (const char *const *)p->args.v, p->args.nr);
	sup_mask_secrets(sp, &sb, from);
	sup_log(sp, "%s", sb.buf);
	sbuf_release(&sb);
}

/* Start rank w: its own group, killed with us, output into two pipes. */
static int start_worker(struct sup *sp, struct worker *w, const struct strvec *argv,
			struct strvec *env, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_pushv(&p.args, (const char *const *)argv->v);
	p.env = *env; /* taken over: proc_clear frees it */
	*env = (struct strvec)STRVEC_INIT;
	p.cwd = sp->s->workdir;
	p.group = PROC_GROUP_NEW;
	p.death_sig = SIGKILL;
	p.default_sigs = PROC_SIG(SIGPIPE); /* we ignore it; exec would keep that */
	p.in.how = PROC_IO_NULL;
	p.out.how = p.err.how = PROC_IO_PIPE;
	int rc = sp->ctr ? sup_container_wrap(sp, w, &p, err) : 0;
	if (!rc)
		log_argv(sp, w, &p);
	if (!rc)
		rc = proc_start(&p, err);
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
	spec_worker_argv(sp->s, &argv);
	proc_env_inherit(&common);
	env_drop_supervisor_only(&common);
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
		if ((rc = logcap_open(&w->log, sp->run_dir, w->rank, sp->s->logs_max_bytes, err)))
			tc_error_prefix(err, "cannot start rank %d", w->rank);
		else if ((rc = start_worker(sp, w, &argv, &env, err)))
			tc_error_prefix(err, "rank %d", w->rank);
		strvec_clear(&env);
		if (rc)
			break;
		sup_watchdog_tell(sp, (int32_t)w->pid);
		w->reaped = false;
		w->status = 0;
		w->started = now_wall();
		sbuf_init(&w->out.partial, 0);
		sbuf_init(&w->err.partial, 0);
	}
	strvec_clear(&argv);
	strvec_clear(&common);
	return rc;
}

int sup_resolve_secrets(struct sup *sp, struct tc_err *err)
{
	char *local = sp->o->secrets ? NULL : secret_local_dir(sp->o->home);
	struct secret_src src = { .given = sp->o->secrets, .local_dir = local };
	int rc = secret_resolve(sp->s, &src, &sp->secrets, err);
	free(local);
	return rc;
}

void sup_mask_secrets(struct sup *sp, struct sbuf *sb, size_t from)
{
	struct sbuf m = SBUF_INIT;
	if (from < sb->len && secret_mask(&sp->secrets.mask, sb->buf + from, sb->len - from, &m)) {
		sbuf_setlen(sb, from);
		sbuf_add(sb, m.buf, m.len);
	}
	sbuf_release(&m);
}

int *sup_rank_ports(struct sup *sp)
{
	if (!env_needs_rank_ports(sp->s->framework))
		return NULL;
	int *ports = xcalloc((size_t)sp->n, sizeof(int));
	for (int i = 0; i < sp->n; i++)
		ports[i] = launch_free_port();
	return ports;
}

int sup_start_workers(struct sup *sp, const struct env_plan *plan, const char *env_file,
		      struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	char *envtext = env_file_text(plan);
	sbuf_adds(&text, envtext);
	free(envtext);
	/* what every worker runs, as a shell reads it back (image jobs: inside the container) */
	struct strvec argv = STRVEC_INIT;
	spec_worker_argv(sp->s, &argv);
	size_t from = text.len;
	sbuf_adds(&text, "# every worker runs: ");
	sbuf_add_shell_argv(&text, (const char *const *)argv.v, argv.nr);
	sbuf_addch(&text, '\n');
	strvec_clear(&argv);
	sup_mask_secrets(sp, &text, from);
	int rc = sup_write_private(sp->run_dir, env_file, text.buf, err);
	sbuf_release(&text);
	if (rc)
		return rc;
	sp->failed = false;
	sp->stopping = false;
	sp->kill_at = 0;
	/* the last attempt's stop is not this one's */
	if (unlink(sp->stop_file) < 0 && errno != ENOENT)
		sup_say(sp, "warning: cannot remove %s: %s", sp->stop_file, strerror(errno));
	if ((rc = spawn_workers(sp, plan, err))) {
		/* those that started are stopped, and recorded, with their ends */
		struct tc_err e2 = TC_ERR_INIT;
		if (sup_record_started(sp, NULL, &e2))
			sup_say(sp, "warning: %s", e2.msg);
		tc_err_release(&e2);
		sup_begin_stop(sp);
		sp->kill_at = now_mono_ms();
		sup_attempt_loop(sp);
	}
	return rc;
}

/* ---- stopping and reaping ---- */

static void reap(struct sup *sp)
{
	int status;
	pid_t pid;
	bool txn = false; /* the ends reaped together are written in one transaction */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == sp->watchdog_pid) {
			sp->watchdog_pid = -1;
			if (sp->watchdog_fd >= 0)
				close(sp->watchdog_fd);
			sp->watchdog_fd = -1;
			sup_say(sp, "warning: the watchdog process ended early");
			continue;
		}
		if (sup_endpoints_reaped(sp, pid, status))
			continue;
		struct worker *w = NULL;
		for (int i = 0; i < sp->n; i++)
			if (sp->w[i].pid == pid && !sp->w[i].reaped)
				w = &sp->w[i];
		if (!w)
			continue;
		w->reaped = true;
		w->status = status;
		struct tc_err e2 = TC_ERR_INIT;
		if (!txn)
			txn = sink_begin(sp->sink, &e2) == 0; /* else each end writes alone */
		tc_err_release(&e2);
		if (sink_worker_end(sp->sink, sp->job_id, sp->attempt, w->rank,
				     WIFEXITED(status) ? WEXITSTATUS(status) : -1,
				     WIFSIGNALED(status) ? WTERMSIG(status) : 0, &e2))
			sup_say(sp, "warning: %s", e2.msg);
		tc_err_release(&e2);
		bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		sup_watch_exit(sp, ok);
		if (!ok && !sp->failed && !sp->user_signal) {
			sp->failed = true;
			sp->fail_rank = w->rank;
			sp->fail_status = status;
			struct sbuf d = SBUF_INIT;
			proc_describe_exit(&d, status);
			sup_event(sp, "rank %d %s; stopping the other workers", w->rank, d.buf);
			sbuf_release(&d);
			sup_begin_stop(sp);
		}
	}
	struct tc_err e3 = TC_ERR_INIT;
	if (txn && sink_commit(sp->sink, 0, &e3))
		sup_say(sp, "warning: %s", e3.msg);
	tc_err_release(&e3);
}

static bool all_reaped(struct sup *sp)
{
	for (int i = 0; i < sp->n; i++)
		if (!sp->w[i].reaped)
			return false;
	return true;
}

/* What the signalfd holds: stop requests, and USR1/USR2 passed to the workers. */
static void read_signals(struct sup *sp)
{
	struct signalfd_siginfo si;
	while (read(sp->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD)
			continue;
		if (sig == SIGUSR1 || sig == SIGUSR2) {
			/* e.g. Slurm's --signal warning: the workers checkpoint */
			sup_event(sp, "%s received: passing it to the workers", strsignal(sig));
			sup_stop_pending(sp, strsignal(sig)); /* a time limit is near */
			sup_signal_groups(sp, sig);
			continue;
		}
		if (sp->user_signal) {
			struct sbuf name = SBUF_INIT;
			proc_describe_stop_signal(&name, sig);
			sup_event(sp, "second %s: killing the workers now", name.buf);
			sbuf_release(&name);
			sp->kill_at = now_mono_ms();
			continue;
		}
		sp->user_signal = sig;
		struct sbuf name = SBUF_INIT;
		proc_describe_stop_signal(&name, sig);
		sup_event(sp, "%s received: stopping the workers (SIGKILL in %d s)", name.buf,
			  sp->s->grace_seconds);
		sbuf_release(&name);
		sup_begin_stop(sp);
	}
}

/* The drain window is over: what is left of every stream goes out, the pipes close. */
static void close_streams(struct sup *sp)
{
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

/* Run one attempt to its end (all reaped, pipes drained). */
void sup_attempt_loop(struct sup *sp)
{
	struct pollfd *pfd = xcalloc((size_t)sp->n * 2 + 1, sizeof(*pfd));
	struct stream **which = xcalloc((size_t)sp->n * 2 + 1, sizeof(*which));
	struct worker **owner = xcalloc((size_t)sp->n * 2 + 1, sizeof(*owner));
	int64_t drain_until = 0, rest_until = 0;
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
			sup_signal_groups(sp, SIGKILL);
			drain_until = now_mono_ms() + DRAIN_MS;
		}
		int64_t now = now_mono_ms();
		int timeout = sp->mi ? metrics_ingest_tick(sp->mi, now) : -1;
		int wt = sup_watch_tick(sp, now);
		if (wt >= 0 && (timeout < 0 || wt < timeout))
			timeout = wt;
		int lt = sup_limit_tick(sp, now);
		if (lt >= 0 && (timeout < 0 || lt < timeout))
			timeout = lt;
		int ct = console_tick(sp->con, now);
		if (ct >= 0 && (timeout < 0 || ct < timeout))
			timeout = ct;
		int dt = sup_disk_tick(sp, now);
		if (dt >= 0 && (timeout < 0 || dt < timeout))
			timeout = dt;
		int it = sup_idle_tick(sp, now);
		if (it >= 0 && (timeout < 0 || it < timeout))
			timeout = it;
		if (sp->kill_at && (timeout < 0 || sp->kill_at - now < timeout))
			timeout = sp->kill_at > now ? (int)(sp->kill_at - now) : 0;
		if (drain_until) {
			int t = drain_until > now ? (int)(drain_until - now) : 0;
			timeout = timeout < 0 || t < timeout ? t : timeout;
		}
		/* the pipes rest (COALESCE_MS) while the workers run; signals never wait */
		int nfds = np;
		if (rest_until > now && !reaped_all && !drain_until) {
			nfds = 1;
			int t = (int)(rest_until - now);
			timeout = timeout < 0 || t < timeout ? t : timeout;
		}
		int r = poll(pfd, (nfds_t)nfds, timeout);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (pfd[0].revents & POLLIN)) {
			read_signals(sp);
			reap(sp);
		}
		bool got = false, busy = false;
		for (int i = 1; r > 0 && i < nfds; i++)
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				got = true;
				busy |= stream_read(sp, owner[i], which[i]);
			}
		now = now_mono_ms();
		if (got)
			rest_until = busy ? 0 : now + COALESCE_MS;
		if (sp->kill_at && now >= sp->kill_at) {
			sup_signal_groups(sp, SIGKILL);
			sp->kill_at = 0;
		}
		if (drain_until && now >= drain_until)
			close_streams(sp);
		reap(sp); /* SIGCHLD may have been coalesced with another signal */
	}
	sup_disk_attempt_end(sp); /* before the logs close */
	for (int i = 0; i < sp->n; i++) {
		logcap_close(&sp->w[i].log);
	}
	sup_container_attempt_end(sp);
	sup_watchdog_tell(sp, 0);
	sup_endpoints_watch(sp); /* they outlive the attempt */
	free(pfd);
	free(which);
	free(owner);
}
