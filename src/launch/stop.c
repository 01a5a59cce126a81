/*
 * stop.c -- how a supervisor's worker groups end (supervisor_int.h): the
 * stop (the stop file first, then SIGTERM to every group, SIGKILL after
 * the grace period), the stop at limits.max_runtime, and the watchdog, a
 * guard process that kills every group when the supervisor dies.  Calls only say.c in launch/.
 */
#include "launch/supervisor_int.h"
#include "core/proc.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* ---- the watchdog: kills every worker group if the supervisor dies ---- */

/*
 * The watchdog's whole life, in its own process: stdin is the pipe from the
 * supervisor, which writes each worker group's pid, or 0 once it has
 * cleaned up the groups itself.  EOF means the supervisor is gone: kill
 * every group still listed.  A guard (proc.h), so only async-signal-safe
 * calls (proc.h: fn).
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

int sup_watchdog_start(struct sup *sp, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	p.fn = watchdog_main;
	int rc = proc_start_guard(&p, &sp->watchdog_fd, err);
	if (!rc)
		sp->watchdog_pid = p.pid;
	proc_clear(&p);
	return rc;
}

void sup_watchdog_tell(struct sup *sp, int32_t msg)
{
	if (sp->watchdog_fd >= 0 && write_all(sp->watchdog_fd, &msg, sizeof(msg)) < 0)
		sup_say(sp, "warning: watchdog unreachable: %s", strerror(errno));
}

void sup_watchdog_stop(struct sup *sp)
{
	int32_t none = 0; /* the groups are cleaned up */
	if (proc_guard_end(&sp->watchdog_fd, sp->watchdog_pid, &none, sizeof(none)) < 0)
		sup_say(sp, "warning: watchdog unreachable: %s", strerror(errno));
}

/* ---- the stop ---- */

void sup_signal_groups(struct sup *sp, int sig)
{
	for (int i = 0; i < sp->n; i++)
		if (sp->w[i].pid > 0)
			kill(-sp->w[i].pid, sig);
}

void sup_stop_pending(struct sup *sp, const char *why)
{
	/* the run folder is the job's account's, as we are: still, no link is followed */
	int fd = open_regular_nofollow(sp->stop_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, why, strlen(why)) < 0 || write_all(fd, "\n", 1) < 0)
		sup_say(sp, "warning: cannot write %s: %s", sp->stop_file, strerror(errno));
	if (fd >= 0 && close(fd) < 0)
		sup_say(sp, "warning: cannot write %s: %s", sp->stop_file, strerror(errno));
}

int sup_limit_tick(struct sup *sp, int64_t now)
{
	if (!sp->limit_at || sp->over_limit || sp->stopping || sp->failed)
		return -1;
	if (now < sp->limit_at)
		return sp->limit_at - now > INT_MAX ? INT_MAX : (int)(sp->limit_at - now);
	sp->over_limit = true;
	sbuf_reset(&sp->fail_why);
	sbuf_adds(&sp->fail_why, "stopped: it ran past limits.max_runtime (");
	format_duration(&sp->fail_why, sp->s->max_runtime);
	sbuf_addch(&sp->fail_why, ')');
	sup_stop_for_limit(sp);
	return -1;
}

void sup_stop_for_limit(struct sup *sp)
{
	sp->failed = true; /* a worker the stop kills is no failure of its own */
	sp->fail_rank = sp->w[0].rank; /* its log's tail goes with the cause */
	sp->fail_status = 0;
	sup_event(sp, "%s; stopping the workers (SIGKILL in %d s)", sp->fail_why.buf,
		  sp->s->grace_seconds);
	sup_begin_stop(sp);
}

void sup_begin_stop(struct sup *sp)
{
	if (sp->stopping)
		return;
	sp->stopping = true;
	sup_stop_pending(sp, sp->user_signal  ? strsignal(sp->user_signal)
			     : sp->fail_why.len ? sp->fail_why.buf
			     : sp->failed       ? "a rank failed: the group stops"
						: "the group stops");
	sup_signal_groups(sp, SIGTERM);
	sp->kill_at = now_mono_ms() + (int64_t)sp->s->grace_seconds * 1000;
}
