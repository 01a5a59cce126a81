/*
 * sweep.c -- the sweep file, the trials it makes, the objective and the
 * early-stopping rules (see sweep.h; docs/sweeps.md is the user's view).
 */
#include "sweep/sweep.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define MAX_TRIALS 10000

/* ---- parsing ---- */

struct ld {
	yaml_document_t *doc;
	const char *file;
	struct tc_err *err;
};

static int fail(struct ld *l, yaml_node_t *n, const char *key, const char *fmt, ...)
	TC_PRINTF(4, 5);
static int fail(struct ld *l, yaml_node_t *n, const char *key, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	int rc = tc_error(l->err, TC_ESPEC, "%s:%d: %s%s%s", l->file,
			  n ? (int)n->start_mark.line + 1 : 1, key ? key : "", key ? ": " : "", sb.buf);
	sbuf_release(&sb);
	return rc;
}

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool plain(yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* A YAML node as JSON: plain scalars typed as YAML 1.2's core schema does. */
static json_t *to_json(yaml_document_t *doc, yaml_node_t *n)
{
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++)
			json_array_append_new(a, to_json(doc, yaml_document_get_node(doc, *i)));
		return a;
	}
	if (n->type == YAML_MAPPING_NODE) {
		json_t *o = json_object();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
			const char *k = scalar(yaml_document_get_node(doc, p->key));
			json_object_set_new(o, k ? k : "", to_json(doc, yaml_document_get_node(doc, p->value)));
		}
		return o;
	}
	const char *v = scalar(n);
	if (!v)
		return json_null();
	if (!plain(n))
		return json_string(v);
	if (!*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL"))
		return json_null();
	if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
		return json_true();
	if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
		return json_false();
	char *end;
	errno = 0;
	long long i = strtoll(v, &end, 10);
	if (!*end && end != v && !errno)
		return json_integer(i);
	double d = strtod(v, &end);
	if (!*end && end != v && isfinite(d) && strpbrk(v, "0123456789"))
		return json_real(d);
	return json_string(v);
}

static bool num_of(yaml_node_t *n, double *out)
{
	const char *v = scalar(n);
	if (!v || !plain(n) || !*v)
		return false;
	char *end;
	*out = strtod(v, &end);
	return !*end && isfinite(*out);
}

static yaml_node_t *node(struct ld *l, int id)
{
	return yaml_document_get_node(l->doc, id);
}

static int get_int(struct ld *l, yaml_node_t *n, const char *key, long min, long max, long *out)
{
	const char *v = scalar(n);
	if (!v || !plain(n) || !parse_long(v, min, max, out))
		return fail(l, n, key, "must be a whole number from %ld to %ld", min, max);
	return 0;
}

static int get_word(struct ld *l, yaml_node_t *n, const char *key, const char *const *words,
		    int *out)
{
	const char *v = scalar(n);
	for (int i = 0; v && words[i]; i++)
		if (!strcmp(v, words[i])) {
			*out = i;
			return 0;
		}
	struct sbuf sb = SBUF_INIT;
	for (int i = 0; words[i]; i++)
		sbuf_addf(&sb, "%s%s", i ? ", " : "", words[i]);
	int rc = fail(l, n, key, "must be one of %s, not '%s'", sb.buf, v ? v : "(not a word)");
	sbuf_release(&sb);
	return rc;
}

static int unknown_key(struct ld *l, yaml_node_t *kn, const char *prefix, const char *k,
		       const char *const *known)
{
	const char *best = NULL;
	size_t bd = 3;
	for (int i = 0; known[i]; i++) {
		size_t d = edit_distance(k, known[i]);
		if (d < bd) {
			bd = d;
			best = known[i];
		}
	}
	if (best)
		return fail(l, kn, NULL, "unknown key '%s%s' (did you mean '%s%s'?)", prefix, k, prefix,
			    best);
	return fail(l, kn, NULL, "unknown key '%s%s'", prefix, k);
}

static const char *const reduce_words[] = { "last", "min", "max", "mean", NULL };
static const char *const mode_words[] = { "min", "max", NULL };
static const char *const rule_words[] = { "none", "median", "halving", NULL };
static const char *const dist_words[] = { "grid", "uniform", "loguniform", "int", NULL };

static int parse_param(struct ld *l, const char *key, yaml_node_t *v, struct sweep_param *p)
{
	struct sbuf k = SBUF_INIT;
	sbuf_addf(&k, "parameters.%s", key);
	int rc = 0;
	p->key = xstrdup(key);
	if (!*key || key[0] == '.' || key[strlen(key) - 1] == '.' || strstr(key, "..")) {
		rc = fail(l, v, k.buf, "not a dotted spec key");
	} else if (v->type == YAML_SEQUENCE_NODE) {
		p->dist = SWEEP_GRID;
		p->values = to_json(l->doc, v);
		if (!json_array_size(p->values))
			rc = fail(l, v, k.buf, "a grid needs at least one value");
	} else if (v->type == YAML_MAPPING_NODE && v->data.mapping.pairs.top - v->data.mapping.pairs.start == 1) {
		yaml_node_pair_t *pr = v->data.mapping.pairs.start;
		yaml_node_t *kn = node(l, pr->key), *vn = node(l, pr->value);
		int d;
		if ((rc = get_word(l, kn, k.buf, dist_words, &d)))
			goto out;
		p->dist = (enum sweep_dist)d;
		if (p->dist == SWEEP_GRID) {
			if (vn->type != YAML_SEQUENCE_NODE) {
				rc = fail(l, vn, k.buf, "grid: takes a list of values");
				goto out;
			}
			p->values = to_json(l->doc, vn);
			if (!json_array_size(p->values))
				rc = fail(l, v, k.buf, "a grid needs at least one value");
			goto out;
		}
		if (vn->type != YAML_SEQUENCE_NODE ||
		    vn->data.sequence.items.top - vn->data.sequence.items.start != 2 ||
		    !num_of(node(l, vn->data.sequence.items.start[0]), &p->lo) ||
		    !num_of(node(l, vn->data.sequence.items.start[1]), &p->hi)) {
			rc = fail(l, vn, k.buf, "%s: takes [low, high], two numbers", dist_words[d]);
		} else if (p->lo > p->hi) {
			rc = fail(l, vn, k.buf, "%s: low %g is above high %g", dist_words[d], p->lo, p->hi);
		} else if (p->dist == SWEEP_LOGUNIFORM && p->lo <= 0) {
			rc = fail(l, vn, k.buf, "loguniform: needs low > 0");
		} else if (p->dist == SWEEP_INT && (p->lo != floor(p->lo) || p->hi != floor(p->hi) ||
						    fabs(p->lo) > 1e15 || fabs(p->hi) > 1e15)) {
			rc = fail(l, vn, k.buf, "int: takes two whole numbers");
		}
	} else {
		rc = fail(l, v, k.buf,
			  "a list of values (grid), or one of {uniform: [lo, hi]}, {loguniform: [lo, hi]},"
			  " {int: [lo, hi]}, {grid: [...]}");
	}
out:
	sbuf_release(&k);
	return rc;
}

static int parse_objective(struct ld *l, yaml_node_t *n, struct sweep_def *d)
{
	static const char *const keys[] = { "metric", "mode", "reduce", NULL };
	if (n->type != YAML_MAPPING_NODE)
		return fail(l, n, "objective", "must be a mapping {metric, mode, reduce}");
	int rc = 0, w;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; !rc && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = node(l, p->key), *vn = node(l, p->value);
		const char *k = scalar(kn) ? scalar(kn) : "";
		if (!strcmp(k, "metric")) {
			if (!scalar(vn) || !*scalar(vn))
				rc = fail(l, vn, "objective.metric", "must be a metric name");
			else {
				free(d->metric);
				d->metric = xstrdup(scalar(vn));
			}
		} else if (!strcmp(k, "mode")) {
			if (!(rc = get_word(l, vn, "objective.mode", mode_words, &w)))
				d->mode = (enum sweep_mode)w;
		} else if (!strcmp(k, "reduce")) {
			if (!(rc = get_word(l, vn, "objective.reduce", reduce_words, &w)))
				d->reduce = (enum sweep_reduce)w;
		} else {
			rc = unknown_key(l, kn, "objective.", k, keys);
		}
	}
	if (!rc && !d->metric)
		rc = fail(l, n, "objective", "needs metric: (e.g. val.accuracy)");
	return rc;
}

static int parse_stop(struct ld *l, yaml_node_t *n, struct sweep_def *d)
{
	static const char *const keys[] = { "rule", "grace", "min_trials", "budget", "eta",
					    "min_steps", NULL };
	if (n->type != YAML_MAPPING_NODE)
		return fail(l, n, "early_stopping", "must be a mapping {rule: median|halving, ...}");
	int rc = 0, w;
	long v;
	yaml_node_t *budget = NULL;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; !rc && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = node(l, p->key), *vn = node(l, p->value);
		const char *k = scalar(kn) ? scalar(kn) : "";
		struct sbuf key = SBUF_INIT;
		sbuf_addf(&key, "early_stopping.%s", k);
		if (!strcmp(k, "rule")) {
			if (!(rc = get_word(l, vn, key.buf, rule_words, &w)))
				d->stop.rule = (enum sweep_rule)w;
		} else if (!strcmp(k, "grace")) {
			if (!(rc = get_int(l, vn, key.buf, 0, 1000000000, &v)))
				d->stop.grace = v;
		} else if (!strcmp(k, "min_trials")) {
			if (!(rc = get_int(l, vn, key.buf, 1, 10000, &v)))
				d->stop.min_trials = (int)v;
		} else if (!strcmp(k, "budget")) {
			budget = vn;
			if (!(rc = get_int(l, vn, key.buf, 1, 1000000000, &v)))
				d->stop.budget = v;
		} else if (!strcmp(k, "eta")) {
			if (!(rc = get_int(l, vn, key.buf, 2, 100, &v)))
				d->stop.eta = (int)v;
		} else if (!strcmp(k, "min_steps")) {
			if (!(rc = get_int(l, vn, key.buf, 1, 1000000000, &v)))
				d->stop.min_steps = v;
		} else {
			rc = unknown_key(l, kn, "early_stopping.", k, keys);
		}
		sbuf_release(&key);
	}
	if (!rc && d->stop.rule == SWEEP_RULE_HALVING && !budget)
		rc = fail(l, n, "early_stopping", "halving needs budget: (the steps of a whole trial)");
	return rc;
}

static void def_defaults(struct sweep_def *d)
{
	memset(d, 0, sizeof(*d));
	d->mode = SWEEP_MIN;
	d->reduce = SWEEP_LAST;
	d->parallel = 1;
	d->seed = 1;
	d->stop.grace = 1;
	d->stop.min_trials = 3;
	d->stop.eta = 3;
	d->stop.min_steps = 1;
	d->preemptible = -1;
}

/* Is s a YAML/JSON mapping's text (the inline base spec's) we can rebase? */
static char *inline_spec(struct ld *l, yaml_node_t *n, const char *dir)
{
	json_t *o = to_json(l->doc, n);
	/* relative paths of an inline spec are the sweep file's folder's */
	json_t *wd = json_object_get(o, "workdir");
	if (!wd) {
		json_object_set_new(o, "workdir", json_string(dir));
	} else if (json_is_string(wd) && json_string_value(wd)[0] != '/') {
		char *abs = path_absolute(json_string_value(wd), dir);
		json_object_set_new(o, "workdir", json_string(abs));
		free(abs);
	}
	char *t = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	json_decref(o);
	return t ? t : xstrdup("{}");
}

static int grid_product(struct sweep_def *d, long *out)
{
	long n = 1;
	for (size_t i = 0; i < d->nparams; i++) {
		if (d->params[i].dist != SWEEP_GRID)
			continue;
		n *= (long)json_array_size(d->params[i].values);
		if (n > MAX_TRIALS)
			return -1;
	}
	*out = n;
	return 0;
}

static int parse_root(struct ld *l, yaml_node_t *root, const char *dir, const char *spec_text,
		      struct sweep_def *d)
{
	static const char *const keys[] = { "name", "spec", "parameters", "count", "seed", "objective",
					    "parallel", "early_stopping", "priority", "preemptible",
					    NULL };
	if (!root || root->type != YAML_MAPPING_NODE)
		return fail(l, root, NULL, "a sweep file is a mapping (name, spec, parameters, objective, ...)");
	yaml_node_t *spec = NULL, *params = NULL, *count = NULL, *objective = NULL;
	int rc = 0;
	long v;
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; !rc && p < root->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = node(l, p->key), *vn = node(l, p->value);
		const char *k = scalar(kn) ? scalar(kn) : "";
		if (!strcmp(k, "name")) {
			if (!scalar(vn) || !*scalar(vn) || strlen(scalar(vn)) > 100)
				rc = fail(l, vn, k, "must be a name (1 to 100 characters)");
			else
				d->name = xstrdup(scalar(vn));
		} else if (!strcmp(k, "spec")) {
			spec = vn;
		} else if (!strcmp(k, "parameters")) {
			params = vn;
		} else if (!strcmp(k, "count")) {
			count = vn;
			if (!(rc = get_int(l, vn, k, 1, MAX_TRIALS, &v)))
				d->count = (int)v;
		} else if (!strcmp(k, "seed")) {
			if (!(rc = get_int(l, vn, k, 0, 1L << 62, &v)))
				d->seed = (unsigned long long)v;
		} else if (!strcmp(k, "objective")) {
			objective = vn;
			rc = parse_objective(l, vn, d);
		} else if (!strcmp(k, "parallel")) {
			if (!(rc = get_int(l, vn, k, 1, 1024, &v)))
				d->parallel = (int)v;
		} else if (!strcmp(k, "early_stopping")) {
			rc = parse_stop(l, vn, d);
		} else if (!strcmp(k, "priority")) {
			if (!(rc = get_int(l, vn, k, 1, 1000, &v)))
				d->priority = (int)v;
		} else if (!strcmp(k, "preemptible")) {
			const char *b = scalar(vn);
			if (b && (!strcmp(b, "true") || !strcmp(b, "false")))
				d->preemptible = !strcmp(b, "true");
			else
				rc = fail(l, vn, k, "must be true or false");
		} else {
			rc = unknown_key(l, kn, "", k, keys);
		}
	}
	if (rc)
		return rc;
	if (!spec)
		return fail(l, root, NULL, "spec: is missing (a spec file's path, or the spec inline)");
	if (!objective)
		return fail(l, root, NULL, "objective: is missing ({metric: NAME, mode: min|max})");
	if (!params || params->type != YAML_MAPPING_NODE ||
	    params->data.mapping.pairs.top == params->data.mapping.pairs.start)
		return fail(l, params ? params : root, "parameters",
			    "%s", "needs at least one dotted spec key with its values (args.lr: [0.01, 0.1])");
	if (scalar(spec) && *scalar(spec)) {
		d->spec_path = path_absolute(scalar(spec), dir);
		d->base = path_dirname(d->spec_path);
		if (spec_text) {
			d->spec_text = xstrdup(spec_text);
			goto params;
		}
		struct sbuf text = SBUF_INIT;
		struct tc_err e2 = TC_ERR_INIT;
		if (read_file(d->spec_path, &text, &e2)) {
			rc = fail(l, spec, "spec", "%s", e2.msg ? e2.msg : "cannot read");
			tc_err_release(&e2);
			sbuf_release(&text);
			return rc;
		}
		d->spec_text = sbuf_detach(&text);
	} else if (spec->type == YAML_MAPPING_NODE) {
		d->spec_text = inline_spec(l, spec, dir);
		d->base = xstrdup(dir);
	} else {
		return fail(l, spec, "spec", "a spec file's path, or the spec inline as a mapping");
	}
params:;
	size_t np = (size_t)(params->data.mapping.pairs.top - params->data.mapping.pairs.start);
	d->params = xcalloc(np, sizeof(*d->params));
	for (yaml_node_pair_t *p = params->data.mapping.pairs.start; !rc && p < params->data.mapping.pairs.top; p++) {
		const char *k = scalar(node(l, p->key));
		for (size_t i = 0; k && i < d->nparams; i++)
			if (!strcmp(d->params[i].key, k))
				return fail(l, node(l, p->key), "parameters", "'%s' is given twice", k);
		rc = parse_param(l, k ? k : "", node(l, p->value), &d->params[d->nparams++]);
		if (d->params[d->nparams - 1].dist != SWEEP_GRID)
			d->random = true;
	}
	if (rc)
		return rc;
	long n;
	if (grid_product(d, &n))
		return fail(l, params, "parameters", "the grid has more than %d trials", MAX_TRIALS);
	if (!d->random && count)
		return fail(l, count, "count", "is for random search (a uniform, loguniform or int range); a grid runs every combination (%ld)", n);
	if (d->random && !count)
		return fail(l, root, NULL, "count: is missing (how many random trials)");
	if (!d->random)
		d->count = (int)n;
	if (!d->name) {
		/* the sweep file's name, less its extension */
		const char *b = path_basename(l->file);
		d->name = xstrdup(b);
		char *dot = strrchr(d->name, '.');
		if (dot && dot != d->name)
			*dot = '\0';
	}
	return 0;
}

int sweep_parse(const char *text, size_t len, const char *name, const char *dir,
		const char *spec_text, struct sweep_def **out, struct tc_err *err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser))
		xdie_oom(sizeof(parser));
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		int rc = tc_error(err, TC_ESPEC, "%s:%zu: syntax error: %s", name,
				  parser.problem_mark.line + 1, parser.problem ? parser.problem : "cannot parse");
		yaml_parser_delete(&parser);
		return rc;
	}
	struct ld l = { &doc, name, err };
	struct sweep_def *d = xmalloc(sizeof(*d));
	def_defaults(d);
	char *adir = path_absolute(dir ? dir : ".", NULL);
	int rc = parse_root(&l, yaml_document_get_root_node(&doc), adir, spec_text, d);
	free(adir);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (rc)
		sweep_def_free(d);
	else
		*out = d;
	return rc;
}

int sweep_load(const char *path, struct sweep_def **out, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	int rc = read_file(path, &text, err);
	if (rc) {
		sbuf_release(&text);
		return rc;
	}
	char *dir = path_dirname(path);
	rc = sweep_parse(text.buf, text.len, path, dir, NULL, out, err);
	free(dir);
	sbuf_release(&text);
	return rc;
}

void sweep_def_free(struct sweep_def *d)
{
	if (!d)
		return;
	free(d->name);
	free(d->spec_path);
	free(d->spec_text);
	free(d->base);
	for (size_t i = 0; i < d->nparams; i++) {
		free(d->params[i].key);
		json_decref(d->params[i].values);
	}
	free(d->params);
	free(d->metric);
	free(d);
}

/* ---- stored form ---- */

json_t *sweep_def_to_json(const struct sweep_def *d)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(d->name));
	json_object_set_new(o, "spec_path", json_string_or_null(d->spec_path));
	json_object_set_new(o, "spec_text", json_string(d->spec_text));
	json_object_set_new(o, "base", json_string(d->base));
	json_t *ps = json_array();
	for (size_t i = 0; i < d->nparams; i++) {
		const struct sweep_param *p = &d->params[i];
		json_t *x = json_pack("{s:s, s:s}", "key", p->key, "dist", dist_words[p->dist]);
		if (p->dist == SWEEP_GRID)
			json_object_set(x, "values", p->values);
		else
			json_object_set_new(x, "range", json_pack("[f, f]", p->lo, p->hi));
		json_array_append_new(ps, x);
	}
	json_object_set_new(o, "parameters", ps);
	json_object_set_new(o, "random", json_boolean(d->random));
	json_object_set_new(o, "count", json_integer(d->count));
	json_object_set_new(o, "seed", json_integer((json_int_t)d->seed));
	json_object_set_new(o, "objective", json_pack("{s:s, s:s, s:s}", "metric", d->metric, "mode",
						      mode_words[d->mode], "reduce",
						      reduce_words[d->reduce]));
	json_object_set_new(o, "parallel", json_integer(d->parallel));
	json_object_set_new(o, "early_stopping",
			    json_pack("{s:s, s:I, s:i, s:I, s:i, s:I}", "rule", rule_words[d->stop.rule],
				      "grace", (json_int_t)d->stop.grace, "min_trials", d->stop.min_trials,
				      "budget", (json_int_t)d->stop.budget, "eta", d->stop.eta,
				      "min_steps", (json_int_t)d->stop.min_steps));
	json_object_set_new(o, "priority", json_integer(d->priority));
	json_object_set_new(o, "preemptible", json_integer(d->preemptible));
	return o;
}

static int word_of(const char *s, const char *const *words)
{
	for (int i = 0; s && words[i]; i++)
		if (!strcmp(s, words[i]))
			return i;
	return -1;
}

static char *dup_or_null(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? xstrdup(s) : NULL;
}

int sweep_def_from_json(const char *text, struct sweep_def **out, struct tc_err *err)
{
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return tc_error(err, TC_ESTORE, "stored sweep: not a JSON object (%s)", je.text);
	}
	struct sweep_def *d = xmalloc(sizeof(*d));
	def_defaults(d);
	d->name = dup_or_null(o, "name");
	d->spec_path = dup_or_null(o, "spec_path");
	d->spec_text = dup_or_null(o, "spec_text");
	d->base = dup_or_null(o, "base");
	json_t *ps = json_object_get(o, "parameters");
	d->params = xcalloc(json_array_size(ps) + 1, sizeof(*d->params));
	size_t i;
	json_t *x;
	bool bad = !d->name || !d->spec_text || !d->base;
	json_array_foreach(ps, i, x) {
		struct sweep_param *p = &d->params[d->nparams++];
		p->key = dup_or_null(x, "key");
		int dist = word_of(json_string_value(json_object_get(x, "dist")), dist_words);
		p->dist = dist < 0 ? SWEEP_GRID : (enum sweep_dist)dist;
		if (p->dist == SWEEP_GRID) {
			p->values = json_incref(json_object_get(x, "values"));
			bad |= !json_is_array(p->values);
		} else {
			json_t *r = json_object_get(x, "range");
			p->lo = json_number_value(json_array_get(r, 0));
			p->hi = json_number_value(json_array_get(r, 1));
		}
		bad |= !p->key || dist < 0;
	}
	d->random = json_is_true(json_object_get(o, "random"));
	d->count = (int)json_integer_value(json_object_get(o, "count"));
	d->seed = (unsigned long long)json_integer_value(json_object_get(o, "seed"));
	json_t *ob = json_object_get(o, "objective");
	d->metric = dup_or_null(ob, "metric");
	int w = word_of(json_string_value(json_object_get(ob, "mode")), mode_words);
	d->mode = w < 0 ? SWEEP_MIN : (enum sweep_mode)w;
	w = word_of(json_string_value(json_object_get(ob, "reduce")), reduce_words);
	d->reduce = w < 0 ? SWEEP_LAST : (enum sweep_reduce)w;
	d->parallel = (int)json_integer_value(json_object_get(o, "parallel"));
	json_t *es = json_object_get(o, "early_stopping");
	w = word_of(json_string_value(json_object_get(es, "rule")), rule_words);
	d->stop.rule = w < 0 ? SWEEP_RULE_NONE : (enum sweep_rule)w;
	d->stop.grace = (long)json_integer_value(json_object_get(es, "grace"));
	d->stop.min_trials = (int)json_integer_value(json_object_get(es, "min_trials"));
	d->stop.budget = (long)json_integer_value(json_object_get(es, "budget"));
	d->stop.eta = (int)json_integer_value(json_object_get(es, "eta"));
	d->stop.min_steps = (long)json_integer_value(json_object_get(es, "min_steps"));
	d->priority = (int)json_integer_value(json_object_get(o, "priority"));
	d->preemptible = (int)json_integer_value(json_object_get(o, "preemptible"));
	json_decref(o);
	if (bad || !d->metric || d->parallel < 1 || d->count < 0 || d->stop.eta < 2) {
		sweep_def_free(d);
		return tc_error(err, TC_ESTORE, "stored sweep: its definition is incomplete");
	}
	*out = d;
	return 0;
}

/* ---- trials ---- */

/* splitmix64: a fixed, portable sequence for a seed (note 1) */
static unsigned long long next_rand(unsigned long long *s)
{
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double unit_rand(unsigned long long *s)
{
	return (double)(next_rand(s) >> 11) / 9007199254740992.0; /* [0, 1) */
}

/* A drawn real kept to 6 significant digits: short --set values, same everywhere. */
static json_t *real6(double v)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%.6g", v);
	return json_real(strtod(buf, NULL));
}

json_t *sweep_trials(const struct sweep_def *d)
{
	json_t *all = json_array();
	unsigned long long rs = d->seed;
	for (int t = 0; t < d->count; t++) {
		json_t *o = json_object();
		long rest = t; /* grid: mixed-radix digits of t, the last key fastest */
		for (size_t k = d->nparams; k-- > 0;) {
			const struct sweep_param *p = &d->params[k];
			if (p->dist != SWEEP_GRID || d->random)
				continue;
			size_t n = json_array_size(p->values);
			json_object_set(o, p->key, json_array_get(p->values, (size_t)(rest % (long)n)));
			rest /= (long)n;
		}
		for (size_t k = 0; d->random && k < d->nparams; k++) {
			const struct sweep_param *p = &d->params[k];
			double u = unit_rand(&rs);
			json_t *v;
			switch (p->dist) {
			case SWEEP_GRID: {
				size_t n = json_array_size(p->values);
				size_t i = (size_t)(u * (double)n);
				v = json_incref(json_array_get(p->values, i < n ? i : n - 1));
				break;
			}
			case SWEEP_UNIFORM: v = real6(p->lo + u * (p->hi - p->lo)); break;
			case SWEEP_LOGUNIFORM: v = real6(exp(log(p->lo) + u * (log(p->hi) - log(p->lo)))); break;
			default: {
				double span = p->hi - p->lo + 1;
				double x = p->lo + floor(u * span);
				v = json_integer((json_int_t)(x > p->hi ? p->hi : x));
				break;
			}
			}
			json_object_set_new(o, p->key, v);
		}
		/* keys in file order, whatever order they were set in */
		json_t *ord = json_object();
		for (size_t k = 0; k < d->nparams; k++)
			json_object_set(ord, d->params[k].key, json_object_get(o, d->params[k].key));
		json_decref(o);
		json_array_append_new(all, ord);
	}
	return all;
}

char *sweep_value_text(const json_t *v)
{
	/* strings as they are, unless YAML would read them as something else */
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		bool plain_ok = *s && !strpbrk(s, ":#{}[],&*!|>'\"%@`\n") && s[0] != ' ' && s[0] != '-' &&
				strcmp(s, "true") && strcmp(s, "false") && strcmp(s, "null") && strcmp(s, "~");
		char *end;
		if (plain_ok) {
			(void)strtod(s, &end);
			plain_ok = *end != '\0';
		}
		if (plain_ok)
			return xstrdup(s);
	}
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER |
				       JSON_REAL_PRECISION(15));
	return t ? t : xstrdup("null");
}

char *sweep_params_text(const char *params_json)
{
	json_t *o = json_loads(params_json ? params_json : "{}", 0, NULL);
	struct sbuf sb = SBUF_INIT;
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v) {
		const char *dot = strrchr(k, '.');
		char *t = sweep_value_text(v);
		sbuf_addf(&sb, "%s%s=%s", sb.len ? " " : "", dot ? dot + 1 : k, t);
		free(t);
	}
	json_decref(o);
	return sbuf_detach(&sb);
}

/* ---- objective and early stopping ---- */

double sweep_reduce_values(const double *v, size_t n, enum sweep_reduce r)
{
	if (!n)
		return NAN;
	double acc = r == SWEEP_LAST ? v[n - 1] : v[0];
	for (size_t i = 1; r != SWEEP_LAST && i < n; i++) {
		if (r == SWEEP_RMIN)
			acc = v[i] < acc ? v[i] : acc;
		else if (r == SWEEP_RMAX)
			acc = v[i] > acc ? v[i] : acc;
		else
			acc += v[i];
	}
	return r == SWEEP_MEAN ? acc / (double)n : acc;
}

bool sweep_better(enum sweep_mode mode, double a, double b)
{
	if (isnan(a))
		return false;
	if (isnan(b))
		return true;
	return mode == SWEEP_MAX ? a > b : a < b;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static bool median_stop(const struct sweep_def *d, const struct sweep_curve *c, size_t n, size_t i,
			struct sbuf *why)
{
	size_t s = c[i].n;
	if ((long)s <= d->stop.grace || !s)
		return false;
	double *avg = xcalloc(n, sizeof(*avg));
	size_t m = 0;
	for (size_t j = 0; j < n; j++) {
		if (j == i || c[j].n < s)
			continue;
		avg[m++] = sweep_reduce_values(c[j].v, s, SWEEP_MEAN);
	}
	bool stop = false;
	if (m >= (size_t)d->stop.min_trials) {
		qsort(avg, m, sizeof(*avg), cmp_double);
		double med = m % 2 ? avg[m / 2] : (avg[m / 2 - 1] + avg[m / 2]) / 2;
		double best = sweep_reduce_values(c[i].v, s, d->mode == SWEEP_MAX ? SWEEP_RMAX : SWEEP_RMIN);
		stop = sweep_better(d->mode, med, best);
		if (stop)
			sbuf_addf(why, "median rule: best %.6g after %zu steps is worse than the median %.6g of %zu other trials' running averages",
				  best, s, med, m);
	}
	free(avg);
	return stop;
}

static bool halving_stop(const struct sweep_def *d, const struct sweep_curve *c, size_t n, size_t i,
			 struct sbuf *why)
{
	long rung = 0; /* the highest rung reached: min_steps * eta^k below budget */
	for (long r = d->stop.min_steps; r > 0 && r < d->stop.budget;) {
		if ((long)c[i].n >= r)
			rung = r;
		if (r > d->stop.budget / d->stop.eta)
			break;
		r *= d->stop.eta;
	}
	if (!rung)
		return false;
	double mine = sweep_reduce_values(c[i].v, (size_t)rung, d->reduce);
	size_t m = 0, better = 0;
	for (size_t j = 0; j < n; j++) {
		if ((long)c[j].n < rung)
			continue;
		m++;
		if (j != i && sweep_better(d->mode, sweep_reduce_values(c[j].v, (size_t)rung, d->reduce), mine))
			better++;
	}
	size_t keep = m / (size_t)d->stop.eta;
	if (keep < 1)
		keep = 1;
	if (m < (size_t)d->stop.eta || better < keep)
		return false;
	sbuf_addf(why, "successive halving: %.6g at rung %ld steps is not among the best %zu of %zu trials",
		  mine, rung, keep, m);
	return true;
}

bool sweep_should_stop(const struct sweep_def *d, const struct sweep_curve *c, size_t n, size_t i,
		       struct sbuf *why)
{
	if (!c[i].running)
		return false;
	if (d->stop.rule == SWEEP_RULE_MEDIAN)
		return median_stop(d, c, n, i, why);
	if (d->stop.rule == SWEEP_RULE_HALVING)
		return halving_stop(d, c, n, i, why);
	return false;
}

bool sweep_trial_ended(const char *state)
{
	enum trial_state t;
	return trial_state_parse(state, &t) && trial_state_final(t);
}

bool sweep_metric_maximised(const char *metric)
{
	static const char *const words[] = { "acc",  "accuracy", "top1", "top5",  "f1",    "precision",
					     "recall", "auc", "auroc", "map",  "bleu",  "rouge", "iou",
					     "miou", "dice", "r2",   "score", NULL };
	/* the last word: "val.accuracy", "val_acc", "eval/f1", "val-top1" */
	const char *w = metric;
	for (const char *c = metric; *c; c++)
		if (*c == '.' || *c == '_' || *c == '/' || *c == '-' || *c == ':')
			w = c + 1;
	for (size_t i = 0; words[i]; i++)
		if (!strcasecmp(w, words[i]))
			return true;
	return false;
}
