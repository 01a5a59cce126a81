/*
 * spec.c -- job spec parsing and validation; see spec.h.
 *
 * The YAML document is loaded whole (yaml_parser_load), then walked with
 * one rule table per mapping.  Each rule names a key, its handler, and,
 * for features not built yet, the reason it is refused.
 */
#include "spec/spec.h"
#include "backend/names.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "plan/plan.h"
#include "storage/storage.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
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
};

typedef int (*rule_fn)(struct walk *w, yaml_node_t *n, const char *key);

struct rule {
	const char *key;
	rule_fn fn;
	const char *not_yet; /* non-NULL: refused with this reason */
};

static int line_of(yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

static int fail(struct walk *w, yaml_node_t *n, const char *key, const char *fmt, ...)
	TC_PRINTF(4, 5);

static int fail(struct walk *w, yaml_node_t *n, const char *key, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	sbuf_addf(&sb, "%s:%d: ", w->file, n ? line_of(n) : 1);
	if (key)
		sbuf_addf(&sb, "%s: ", key);
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	tc_error(w->err, TC_ESPEC, "%s", sb.buf);
	sbuf_release(&sb);
	return TC_ESPEC;
}

static const char *scalar(yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool plain(yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static bool is_null(yaml_node_t *n)
{
	const char *v = scalar(n);
	return plain(n) && (!*v || !strcmp(v, "null") || !strcmp(v, "~"));
}

static int get_string(struct walk *w, yaml_node_t *n, const char *key, char **out)
{
	if (n->type != YAML_SCALAR_NODE || is_null(n))
		return fail(w, n, key, "must be a string");
	free(*out);
	*out = xstrdup(scalar(n));
	return 0;
}

static int get_int(struct walk *w, yaml_node_t *n, const char *key, long min, long max,
		   int *out)
{
	long v;
	if (!plain(n) || !parse_long(scalar(n), LONG_MIN, LONG_MAX, &v))
		return fail(w, n, key, "must be an integer, not '%s'",
			    scalar(n) ? scalar(n) : "a list or mapping");
	if (v < min || v > max)
		return fail(w, n, key, "must be between %ld and %ld, not %ld", min, max, v);
	*out = (int)v;
	return 0;
}

static int check_enum(struct walk *w, yaml_node_t *n, const char *key,
		      const char *const *allowed, char **out)
{
	int rc = get_string(w, n, key, out);
	if (rc)
		return rc;
	struct sbuf list = SBUF_INIT;
	for (const char *const *a = allowed; *a; a++) {
		if (!strcmp(*a, *out)) {
			sbuf_release(&list);
			return 0;
		}
		sbuf_addf(&list, "%s%s", list.len ? ", " : "", *a);
	}
	rc = fail(w, n, key, "'%s' is not one of: %s", *out, list.buf);
	sbuf_release(&list);
	return rc;
}

/* Walk a mapping with a rule table; prefix names nested keys ("devices."). */
static int walk_map(struct walk *w, yaml_node_t *map, const char *prefix,
		    const struct rule *rules)
{
	if (map->type != YAML_MAPPING_NODE)
		return fail(w, map, prefix[0] ? prefix : NULL, "must be a mapping");
	struct sbuf key = SBUF_INIT;
	int rc = 0;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE) {
			rc = fail(w, k ? k : map, NULL, "keys must be plain names");
			goto out;
		}
		/* a key listed twice would silently win or lose: refuse it */
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *k2 = yaml_document_get_node(w->doc, q->key);
			if (k2 && scalar(k2) && !strcmp(scalar(k2), scalar(k))) {
				rc = fail(w, k, NULL, "key '%s%s' is given twice", prefix, scalar(k));
				goto out;
			}
		}
		sbuf_reset(&key);
		sbuf_addf(&key, "%s%s", prefix, scalar(k));
		const struct rule *r = NULL;
		for (const struct rule *x = rules; x->key; x++)
			if (!strcmp(x->key, scalar(k)))
				r = x;
		if (!r) {
			const char *best = NULL;
			size_t bestd = 3;
			for (const struct rule *x = rules; x->key; x++) {
				size_t d = edit_distance(x->key, scalar(k));
				if (d < bestd) {
					bestd = d;
					best = x->key;
				}
			}
			if (best)
				rc = fail(w, k, NULL, "unknown key '%s' (did you mean '%s%s'?)",
					  key.buf, prefix, best);
			else
				rc = fail(w, k, NULL, "unknown key '%s'", key.buf);
			goto out;
		}
		if (r->not_yet) {
			rc = fail(w, k, key.buf, "not supported yet (%s)", r->not_yet);
			goto out;
		}
		rc = r->fn(w, v, key.buf);
		if (rc)
			goto out;
	}
out:
	sbuf_release(&key);
	return rc;
}

/* ---- top-level keys ---- */

static int r_name(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = get_string(w, n, key, &w->s->name);
	if (rc)
		return rc;
	const char *v = w->s->name;
	if (!*v || strlen(v) > 128)
		return fail(w, n, key, "must be 1 to 128 characters");
	for (; *v; v++)
		if (!(*v == '-' || *v == '_' || *v == '.' || (*v >= '0' && *v <= '9') ||
		      (*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z')))
			return fail(w, n, key, "may hold only letters, digits, '.', '_' and '-'");
	return 0;
}

static int r_command(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type == YAML_SCALAR_NODE && !is_null(n)) {
		if (!*scalar(n))
			return fail(w, n, key, "is empty");
		return get_string(w, n, key, &w->s->shell);
	}
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(w, n, key, "must be a list (argv) or a string (shell command)");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item || item->type != YAML_SCALAR_NODE)
			return fail(w, item ? item : n, key, "items must be strings");
		strvec_push(&w->s->argv, scalar(item));
	}
	if (!w->s->argv.nr || !*w->s->argv.v[0])
		return fail(w, n, key, "must name a program");
	return 0;
}

static int get_kv_map(struct walk *w, yaml_node_t *n, const char *key, struct spec_kv **out,
		      size_t *nr, bool allow_null)
{
	if (n->type != YAML_MAPPING_NODE)
		return fail(w, n, key, "must be a mapping");
	size_t alloc = 0;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE || !*scalar(k))
			return fail(w, k ? k : n, key, "keys must be plain names");
		if (v->type != YAML_SCALAR_NODE || (!allow_null && is_null(v)))
			return fail(w, v, key, "'%s' must be a single value", scalar(k));
		XGROW(*out, *nr + 1, alloc);
		(*out)[*nr].key = xstrdup(scalar(k));
		(*out)[*nr].val = is_null(v) ? NULL : xstrdup(scalar(v));
		(*nr)++;
	}
	return 0;
}

static int r_args(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_kv_map(w, n, key, &w->s->args, &w->s->nargs, true);
}

static int r_env(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = get_kv_map(w, n, key, &w->s->env, &w->s->nenv, false);
	if (rc)
		return rc;
	for (size_t i = 0; i < w->s->nenv; i++) {
		const char *k = w->s->env[i].key;
		for (const char *c = k; *c; c++)
			if (!(*c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
			      (*c >= 'A' && *c <= 'Z')) || (c == k && *c >= '0' && *c <= '9'))
				return fail(w, n, key, "'%s' is not a valid variable name", k);
		if (!strcmp(k, "MASTER_PORT")) {
			long port;
			if (!parse_long(w->s->env[i].val, 1, 65535, &port))
				return fail(w, n, key, "MASTER_PORT must be a port number (1-65535)");
			w->s->master_port = (int)port;
		} else if (spec_env_reserved(k)) {
			return fail(w, n, key, "'%s' is set by trainctl for each worker", k);
		}
	}
	return 0;
}

static int r_workdir(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = get_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->workdir);
	w->s->workdir = path_absolute(v, w->base);
	free(v);
	if (!is_dir(w->s->workdir))
		return fail(w, n, key, "'%s' is not a directory", w->s->workdir);
	return 0;
}

static int r_framework(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const fw[] = { "pytorch", "mindspore", "tensorflow", "paddle", NULL };
	return check_enum(w, n, key, fw, &w->s->framework);
}

static int r_nodes(struct walk *w, yaml_node_t *n, const char *key)
{
	w->nodes_line = line_of(n);
	return get_int(w, n, key, 1, 4096, &w->s->nodes);
}

static int r_backend(struct walk *w, yaml_node_t *n, const char *key)
{
	return check_enum(w, n, key, backend_names, &w->s->backend);
}

/* ---- devices: ---- */

static int r_dev_type(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = get_string(w, n, key, &w->s->device_type);
	if (rc)
		return rc;
	w->type_line = line_of(n);
	if (!device_kind_find(w->s->device_type))
		return fail(w, n, key, "'%s' is not a device type (one of: %s)",
			    w->s->device_type, device_kind_names());
	return 0;
}

static int r_dev_per_node(struct walk *w, yaml_node_t *n, const char *key)
{
	w->per_node_line = line_of(n);
	w->per_node_set = true;
	if (plain(n) && !strcmp(scalar(n), "all")) {
		w->per_node_all = true;
		return 0;
	}
	int rc = get_int(w, n, key, 1, 1024, &w->s->per_node);
	if (rc && plain(n) && !strcmp(scalar(n), "0"))
		return fail(w, n, key, "must be at least 1 (a job needs a device)");
	return rc;
}

static int r_dev_ids(struct walk *w, yaml_node_t *n, const char *key)
{
	w->ids_line = line_of(n);
	w->s->device_ids_given = true;
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(w, n, key, "must be a list of device ids");
	size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	if (cnt == 0)
		return fail(w, n, key, "must not be empty");
	if (cnt > 1024)
		return fail(w, n, key, "too many ids");
	free(w->s->device_ids);
	w->s->device_ids = xcalloc(cnt, sizeof(int));
	size_t k = 0;
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		int id;
		int rc = get_int(w, item ? item : n, key, 0, 65535, &id);
		if (rc)
			return rc;
		for (size_t j = 0; j < k; j++)
			if (w->s->device_ids[j] == id)
				return fail(w, item, key, "id %d is listed twice", id);
		w->s->device_ids[k++] = id;
	}
	if (w->per_node_set && !w->per_node_all && w->s->per_node != (int)cnt)
		return fail(w, n, key, "lists %zu ids but per_node is %d", cnt, w->s->per_node);
	w->s->per_node = (int)cnt;
	return 0;
}

static int r_dev_hccn(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = get_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->hccn_conf);
	w->s->hccn_conf = path_absolute(v, w->base);
	free(v);
	/* "{node}" is each node's own file, read on that node (docs/slurm.md) */
	if (!strstr(w->s->hccn_conf, "{node}") && !path_exists(w->s->hccn_conf))
		return fail(w, n, key, "'%s' does not exist", w->s->hccn_conf);
	return 0;
}

static const struct rule device_rules[] = {
	{ "type", r_dev_type, NULL },
	{ "per_node", r_dev_per_node, NULL },
	{ "ids", r_dev_ids, NULL },
	{ "hccn_conf", r_dev_hccn, NULL },
	{ NULL, NULL, NULL },
};

static int r_devices(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "devices.", device_rules);
}

/* ---- restart: ---- */

static int r_max_restarts(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 0, 1000, &w->s->max_restarts);
}

static int r_grace(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 0, 86400, &w->s->grace_seconds);
}

static const struct rule restart_rules[] = {
	{ "max_restarts", r_max_restarts, NULL },
	{ "grace_seconds", r_grace, NULL },
	{ NULL, NULL, NULL },
};

static int r_restart(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "restart.", restart_rules);
}

/* ---- checkpoint: ---- */

static int r_ckpt_dir(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = get_string(w, n, key, &w->s->ckpt_dir);
	if (!rc && !*w->s->ckpt_dir)
		return fail(w, n, key, "is empty");
	return rc;
}

static int r_ckpt_resume(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = get_string(w, n, key, &v);
	if (rc)
		return rc;
	if (!strcmp(v, "auto")) {
		w->s->resume = RESUME_AUTO;
	} else if (!strcmp(v, "never")) {
		w->s->resume = RESUME_NEVER;
	} else if (storage_is_remote(v)) {
		w->s->resume = RESUME_PATH;
		free(w->s->resume_path);
		w->s->resume_path = xstrdup(v);
	} else {
		w->s->resume = RESUME_PATH;
		free(w->s->resume_path);
		w->s->resume_path = path_absolute(v, w->base);
		if (!path_exists(w->s->resume_path)) {
			rc = fail(w, n, key, "'%s' does not exist (use auto, never or a path)",
				  w->s->resume_path);
		}
	}
	free(v);
	return rc;
}

static int r_ckpt_keep(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 0, 1000000, &w->s->ckpt_keep);
}

static const struct rule ckpt_rules[] = {
	{ "dir", r_ckpt_dir, NULL },
	{ "resume", r_ckpt_resume, NULL },
	{ "keep", r_ckpt_keep, NULL },
	{ NULL, NULL, NULL },
};

/* ---- inputs: and outputs: (storage) ---- */

/* A storage location: s3:// or obs:// as is, a local path made absolute. */
static int get_location(struct walk *w, yaml_node_t *n, const char *key, char **out)
{
	char *v = NULL;
	int rc = get_string(w, n, key, &v);
	if (rc)
		return rc;
	if (!*v) {
		free(v);
		return fail(w, n, key, "is empty");
	}
	if (strstr(v, "://") && !storage_is_remote(v) && strncmp(v, "file://", 7) != 0) {
		rc = fail(w, n, key, "'%s': use s3://, obs://, file:// or a path", v);
		free(v);
		return rc;
	}
	free(*out);
	if (storage_is_remote(v)) {
		*out = v;
		return 0;
	}
	*out = path_absolute(!strncmp(v, "file://", 7) ? v + 7 : v, w->base);
	free(v);
	return 0;
}

static int r_in_from(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_location(w, n, key, &w->s->inputs[w->s->ninputs - 1].from);
}

static int r_in_to(struct walk *w, yaml_node_t *n, const char *key)
{
	struct spec_input *in = &w->s->inputs[w->s->ninputs - 1];
	int rc = get_string(w, n, key, &in->to);
	if (rc)
		return rc;
	for (const char *p = in->to; *p; p++)
		if ((p == in->to || p[-1] == '/') && p[0] == '.' && p[1] == '.' &&
		    (p[2] == '/' || !p[2]))
			return fail(w, n, key, "'%s' may not leave the data folder", in->to);
	return 0;
}

static const struct rule input_rules[] = {
	{ "from", r_in_from, NULL },
	{ "to", r_in_to, NULL },
	{ NULL, NULL, NULL },
};

static int r_inputs(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(w, n, key, "must be a list of {from: URL, to: PATH}");
	size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	w->s->inputs = xcalloc(cnt ? cnt : 1, sizeof(*w->s->inputs));
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item)
			return fail(w, n, key, "items must be mappings");
		w->s->ninputs++;
		int rc = walk_map(w, item, "inputs[].", input_rules);
		if (rc)
			return rc;
		struct spec_input *in = &w->s->inputs[w->s->ninputs - 1];
		if (!in->from)
			return fail(w, item, "inputs[].from", "is required");
		if (!in->to)
			in->to = xstrdup(".");
	}
	return 0;
}

static int r_out_upload(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_location(w, n, key, &w->s->upload_to);
}

static int r_out_secs(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 1, 86400 * 365, &w->s->upload_every_seconds);
}

static int r_out_steps(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 1, INT_MAX, &w->s->upload_every_steps);
}

static const struct rule output_rules[] = {
	{ "upload_to", r_out_upload, NULL },
	{ "every_seconds", r_out_secs, NULL },
	{ "every_steps", r_out_steps, NULL },
	{ NULL, NULL, NULL },
};

static int r_outputs(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	int rc = walk_map(w, n, "outputs.", output_rules);
	if (!rc && !w->s->upload_to)
		return fail(w, n, "outputs.upload_to", "is required");
	return rc;
}

static int r_checkpoint(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "checkpoint.", ckpt_rules);
}

/* ---- metrics: ---- */

static int r_met_format(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const fmts[] = { "auto", "dllogger", "tcap", "mindformers", "none", NULL };
	return check_enum(w, n, key, fmts, &w->s->metrics_format);
}

static int r_met_warmup(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 0, INT_MAX, &w->s->metrics_warmup_steps);
}

static int r_met_batch(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 1, INT_MAX, &w->s->metrics_batch_size);
}

static int r_met_accuracy(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = get_string(w, n, key, &w->s->metrics_accuracy);
	if (!rc && !*w->s->metrics_accuracy)
		return fail(w, n, key, "is empty");
	return rc;
}

static int r_met_files(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(w, n, key, "must be a list of paths");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item || item->type != YAML_SCALAR_NODE || is_null(item) || !*scalar(item))
			return fail(w, item ? item : n, key, "items must be non-empty paths");
		strvec_push(&w->s->metrics_files, scalar(item));
	}
	return 0;
}

static const struct rule metrics_rules[] = {
	{ "format", r_met_format, NULL },
	{ "warmup_steps", r_met_warmup, NULL },
	{ "batch_size", r_met_batch, NULL },
	{ "accuracy", r_met_accuracy, NULL },
	{ "files", r_met_files, NULL },
	{ NULL, NULL, NULL },
};

static int r_metrics(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "metrics.", metrics_rules);
}

/* ---- parallel: (the planner, docs/plan.md) ---- */

static int r_par_strategy(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const strategies[] = { "auto", NULL };
	char *v = NULL;
	int rc = check_enum(w, n, key, strategies, &v);
	free(v);
	w->s->parallel.on = rc == 0;
	return rc;
}

static int r_par_model(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = get_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->parallel.model);
	/* a built-in name stays a name; anything with a slash or .yaml is a file */
	if (strchr(v, '/') || strstr(v, ".yaml") || strstr(v, ".yml")) {
		w->s->parallel.model = path_absolute(v, w->base);
		free(v);
		if (!path_exists(w->s->parallel.model))
			return fail(w, n, key, "'%s' does not exist", w->s->parallel.model);
		return 0;
	}
	w->s->parallel.model = v;
	return 0;
}

static int r_par_batch(struct walk *w, yaml_node_t *n, const char *key)
{
	int v;
	int rc = get_int(w, n, key, 1, 1 << 30, &v);
	w->s->parallel.global_batch = v;
	return rc;
}

static int r_par_cluster(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = get_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->parallel.cluster);
	w->s->parallel.cluster = path_absolute(v, w->base);
	free(v);
	if (!path_exists(w->s->parallel.cluster))
		return fail(w, n, key, "'%s' does not exist", w->s->parallel.cluster);
	return 0;
}

static int r_par_memory(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SCALAR_NODE || !plan_parse_size(scalar(n), &w->s->parallel.memory) ||
	    w->s->parallel.memory <= 0)
		return fail(w, n, key, "must be a size such as 80GiB");
	return 0;
}

static const struct rule parallel_rules[] = {
	{ "strategy", r_par_strategy, NULL },
	{ "model", r_par_model, NULL },
	{ "global_batch", r_par_batch, NULL },
	{ "cluster", r_par_cluster, NULL },
	{ "memory", r_par_memory, NULL },
	{ NULL, NULL, NULL },
};

static int r_parallel(struct walk *w, yaml_node_t *n, const char *key)
{
	w->parallel_line = line_of(n);
	int rc = walk_map(w, n, "parallel.", parallel_rules);
	if (rc)
		return rc;
	if (!w->s->parallel.on)
		return fail(w, n, key, "strategy: auto is required (the only strategy)");
	if (!w->s->parallel.model)
		return fail(w, n, key, "model: is required");
	if (!w->s->parallel.global_batch)
		return fail(w, n, key, "global_batch: is required");
	return 0;
}

/* Ask the planner for the best split of this job's devices. */
static int plan_parallel(struct walk *w)
{
	struct spec *s = w->s;
	struct plan_strategy_req req = {
		.model = s->parallel.model, .devices = s->per_node * s->nodes, .nodes = s->nodes,
		.global_batch = s->parallel.global_batch, .cluster_file = s->parallel.cluster,
		.memory = s->parallel.memory, .seq_len = 0,
	};
	struct plan_candidate best;
	struct tc_err perr = TC_ERR_INIT;
	memset(&best, 0, sizeof(best));
	if (plan_strategy_best(&req, &best, &perr)) {
		tc_error(w->err, TC_ESPEC, "%s:%d: parallel: %s", w->file, w->parallel_line,
			 perr.msg ? perr.msg : "no plan");
		tc_err_release(&perr);
		return TC_ESPEC;
	}
	s->parallel.dp = best.dp;
	s->parallel.tp = best.tp;
	s->parallel.pp = best.pp;
	s->parallel.micro_batch = best.mb;
	s->parallel.step_time = best.step_time;
	struct sbuf part = SBUF_INIT;
	for (int i = 0; i < best.pp; i++)
		sbuf_addf(&part, "%s%d", i ? "," : "", best.layers[i]);
	free(s->parallel.partition);
	s->parallel.partition = sbuf_detach(&part);
	plan_candidate_release(&best);
	return 0;
}

/* ---- priority:, preemptible: (the server's scheduler, docs/server.md) ---- */

static int r_priority(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_int(w, n, key, 1, 1000, &w->s->priority);
}

static int r_preemptible(struct walk *w, yaml_node_t *n, const char *key)
{
	const char *v = plain(n) ? scalar(n) : NULL;
	if (v && (!strcmp(v, "true") || !strcmp(v, "false"))) {
		w->s->preemptible = !strcmp(v, "true");
		return 0;
	}
	return fail(w, n, key, "must be true or false");
}

/* ---- slurm: (backend: slurm, docs/slurm.md) ---- */

/* A value that becomes part of an #SBATCH line: one line, printable. */
static int get_sbatch_value(struct walk *w, yaml_node_t *n, const char *key, char **out)
{
	int rc = get_string(w, n, key, out);
	if (rc)
		return rc;
	if (!**out)
		return fail(w, n, key, "is empty");
	for (const unsigned char *c = (const unsigned char *)*out; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return fail(w, n, key, "must be one line without control characters");
	return 0;
}

static int r_sl_partition(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_sbatch_value(w, n, key, &w->s->slurm.partition);
}

static int r_sl_account(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_sbatch_value(w, n, key, &w->s->slurm.account);
}

static int r_sl_qos(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_sbatch_value(w, n, key, &w->s->slurm.qos);
}

static int r_sl_time(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = get_sbatch_value(w, n, key, &w->s->slurm.time);
	if (rc)
		return rc;
	/* Slurm's forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS */
	for (const char *c = w->s->slurm.time; *c; c++)
		if (!((*c >= '0' && *c <= '9') || *c == ':' || *c == '-'))
			return fail(w, n, key, "'%s' is not a Slurm time (MM, HH:MM:SS or D-HH:MM:SS)",
				    w->s->slurm.time);
	return 0;
}

static int r_sl_signal(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = get_sbatch_value(w, n, key, &w->s->slurm.signal);
	if (rc)
		return rc;
	for (const char *c = w->s->slurm.signal; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z') || *c == '@' || *c == ':'))
			return fail(w, n, key, "'%s' is not a Slurm --signal value (e.g. USR1@120)",
				    w->s->slurm.signal);
	return 0;
}

static int r_sl_gres(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_sbatch_value(w, n, key, &w->s->slurm.gres);
}

static int r_sl_extra(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(w, n, key, "must be a list of sbatch options (\"--exclusive\")");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		char *v = NULL;
		if (!item)
			return fail(w, n, key, "items must be strings");
		int rc = get_sbatch_value(w, item, key, &v);
		if (!rc && v[0] != '-')
			rc = fail(w, item, key, "'%s' is not an sbatch option (it must start with '-')", v);
		if (rc) {
			free(v);
			return rc;
		}
		strvec_push_nodup(&w->s->slurm.extra, v);
	}
	return 0;
}

static const struct rule slurm_rules[] = {
	{ "partition", r_sl_partition, NULL },
	{ "account", r_sl_account, NULL },
	{ "qos", r_sl_qos, NULL },
	{ "time", r_sl_time, NULL },
	{ "signal", r_sl_signal, NULL },
	{ "gres", r_sl_gres, NULL },
	{ "extra", r_sl_extra, NULL },
	{ NULL, NULL, NULL },
};

static int r_slurm(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	w->slurm_line = line_of(n);
	return walk_map(w, n, "slurm.", slurm_rules);
}

static const struct rule top_rules[] = {
	{ "name", r_name, NULL },
	{ "command", r_command, NULL },
	{ "args", r_args, NULL },
	{ "workdir", r_workdir, NULL },
	{ "env", r_env, NULL },
	{ "framework", r_framework, NULL },
	{ "devices", r_devices, NULL },
	{ "nodes", r_nodes, NULL },
	{ "backend", r_backend, NULL },
	{ "restart", r_restart, NULL },
	{ "checkpoint", r_checkpoint, NULL },
	{ "priority", r_priority, NULL },
	{ "preemptible", r_preemptible, NULL },
	{ "inputs", r_inputs, NULL },
	{ "outputs", r_outputs, NULL },
	{ "metrics", r_metrics, NULL },
	{ "parallel", r_parallel, NULL },
	{ "slurm", r_slurm, NULL },
	{ NULL, NULL, NULL },
};

/* ---- entry points ---- */

void spec_init(struct spec *s)
{
	memset(s, 0, sizeof(*s));
	s->argv = (struct strvec)STRVEC_INIT;
	s->framework = xstrdup("pytorch");
	s->device_type = xstrdup("cpu");
	s->per_node = 1;
	s->nodes = 1;
	s->backend = xstrdup(backend_names[BACKEND_LOCAL]);
	s->max_restarts = 0;
	s->grace_seconds = 30;
	s->ckpt_dir = xstrdup("checkpoints");
	s->resume = RESUME_AUTO;
	s->metrics_format = NULL; /* auto; left unallocated so stack specs need no free */
	s->metrics_files = (struct strvec)STRVEC_INIT;
	s->slurm.extra = (struct strvec)STRVEC_INIT;
	s->priority = 100;
}

static const char *const reserved_env[] = {
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
	"GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
	"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
	"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
	"TRAINCTL_JOB_ID", "TRAINCTL_OUTPUT_DIR", "TRAINCTL_CKPT_DIR", "TRAINCTL_DATA_DIR",
	"TRAINCTL_LOG_DIR", "TRAINCTL_RESUME_FROM", "TRAINCTL_TENSORBOARD_DIR",
	"TRAINCTL_DP", "TRAINCTL_TP", "TRAINCTL_PP", "TRAINCTL_MICRO_BATCH", "TRAINCTL_PIPELINE_PARTITION",
	"RANK_ID", "RANK_SIZE", "DEVICE_ID", "RANK_TABLE_FILE",
	"PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
	"PADDLE_CURRENT_ENDPOINT", NULL,
};

bool spec_env_reserved(const char *key)
{
	for (const char *const *r = reserved_env; *r; r++)
		if (!strcmp(*r, key))
			return true;
	return false;
}

/* Resolve the device count against the machine (shared by file and ad hoc). */
static int finish_devices(struct spec *s, const char *file, int type_line, int count_line,
			  bool per_node_all, struct tc_err *err)
{
	struct device_list devs = DEVICE_LIST_INIT;
	int rc = 0;
	devices_discover(&devs);
	int have = devices_count(&devs, s->device_type);
	const char *where = file ? file : "command line";
	if (per_node_all) {
		if (have < 0) {
			rc = tc_error(err, TC_ESPEC,
				      "%s:%d: devices.per_node: 'all' needs a way to count %s devices on this machine; give a number or ids",
				      where, count_line, s->device_type);
			goto out;
		}
		if (have == 0) {
			rc = tc_error(err, TC_ESPEC, "%s:%d: devices.type: this machine has no %s devices",
				      where, type_line, s->device_type);
			goto out;
		}
		s->per_node = have;
	}
	if (strcmp(s->device_type, "cpu") != 0 && have >= 0) {
		if (s->per_node > have) {
			rc = tc_error(err, TC_ESPEC,
				      "%s:%d: devices.per_node: %d %s devices requested but this machine has %d",
				      where, count_line, s->per_node, s->device_type, have);
			goto out;
		}
		for (int i = 0; s->device_ids && i < s->per_node; i++) {
			bool found = false;
			for (size_t j = 0; j < devs.nr; j++)
				if (!strcmp(devs.v[j].type, s->device_type) && devs.v[j].id == s->device_ids[i])
					found = true;
			if (!found) {
				rc = tc_error(err, TC_ESPEC, "%s:%d: devices.ids: this machine has no %s %d",
					      where, count_line, s->device_type, s->device_ids[i]);
				goto out;
			}
		}
	}
	if (!s->device_ids) {
		s->device_ids = xcalloc((size_t)s->per_node, sizeof(int));
		for (int i = 0; i < s->per_node; i++)
			s->device_ids[i] = i;
	}
out:
	device_list_release(&devs);
	return rc;
}

/*
 * An ad hoc job is named after its program, or after the script an
 * interpreter runs ("python3 train.py" -> "train").
 */
static char *default_name(const struct spec *s)
{
	static const char *const interpreters[] = { "python", "python3", "sh", "bash", "perl", NULL };
	const char *prog = s->argv.nr ? path_basename(s->argv.v[0]) : "job";
	for (const char *const *i = interpreters; *i; i++) {
		if (strcmp(*i, prog) != 0)
			continue;
		for (size_t k = 1; k < s->argv.nr; k++) {
			const char *a = s->argv.v[k];
			if (a[0] == '-')
				break;
			if (strchr(a, '.')) {
				a = path_basename(a);
				return xstrndup(a, (size_t)(strrchr(a, '.') - a));
			}
		}
	}
	struct sbuf sb = SBUF_INIT;
	for (const char *c = prog; *c && sb.len < 64; c++)
		sbuf_addch(&sb, strchr("/ \t", *c) ? '-' : *c);
	return sbuf_detach(&sb);
}

int spec_finish(struct spec *s, struct tc_err *err)
{
	if (!s->argv.nr && !s->shell)
		return tc_error(err, TC_EUSAGE, "no command to run");
	if (!device_kind_find(s->device_type))
		return tc_error(err, TC_EUSAGE, "'%s' is not a device type (one of: %s)",
				s->device_type, device_kind_names());
	if (!s->workdir)
		s->workdir = path_absolute(".", NULL);
	if (!s->name)
		s->name = default_name(s);
	return finish_devices(s, NULL, 1, 1, s->per_node <= 0, err);
}

/* JSON allows tabs between tokens; libyaml does not: blank them out. */
static void detab_json(char *text, size_t len)
{
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		if (in_str) {
			if (text[i] == '\\')
				i++;
			else if (text[i] == '"')
				in_str = false;
		} else if (text[i] == '"') {
			in_str = true;
		} else if (text[i] == '\t') {
			text[i] = ' ';
		}
	}
}

/* spec_parse, with backend: replaced by backend when not NULL (--backend) */
static int parse_text(const char *text, size_t len, const char *name, const char *base,
		      const char *backend, struct spec **out, struct tc_err *err)
{
	/* a NUL would end the copy below early (and YAML forbids it anyway) */
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		size_t line = 1;
		for (const char *p = text; p < nul; p++)
			line += *p == '\n';
		return tc_error(err, TC_ESPEC, "%s:%zu: the spec holds a NUL byte", name, line);
	}
	yaml_parser_t parser;
	yaml_document_t doc;
	bool have_doc = false;
	int rc = 0;
	struct spec *s = xmalloc(sizeof(*s));
	spec_init(s);
	s->source = xstrdup(name);
	char *copy = xstrndup(text, len);
	size_t nlen = strlen(name);
	if (nlen > 5 && !strcmp(name + nlen - 5, ".json"))
		detab_json(copy, strlen(copy));

	if (!yaml_parser_initialize(&parser))
		xdie_oom(sizeof(parser));
	yaml_parser_set_input_string(&parser, (const unsigned char *)copy, strlen(copy));
	if (!yaml_parser_load(&parser, &doc)) {
		rc = tc_error(err, TC_ESPEC, "%s:%zu: syntax error: %s%s%s", name,
			      parser.problem_mark.line + 1,
			      parser.problem ? parser.problem : "cannot parse",
			      parser.context ? " " : "", parser.context ? parser.context : "");
		goto out;
	}
	have_doc = true;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	struct walk w = { &doc, name, base, s, err, 1, 1, 1, false, false, 1, 0, 0 };
	if (!root) {
		rc = tc_error(err, TC_ESPEC, "%s:1: the spec is empty", name);
		goto out;
	}
	if ((rc = walk_map(&w, root, "", top_rules)))
		goto out;
	if (backend) {
		free(s->backend);
		s->backend = xstrdup(backend);
	}
	if (!s->argv.nr && !s->shell) {
		rc = tc_error(err, TC_ESPEC, "%s:%d: command: is required", name, line_of(root));
		goto out;
	}
	if (s->nodes > 1 && strcmp(s->backend, "slurm") != 0) {
		rc = tc_error(err, TC_ESPEC, "%s:%d: nodes: %d nodes need backend: slurm", name,
			      w.nodes_line, s->nodes);
		goto out;
	}
	if (w.slurm_line && strcmp(s->backend, "slurm") != 0) {
		rc = tc_error(err, TC_ESPEC, "%s:%d: slurm: is for backend: slurm (backend is %s)",
			      name, w.slurm_line, s->backend);
		goto out;
	}
	if (!s->workdir)
		s->workdir = xstrdup(base);
	if (!s->name) {
		const char *b = path_basename(name);
		const char *dot = strrchr(b, '.');
		s->name = xstrndup(b, dot ? (size_t)(dot - b) : strlen(b));
	}
	rc = finish_devices(s, name, w.type_line, w.ids_line > 1 ? w.ids_line : w.per_node_line,
			    w.per_node_all, err);
	if (!rc && s->parallel.on)
		rc = plan_parallel(&w);
out:
	if (have_doc)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	free(copy);
	if (rc) {
		spec_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int spec_parse(const char *text, size_t len, const char *name, const char *base,
	       struct spec **out, struct tc_err *err)
{
	return parse_text(text, len, name, base, NULL, out, err);
}

/* spec_load, with backend: replaced by backend when not NULL */
static int load_file(const char *path, const char *backend, struct spec **out,
		     struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	int rc = read_file(path, &text, err);
	if (rc) {
		rc = tc_error(err, TC_ESPEC, "%s", err->msg);
		goto out;
	}
	if (memchr(text.buf, '\0', text.len)) {
		rc = tc_error(err, TC_ESPEC, "%s:1: the spec holds a NUL byte", path);
		goto out;
	}
	char *abs = path_absolute(path, NULL);
	char *base = path_dirname(abs);
	rc = parse_text(text.buf, text.len, path, base, backend, out, err);
	free(abs);
	free(base);
out:
	sbuf_release(&text);
	return rc;
}

int spec_load(const char *path, struct spec **out, struct tc_err *err)
{
	return load_file(path, NULL, out, err);
}

static int not_a_backend(const char *backend, struct tc_err *err)
{
	struct sbuf names = SBUF_INIT;
	backend_names_add(&names);
	int rc = tc_error(err, TC_EUSAGE, "'%s' is not a backend (one of: %s)", backend, names.buf);
	sbuf_release(&names);
	return rc;
}

int spec_parse_backend(const char *text, size_t len, const char *name, const char *base,
		       const char *backend, struct spec **out, struct tc_err *err)
{
	if (backend && backend_lookup(backend) < 0)
		return not_a_backend(backend, err);
	return parse_text(text, len, name, base, backend, out, err);
}

int spec_load_backend(const char *path, const char *backend, struct spec **out,
		      struct tc_err *err)
{
	if (backend && backend_lookup(backend) < 0)
		return not_a_backend(backend, err);
	return load_file(path, backend, out, err);
}

static void free_kv(struct spec_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].val);
	}
	free(kv);
}

void spec_free(struct spec *s)
{
	if (!s)
		return;
	free(s->source);
	free(s->name);
	strvec_clear(&s->argv);
	free(s->shell);
	free_kv(s->args, s->nargs);
	free(s->workdir);
	free_kv(s->env, s->nenv);
	free(s->framework);
	free(s->device_type);
	free(s->device_ids);
	free(s->hccn_conf);
	free(s->backend);
	free(s->slurm.partition);
	free(s->slurm.account);
	free(s->slurm.qos);
	free(s->slurm.time);
	free(s->slurm.signal);
	free(s->slurm.gres);
	strvec_clear(&s->slurm.extra);
	free(s->ckpt_dir);
	free(s->resume_path);
	free(s->parallel.model);
	free(s->parallel.cluster);
	free(s->parallel.partition);
	for (size_t i = 0; i < s->ninputs; i++) {
		free(s->inputs[i].from);
		free(s->inputs[i].to);
	}
	free(s->inputs);
	free(s->upload_to);
	free(s->metrics_format);
	free(s->metrics_accuracy);
	strvec_clear(&s->metrics_files);
	free(s);
}
