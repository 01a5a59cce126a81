/* state.c -- the job state table and the diagram's edges (state.h). */
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
	 * before the server's poll saw Slurm's RUNNING (or after a requeue)
	 */
	[JOB_QUEUED] = BIT(JOB_QUEUED) | BIT(JOB_STARTING) | BIT(JOB_RUNNING) | BIT(JOB_PAUSED) |
		       BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) | BIT(JOB_KILLED) | BIT(JOB_LOST),
	[JOB_STARTING] = BIT(JOB_STARTING) | BIT(JOB_RUNNING) | BIT(JOB_QUEUED) |
			 BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) | BIT(JOB_KILLED) | BIT(JOB_LOST) |
			 BIT(JOB_PAUSED) | BIT(JOB_PREEMPTED),
	[JOB_RUNNING] = BIT(JOB_RESTARTING) | BIT(JOB_PAUSED) | BIT(JOB_PREEMPTED) |
			BIT(JOB_QUEUED) | BIT(JOB_STARTING) | BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) |
			BIT(JOB_KILLED) | BIT(JOB_LOST),
	[JOB_RESTARTING] = BIT(JOB_RUNNING) | BIT(JOB_PAUSED) | BIT(JOB_PREEMPTED) |
			   BIT(JOB_QUEUED) | BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) | BIT(JOB_KILLED) |
			   BIT(JOB_LOST),
	[JOB_PAUSED] = BIT(JOB_QUEUED) | BIT(JOB_STARTING) | BIT(JOB_SUCCEEDED) | BIT(JOB_FAILED) |
		       BIT(JOB_KILLED) | BIT(JOB_LOST),
	[JOB_PREEMPTED] = BIT(JOB_QUEUED) | BIT(JOB_KILLED),
	[JOB_LOST] = BIT(JOB_QUEUED),
};

bool job_state_can(enum job_state from, enum job_state to)
{
	return valid(from) && valid(to) && (edges[from] & BIT(to)) != 0;
}

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
