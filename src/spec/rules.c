/*
 * rules.c -- the rule tables of a spec's keys, one handler per key, each
 * checking its value and storing it in the spec (devices: and parallel:
 * are in placement.c); see spec_int.h.
 */
#include "spec/spec_int.h"
#include "backend/names.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "plan/plan.h"
#include "secret/secret.h"
#include "storage/storage.h"

#include <limits.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ---- top-level keys ---- */

static int r_name(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &w->s->name);
	if (rc)
		return rc;
	const char *v = w->s->name;
	if (!*v || strlen(v) > 128)
		return walk_fail(w, n, key, "must be 1 to 128 characters");
	if (!spec_name_ok(v))
		return walk_fail(w, n, key, "may hold only letters, digits, '.', '_' and '-'");
	return 0;
}

bool spec_name_ok(const char *v)
{
	if (!*v || strlen(v) > 128)
		return false;
	for (; *v; v++)
		if (!(*v == '-' || *v == '_' || *v == '.' || (*v >= '0' && *v <= '9') ||
		      (*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z')))
			return false;
	return true;
}

static int r_command(struct walk *w, yaml_node_t *n, const char *key)
{
	w->s->command_line = line_of(n);
	if (n->type == YAML_SCALAR_NODE && !is_null(n)) {
		if (!*scalar(n))
			return walk_fail(w, n, key, "is empty");
		return walk_string(w, n, key, &w->s->shell);
	}
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list (argv) or a string (shell command)");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item || item->type != YAML_SCALAR_NODE)
			return walk_fail(w, item ? item : n, key, "items must be strings");
		strvec_push(&w->s->argv, scalar(item));
	}
	if (!w->s->argv.nr || !*w->s->argv.v[0])
		return walk_fail(w, n, key, "must name a program");
	/* the program a --set gave (command.0=...) is the override's to answer for */
	yaml_node_t *prog = yaml_document_get_node(w->doc, n->data.sequence.items.start[0]);
	if (from_set(prog))
		w->s->command_line = line_of(prog);
	return 0;
}

static int get_kv_map(struct walk *w, yaml_node_t *n, const char *key, struct spec_kv **out,
		      size_t *nr, bool allow_null)
{
	if (n->type != YAML_MAPPING_NODE)
		return walk_fail(w, n, key, "must be a mapping");
	size_t alloc = 0;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE || !*scalar(k))
			return walk_fail(w, k ? k : n, key, "keys must be plain names");
		if (v->type != YAML_SCALAR_NODE || (!allow_null && is_null(v)))
			return walk_fail(w, v, key, "'%s' must be a single value", scalar(k));
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

/*
 * An env: value that is a mapping: {secret: NAME} or {file: PATH} (a
 * relative PATH starts at the spec's folder; the file is read when the
 * job starts, as its user, never here).
 */
static int env_source(struct walk *w, yaml_node_t *v, const char *key, const char *name,
		      struct spec_kv *kv)
{
	yaml_node_pair_t *p = v->data.mapping.pairs.start;
	yaml_node_t *k = p + 1 == v->data.mapping.pairs.top ? yaml_document_get_node(w->doc, p->key) : NULL;
	yaml_node_t *x = k ? yaml_document_get_node(w->doc, p->value) : NULL;
	bool secret = k && k->type == YAML_SCALAR_NODE && !strcmp(scalar(k), "secret");
	bool file = k && k->type == YAML_SCALAR_NODE && !strcmp(scalar(k), "file");
	if (!(secret || file) || !x || x->type != YAML_SCALAR_NODE || is_null(x) || !*scalar(x))
		return walk_fail(w, v, key, "'%s' must be a single value, {secret: NAME} or {file: PATH}",
				 name);
	if (secret && !secret_name_ok(scalar(x)))
		return walk_fail(w, x, key, "'%s': '%s' is not a secret name (letters, digits, '.', '_'"
				 " and '-', not starting with '.')", name, scalar(x));
	kv->from = secret ? ENV_FROM_SECRET : ENV_FROM_FILE;
	kv->val = secret ? xstrdup(scalar(x)) : path_absolute(scalar(x), w->base);
	return 0;
}

static int r_env(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_MAPPING_NODE)
		return walk_fail(w, n, key, "must be a mapping");
	size_t alloc = 0;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE || !*scalar(k))
			return walk_fail(w, k ? k : n, key, "keys must be plain names");
		struct spec_kv kv = { 0 };
		if (v->type == YAML_MAPPING_NODE) {
			int rc = env_source(w, v, key, scalar(k), &kv);
			if (rc)
				return rc;
		} else if (v->type != YAML_SCALAR_NODE || is_null(v)) {
			return walk_fail(w, v, key, "'%s' must be a single value", scalar(k));
		} else {
			kv.val = xstrdup(scalar(v));
		}
		kv.key = xstrdup(scalar(k));
		XGROW(w->s->env, w->s->nenv + 1, alloc);
		w->s->env[w->s->nenv++] = kv;
	}
	for (size_t i = 0; i < w->s->nenv; i++) {
		const char *k = w->s->env[i].key;
		/* one pair per entry: its nodes, so that a --set's error names the override */
		yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
		yaml_node_t *kn = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(w->doc, p->value);
		for (const char *c = k; *c; c++)
			if (!(*c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
			      (*c >= 'A' && *c <= 'Z')) || (c == k && *c >= '0' && *c <= '9'))
				return walk_fail(w, from_set(kn) ? kn : n, key,
						 "'%s' is not a valid variable name", k);
		if (!strcmp(k, "MASTER_PORT")) {
			long port;
			if (w->s->env[i].from != ENV_FROM_VALUE ||
			    !parse_long(w->s->env[i].val, 1, 65535, &port))
				return walk_fail(w, from_set(vn) ? vn : n, key,
						 "MASTER_PORT must be a port number (1-65535)");
			w->s->master_port = (int)port;
		} else if (spec_env_reserved(k)) {
			return walk_fail(w, from_set(kn) ? kn : n, key,
					 "'%s' is set by trainctl for each worker", k);
		}
	}
	return 0;
}

static int r_workdir(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = walk_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->workdir);
	w->s->workdir = path_absolute(v, w->base);
	free(v);
	if (!is_dir(w->s->workdir))
		return walk_fail(w, n, key, "'%s' is not a directory", w->s->workdir);
	return 0;
}

static int r_framework(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const fw[] = { "pytorch", "mindspore", "tensorflow", "paddle", NULL };
	return walk_enum(w, n, key, fw, &w->s->framework);
}

static int r_backend(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_enum(w, n, key, backend_names, &w->s->backend);
}

/* ---- restart: ---- */

static int r_max_restarts(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 0, 1000, &w->s->max_restarts);
}

static int r_grace(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 0, 86400, &w->s->grace_seconds);
}

/*
 * restart.policy: a word or a list of them, one of each pair: first_step
 * or always (a worker's failure), replace or restart (a lost node).
 */
static int restart_policy_word(struct walk *w, yaml_node_t *n, const char *key, bool *failure,
			       bool *node)
{
	static const char *const names[] = { "first_step", "always", "replace", "restart", NULL };
	char *v = NULL;
	int rc = walk_enum(w, n, key, names, &v);
	bool is_node = !rc && (!strcmp(v, "replace") || !strcmp(v, "restart"));
	if (!rc && (is_node ? *node : *failure))
		rc = walk_fail(w, n, key, "'%s': the list names %s only once", v,
			       is_node ? "replace or restart" : "first_step or always");
	if (!rc && is_node) {
		*node = true;
		w->s->node_policy = !strcmp(v, "restart") ? NODE_POLICY_RESTART : NODE_POLICY_REPLACE;
	} else if (!rc) {
		*failure = true;
		w->s->restart_policy = !strcmp(v, "always") ? RESTART_POLICY_ALWAYS
							    : RESTART_POLICY_FIRST_STEP;
	}
	free(v);
	return rc;
}

static int r_restart_policy(struct walk *w, yaml_node_t *n, const char *key)
{
	bool failure = false, node = false;
	if (n->type != YAML_SEQUENCE_NODE)
		return restart_policy_word(w, n, key, &failure, &node);
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *x = yaml_document_get_node(w->doc, *i);
		int rc = x ? restart_policy_word(w, x, key, &failure, &node) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

static const struct rule restart_rules[] = {
	{ "max_restarts", r_max_restarts, NULL },
	{ "grace_seconds", r_grace, NULL },
	{ "policy", r_restart_policy, NULL },
	{ NULL, NULL, NULL },
};

static int r_restart(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "restart.", restart_rules);
}

/* ---- watchdog: and on_log: (docs/diagnostics.md) ---- */

/* A number of seconds (or a factor) in [min, max]. */
static int walk_seconds(struct walk *w, yaml_node_t *n, const char *key, double min, double max,
			double *out)
{
	double v;
	if (n->type != YAML_SCALAR_NODE || is_null(n) || !parse_double(scalar(n), &v) ||
	    !isfinite(v) || v < min || v > max)
		return walk_fail(w, n, key, "must be a number from %g to %g", min, max);
	*out = v;
	return 0;
}

/* A POSIX extended regex, compiled once here so that a bad one fails the load. */
static int walk_regex(struct walk *w, yaml_node_t *n, const char *key, char **out)
{
	int rc = walk_string(w, n, key, out);
	if (rc)
		return rc;
	if (!**out)
		return walk_fail(w, n, key, "is empty");
	regex_t re;
	int e = regcomp(&re, *out, REG_EXTENDED | REG_NOSUB);
	if (e) {
		char msg[256];
		regerror(e, &re, msg, sizeof(msg));
		return walk_fail(w, n, key, "'%s' is not a regular expression: %s", *out, msg);
	}
	regfree(&re);
	return 0;
}

static int r_wd_pattern(struct walk *w, yaml_node_t *n, const char *key)
{
	free(w->s->watchdog.progress_pattern);
	w->s->watchdog.progress_pattern = NULL;
	return walk_regex(w, n, key, &w->s->watchdog.progress_pattern);
}

static int r_wd_warmup(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 0, 1000000, &w->s->watchdog.warmup_steps);
}

static int r_wd_min(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_seconds(w, n, key, 0.1, 7 * 86400, &w->s->watchdog.min_seconds);
}

static int r_wd_factor(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_seconds(w, n, key, 1, 1000, &w->s->watchdog.factor);
}

static int r_wd_startup(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_seconds(w, n, key, 0, 7 * 86400, &w->s->watchdog.startup_seconds);
}

static int r_wd_sg_percent(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_seconds(w, n, key, 1, 10000, &w->s->watchdog.straggler_percent);
}

static int r_wd_sg_steps(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 2, 100000, &w->s->watchdog.straggler_steps);
}

static int r_wd_dump(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_seconds(w, n, key, 0, 600, &w->s->watchdog.dump_seconds);
}

static const struct rule watchdog_rules[] = {
	{ "progress_pattern", r_wd_pattern, NULL },
	{ "warmup_steps", r_wd_warmup, NULL },
	{ "min_seconds", r_wd_min, NULL },
	{ "factor", r_wd_factor, NULL },
	{ "startup_seconds", r_wd_startup, NULL },
	{ "straggler_percent", r_wd_sg_percent, NULL },
	{ "straggler_steps", r_wd_sg_steps, NULL },
	{ "dump_seconds", r_wd_dump, NULL },
	{ NULL, NULL, NULL },
};

/* watchdog: {keys} turns it on with those; watchdog: true / false */
static int r_watchdog(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type == YAML_SCALAR_NODE) {
		const char *v = scalar(n);
		if (!strcmp(v, "true") || !strcmp(v, "false")) {
			w->s->watchdog.on = !strcmp(v, "true");
			return 0;
		}
		return walk_fail(w, n, key, "must be a mapping of its keys, true or false");
	}
	w->s->watchdog.on = true;
	return walk_map(w, n, "watchdog.", watchdog_rules);
}

static int r_on_log(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const actions[] = { "fail", "restart", "exclude_node", NULL };
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of {pattern, action}");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item || item->type != YAML_MAPPING_NODE)
			return walk_fail(w, item ? item : n, key, "items must be {pattern, action}");
		char *pattern = NULL, *action = NULL;
		int rc = 0;
		for (yaml_node_pair_t *p = item->data.mapping.pairs.start;
		     !rc && p < item->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
			yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
			const char *kn = k && k->type == YAML_SCALAR_NODE ? scalar(k) : "";
			if (!v)
				rc = walk_fail(w, item, key, "items must be {pattern, action}");
			else if (!strcmp(kn, "pattern") && !pattern)
				rc = walk_regex(w, v, "on_log.pattern", &pattern);
			else if (!strcmp(kn, "action") && !action)
				rc = walk_enum(w, v, "on_log.action", actions, &action);
			else
				rc = walk_fail(w, k ? k : item, key, "unknown or repeated key '%s' (pattern, action)", kn);
		}
		if (!rc && (!pattern || !action))
			rc = walk_fail(w, item, key, "each item needs pattern: and action:");
		if (!rc) {
			w->s->on_log = xrealloc(w->s->on_log, (w->s->non_log + 1) * sizeof(*w->s->on_log));
			w->s->on_log[w->s->non_log++] = (struct spec_on_log){
				.pattern = pattern,
				.action = !strcmp(action, "fail")      ? LOG_ACTION_FAIL
					  : !strcmp(action, "restart") ? LOG_ACTION_RESTART
								       : LOG_ACTION_EXCLUDE_NODE,
			};
			pattern = NULL;
		}
		free(pattern);
		free(action);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- checkpoint: ---- */

static int r_ckpt_dir(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &w->s->ckpt_dir);
	if (!rc && !*w->s->ckpt_dir)
		return walk_fail(w, n, key, "is empty");
	return rc;
}

static int r_ckpt_resume(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL, *why = NULL;
	int rc = walk_string(w, n, key, &v);
	if (rc)
		return rc;
	if (!strcmp(v, "auto")) {
		w->s->resume = RESUME_AUTO;
	} else if (!strcmp(v, "never")) {
		w->s->resume = RESUME_NEVER;
	} else if ((why = storage_location_problem(v))) {
		rc = walk_fail(w, n, key, "%s", why);
		free(why);
	} else if (storage_is_remote(v)) {
		w->s->resume = RESUME_PATH;
		free(w->s->resume_path);
		w->s->resume_path = xstrdup(v);
	} else {
		w->s->resume = RESUME_PATH;
		free(w->s->resume_path);
		w->s->resume_path = path_absolute(v, w->base);
		if (!path_exists(w->s->resume_path)) {
			rc = walk_fail(w, n, key, "'%s' does not exist (use auto, never or a path)",
				       w->s->resume_path);
		}
	}
	free(v);
	return rc;
}

static int r_ckpt_keep(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 0, 1000000, &w->s->ckpt_keep);
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
	int rc = walk_string(w, n, key, &v);
	if (rc)
		return rc;
	if (!*v) {
		free(v);
		return walk_fail(w, n, key, "is empty");
	}
	if (strstr(v, "://") && !storage_is_remote(v) && strncmp(v, "file://", 7) != 0) {
		rc = walk_fail(w, n, key, "'%s': use s3://, obs://, file:// or a path", v);
		free(v);
		return rc;
	}
	char *why = storage_location_problem(v);
	if (why) {
		rc = walk_fail(w, n, key, "%s", why);
		free(why);
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
	int rc = walk_string(w, n, key, &in->to);
	if (rc)
		return rc;
	for (const char *p = in->to; *p; p++)
		if ((p == in->to || p[-1] == '/') && p[0] == '.' && p[1] == '.' &&
		    (p[2] == '/' || !p[2]))
			return walk_fail(w, n, key, "'%s' may not leave the data folder", in->to);
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
		return walk_fail(w, n, key, "must be a list of {from: URL, to: PATH}");
	size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	w->s->inputs = xcalloc(cnt ? cnt : 1, sizeof(*w->s->inputs));
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item)
			return walk_fail(w, n, key, "items must be mappings");
		w->s->ninputs++;
		int rc = walk_map(w, item, "inputs[].", input_rules);
		if (rc)
			return rc;
		struct spec_input *in = &w->s->inputs[w->s->ninputs - 1];
		if (!in->from)
			return walk_fail(w, item, "inputs[].from", "is required");
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
	return walk_int(w, n, key, 1, 86400 * 365, &w->s->upload_every_seconds);
}

static int r_out_steps(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, INT_MAX, &w->s->upload_every_steps);
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
		return walk_fail(w, n, "outputs.upload_to", "is required");
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
	return walk_enum(w, n, key, fmts, &w->s->metrics_format);
}

static int r_met_warmup(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 0, INT_MAX, &w->s->metrics_warmup_steps);
}

static int r_met_batch(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, INT_MAX, &w->s->metrics_batch_size);
}

static int r_met_accuracy(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &w->s->metrics_accuracy);
	if (!rc && !*w->s->metrics_accuracy)
		return walk_fail(w, n, key, "is empty");
	return rc;
}

/* A list of non-empty paths (relative to workdir), appended to out. */
static int walk_paths(struct walk *w, yaml_node_t *n, const char *key, struct strvec *out)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of paths");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item || item->type != YAML_SCALAR_NODE || is_null(item) || !*scalar(item))
			return walk_fail(w, item ? item : n, key, "items must be non-empty paths");
		strvec_push(out, scalar(item));
	}
	return 0;
}

static int r_met_files(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_paths(w, n, key, &w->s->metrics_files);
}

static int r_met_tbdirs(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_paths(w, n, key, &w->s->metrics_tb_dirs);
}

/* metrics.patterns: [{regex, step, values: {NAME: GROUP}}] (docs/metrics.md) */
static struct metrics_pattern *cur_pattern(struct walk *w)
{
	return &w->s->metrics_patterns[w->s->metrics_npatterns - 1];
}

static int r_pat_regex(struct walk *w, yaml_node_t *n, const char *key)
{
	struct metrics_pattern *p = cur_pattern(w);
	int rc = walk_string(w, n, key, &p->regex);
	if (rc)
		return rc;
	if (!*p->regex)
		return walk_fail(w, n, key, "is empty");
	regex_t re;
	int e = regcomp(&re, p->regex, REG_EXTENDED);
	if (e) {
		char msg[256];
		regerror(e, &re, msg, sizeof(msg));
		return walk_fail(w, n, key, "'%s' is not a POSIX extended regular expression: %s",
				 p->regex, msg);
	}
	regfree(&re);
	return 0;
}

static int r_pat_step(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, 99, &cur_pattern(w)->step);
}

static int r_pat_values(struct walk *w, yaml_node_t *n, const char *key)
{
	struct metrics_pattern *p = cur_pattern(w);
	if (n->type != YAML_MAPPING_NODE || n->data.mapping.pairs.top == n->data.mapping.pairs.start)
		return walk_fail(w, n, key, "must be a mapping of metric names to group numbers"
				 " ({loss: 2})");
	size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
	p->names = xcalloc(cnt, sizeof(*p->names));
	p->groups = xcalloc(cnt, sizeof(*p->groups));
	struct sbuf sub = SBUF_INIT;
	int rc = 0;
	for (yaml_node_pair_t *q = n->data.mapping.pairs.start; !rc && q < n->data.mapping.pairs.top;
	     q++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, q->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, q->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE || !*scalar(k)) {
			rc = walk_fail(w, k ? k : n, key, "metric names must be non-empty strings");
			break;
		}
		for (size_t i = 0; i < p->nvalues; i++)
			if (!strcmp(p->names[i], scalar(k)))
				rc = walk_fail(w, k, key, "metric '%s' is given twice", scalar(k));
		if (rc)
			break;
		sbuf_reset(&sub);
		sbuf_addf(&sub, "%s.%s", key, scalar(k));
		rc = walk_int(w, v, sub.buf, 1, 99, &p->groups[p->nvalues]);
		if (!rc)
			p->names[p->nvalues++] = xstrdup(scalar(k));
	}
	sbuf_release(&sub);
	return rc;
}

static const struct rule pattern_rules[] = {
	{ "regex", r_pat_regex, NULL },
	{ "step", r_pat_step, NULL },
	{ "values", r_pat_values, NULL },
	{ NULL, NULL, NULL },
};

/* The groups a pattern names must be groups its regex has. */
static int check_pattern(struct walk *w, yaml_node_t *item, const struct metrics_pattern *p)
{
	if (!p->regex)
		return walk_fail(w, item, "metrics.patterns[].regex", "is required");
	if (!p->step)
		return walk_fail(w, item, "metrics.patterns[].step",
				 "is required (the group number of the step)");
	if (!p->nvalues)
		return walk_fail(w, item, "metrics.patterns[].values",
				 "is required ({NAME: GROUP, ...})");
	regex_t re;
	if (regcomp(&re, p->regex, REG_EXTENDED))
		return walk_fail(w, item, "metrics.patterns[].regex", "does not compile");
	size_t nsub = re.re_nsub;
	regfree(&re);
	if ((size_t)p->step > nsub)
		return walk_fail(w, item, "metrics.patterns[].step",
				 "group %d, but '%s' has %zu group%s", p->step, p->regex, nsub,
				 nsub == 1 ? "" : "s");
	for (size_t i = 0; i < p->nvalues; i++)
		if ((size_t)p->groups[i] > nsub)
			return walk_fail(w, item, "metrics.patterns[].values",
					 "%s: group %d, but '%s' has %zu group%s", p->names[i],
					 p->groups[i], p->regex, nsub, nsub == 1 ? "" : "s");
	return 0;
}

static int r_met_patterns(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of {regex: RE, step: GROUP,"
				 " values: {NAME: GROUP}}");
	struct spec *s = w->s;
	for (size_t i = 0; i < s->metrics_npatterns; i++)
		metrics_pattern_release(&s->metrics_patterns[i]);
	free(s->metrics_patterns);
	s->metrics_npatterns = 0;
	size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	s->metrics_patterns = xcalloc(cnt ? cnt : 1, sizeof(*s->metrics_patterns));
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item)
			return walk_fail(w, n, key, "items must be mappings");
		s->metrics_npatterns++;
		int rc = walk_map(w, item, "metrics.patterns[].", pattern_rules);
		if (!rc)
			rc = check_pattern(w, item, cur_pattern(w));
		if (rc)
			return rc;
	}
	return 0;
}

static const struct rule metrics_rules[] = {
	{ "format", r_met_format, NULL },
	{ "warmup_steps", r_met_warmup, NULL },
	{ "batch_size", r_met_batch, NULL },
	{ "accuracy", r_met_accuracy, NULL },
	{ "files", r_met_files, NULL },
	{ "tensorboard_dirs", r_met_tbdirs, NULL },
	{ "patterns", r_met_patterns, NULL },
	{ NULL, NULL, NULL },
};

static int r_metrics(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	return walk_map(w, n, "metrics.", metrics_rules);
}

/* ---- priority:, preemptible: (the server's scheduler, docs/server.md) ---- */

static int r_priority(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, 1000, &w->s->priority);
}

static int r_preemptible(struct walk *w, yaml_node_t *n, const char *key)
{
	const char *v = plain(n) ? scalar(n) : NULL;
	if (v && (!strcmp(v, "true") || !strcmp(v, "false"))) {
		w->s->preemptible = !strcmp(v, "true");
		return 0;
	}
	return walk_fail(w, n, key, "must be true or false");
}

/* ---- slurm: (backend: slurm, docs/slurm.md) ---- */

/* A value that becomes part of an #SBATCH line: one line, printable. */
static int get_sbatch_value(struct walk *w, yaml_node_t *n, const char *key, char **out)
{
	int rc = walk_string(w, n, key, out);
	if (rc)
		return rc;
	if (!**out)
		return walk_fail(w, n, key, "is empty");
	for (const unsigned char *c = (const unsigned char *)*out; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return walk_fail(w, n, key, "must be one line without control characters");
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
			return walk_fail(w, n, key, "'%s' is not a Slurm time (MM, HH:MM:SS or D-HH:MM:SS)",
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
			return walk_fail(w, n, key, "'%s' is not a Slurm --signal value (e.g. USR1@120)",
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
		return walk_fail(w, n, key, "must be a list of sbatch options (\"--exclusive\")");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		char *v = NULL;
		if (!item)
			return walk_fail(w, n, key, "items must be strings");
		int rc = get_sbatch_value(w, item, key, &v);
		if (!rc && v[0] != '-')
			rc = walk_fail(w, item, key, "'%s' is not an sbatch option (it must start with '-')", v);
		if (rc) {
			free(v);
			return rc;
		}
		strvec_push_nodup(&w->s->slurm.extra, v);
	}
	return 0;
}

/*
 * What a non-admin's slurm.extra may say through a server: options that ask
 * for resources or placement.  Everything else (--chdir, --output, --error,
 * --input, --export, --uid, --gid, --get-user-env, --container, --wrap, ...)
 * names paths, accounts or the environment, and is an admin's.
 */
static const char *const extra_allowed[] = {
	"--exclusive", "--nodes", "-N", "--ntasks-per-node", "--cpus-per-task", "-c", "--mem",
	"--mem-per-cpu", "--mem-per-gpu", "--gpus", "-G", "--gpus-per-node", "--gpus-per-task",
	"--cpus-per-gpu", "--constraint", "-C", "--nodelist", "-w", "--exclude", "-x", "--qos", "-q",
	"--reservation", "--comment", "--hint", "--switches", "--begin", "--deadline", "--requeue",
	"--no-requeue", "--contiguous", "--tmp", "--mail-type", "--job-name", "-J", "--time-min",
	"--distribution", "-m", "--overcommit", "-O", "--spread-job", "--threads-per-core",
	"--cores-per-socket", "--sockets-per-node", "--gres-flags", "--licenses", "-L", "--network",
};

const char *spec_slurm_extra_refused(const struct spec *s)
{
	return spec_extra_refused(&s->slurm.extra, extra_allowed,
				  sizeof(extra_allowed) / sizeof(extra_allowed[0]));
}

const char *spec_extra_refused(const struct strvec *extra, const char *const *allowed, size_t nallowed)
{
	for (size_t i = 0; i < extra->nr; i++) {
		const char *v = extra->v[i];
		/* "--mem=4G", "--mem 4G", "-N2", "-N 2": the option is the name before '=' or ' ' */
		size_t n = strcspn(v, "= \t");
		if (v[1] != '-' && n > 2)
			n = 2;
		bool ok = false;
		for (size_t k = 0; !ok && k < nallowed; k++)
			ok = strlen(allowed[k]) == n && !strncmp(allowed[k], v, n);
		if (!ok)
			return v;
	}
	return NULL;
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

/* overrides: the record of --set (spec.h), read back from job.yaml or a clone */
static int r_overrides(struct walk *w, yaml_node_t *n, const char *key)
{
	return get_kv_map(w, n, key, &w->s->overrides, &w->s->noverrides, false);
}

const struct rule spec_top_rules[] = {
	{ "name", r_name, NULL },
	{ "command", r_command, NULL },
	{ "args", r_args, NULL },
	{ "workdir", r_workdir, NULL },
	{ "env", r_env, NULL },
	{ "framework", r_framework, NULL },
	{ "devices", spec_r_devices, NULL },
	{ "nodes", spec_r_nodes, NULL },
	{ "spares", spec_r_spares, NULL },
	{ "backend", r_backend, NULL },
	{ "restart", r_restart, NULL },
	{ "checkpoint", r_checkpoint, NULL },
	{ "priority", r_priority, NULL },
	{ "preemptible", r_preemptible, NULL },
	{ "limits", spec_r_limits, NULL },
	{ "inputs", r_inputs, NULL },
	{ "outputs", r_outputs, NULL },
	{ "metrics", r_metrics, NULL },
	{ "logs", spec_r_logs, NULL },
	{ "parallel", spec_r_parallel, NULL },
	{ "slurm", r_slurm, NULL },
	{ "overrides", r_overrides, NULL },
	{ "notify", spec_r_notify, NULL },
	{ "watchdog", r_watchdog, NULL },
	{ "on_log", r_on_log, NULL },
	{ "on_disk_full", spec_r_on_disk_full, NULL },
	{ "endpoints", spec_r_endpoints, NULL },
	{ "image", spec_r_image, NULL },
	{ "container", spec_r_container, NULL },
	{ NULL, NULL, NULL },
};
