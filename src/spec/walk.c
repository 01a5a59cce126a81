/*
 * walk.c -- the walk over a YAML spec: errors with file and line, the
 * typed getters, and walk_map, which checks a mapping against its rule
 * table (unknown and repeated keys, "did you mean"); see spec_int.h.
 */
#include "spec/spec_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int walk_fail(struct walk *w, yaml_node_t *n, const char *key, const char *fmt, ...)
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

int walk_string(struct walk *w, yaml_node_t *n, const char *key, char **out)
{
	if (n->type != YAML_SCALAR_NODE || is_null(n))
		return walk_fail(w, n, key, "must be a string");
	free(*out);
	*out = xstrdup(scalar(n));
	return 0;
}

int walk_int(struct walk *w, yaml_node_t *n, const char *key, long min, long max,
	     int *out)
{
	long v;
	/* "2" in quotes is a string to YAML: say so, or the message reads wrong */
	if (n->type == YAML_SCALAR_NODE && !plain(n) && parse_long(scalar(n), LONG_MIN, LONG_MAX, &v))
		return walk_fail(w, n, key,
				 "must be an integer, not the quoted string '%s' (write %s without"
				 " quotes)",
				 scalar(n), scalar(n));
	if (!plain(n) || !parse_long(scalar(n), LONG_MIN, LONG_MAX, &v))
		return walk_fail(w, n, key, "must be an integer, not '%s'",
				 scalar(n) ? scalar(n) : "a list or mapping");
	if (v < min || v > max)
		return walk_fail(w, n, key, "must be between %ld and %ld, not %ld", min, max, v);
	*out = (int)v;
	return 0;
}

int walk_enum(struct walk *w, yaml_node_t *n, const char *key,
	      const char *const *allowed, char **out)
{
	int rc = walk_string(w, n, key, out);
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
	rc = walk_fail(w, n, key, "'%s' is not one of: %s", *out, list.buf);
	sbuf_release(&list);
	return rc;
}

static bool rule_named(const struct rule *rules, const char *name)
{
	for (const struct rule *x = rules; x->key; x++)
		if (!strcmp(x->key, name))
			return true;
	return false;
}

/* Walk a mapping with a rule table; prefix names nested keys ("devices."). */
int walk_map(struct walk *w, yaml_node_t *map, const char *prefix,
	     const struct rule *rules)
{
	if (map->type != YAML_MAPPING_NODE)
		return walk_fail(w, map, prefix[0] ? prefix : NULL, "must be a mapping");
	struct sbuf key = SBUF_INIT;
	int rc = 0;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
		if (!k || !v || k->type != YAML_SCALAR_NODE) {
			rc = walk_fail(w, k ? k : map, NULL, "keys must be plain names");
			goto out;
		}
		/* a key listed twice would silently win or lose: refuse it */
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *k2 = yaml_document_get_node(w->doc, q->key);
			if (k2 && scalar(k2) && !strcmp(scalar(k2), scalar(k))) {
				rc = walk_fail(w, k, NULL, "key '%s%s' is given twice", prefix, scalar(k));
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
			/* a --set names its whole path already: the part alone */
			const char *shown = from_set(k) ? scalar(k) : key.buf;
			if (best)
				rc = walk_fail(w, k, NULL, "unknown key '%s' (did you mean '%s%s'?)",
					       shown, from_set(k) ? "" : prefix, best);
			else if (!*prefix && rule_named(rules, "args"))
				/* `lr: 0.1` or --set lr=0.1: the script's own arguments live under args */
				rc = walk_fail(w, k, NULL,
					       "unknown key '%s' (did you mean 'args.%s'? the command's"
					       " arguments go under args)",
					       shown, scalar(k));
			else
				rc = walk_fail(w, k, NULL, "unknown key '%s'", shown);
			goto out;
		}
		if (r->not_yet) {
			rc = walk_fail(w, k, key.buf, "not supported yet (%s)", r->not_yet);
			goto out;
		}
		w->key_line = line_of(k);
		rc = r->fn(w, v, key.buf);
		if (rc)
			goto out;
	}
out:
	sbuf_release(&key);
	return rc;
}
