/*
 * strategy.c -- the data / tensor / pipeline strategy search: models (built
 * in from their shapes, or a YAML layer table), the cluster, the cost and
 * memory model of one candidate, and the enumeration APSS does, with every
 * candidate's partition solved exactly (solve.c).  docs/plan.md states the
 * model; the constants below are its defaults.
 */
#include "plan/plan.h"
#include "plan/plan_int.h"

#include "core/json.h"
#include "core/sbuf.h"
#include "core/upath.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "core/yaml.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MAX_TP 16
/* Work one search may take, in cand_work() units (about 1 ns each): a
 * plan is made inside a server request, so about a second at most. */
#define PLAN_WORK_BUDGET 1e9

/* ---- models ------------------------------------------------------------- */

struct layer {
	double params;     /* parameters (before the tensor-parallel split) */
	double out_bytes;  /* per sample, sent on when a cut follows */
	double act_bytes;  /* per sample kept for backward at tp 1 (YAML: / tp) */
	double time[MAX_TP + 1]; /* YAML: fwd+bwd seconds per sample at tp; 0 = not profiled */
};

struct plan_model {
	char *name;
	bool builtin;
	int n, h, heads, seq, vocab; /* built-in shape */
	struct layer *layers;        /* YAML: n layers */
	double bytes_per_param;      /* weights + grads + optimizer state */
	double grad_bytes;           /* bytes per gradient value all-reduced */
};

static const struct builtin {
	const char *name;
	int n, h, heads, seq, vocab;
} builtins[] = {
	{ "gpt2-small", 12, 768, 12, 1024, 50257 },
	{ "gpt2-medium", 24, 1024, 16, 1024, 50257 },
	{ "gpt2-large", 36, 1280, 20, 1024, 50257 },
	{ "gpt2-xl", 48, 1600, 25, 1024, 50257 },
	{ "gpt3-175b", 96, 12288, 96, 2048, 50257 },
};

const char *const plan_builtin_models[] = { "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl",
					    "gpt3-175b", NULL };

int plan_model_layers(const struct plan_model *m)
{
	return m->n;
}

const char *plan_model_name(const struct plan_model *m)
{
	return m->name;
}

bool plan_model_tp_ok(const struct plan_model *m, int tp)
{
	if (tp < 1 || tp > MAX_TP)
		return false;
	if (m->builtin)
		return m->heads % tp == 0 && m->h % tp == 0;
	for (int i = 0; i < m->n; i++)
		if (m->layers[i].time[tp] <= 0)
			return false;
	return true;
}

void plan_model_free(struct plan_model *m)
{
	if (!m)
		return;
	free(m->name);
	free(m->layers);
	free(m);
}

/* YAML helpers over the document API. */
static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int yerr(struct tc_err *err, const char *path, yaml_node_t *n, const char *fmt, const char *a)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, fmt, a);
	int rc = tc_error(err, TC_EINPUT, "%s:%zu: %s", path, n ? n->start_mark.line + 1 : 0, sb.buf);
	sbuf_release(&sb);
	return rc;
}

static int ynum(yaml_node_t *n, const char *path, const char *key, double min, double *out,
		struct tc_err *err)
{
	const char *v = scalar(n);
	if (!v || !parse_double(v, out) || !isfinite(*out) || *out < min)
		return yerr(err, path, n, "'%s': expected a number", key);
	return 0;
}

/* Load text (len bytes, named path in messages) as one YAML mapping. */
static int yload(const char *text, size_t len, const char *path, yaml_document_t *doc,
		 yaml_node_t **root, struct tc_err *err)
{
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser))
		xdie_oom(sizeof(parser));
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int ok = yaml_parser_load(&parser, doc);
	int rc = 0;
	if (!ok && tc_yaml_tab_problem(&parser, text, len))
		rc = tc_error(err, TC_EINPUT, "%s:%zu: " TC_YAML_TAB_HINT, path,
			      parser.problem_mark.line + 1);
	else if (!ok)
		rc = tc_error(err, TC_EINPUT, "%s:%zu: %s", path, parser.problem_mark.line + 1,
			      parser.problem ? parser.problem : "not YAML");
	yaml_parser_delete(&parser);
	if (rc)
		return rc;
	*root = yaml_document_get_root_node(doc);
	if (!*root || (*root)->type != YAML_MAPPING_NODE) {
		yaml_document_delete(doc);
		return tc_error(err, TC_EINPUT, "%s: expected a mapping of keys", path);
	}
	return 0;
}

/*
 * The whole file at path; TC_EINPUT when it cannot be read.  A spec names
 * it and a root server reads it (as the caller): a regular file with a
 * size cap, never a FIFO that blocks or /dev/zero that never ends.
 */
static int slurp(const char *path, struct sbuf *text, struct tc_err *err)
{
	if (upath_read_path(path, UPATH_SPEC_MAX, text, err)) {
		err->code = TC_EINPUT;
		return TC_EINPUT;
	}
	return 0;
}

static int model_yaml(const char *text, size_t len, const char *path, struct plan_model *m,
		      struct tc_err *err)
{
	yaml_document_t doc;
	yaml_node_t *root;
	int rc = yload(text, len, path, &doc, &root, err);
	if (rc)
		return rc;
	size_t alloc = 0;
	yaml_node_pair_t *pr;
	yaml_node_t *layers = NULL;
	for (pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top; pr++) {
		yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
		yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
		const char *key = scalar(k) ? scalar(k) : "";
		if (!strcmp(key, "name") && scalar(v)) {
			free(m->name);
			m->name = xstrdup(scalar(v));
		} else if (!strcmp(key, "bytes_per_param")) {
			rc = ynum(v, path, key, 0, &m->bytes_per_param, err);
		} else if (!strcmp(key, "grad_bytes_per_param")) {
			rc = ynum(v, path, key, 0, &m->grad_bytes, err);
		} else if (!strcmp(key, "layers") && v->type == YAML_SEQUENCE_NODE) {
			layers = v;
		} else {
			rc = yerr(err, path, k, "unknown key '%s' (name, layers, bytes_per_param, grad_bytes_per_param)", key);
		}
		if (rc)
			goto out;
	}
	if (!layers) {
		rc = tc_error(err, TC_EINPUT, "%s: 'layers': missing (a list of layers)", path);
		goto out;
	}
	for (yaml_node_item_t *it = layers->data.sequence.items.start; it < layers->data.sequence.items.top; it++) {
		yaml_node_t *ln = yaml_document_get_node(&doc, *it);
		struct layer L = { 0 };
		double count = 1;
		bool has_time = false, has_params = false;
		if (ln->type != YAML_MAPPING_NODE) {
			rc = yerr(err, path, ln, "%s: each layer is a mapping", "layers");
			goto out;
		}
		for (pr = ln->data.mapping.pairs.start; pr < ln->data.mapping.pairs.top; pr++) {
			yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
			yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
			const char *key = scalar(k) ? scalar(k) : "";
			if (!strcmp(key, "name")) {
				continue;
			} else if (!strcmp(key, "count")) {
				rc = ynum(v, path, key, 1, &count, err);
			} else if (!strcmp(key, "params")) {
				rc = ynum(v, path, key, 0, &L.params, err);
				has_params = true;
			} else if (!strcmp(key, "output_bytes")) {
				rc = ynum(v, path, key, 0, &L.out_bytes, err);
			} else if (!strcmp(key, "activation_bytes")) {
				rc = ynum(v, path, key, 0, &L.act_bytes, err);
			} else if (!strcmp(key, "time_ms") && v->type == YAML_MAPPING_NODE) {
				for (yaml_node_pair_t *tp = v->data.mapping.pairs.start; tp < v->data.mapping.pairs.top; tp++) {
					yaml_node_t *tk = yaml_document_get_node(&doc, tp->key);
					long deg;
					double ms;
					if (!scalar(tk) || !parse_long(scalar(tk), 1, MAX_TP, &deg)) {
						rc = yerr(err, path, tk, "'time_ms': keys are tensor-parallel degrees 1..16, not '%s'",
							  scalar(tk) ? scalar(tk) : "?");
						goto out;
					}
					rc = ynum(yaml_document_get_node(&doc, tp->value), path, "time_ms", 0, &ms, err);
					if (rc)
						goto out;
					L.time[deg] = ms * 1e-3;
					has_time = true;
				}
			} else {
				rc = yerr(err, path, k, "unknown layer key '%s' (name, count, params, time_ms, output_bytes, activation_bytes)", key);
			}
			if (rc)
				goto out;
		}
		if (!has_time || !has_params) {
			rc = yerr(err, path, ln, "%s: a layer needs 'params' and 'time_ms'", "layers");
			goto out;
		}
		if (count != floor(count) || count > 100000) {
			rc = yerr(err, path, ln, "%s: 'count' must be a whole number", "layers");
			goto out;
		}
		for (int i = 0; i < (int)count; i++) {
			XGROW(m->layers, (size_t)m->n + 1, alloc);
			m->layers[m->n++] = L;
		}
	}
	if (m->n < 1)
		rc = tc_error(err, TC_EINPUT, "%s: 'layers': empty", path);
out:
	yaml_document_delete(&doc);
	return rc;
}

static struct plan_model *model_new(void)
{
	struct plan_model *m = xcalloc(1, sizeof(*m));
	m->bytes_per_param = 16; /* fp16 weights 2 + fp16 grads 2 + fp32 master, Adam m, v 12 */
	m->grad_bytes = 2;
	return m;
}

int plan_model_load(const char *name, int seq_len, struct plan_model **out, struct tc_err *err)
{
	struct plan_model *m = model_new();
	struct sbuf text = SBUF_INIT;
	int rc = 0;
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (!strcmp(name, builtins[i].name)) {
			const struct builtin *b = &builtins[i];
			m->builtin = true;
			m->name = xstrdup(b->name);
			m->n = b->n;
			m->h = b->h;
			m->heads = b->heads;
			m->seq = seq_len > 0 ? seq_len : b->seq;
			m->vocab = b->vocab;
			*out = m;
			return 0;
		}
	if (!path_exists(name)) {
		rc = tc_error(err, TC_EINPUT,
			      "unknown model '%s' (built-in: gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, gpt3-175b; or a YAML file)",
			      name);
		goto out;
	}
	m->name = xstrdup(path_basename(name));
	rc = slurp(name, &text, err);
	if (!rc)
		rc = model_yaml(text.buf, text.len, name, m, err);
out:
	sbuf_release(&text);
	if (rc)
		plan_model_free(m);
	else
		*out = m;
	return rc;
}

int plan_model_parse(const char *text, size_t len, const char *name, struct plan_model **out,
		     struct tc_err *err)
{
	struct plan_model *m = model_new();
	m->name = xstrdup(path_basename(name));
	int rc = model_yaml(text, len, name, m, err);
	if (rc)
		plan_model_free(m);
	else
		*out = m;
	return rc;
}

/* ---- cluster ------------------------------------------------------------ */

void plan_cluster_defaults(struct plan_cluster *c)
{
	c->nodes = 1;
	c->devices_per_node = 8;
	c->intra_bw = 150e9;     /* NVLink-class, effective */
	c->inter_bw = 12.5e9;    /* 100 Gbit/s InfiniBand */
	c->device_memory = 80 * GiB;
	c->memory_reserve = 1 * GiB;
	c->device_flops = 125e12; /* ~40% of an A100's 312 TFLOP/s bf16 */
}

bool plan_parse_size(const char *s, double *out)
{
	static const struct {
		const char *suf;
		double mul;
	} units[] = { { "KiB", 1024.0 }, { "MiB", 1024.0 * 1024 }, { "GiB", GiB }, { "TiB", GiB * 1024 },
		      { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 }, { "TB", 1e12 }, { "B", 1 }, { "", 1 } };
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
		return false;
	while (*end == ' ')
		end++;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].suf)) {
			*out = v * units[i].mul;
			return true;
		}
	return false;
}

int plan_cluster_load(const char *path, struct plan_cluster *c, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	int rc = slurp(path, &text, err);
	if (!rc)
		rc = plan_cluster_parse(text.buf, text.len, path, c, err);
	sbuf_release(&text);
	return rc;
}

int plan_cluster_parse(const char *text, size_t len, const char *path, struct plan_cluster *c,
		       struct tc_err *err)
{
	yaml_document_t doc;
	yaml_node_t *root;
	yaml_node_t *count_node = NULL; /* the later of nodes: and devices_per_node: */
	int rc = yload(text, len, path, &doc, &root, err);
	if (rc)
		return rc;
	for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top; pr++) {
		yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
		yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
		const char *key = scalar(k) ? scalar(k) : "";
		double d;
		if (!strcmp(key, "nodes") || !strcmp(key, "devices_per_node")) {
			double max = key[0] == 'n' ? PLAN_MAX_NODES : PLAN_MAX_DEVICES_PER_NODE;
			rc = ynum(v, path, key, 1, &d, err);
			if (!rc && d != floor(d))
				rc = yerr(err, path, v, "'%s': expected a whole number", key);
			if (!rc && d > max) {
				struct sbuf m = SBUF_INIT;
				sbuf_addf(&m, "'%s': %.0f is more than the %.0f the planner handles", key, d,
					  max);
				rc = yerr(err, path, v, "%s", m.buf);
				sbuf_release(&m);
			}
			if (!rc)
				*(key[0] == 'n' ? &c->nodes : &c->devices_per_node) = (int)d;
			count_node = v;
		} else if (!strcmp(key, "intra_node_bandwidth") || !strcmp(key, "inter_node_bandwidth")) {
			rc = ynum(v, path, key, 0, &d, err);
			if (!rc && d <= 0)
				rc = yerr(err, path, v, "'%s': must be > 0 (GB/s)", key);
			if (!rc)
				*(!strncmp(key, "intra", 5) ? &c->intra_bw : &c->inter_bw) = d * 1e9;
		} else if (!strcmp(key, "device_tflops")) {
			rc = ynum(v, path, key, 0, &d, err);
			if (!rc && d <= 0)
				rc = yerr(err, path, v, "'%s': must be > 0", key);
			if (!rc)
				c->device_flops = d * 1e12;
		} else if (!strcmp(key, "device_memory") || !strcmp(key, "memory_reserve")) {
			if (!scalar(v) || !plan_parse_size(scalar(v), &d))
				rc = yerr(err, path, v, "'%s': expected a size like 80GiB", key);
			else
				*(key[0] == 'd' ? &c->device_memory : &c->memory_reserve) = d;
		} else {
			rc = yerr(err, path, k,
				  "unknown key '%s' (nodes, devices_per_node, intra_node_bandwidth, inter_node_bandwidth, device_memory, memory_reserve, device_tflops)",
				  key);
		}
		if (rc)
			break;
	}
	/* each may be in range and their product still too many */
	long long total = (long long)c->nodes * c->devices_per_node;
	if (!rc && total > PLAN_MAX_DEVICES) {
		struct sbuf m = SBUF_INIT;
		sbuf_addf(&m, "'nodes' x 'devices_per_node' = %d x %d = %lld devices, more than the %d the planner handles",
			  c->nodes, c->devices_per_node, total, PLAN_MAX_DEVICES);
		rc = yerr(err, path, count_node, "%s", m.buf);
		sbuf_release(&m);
	}
	yaml_document_delete(&doc);
	return rc;
}

/* ---- one candidate as a partition problem ------------------------------- */

/*
 * Ranks: tp innermost, then dp, then pp (Megatron's order), filled node by
 * node, so a rank's node, rank / devices_per_node, never decreases with the
 * rank.  Is there a rank r in [a, a + len) such that r and r + stride sit on
 * two nodes?  In O(1): with stride < n that is r mod n >= n - stride.
 */
static bool crosses(long a, long len, long stride, long n)
{
	if (len < 1 || stride < 1)
		return false;
	if (stride >= n || len >= n)
		return true;
	long ra = a % n, hi = ra + len - 1;
	return hi >= n || hi >= n - stride; /* the residues wrap past n - 1, or reach n - stride */
}

void plan_cand_build(const struct plan_model *m, const struct plan_cluster *cl, int tp, int dp,
		     int pp, int mb, long nb, struct plan_cand_problem *o)
{
	int g = m->n, s = pp - 1;
	memset(o, 0, sizeof(*o));
	o->x = xcalloc((size_t)g, sizeof(double));
	o->y = xcalloc((size_t)g, sizeof(double));
	o->c = xcalloc((size_t)(g - 1) * (size_t)s + 1, sizeof(double));
	o->mstat = xcalloc((size_t)g, sizeof(double));
	o->mact = xcalloc((size_t)g, sizeof(double));
	o->mult = xcalloc((size_t)pp, sizeof(double));
	o->cap = xcalloc((size_t)pp, sizeof(double));

	/* data-parallel link: inter-node if any group crosses a node.  The group
	 * (stage st, tp rank t) is ranks st*dp*tp + t + d*tp, d < dp: it crosses
	 * when its first and last rank do. */
	long n = cl->devices_per_node, w = (long)dp * tp;
	double dp_bw = cl->intra_bw;
	for (int st = 0; st < pp && dp > 1; st++)
		if (crosses(st * w, tp, (long)(dp - 1) * tp, n)) {
			dp_bw = cl->inter_bw;
			break;
		}
	/* boundary k: stage k's ranks [k*w, (k+1)*w) each send to the rank w on */
	double *kbw = xmalloc((size_t)pp * sizeof(double));
	for (int k = 0; k < s; k++)
		kbw[k] = crosses(k * w, w, w, n) ? cl->inter_bw : cl->intra_bw;
	double ring = dp > 1 ? 2.0 * (dp - 1) / dp / dp_bw : 0;
	double b = mb;
	for (int j = 0; j < g; j++) {
		double params, out, act, time;
		if (m->builtin) {
			double h = m->h, sq = m->seq, a = m->heads, v = m->vocab, t = tp;
			params = 12 * h * h + 13 * h;
			double flops = 24 * sq * h * h + 4 * sq * sq * h; /* forward, per sample */
			act = sq * h * (10 + 24 / t + 5 * a * sq / (h * t)); /* Korthikanti et al. */
			if (j == 0)
				params += v * h + sq * h; /* token + position embeddings */
			if (j == g - 1) {
				params += 2 * h + (pp > 1 ? v * h : 0); /* final norm, tied head copy */
				flops += 2 * sq * h * v;
				act += 4 * sq * v / t; /* fp32 logits */
			}
			time = 3 * flops * b / (t * cl->device_flops);
			if (tp > 1) /* 2 all-reduces forward, 2 backward, of the activations */
				time += 4 * 2.0 * (t - 1) / t * (b * sq * h * 2) / cl->intra_bw;
			out = sq * h * 2;
			params /= t;
		} else {
			const struct layer *L = &m->layers[j];
			params = L->params / tp;
			act = L->act_bytes / tp;
			out = L->out_bytes;
			time = L->time[tp] * b;
		}
		o->x[j] = time;
		o->y[j] = ring * m->grad_bytes * params;
		o->mstat[j] = m->bytes_per_param * params;
		o->mact[j] = b * act;
		o->sum_x += time;
		for (int k = 0; k < s && j < g - 1; k++)
			o->c[(size_t)j * s + k] = 2 * b * out / kbw[k]; /* activation + its gradient */
	}
	free(kbw);
	for (int st = 0; st < pp; st++) {
		o->mult[st] = (double)(nb < pp - st ? nb : pp - st); /* 1F1B in-flight micro-batches */
		o->cap[st] = cl->device_memory - cl->memory_reserve;
	}
	o->p.g = g;
	o->p.s = s;
	o->p.x = o->x;
	o->p.c = o->c;
	o->p.wx = (double)(nb - 1);
	o->p.y = o->y;
	o->p.wy = 1;
	o->p.mstat = o->mstat;
	o->p.mact = o->mact;
	o->p.mult = o->mult;
	o->p.cap = o->cap;
}

void plan_cand_release(struct plan_cand_problem *cp)
{
	if (!cp)
		return;
	free(cp->x);
	free(cp->y);
	free(cp->c);
	free(cp->mstat);
	free(cp->mact);
	free(cp->mult);
	free(cp->cap);
	memset(cp, 0, sizeof(*cp));
}

/* ---- search ------------------------------------------------------------- */

void plan_candidate_release(struct plan_candidate *c)
{
	if (!c)
		return;
	free(c->layers);
	free(c->peak_mem);
	memset(c, 0, sizeof(*c));
}

void plan_strategy_free(struct plan_strategy *st)
{
	if (!st)
		return;
	for (int i = 0; i < st->n; i++)
		plan_candidate_release(&st->cand[i]);
	free(st->cand);
	free(st->model_name);
	free(st);
}

static int cmp_cand(const void *a, const void *b)
{
	const struct plan_candidate *x = a, *y = b;
	if (x->step_time != y->step_time)
		return (x->step_time > y->step_time) - (x->step_time < y->step_time);
	if (x->pp != y->pp)
		return x->pp - y->pp;
	if (x->tp != y->tp)
		return x->tp - y->tp;
	if (x->dp != y->dp)
		return x->dp - y->dp;
	return x->mb - y->mb;
}

/* Fill a candidate from a solved partition (cuts as layer indices). */
static void describe(const struct plan_cand_problem *cp, const int *cuts, int tp, int dp, int pp,
		     int mb, long nb, struct plan_candidate *c)
{
	int g = cp->p.g, s = pp - 1;
	double *sx = xmalloc((size_t)pp * sizeof(double)), *sy = xmalloc((size_t)pp * sizeof(double));
	double *ms = xmalloc((size_t)pp * sizeof(double)), *ma = xmalloc((size_t)pp * sizeof(double));
	memset(c, 0, sizeof(*c));
	c->dp = dp;
	c->tp = tp;
	c->pp = pp;
	c->mb = mb;
	c->micro_batches = nb;
	c->layers = xmalloc((size_t)pp * sizeof(int));
	c->peak_mem = xmalloc((size_t)pp * sizeof(double));
	plan_stage_sums(cp->x, g, cuts, s, sx);
	plan_stage_sums(cp->y, g, cuts, s, sy);
	plan_stage_sums(cp->mstat, g, cuts, s, ms);
	plan_stage_sums(cp->mact, g, cuts, s, ma);
	int a = 0;
	for (int t = 0; t < pp; t++) {
		int e = t < s ? cuts[t] + 1 : g;
		c->layers[t] = e - a;
		a = e;
		c->peak_mem[t] = ms[t] + cp->mult[t] * ma[t];
		if (sx[t] > c->bottleneck)
			c->bottleneck = sx[t];
		if (sy[t] > c->allreduce)
			c->allreduce = sy[t];
		if (t < s)
			c->comm += cp->c[(size_t)cuts[t] * s + t];
	}
	c->step_time = (double)(nb - 1) * c->bottleneck + cp->sum_x + c->comm + c->allreduce;
	free(sx);
	free(sy);
	free(ms);
	free(ma);
}

/* The divisors of n >= 1 in increasing order, by trial division up to its square root. */
static long *divisors(long n, size_t *count)
{
	long *d = NULL, *big = NULL;
	size_t nd = 0, nb = 0, ad = 0, ab = 0;
	for (long i = 1; i <= n / i; i++) {
		if (n % i)
			continue;
		XGROW(d, nd + 1, ad);
		d[nd++] = i;
		if (i != n / i) {
			XGROW(big, nb + 1, ab);
			big[nb++] = n / i;
		}
	}
	XGROW(d, nd + nb, ad);
	while (nb)
		d[nd++] = big[--nb];
	free(big);
	*count = nd;
	return d;
}

/*
 * One search: the (tp, dp, mb) candidates are walked twice, first only
 * counted with their cost, so that a request beyond the budget fails before
 * any work, then solved.
 */
struct search {
	const struct plan_model *m;
	const struct plan_cluster *cl;
	int devices, g;
	long gb;
	long *ddiv, *gdiv; /* divisors of the devices and of the global batch */
	size_t nddiv, ngdiv;
	double work;       /* PLAN_WORK_BUDGET units counted */
	size_t cand_alloc;
};

/*
 * Cost of one candidate in PLAN_WORK_BUDGET units (about a nanosecond each
 * on a 2020s x86 core, measured): the solver's bounds are the O(g^2) stage
 * sums, sorted, searched with a few dozen DP runs -- about 12 g^2 log2 g,
 * from 3x too much at 96 layers to 1.3x too little at 5,000 -- and building
 * the candidate writes the g x pp boundary-cost table.
 */
static double cand_work(int g, int pp)
{
	return 12.0 * g * g * log2(g + 1.0) + 64.0 * g * pp;
}

static void walk(struct search *S, struct plan_strategy *st, int *cuts, double *least_static)
{
	const struct plan_model *m = S->m;
	const struct plan_cluster *cl = S->cl;
	int devices = S->devices, g = S->g, dpn = cl->devices_per_node;
	long gb = S->gb;
	for (int tp = 1; tp <= dpn && tp <= MAX_TP; tp++) {
		if (dpn % tp || !plan_model_tp_ok(m, tp))
			continue;
		for (size_t i = 0; i < S->nddiv; i++) {
			int dp = (int)S->ddiv[i];
			if ((devices / tp) % dp || gb % dp)
				continue;
			int pp = devices / (tp * dp);
			if (pp > g)
				continue;
			for (size_t j = 0; j < S->ngdiv && S->gdiv[j] <= gb / dp; j++) {
				long mb = S->gdiv[j];
				if ((gb / dp) % mb)
					continue;
				if (!st) {
					S->work += cand_work(g, pp);
					continue;
				}
				long nb = gb / (dp * mb);
				struct plan_cand_problem cp;
				double value;
				plan_cand_build(m, cl, tp, dp, pp, (int)mb, nb, &cp);
				st->enumerated++;
				double stat = 0;
				for (int k = 0; k < g; k++)
					stat += cp.mstat[k];
				if (stat / pp < *least_static)
					*least_static = stat / pp;
				if (plan_solve(&cp.p, cuts, &value) != 0) {
					st->rejected_memory++;
				} else {
					XGROW(st->cand, (size_t)st->n + 1, S->cand_alloc);
					describe(&cp, cuts, tp, dp, pp, (int)mb, nb, &st->cand[st->n++]);
				}
				plan_cand_release(&cp);
			}
		}
	}
}

int plan_strategy_search(const struct plan_strategy_req *req, struct plan_strategy **out,
			 struct tc_err *err)
{
	struct plan_cluster cl;
	struct plan_model *m = NULL;
	struct plan_strategy *st = NULL;
	double least_static = HUGE_VAL;
	int rc;

	plan_cluster_defaults(&cl);
	if (req->cluster_file && (rc = plan_cluster_load(req->cluster_file, &cl, err)))
		return rc;
	if (req->nodes > 0)
		cl.nodes = req->nodes;
	if (req->devices > 0) {
		if (req->devices % cl.nodes)
			return tc_error(err, TC_EUSAGE, "--devices %d is not a multiple of the %d nodes",
					req->devices, cl.nodes);
		cl.devices_per_node = req->devices / cl.nodes;
	}
	/* in 64 bits: each count alone may be in range */
	long long total = (long long)cl.nodes * cl.devices_per_node;
	if (total > PLAN_MAX_DEVICES)
		return tc_error(err, TC_EINPUT,
				"%d nodes x %d devices per node = %lld devices, more than the %d the planner handles",
				cl.nodes, cl.devices_per_node, total, PLAN_MAX_DEVICES);
	if (req->memory > 0)
		cl.device_memory = req->memory;
	if (req->global_batch < 1)
		return tc_error(err, TC_EUSAGE, "--global-batch must be >= 1");
	if (req->global_batch > INT_MAX) /* a micro-batch size is an int */
		return tc_error(err, TC_EUSAGE, "--global-batch must be <= %d", INT_MAX);
	if (cl.device_memory <= cl.memory_reserve)
		return tc_error(err, TC_EINPUT, "device memory %.1f GiB is not above the %.1f GiB reserve",
				cl.device_memory / GiB, cl.memory_reserve / GiB);
	if ((rc = plan_model_load(req->model, req->seq_len, &m, err)))
		return rc;

	struct search S = { .m = m, .cl = &cl, .devices = (int)total, .g = plan_model_layers(m),
			    .gb = req->global_batch };
	int devices = S.devices, g = S.g;
	long gb = S.gb;
	S.ddiv = divisors(devices, &S.nddiv);
	S.gdiv = divisors(gb, &S.ngdiv);
	walk(&S, NULL, NULL, NULL);
	if (S.work > PLAN_WORK_BUDGET) {
		rc = tc_error(err, TC_EINPUT,
			      "planning %s (%d layers) on %d devices with global batch %ld is more work than one plan may take "
			      "(about %.0fx the budget): use fewer devices, or a global batch with fewer divisors",
			      plan_model_name(m), g, devices, gb, ceil(S.work / PLAN_WORK_BUDGET));
		goto out;
	}
	st = xcalloc(1, sizeof(*st));
	st->model_name = xstrdup(plan_model_name(m));
	st->num_layers = g;
	st->cluster = cl;
	st->global_batch = gb;
	int *cuts = xmalloc((size_t)g * sizeof(int));
	walk(&S, st, cuts, &least_static);
	free(cuts);
	if (st->enumerated == 0) {
		rc = tc_error(err, TC_EINPUT,
			      "no strategy for %s on %d devices with global batch %ld (tp must divide the %d devices per node%s; dp must divide the global batch; pp <= %d layers)",
			      st->model_name, devices, gb, cl.devices_per_node,
			      m->builtin ? " and the attention heads" : " and be profiled in time_ms", g);
		goto out;
	}
	if (st->n == 0) {
		rc = tc_error(err, TC_EINPUT,
			      "model %s does not fit on %d devices of %.1f GiB: every one of the %d candidates runs out of memory "
			      "(weights, gradients and optimizer state alone need %.1f GiB per device at best, plus activations and a %.1f GiB reserve); "
			      "use more devices or devices with more memory",
			      st->model_name, devices, cl.device_memory / GiB, st->enumerated,
			      least_static / GiB, cl.memory_reserve / GiB);
		goto out;
	}
	qsort(st->cand, (size_t)st->n, sizeof(st->cand[0]), cmp_cand);
	*out = st;
	st = NULL;
	rc = 0;
out:
	free(S.ddiv);
	free(S.gdiv);
	plan_strategy_free(st);
	plan_model_free(m);
	return rc;
}

int plan_strategy_best(const struct plan_strategy_req *req, struct plan_candidate *out,
		       struct tc_err *err)
{
	struct plan_strategy *st = NULL;
	int rc = plan_strategy_search(req, &st, err);
	if (rc)
		return rc;
	*out = st->cand[0];
	memset(&st->cand[0], 0, sizeof(st->cand[0]));
	plan_strategy_free(st);
	return 0;
}

void plan_strategy_print(const struct plan_strategy *st, int top, bool json, FILE *f)
{
	const struct plan_cluster *cl = &st->cluster;
	int n = top > 0 && top < st->n ? top : st->n;
	if (json) {
		struct sbuf model = SBUF_INIT;
		json_add_str(&model, st->model_name);
		fprintf(f,
			"{\"model\":%s,\"layers\":%d,\"devices\":%d,\"nodes\":%d,\"global_batch\":%ld,"
			"\"device_memory\":%.0f,\"enumerated\":%d,\"rejected_memory\":%d,\"candidates\":[",
			model.buf, st->num_layers, cl->nodes * cl->devices_per_node, cl->nodes,
			st->global_batch, cl->device_memory, st->enumerated, st->rejected_memory);
		sbuf_release(&model);
		for (int i = 0; i < n; i++) {
			const struct plan_candidate *c = &st->cand[i];
			fprintf(f,
				"%s{\"dp\":%d,\"tp\":%d,\"pp\":%d,\"micro_batch\":%d,\"micro_batches\":%ld,"
				"\"step_time\":%.9g,\"samples_per_second\":%.9g,\"bottleneck\":%.9g,\"comm\":%.9g,"
				"\"allreduce\":%.9g,\"layers\":[",
				i ? "," : "", c->dp, c->tp, c->pp, c->mb, c->micro_batches, c->step_time,
				(double)st->global_batch / c->step_time, c->bottleneck, c->comm, c->allreduce);
			for (int t = 0; t < c->pp; t++)
				fprintf(f, t ? ",%d" : "%d", c->layers[t]);
			fprintf(f, "],\"peak_memory\":[");
			for (int t = 0; t < c->pp; t++)
				fprintf(f, t ? ",%.0f" : "%.0f", c->peak_mem[t]);
			fprintf(f, "]}");
		}
		fprintf(f, "]}\n");
		return;
	}
	fprintf(f, "model %s (%d layers) on %d devices (%d nodes x %d), %.1f GiB each, global batch %ld\n",
		st->model_name, st->num_layers, cl->nodes * cl->devices_per_node, cl->nodes,
		cl->devices_per_node, cl->device_memory / GiB, st->global_batch);
	fprintf(f, "%d candidates, %d rejected (out of memory), %d fit; best first:\n", st->enumerated,
		st->rejected_memory, st->n);
	/* columns as wide as their widest cell: 8 stages of memory are wider than 2 */
	enum { NCOL = 10 };
	static const char *const head[NCOL] = { "rank", "dp", "tp", "pp", "mb", "B", "step (s)",
						"samples/s", "peak mem/stage (GiB)", "layers/stage" };
	struct sbuf *cell = xcalloc((size_t)(n + 1) * NCOL, sizeof(*cell));
	size_t width[NCOL] = { 0 };
	for (int k = 0; k < NCOL; k++)
		sbuf_adds(&cell[k], head[k]);
	for (int i = 0; i < n; i++) {
		const struct plan_candidate *c = &st->cand[i];
		struct sbuf *row = &cell[(size_t)(i + 1) * NCOL];
		sbuf_addf(&row[0], "%d", i + 1);
		sbuf_addf(&row[1], "%d", c->dp);
		sbuf_addf(&row[2], "%d", c->tp);
		sbuf_addf(&row[3], "%d", c->pp);
		sbuf_addf(&row[4], "%d", c->mb);
		sbuf_addf(&row[5], "%ld", c->micro_batches);
		sbuf_addf(&row[6], "%.5f", c->step_time);
		sbuf_addf(&row[7], "%.2f", (double)st->global_batch / c->step_time);
		for (int t = 0; t < c->pp; t++) {
			sbuf_addf(&row[8], t ? "/%.1f" : "%.1f", c->peak_mem[t] / GiB);
			sbuf_addf(&row[9], t ? "+%d" : "%d", c->layers[t]);
		}
	}
	for (int i = 0; i <= n; i++)
		for (int k = 0; k < NCOL; k++)
			if (cell[(size_t)i * NCOL + k].len > width[k])
				width[k] = cell[(size_t)i * NCOL + k].len;
	for (int i = 0; i <= n; i++) {
		for (int k = 0; k < NCOL; k++) {
			const struct sbuf *cb = &cell[(size_t)i * NCOL + k];
			if (k < NCOL - 1)
				fprintf(f, "%-*s ", (int)width[k], cb->buf);
			else
				fprintf(f, "%s\n", cb->buf);
		}
	}
	for (size_t i = 0; i < (size_t)(n + 1) * NCOL; i++)
		sbuf_release(&cell[i]);
	free(cell);
}
