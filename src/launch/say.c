/*
 * say.c -- what a supervisor says (supervisor_int.h): a line on stderr and
 * in its node's supervisor log, or the log only, and the job's outcome,
 * said last.  A leaf of launch/: every other part of the supervisor calls
 * it, it calls none of them.
 */
#include "launch/supervisor_int.h"
#include "launch/console_int.h"
#include "core/sbuf.h"
#include "core/util.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

/* msg to the log file logfd (when >= 0) and, when console, to stderr */
static void say_text(int logfd, bool console, const char *msg)
{
	struct sbuf line = SBUF_INIT;
	sbuf_addf(&line, "trainctl: %s\n", msg);
	/* the console copy is best effort: a closed terminal must not stop the job */
	if (console)
		console_before_stderr();
	if (console && write_all(STDERR_FILENO, line.buf, line.len) < 0)
		errno = 0;
	if (logfd >= 0) {
		sbuf_reset(&line);
		format_time_utc(&line, now_wall());
		sbuf_addf(&line, " %s\n", msg);
		if (write_all(logfd, line.buf, line.len) < 0)
			errno = 0;
	}
	sbuf_release(&line);
}

void launch_vsay(int logfd, const char *fmt, va_list ap)
{
	struct sbuf msg = SBUF_INIT;
	sbuf_vaddf(&msg, fmt, ap);
	say_text(logfd, true, msg.buf);
	sbuf_release(&msg);
}

void launch_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	launch_vsay(-1, fmt, ap);
	va_end(ap);
}

enum say_to { SAY_LOG, SAY_CONSOLE, SAY_UNLESS_BRIEF };

static void say_fmt(struct sup *sp, enum say_to to, const char *fmt, va_list ap)
{
	struct sbuf msg = SBUF_INIT;
	sbuf_vaddf(&msg, fmt, ap);
	/* run -q: the console gets the warnings (and the result line, sup_result) only */
	bool console = to == SAY_CONSOLE ||
		       (to == SAY_UNLESS_BRIEF && (!sp->o->brief || !strncmp(msg.buf, "warning: ", 9)));
	say_text(sp->suplog_fd, console, msg.buf);
	sbuf_release(&msg);
}

/* fmt's arguments to say_fmt */
#define SAY_VIA(to)                            \
	do {                                   \
		va_list ap_;                   \
		va_start(ap_, fmt);            \
		say_fmt(sp, (to), fmt, ap_);   \
		va_end(ap_);                   \
	} while (0)

void sup_say(struct sup *sp, const char *fmt, ...)
{
	SAY_VIA(SAY_UNLESS_BRIEF);
}

void sup_log(struct sup *sp, const char *fmt, ...)
{
	SAY_VIA(SAY_LOG);
}

void sup_event(struct sup *sp, const char *fmt, ...)
{
	SAY_VIA(SAY_CONSOLE);
}

void sup_result(struct sup *sp, const char *fmt, ...)
{
	va_list ap;
	sbuf_reset(&sp->result);
	va_start(ap, fmt);
	sbuf_vaddf(&sp->result, fmt, ap);
	va_end(ap);
}

void sup_say_result(struct sup *sp)
{
	if (sp->result.len)
		say_text(sp->suplog_fd, true, sp->result.buf);
}

void sup_say_cb(void *sp, const char *msg)
{
	sup_say(sp, "%s", msg);
}

void sup_event_cb(void *sp, const char *msg)
{
	sup_event(sp, "%s", msg);
}
