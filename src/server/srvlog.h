/*
 * srvlog.h -- the server's log on stderr: one line per event, each with a
 * level.  Under systemd (stderr is the journal: JOURNAL_STREAM names its
 * device and inode) a line is "<N>text", the sd-daemon prefix from which
 * journald takes the priority, and carries no time of its own (journald
 * stamps it); elsewhere it is "TIME trainctl server: text".  A message's
 * own newlines become spaces, so that an event stays one line.
 */
#ifndef TC_SRVLOG_H
#define TC_SRVLOG_H

#include "core/err.h"

#include <stdarg.h>
#include <stdbool.h>

/* syslog(3)'s numbers, which the "<N>" prefix carries */
enum srvlog_level {
	SRVLOG_ERR = 3,     /* the server failed at something (a request's 500) */
	SRVLOG_WARNING = 4, /* something went wrong and the server goes on */
	SRVLOG_NOTICE = 5,  /* what an operator must see: the login URL, stopping */
	SRVLOG_INFO = 6,    /* activity: jobs started, ended, preempted */
};

void srvlog(int level, const char *fmt, ...) TC_PRINTF(2, 3);
void srvlog_v(int level, const char *fmt, va_list ap);
/*
 * The server's activity, unless quiet (--quiet): the callers' words say the
 * level, a warning when the format starts "warning: ", info otherwise.
 */
void srvlog_act(bool quiet, const char *fmt, ...) TC_PRINTF(2, 3);
void srvlog_act_v(bool quiet, const char *fmt, va_list ap);
/* Whether stderr is the journal (JOURNAL_STREAM matches it); read once. */
bool srvlog_journal(void);

#endif
