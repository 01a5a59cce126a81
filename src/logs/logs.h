/*
 * logs.h -- reading a job's rank logs: the last N lines, or following them
 * while the job runs (`trainctl logs`).  Lines from several ranks get the
 * same "[r] " prefix as on the supervisor's console.
 */
#ifndef TC_LOGS_H
#define TC_LOGS_H

#include <stdbool.h>
#include <stdio.h>

#include "core/err.h"

/* Is the job still running?  Polled while following. */
typedef bool (*logs_alive_fn)(void *data);

struct logs_opts {
	const char *log_dir;
	int rank;        /* -1: every rank_*.log found */
	long tail;       /* -1: everything */
	bool follow;
	bool prefix;     /* "[r] " before each line */
	logs_alive_fn alive;
	void *alive_data;
};

int logs_print(const struct logs_opts *o, FILE *out, struct tc_err *err);

#endif
