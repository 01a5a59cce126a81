/* state.c -- the state tables of jobs, sweeps, trials and endpoints, and their edges (state.h). */
#include "jobs/state.h"

#include <string.h>

enum kind { ACTIVE, WAITING, TERMINAL };

static const struct state_row {
	const char *name;
	enum kind kind;
} states[JOB_NSTATES] = {
	[JOB_QUEUED] = { "queued", WAITING },
	[JOB_STARTING] = { "starting", ACTIVE },
	[JOB_RUNNING] = { "running", ACTIVE },
	[JOB_RESTARTING] = { "restarting", ACTIVE },
	[JOB_PAUSED] = { "paused", WAITING },
	[JOB_PREEMPTED] = { "preempted", WAITING },
	[JOB_SUCCEEDED] = { "succeeded", TERMINAL },
	[JOB_FAILED] = { "failed", TERMINAL },
	[JOB_KILLED] = { "killed", TERMINAL },
	[JOB_LOST] = { "lost", TERMINAL },
};

static bool valid(enum job_state s)
{
	return (unsigned)s < JOB_NSTATES;
}

const char *job_state_name(enum job_state s)
{
	return valid(s) ? states[s].name : "?";
}

bool job_state_parse(const char *name, size_t len, enum job_state *out)
{
	for (int i = 0; i < JOB_NSTATES; i++)
		if (strlen(states[i].name) == len && !memcmp(states[i].name, name, len)) {
			*out = (enum job_state)i;
			return true;
		}
	return false;
}

bool job_state_terminal(enum job_state s)
{
	return valid(s) && states[s].kind == TERMINAL;
}

bool job_state_active(enum job_state s)
{
	return valid(s) && states[s].kind == ACTIVE;
}

bool job_state_waiting(enum job_state s)
{
	return valid(s) && states[s].kind == WAITING;
}

#define BIT(s) (1u << (s))

/* edges[from]: the states the diagram of state.h lets a job go to */
static const unsigned edges[JOB_NSTATES] = {
	/*
	 * a queued Slurm job may end without running (cancelled, forgotten by
	 * Slurm); its driver records running straight from queued when it starts
	 * before the server's poll saw Slurm's RUNNING (or after a requeue);
	 * running to running is a requeued Slurm job's next attempt whose driver
	 * started before anyone saw Slurm's PENDING
	 */
	[JOB_QUEUED] = BIT(JOB_QUEUED) | BIT(JOB_STARTING) | BIT(JOB_RUNNING) | BIT(JOB_PAUSED) |
		       BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) | BIT(JOB_KILLED) | BIT(JOB_LOST),
	[JOB_STARTING] = BIT(JOB_STARTING) | BIT(JOB_RUNNING) | BIT(JOB_QUEUED) |
			 BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) | BIT(JOB_KILLED) | BIT(JOB_LOST) |
			 BIT(JOB_PAUSED) | BIT(JOB_PREEMPTED),
	[JOB_RUNNING] = BIT(JOB_RUNNING) | BIT(JOB_RESTARTING) | BIT(JOB_PAUSED) | BIT(JOB_PREEMPTED) |
			BIT(JOB_QUEUED) | BIT(JOB_STARTING) | BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) |
			BIT(JOB_KILLED) | BIT(JOB_LOST),
	[JOB_RESTARTING] = BIT(JOB_RUNNING) | BIT(JOB_PAUSED) | BIT(JOB_PREEMPTED) |
			   BIT(JOB_QUEUED) | BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) | BIT(JOB_KILLED) |
			   BIT(JOB_LOST),
	[JOB_PAUSED] = BIT(JOB_QUEUED) | BIT(JOB_STARTING) | BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) |
		       BIT(JOB_KILLED) | BIT(JOB_LOST),
	/* `trainctl pause` of a job waiting to be requeued (backend.c: local_pause) */
	[JOB_PREEMPTED] = BIT(JOB_QUEUED) | BIT(JOB_PAUSED) | BIT(JOB_KILLED),
	[JOB_LOST] = BIT(JOB_QUEUED),
};

bool job_state_can(enum job_state from, enum job_state to)
{
	return valid(from) && valid(to) && (edges[from] & BIT(to)) != 0;
}

/* ---- sweeps, trials, endpoints (state.h) ---- */

struct word_row {
	const char *name;
	bool final;
	unsigned edges; /* BIT(to) for each state it may go to */
};

static const struct word_row sweep_rows[SWEEP_NSTATES] = {
	[SWEEP_RUNNING] = { "running", false, BIT(SWEEP_DONE) | BIT(SWEEP_FAILED) | BIT(SWEEP_STOPPED) },
	[SWEEP_DONE] = { "done", true, 0 },
	[SWEEP_FAILED] = { "failed", true, 0 },
	[SWEEP_STOPPED] = { "stopped", true, 0 },
};

#define TRIAL_ENDS                                                                               \
	(BIT(TRIAL_SUCCEEDED) | BIT(TRIAL_FAILED) | BIT(TRIAL_KILLED) | BIT(TRIAL_STOPPED) |      \
	 BIT(TRIAL_FAILED_OBJECTIVE))

static const struct word_row trial_rows[TRIAL_NSTATES] = {
	[TRIAL_PENDING] = { "pending", false, BIT(TRIAL_RUNNING) | BIT(TRIAL_FAILED) | BIT(TRIAL_KILLED) },
	[TRIAL_RUNNING] = { "running", false, TRIAL_ENDS },
	[TRIAL_SUCCEEDED] = { "succeeded", true, BIT(TRIAL_FAILED_OBJECTIVE) },
	[TRIAL_FAILED] = { "failed", true, 0 },
	[TRIAL_KILLED] = { "killed", true, 0 },
	[TRIAL_STOPPED] = { "stopped", true, 0 },
	[TRIAL_FAILED_OBJECTIVE] = { "failed-objective", true, 0 },
};

static const struct word_row endpoint_rows[ENDPOINT_NSTATES] = {
	[ENDPOINT_RUNNING] = { "running", false,
			       BIT(ENDPOINT_FAILED) | BIT(ENDPOINT_EXITED) | BIT(ENDPOINT_STOPPED) },
	[ENDPOINT_FAILED] = { "failed", true, 0 },
	[ENDPOINT_EXITED] = { "exited", true, 0 },
	[ENDPOINT_STOPPED] = { "stopped", true, 0 },
};

static const char *row_name(const struct word_row *rows, int n, int s)
{
	return s >= 0 && s < n ? rows[s].name : "?";
}

static bool row_parse(const struct word_row *rows, int n, const char *name, int *out)
{
	for (int i = 0; name && i < n; i++)
		if (!strcmp(rows[i].name, name)) {
			*out = i;
			return true;
		}
	return false;
}

static bool row_final(const struct word_row *rows, int n, int s)
{
	return s >= 0 && s < n && rows[s].final;
}

static bool row_can(const struct word_row *rows, int n, int from, int to)
{
	return from >= 0 && from < n && to >= 0 && to < n && (rows[from].edges & BIT(to)) != 0;
}

/* state.h: enum word_edge, for a row holding from (NULL: none) written with to */
static enum word_edge row_edge(const struct word_row *rows, int n, const char *from,
			       const char *to)
{
	int f, t;
	if (!row_parse(rows, n, to, &t))
		return WORD_REFUSE;
	if (!from || !row_parse(rows, n, from, &f) || f == t || row_can(rows, n, f, t))
		return WORD_WRITE;
	return rows[f].final && rows[t].final ? WORD_KEEP : WORD_REFUSE;
}

#define WORD_TABLE(kind, rows, n)                                                                \
	const char *kind##_state_name(enum kind##_state s)                                       \
	{                                                                                        \
		return row_name(rows, n, (int)s);                                                \
	}                                                                                        \
	bool kind##_state_parse(const char *name, enum kind##_state *out)                        \
	{                                                                                        \
		int i;                                                                           \
		if (!row_parse(rows, n, name, &i))                                               \
			return false;                                                            \
		*out = (enum kind##_state)i;                                                     \
		return true;                                                                     \
	}                                                                                        \
	bool kind##_state_is(const char *word, enum kind##_state s)                              \
	{                                                                                        \
		return word && !strcmp(word, row_name(rows, n, (int)s));                         \
	}                                                                                        \
	bool kind##_state_final(enum kind##_state s)                                             \
	{                                                                                        \
		return row_final(rows, n, (int)s);                                               \
	}                                                                                        \
	bool kind##_state_can(enum kind##_state from, enum kind##_state to)                      \
	{                                                                                        \
		return row_can(rows, n, (int)from, (int)to);                                     \
	}                                                                                        \
	enum word_edge kind##_word_edge(const char *from, const char *to)                        \
	{                                                                                        \
		return row_edge(rows, n, from, to);                                              \
	}

WORD_TABLE(sweep, sweep_rows, SWEEP_NSTATES)
WORD_TABLE(trial, trial_rows, TRIAL_NSTATES)
WORD_TABLE(endpoint, endpoint_rows, ENDPOINT_NSTATES)

static const char *const stop_names[] = {
	[JOB_STOP_NONE] = NULL,
	[JOB_STOP_STOPPED] = "stopped",
	[JOB_STOP_PAUSED] = "paused",
	[JOB_STOP_PREEMPTED] = "preempted",
};

const char *job_stop_name(enum job_stop why)
{
	return (unsigned)why < sizeof(stop_names) / sizeof(stop_names[0]) ? stop_names[why] : NULL;
}

enum job_stop job_stop_parse(const char *name)
{
	for (size_t i = 1; name && i < sizeof(stop_names) / sizeof(stop_names[0]); i++)
		if (!strcmp(stop_names[i], name))
			return (enum job_stop)i;
	return JOB_STOP_NONE;
}

enum job_state job_stop_state(enum job_stop why)
{
	return why == JOB_STOP_PAUSED ? JOB_PAUSED : why == JOB_STOP_PREEMPTED ? JOB_PREEMPTED
									    : JOB_KILLED;
}

/* ---- notes: events that are no change of state (state.h) ---- */

static const char *const note_names[] = {
	[JOB_NOTE_NONE] = "",
	[JOB_NOTE_HANG] = "hang",
	[JOB_NOTE_STRAGGLER] = "straggler",
	[JOB_NOTE_LOG_MATCH] = "log_match",
	[JOB_NOTE_RESUME_MISMATCH] = "resume_mismatch",
	[JOB_NOTE_UNHEALTHY] = "unhealthy",
	[JOB_NOTE_NODE_EXCLUDED] = "node_excluded",
	[JOB_NOTE_DISK_FULL] = "disk_full",
	[JOB_NOTE_IDLE] = "idle",
	[JOB_NOTE_NODE_LOST] = "node_lost",
	[JOB_NOTE_WAIT_NODES] = "wait_nodes",
	[JOB_NOTE_ROUND] = "round",
	[JOB_NOTE_SPARES_IGNORED] = "spares_ignored",
};

const char *job_note_name(enum job_note n)
{
	return (size_t)n < sizeof(note_names) / sizeof(note_names[0]) ? note_names[n] : "";
}

enum job_note job_note_of_reason(const char *reason)
{
	for (size_t i = 1; reason && i < sizeof(note_names) / sizeof(note_names[0]); i++) {
		size_t n = strlen(note_names[i]);
		if (!strncmp(reason, note_names[i], n) && reason[n] == ':' && reason[n + 1] == ' ')
			return (enum job_note)i;
	}
	return JOB_NOTE_NONE;
}
