/*
 * srvlog.c -- the server's log lines (srvlog.h).
 */
#include "server/srvlog.h"
#include "server/server_int.h"
#include "core/sbuf.h"
#include "core/util.h"

#include <string.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool journal;

/* systemd sets JOURNAL_STREAM=DEV:INODE for a stdout or stderr it connected to journald */
static void journal_check(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	char end;
	struct stat st;
	if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2)
		return;
	if (fstat(STDERR_FILENO, &st) < 0) {
		errno = 0;
		return;
	}
	journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool srvlog_journal(void)
{
	pthread_once(&journal_once, journal_check);
	return journal;
}

void srvlog_v(int level, const char *fmt, va_list ap)
{
	struct sbuf sb = SBUF_INIT;
	if (srvlog_journal()) {
		sbuf_addf(&sb, "<%d>", level);
	} else {
		format_time_utc(&sb, now_wall());
		sbuf_adds(&sb, " trainctl server: ");
	}
	size_t start = sb.len;
	sbuf_vaddf(&sb, fmt, ap);
	size_t n = sb.len;
	while (n > start && sb.buf[n - 1] == '\n')
		n--;
	sbuf_setlen(&sb, n);
	for (size_t i = start; i < sb.len; i++)
		if (sb.buf[i] == '\n' || sb.buf[i] == '\r')
			sb.buf[i] = ' ';
	sbuf_addch(&sb, '\n');
	if (write_all(STDERR_FILENO, sb.buf, sb.len) < 0)
		errno = 0; /* a closed terminal must not stop the server */
	sbuf_release(&sb);
}

void srvlog(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	srvlog_v(level, fmt, ap);
	va_end(ap);
}

void srvlog_act_v(bool quiet, const char *fmt, va_list ap)
{
	if (quiet)
		return;
	srvlog_v(strncmp(fmt, "warning: ", 9) ? SRVLOG_INFO : SRVLOG_WARNING, fmt, ap);
}

void srvlog_act(bool quiet, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	srvlog_act_v(quiet, fmt, ap);
	va_end(ap);
}

void srv_say(void *arg, const char *line)
{
	const struct srv *s = arg;
	srvlog_act(s->o.quiet, "%s", line);
}
