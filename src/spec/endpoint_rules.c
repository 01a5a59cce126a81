/*
 * endpoint_rules.c -- the endpoints: key of a spec (services beside the
 * workers, endpoint/endpoint.h) and its JSON form both ways; see
 * spec_int.h.  Which keys an entry may give is its kind's row.
 */
#include "spec/spec_int.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ENDPOINTS 16

static struct spec_endpoint *cur(struct walk *w)
{
	return &w->s->endpoints[w->s->nendpoints - 1];
}

/* a URL path segment that needs no escaping: letters, digits, '_' and '-', 1 to 64 */
static bool name_ok(const char *v)
{
	size_t n = strlen(v);
	if (!n || n > 64)
		return false;
	for (const char *c = v; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '_' || *c == '-'))
			return false;
	return true;
}

static int r_name(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &cur(w)->name);
	if (!rc && !name_ok(cur(w)->name))
		rc = walk_fail(w, n, key, "'%s' is not a name (1 to 64 letters, digits, '_' and '-')",
			       cur(w)->name);
	return rc;
}

static int kind_check(struct walk *w, yaml_node_t *n, const char *key, const char *v)
{
	const struct endpoint_kind *k = endpoint_kind_find(v);
	if (!k)
		return walk_fail(w, n, key, "unknown kind '%s' (%s)", v, endpoint_kind_names());
	if (k->not_yet)
		return walk_fail(w, n, key, "'%s': %s", v, k->not_yet);
	return 0;
}

static int r_kind(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &cur(w)->kind);
	return rc ? rc : kind_check(w, n, key, cur(w)->kind);
}

static int r_command(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &cur(w)->command);
	if (!rc && !*cur(w)->command)
		rc = walk_fail(w, n, key, "is empty");
	return rc;
}

static int r_port(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, 65535, &cur(w)->port);
}

static int r_public_key(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &cur(w)->public_key);
	if (!rc && !*cur(w)->public_key)
		rc = walk_fail(w, n, key, "is empty");
	return rc;
}

static const struct rule endpoint_rules[] = {
	{ "name", r_name, NULL },
	{ "kind", r_kind, NULL },
	{ "command", r_command, NULL },
	{ "port", r_port, NULL },
	{ "public_key", r_public_key, NULL },
	{ NULL, NULL, NULL },
};

static const struct {
	unsigned bit;
	const char *key;
} keys[] = {
	{ ENDPOINT_KEY_COMMAND, "command" },
	{ ENDPOINT_KEY_PORT, "port" },
	{ ENDPOINT_KEY_PUBLIC_KEY, "public_key" },
};

/* The keys e gives, as ENDPOINT_KEY_* bits. */
static unsigned given(const struct spec_endpoint *e)
{
	return (e->command ? ENDPOINT_KEY_COMMAND : 0u) | (e->port ? ENDPOINT_KEY_PORT : 0u) |
	       (e->public_key ? ENDPOINT_KEY_PUBLIC_KEY : 0u);
}

/* An entry walked: its kind (generic when it gives a command), name and keys checked. */
static int entry_done(struct walk *w, yaml_node_t *item)
{
	struct spec_endpoint *e = cur(w);
	if (!e->kind)
		e->kind = xstrdup(e->command ? "generic" : "");
	if (!*e->kind)
		return walk_fail(w, item, "endpoints[].kind",
				 "is required (%s; a command: alone is a generic endpoint)",
				 endpoint_kind_names());
	const struct endpoint_kind *k = endpoint_kind_find(e->kind);
	unsigned g = given(e);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if ((g & keys[i].bit) && !(k->keys & keys[i].bit))
			return walk_fail(w, item, "endpoints[]", "%s: kind %s takes no %s", e->name ? e->name : e->kind,
					 e->kind, keys[i].key);
		if ((k->needs & keys[i].bit) && !(g & keys[i].bit))
			return walk_fail(w, item, "endpoints[]", "%s: kind %s needs %s",
					 e->name ? e->name : e->kind, e->kind, keys[i].key);
	}
	if (!e->name)
		e->name = xstrdup(!strcmp(e->kind, "generic") ? "" : e->kind);
	if (!*e->name)
		return walk_fail(w, item, "endpoints[].name", "is required for a generic endpoint");
	for (size_t i = 0; i + 1 < w->s->nendpoints; i++)
		if (!strcmp(w->s->endpoints[i].name, e->name))
			return walk_fail(w, item, "endpoints[].name",
					 "'%s' is given twice (each endpoint needs its own name)", e->name);
	return 0;
}

int spec_r_endpoints(struct walk *w, yaml_node_t *n, const char *key)
{
	if (is_null(n))
		return 0;
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of kinds (%s) or {name, command, port}",
				 endpoint_kind_names());
	size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	if (cnt > MAX_ENDPOINTS)
		return walk_fail(w, n, key, "%zu endpoints: at most %d", cnt, MAX_ENDPOINTS);
	spec_endpoints_free(w->s->endpoints, w->s->nendpoints);
	w->s->endpoints = xcalloc(cnt ? cnt : 1, sizeof(*w->s->endpoints));
	w->s->nendpoints = 0;
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item)
			return walk_fail(w, n, key, "items must be kinds or mappings");
		w->s->nendpoints++;
		int rc;
		if (item->type == YAML_SCALAR_NODE && !is_null(item)) {
			/* "- jupyter": the kind, named after itself */
			const char *v = scalar(item);
			rc = kind_check(w, item, "endpoints[]", v);
			if (!rc)
				cur(w)->kind = xstrdup(v);
		} else if (item->type == YAML_MAPPING_NODE) {
			rc = walk_map(w, item, "endpoints[].", endpoint_rules);
		} else {
			rc = walk_fail(w, item, key, "items must be kinds (%s) or mappings",
				       endpoint_kind_names());
		}
		if (!rc)
			rc = entry_done(w, item);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- JSON, both ways (serialize.c, access.c) ---- */

json_t *spec_endpoints_json(const struct spec *s)
{
	json_t *a = json_array();
	for (size_t i = 0; i < s->nendpoints; i++) {
		const struct spec_endpoint *e = &s->endpoints[i];
		json_t *o = json_pack("{s:s, s:s}", "name", e->name, "kind", e->kind);
		if (e->command)
			json_object_set_new(o, "command", json_string(e->command));
		if (e->port)
			json_object_set_new(o, "port", json_integer(e->port));
		if (e->public_key)
			json_object_set_new(o, "public_key", json_string(e->public_key));
		json_array_append_new(a, o);
	}
	return a;
}

static char *str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? xstrdup(v) : NULL;
}

void spec_endpoints_take(struct spec *s, json_t *a)
{
	if (!json_is_array(a) || !json_array_size(a))
		return;
	s->endpoints = xcalloc(json_array_size(a), sizeof(*s->endpoints));
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *kind = json_string_value(json_object_get(v, "kind"));
		if (!name || !kind)
			continue;
		struct spec_endpoint *e = &s->endpoints[s->nendpoints++];
		e->name = xstrdup(name);
		e->kind = xstrdup(kind);
		e->command = str_of(v, "command");
		e->public_key = str_of(v, "public_key");
		json_t *p = json_object_get(v, "port");
		e->port = json_is_integer(p) ? (int)json_integer_value(p) : 0;
	}
}

void spec_endpoints_free(struct spec_endpoint *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].kind);
		free(v[i].command);
		free(v[i].public_key);
	}
	free(v);
}
