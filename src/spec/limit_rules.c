/*
 * limit_rules.c -- the keys that bound what a job may use: limits:
 * (max_runtime), logs: (each rank log's cap) and on_disk_full: (what a
 * full output disk does); see spec_int.h.
 */
#include "spec/spec_int.h"
#include "core/util.h"
#include "plan/plan.h"

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

static const struct rule limits_rules[] = {
	{ "max_runtime", r_max_runtime, NULL },
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
