/*
 * config.c -- the server's settings file (config.h).
 */
#include "server/config.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "core/yaml.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct load {
	yaml_document_t *doc;
	const char *file;
	const char *base; /* the file's folder, for SRVCONF_PATH */
	struct srvconf *out;
	struct tc_err *err;
};

int srvconf_line(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

const char *srvconf_scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int srvconf_verror(struct tc_err *err, const char *file, int line, const char *key,
		   const char *fmt, va_list ap)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s:%d: ", file, line);
	if (key)
		sbuf_addf(&sb, "%s: ", key);
	sbuf_vaddf(&sb, fmt, ap);
	tc_error(err, TC_ESPEC, "%s", sb.buf);
	sbuf_release(&sb);
	return TC_ESPEC;
}

int srvconf_error(struct tc_err *err, const char *file, int line, const char *key,
		  const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = srvconf_verror(err, file, line, key, fmt, ap);
	va_end(ap);
	return rc;
}

static bool plain_null(const yaml_node_t *n)
{
	const char *v = srvconf_scalar(n);
	return v && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*v || !strcmp(v, "null") || !strcmp(v, "~"));
}

static int fail(struct load *l, const yaml_node_t *n, const char *key, const char *fmt, ...)
	TC_PRINTF(4, 5);

static int fail(struct load *l, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = srvconf_verror(l->err, l->file, n ? srvconf_line(n) : 1, key, fmt, ap);
	va_end(ap);
	return rc;
}

static void add(struct load *l, const struct srvconf_key *k, const yaml_node_t *n, const char *value)
{
	struct srvconf *c = l->out;
	XGROW(c->w, c->n + 1, c->alloc);
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "--%s", k->name);
	if (value)
		sbuf_addf(&sb, "=%s", value);
	c->w[c->n++] = (struct srvconf_word){ sbuf_detach(&sb), k->name, k->val, srvconf_line(n) };
}

/* One scalar value of key k (not a list, a mapping or nothing). */
static int one_value(struct load *l, const struct srvconf_key *k, const yaml_node_t *v,
		     const char **out)
{
	if (v->type != YAML_SCALAR_NODE)
		return fail(l, v, k->name, "must be a single value, not a %s",
			    v->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
	if (plain_null(v))
		return fail(l, v, k->name, "has no value");
	*out = srvconf_scalar(v);
	return 0;
}

/* A word for each value of list v. */
static int each_value(struct load *l, const struct srvconf_key *k, yaml_node_t *v)
{
	for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
		yaml_node_t *e = yaml_document_get_node(l->doc, *i);
		const char *s = NULL;
		int rc = one_value(l, k, e, &s);
		if (rc)
			return rc;
		add(l, k, e, s);
	}
	return 0;
}

static int take(struct load *l, const struct srvconf_key *k, yaml_node_t *v)
{
	const char *s = NULL;
	int rc;
	switch (k->kind) {
	case SRVCONF_FLAG:
		s = srvconf_scalar(v);
		if (!s || v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
		    (strcmp(s, "true") && strcmp(s, "false")))
			return fail(l, v, k->name, "must be true or false, not %s%s%s",
				    s ? "'" : "a ", s ? s : v->type == YAML_SEQUENCE_NODE ? "list" : "mapping",
				    s ? "'" : "");
		if (!strcmp(s, "true"))
			add(l, k, v, NULL);
		return 0;
	case SRVCONF_VALUE:
		if ((rc = one_value(l, k, v, &s)))
			return rc;
		add(l, k, v, s);
		return 0;
	case SRVCONF_PATH: {
		if ((rc = one_value(l, k, v, &s)))
			return rc;
		char *abs = path_absolute(s, l->base);
		add(l, k, v, abs);
		free(abs);
		return 0;
	}
	case SRVCONF_LIST:
		if (v->type == YAML_SCALAR_NODE) {
			if ((rc = one_value(l, k, v, &s)))
				return rc;
			add(l, k, v, s);
			return 0;
		}
		if (v->type != YAML_SEQUENCE_NODE)
			return fail(l, v, k->name, "must be a value or a list of them, not a mapping");
		return each_value(l, k, v);
	case SRVCONF_PAIRS:
		if (v->type == YAML_SEQUENCE_NODE)
			return each_value(l, k, v);
		if (v->type != YAML_MAPPING_NODE)
			return fail(l, v, k->name, "must be a mapping (NAME: N) or a list of NAME=N");
		for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
			yaml_node_t *pk = yaml_document_get_node(l->doc, p->key);
			yaml_node_t *pv = yaml_document_get_node(l->doc, p->value);
			const char *name = srvconf_scalar(pk);
			if (!name || !pv)
				return fail(l, pk ? pk : v, k->name, "its keys must be plain names");
			if ((rc = one_value(l, k, pv, &s)))
				return rc;
			struct sbuf kv = SBUF_INIT;
			sbuf_addf(&kv, "%s=%s", name, s);
			add(l, k, pk, kv.buf);
			sbuf_release(&kv);
		}
		return 0;
	case SRVCONF_SECTION:
		return 0; /* its own loader's (config.h) */
	}
	return fail(l, v, k->name, "has a kind the loader does not know");
}

static int walk(struct load *l, yaml_node_t *root, const struct srvconf_key *keys)
{
	if (root->type != YAML_MAPPING_NODE)
		return fail(l, root, NULL, "the file must be a mapping of settings (key: value)");
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(l->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(l->doc, p->value);
		const char *name = srvconf_scalar(k);
		if (!name || !v)
			return fail(l, k ? k : root, NULL, "keys must be plain names");
		for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < p; q++) {
			const char *n2 = srvconf_scalar(yaml_document_get_node(l->doc, q->key));
			if (n2 && !strcmp(n2, name))
				return fail(l, k, NULL, "key '%s' is given twice", name);
		}
		const struct srvconf_key *key = NULL, *best = NULL;
		size_t bestd = 3, len = strlen(name);
		for (const struct srvconf_key *x = keys; x->name && !key; x++) {
			size_t d = edit_distance(x->name, name);
			if (!d)
				key = x;
			else if (d < bestd && d < len) {
				bestd = d;
				best = x;
			}
		}
		if (!key && best)
			return fail(l, k, NULL, "unknown key '%s' (did you mean '%s'?)", name, best->name);
		if (!key)
			return fail(l, k, NULL, "unknown key '%s' (the keys are the options of"
				    " trainctl server --help, without --)", name);
		int rc = take(l, key, v);
		if (rc)
			return rc;
	}
	return 0;
}

int srvconf_parse(const char *path, yaml_document_t *doc, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	int rc = read_file(path, &text, err);
	if (rc)
		rc = tc_error(err, TC_ESPEC, "%s", err->msg);
	else
		rc = tc_yaml_parse(path, text.buf, text.len, doc, err);
	sbuf_release(&text);
	return rc;
}

int srvconf_load(const char *path, const struct srvconf_key *keys, struct srvconf *out,
		 struct tc_err *err)
{
	srvconf_free(out);
	out->file = xstrdup(path);
	yaml_document_t doc;
	int rc = srvconf_parse(path, &doc, err);
	if (rc)
		return rc;
	char *abs = path_absolute(path, NULL);
	char *base = path_dirname(abs);
	struct load l = { .doc = &doc, .file = path, .base = base, .out = out, .err = err };
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (root && !plain_null(root)) /* a file of comments only sets nothing */
		rc = walk(&l, root, keys);
	yaml_document_delete(&doc);
	free(abs);
	free(base);
	return rc;
}

void srvconf_free(struct srvconf *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->w[i].arg);
	free(c->w);
	free(c->file);
	*c = (struct srvconf)SRVCONF_INIT;
}

void srvconf_blame(const struct srvconf *c, size_t i, struct tc_err *err)
{
	const char *msg = err->msg ? err->msg : tc_code_name(err->code);
	if (!strncmp(msg, "server: ", 8))
		msg += 8; /* the parser's name for itself: the file and key say more */
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s:%d: %s: %s", c->file, c->w[i].line, c->w[i].name, msg);
	tc_error(err, TC_ESPEC, "%s", sb.buf);
	sbuf_release(&sb);
}
