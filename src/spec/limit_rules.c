/*
 * limit_rules.c -- the keys that bound what a job may use: limits:
 * (max_runtime, idle_minutes), logs: (each rank log's cap) and on_disk_full: (what a
 * full output disk does); see spec_int.h.
 */
#include "spec/spec_int.h"
#include "backend/names.h"
#include "core/util.h"
#include "endpoint/endpoint.h"
#include "plan/plan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- limits: ---- */

#define MAX_RUNTIME_MAX (365L * 86400)

static int r_max_runtime(struct walk *w, yaml_node_t *n, const char *key)
{
	const char *v = n->type == YAML_SCALAR_NODE && !is_null(n) ? scalar(n) : NULL;
	if (!v || !parse_duration(v, MAX_RUNTIME_MAX, &w->s->max_runtime))
		return walk_fail(w, n, key,
				 "must be a duration with a unit, such as 90m, 2h, 1h30m or 45s "
				 "(at most 365d), not '%s'", v ? v : "a list or mapping");
	return 0;
}

/* a tenth of a minute is short enough for a test; a year is max_runtime's bound too */
#define IDLE_MINUTES_MIN 0.05
#define IDLE_MINUTES_MAX (365.0 * 24 * 60)

/* A plain number of minutes (the key says the unit), fractions allowed. */
static int r_idle_minutes(struct walk *w, yaml_node_t *n, const char *key)
{
	const char *v = plain(n) && !is_null(n) ? scalar(n) : NULL;
	char *end = NULL;
	errno = 0;
	double d = v ? strtod(v, &end) : 0;
	if (!v || end == v || *end || errno || !isfinite(d) || d < IDLE_MINUTES_MIN ||
	    d > IDLE_MINUTES_MAX)
		return walk_fail(w, n, key,
				 "must be a number of minutes from 0.05 to 525600 (365 days), such as "
				 "30 or 0.5, not '%s'", v ? v : scalar(n) ? scalar(n) : "a list or mapping");
	w->s->idle_minutes = d;
	w->idle_line = line_of(n);
	return 0;
}

bool spec_idle_watched(const struct spec *s)
{
	bool watched = false;
	for (size_t i = 0; i < s->nendpoints; i++) {
		const struct endpoint_kind *k = endpoint_kind_find(s->endpoints[i].kind);
		watched |= k && k->activity;
	}
	return watched;
}

/* the supervisor of a local one-node job watches; a Slurm job's nodes do not yet */
static bool idle_supported(const struct spec *s)
{
	return s->nodes <= 1 && !strcmp(s->backend, backend_names[BACKEND_LOCAL]);
}

int spec_check_limits(struct walk *w)
{
	const struct spec *s = w->s;
	if (s->idle_minutes <= 0)
		return 0;
	if (!spec_idle_watched(s))
		return tc_error(w->err, TC_ESPEC,
				"%s:%d: limits.idle_minutes: is for an interactive job: it needs an "
				"endpoint whose activity trainctl can see (endpoints: with kind %s), and "
				"this job has none",
				w->file, w->idle_line, endpoint_idle_kind_names());
	if (!idle_supported(s))
		return tc_error(w->err, TC_ESPEC,
				"%s:%d: limits.idle_minutes: is watched for a one-node job of backend "
				"local, not yet for backend %s",
				w->file, w->idle_line, s->backend);
	return 0;
}

bool spec_idle_default(struct spec *s, double minutes)
{
	if (s->idle_minutes > 0 || minutes <= 0 || !spec_idle_watched(s) || !idle_supported(s))
		return false;
	s->idle_minutes = minutes;
	return true;
}

static const struct rule limits_rules[] = {
	{ "max_runtime", r_max_runtime, NULL },
	{ "idle_minutes", r_idle_minutes, NULL },
	{ NULL, NULL, NULL },
};

int spec_r_limits(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "limits.", limits_rules);
}

/* ---- logs: (docs/spec.md): the rank logs' cap ---- */

static int r_logs_max(struct walk *w, yaml_node_t *n, const char *key)
{
	double v = 0;
	/* 0 is no limit; a smaller cap than a few lines would keep nothing useful */
	if (n->type != YAML_SCALAR_NODE || !plan_parse_size(scalar(n), &v) ||
	    (v != 0 && (v < SPEC_LOGS_MAX_BYTES_MIN || v > (double)(1LL << 50))))
		return walk_fail(w, n, key, "must be a size from 4KiB to 1PiB such as 1GiB, or 0 for no limit");
	w->s->logs_max_bytes = (long long)v;
	return 0;
}

static const struct rule logs_rules[] = {
	{ "max_bytes", r_logs_max, NULL },
	{ NULL, NULL, NULL },
};

int spec_r_logs(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "logs.", logs_rules);
}

/* ---- on_disk_full: (docs/reliability.md) ---- */

int spec_r_on_disk_full(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const names[] = { "stop", "wait", NULL };
	char *v = NULL;
	int rc = walk_enum(w, n, key, names, &v);
	if (!rc)
		w->s->disk_full_wait = !strcmp(v, "wait");
	free(v);
	return rc;
}
