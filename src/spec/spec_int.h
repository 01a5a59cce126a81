/*
 * spec_int.h -- private to spec/: the state of one walk over a YAML spec
 * and the rule tables that walk it.
 *
 * A walk checks one document key by key.  Each mapping has a rule table
 * (struct rule): the key, its handler, and, for features not built yet,
 * the reason it is refused.  Handlers store into w->s and report errors
 * through walk_fail, which prefixes "file:line: key: ".  The rules live in
 * rules.c (most keys) and placement.c (devices: and parallel:, which also
 * resolve against the machine and the planner after the walk); walk.c
 * holds the walker and the typed getters; spec.c the entry points.
 */
#ifndef TC_SPEC_INT_H
#define TC_SPEC_INT_H

#include "spec/spec.h"
#include "core/err.h"

#include <stdbool.h>
#include <string.h>
#include <jansson.h>
#include <yaml.h>

struct walk {
	yaml_document_t *doc;
	const char *file;
	const char *base; /* directory that relative paths resolve against */
	struct spec *s;
	struct tc_err *err;
	/* remembered nodes for cross-key checks */
	int per_node_line, ids_line, type_line;
	bool per_node_all, per_node_set;
	int parallel_line; /* where parallel: is, for the planner's errors */
	int nodes_line, slurm_line; /* for "nodes > 1 needs backend: slurm" */
	int key_line;     /* the key whose handler runs (walk_map) */
	int devices_line; /* where devices: is, for the device count's errors */
	int container_line; /* where container: is ("needs image:") */
	int runtime_line;   /* where container.runtime is (pyxis needs backend: slurm) */
	int idle_line;      /* where limits.idle_minutes is (it needs an endpoint to watch) */
};

typedef int (*rule_fn)(struct walk *w, yaml_node_t *n, const char *key);

struct rule {
	const char *key;
	rule_fn fn;
	const char *not_yet; /* non-NULL: refused with this reason */
};

static inline int line_of(yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

static inline const char *scalar(yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static inline bool plain(yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static inline bool is_null(yaml_node_t *n)
{
	const char *v = scalar(n);
	return plain(n) && (!*v || !strcmp(v, "null") || !strcmp(v, "~"));
}

/* walk.c: all return 0, or TC_ESPEC with w->err set to "file:line: key: ..." */
int walk_fail(struct walk *w, yaml_node_t *n, const char *key, const char *fmt, ...)
	TC_PRINTF(4, 5);
int walk_string(struct walk *w, yaml_node_t *n, const char *key, char **out);
int walk_int(struct walk *w, yaml_node_t *n, const char *key, long min, long max, int *out);
int walk_enum(struct walk *w, yaml_node_t *n, const char *key, const char *const *allowed,
	      char **out);
/* Walk a mapping with a rule table; prefix names nested keys ("devices."). */
int walk_map(struct walk *w, yaml_node_t *map, const char *prefix, const struct rule *rules);

/*
 * override.c: --set.  A node an override made (its value, and the keys and
 * mappings made on its path) has the line SPEC_SET_LINE + the override's
 * index, so that the walk's errors can name the override (spec_set_where);
 * no spec file has a billion lines.
 */
#define SPEC_SET_LINE 1000000000
static inline bool from_set(yaml_node_t *n)
{
	return n && line_of(n) >= SPEC_SET_LINE;
}
/* Graft sets into doc (its root a mapping; anything else is left to the walk). */
int spec_apply_sets(yaml_document_t *doc, const struct strvec *sets, struct tc_err *err);
/* An error of the walk at an override's line: "FILE:LINE: ..." becomes "--set K=V: ...". */
void spec_set_where(struct tc_err *err, const char *file, const struct strvec *sets);

/* rules.c: the top-level table, handed to walk_map by spec.c */
extern const struct rule spec_top_rules[];

/* notify_rules.c: notify: (a list of webhooks) and its JSON form both ways */
int spec_r_notify(struct walk *w, yaml_node_t *n, const char *key);
json_t *spec_notify_json(const struct spec *s);
void spec_notify_take(struct spec *s, json_t *a);

/* endpoint_rules.c: endpoints: (services beside the workers) and their JSON form both ways */
int spec_r_endpoints(struct walk *w, yaml_node_t *n, const char *key);
json_t *spec_endpoints_json(const struct spec *s);
void spec_endpoints_take(struct spec *s, json_t *a);
void spec_endpoints_free(struct spec_endpoint *v, size_t n);

/* limit_rules.c: limits:, logs: and on_disk_full: */
int spec_r_limits(struct walk *w, yaml_node_t *n, const char *key);
/* placement.c: nodes: (N, or {min, max}) and spares: */
int spec_r_nodes(struct walk *w, yaml_node_t *n, const char *key);
int spec_r_spares(struct walk *w, yaml_node_t *n, const char *key);
int spec_r_logs(struct walk *w, yaml_node_t *n, const char *key);
int spec_r_on_disk_full(struct walk *w, yaml_node_t *n, const char *key);
/* After the walk: limits.idle_minutes only with an endpoint whose activity is watched. */
int spec_check_limits(struct walk *w);

/* container_rules.c: image: and container: (docs/containers.md), JSON both ways */
int spec_r_image(struct walk *w, yaml_node_t *n, const char *key);
int spec_r_container(struct walk *w, yaml_node_t *n, const char *key);
void spec_container_json(const struct spec *s, json_t *o);
void spec_container_take(struct spec *s, json_t *o);
void spec_container_free(struct spec *s);

/* placement.c: devices: and parallel: */
int spec_r_devices(struct walk *w, yaml_node_t *n, const char *key);
int spec_r_parallel(struct walk *w, yaml_node_t *n, const char *key);
/* Ask the planner for the best split of this job's devices (after the walk). */
int spec_plan_parallel(struct walk *w);
/*
 * Where the device count came from, for messages: the key the user wrote
 * (devices.per_node, devices.ids), else devices: itself (per_node's default
 * of 1); an ad hoc run's --nproc / --device (no file).
 */
struct dev_where {
	const char *file; /* NULL: ad hoc */
	int count_line;
	const char *count_key;
};
/* Resolve the device count against the machine (shared by file and ad hoc). */
int spec_finish_devices(struct spec *s, const struct dev_where *dw, bool per_node_all,
			struct tc_err *err);

/* The first of extra's options whose name is not in allowed (NULL: all are). */
const char *spec_extra_refused(const struct strvec *extra, const char *const *allowed, size_t nallowed);

#endif
