/*
 * override.c -- `--set KEY=VALUE` (spec.h: spec_load_set): each override
 * read on its own (KEY a dotted path, VALUE one YAML scalar or flow
 * collection parsed by libyaml), then grafted into the spec's document
 * before the walk, so that the file's rules check it.  Every node an
 * override makes carries the line SPEC_SET_LINE + its index (spec_int.h);
 * spec_set_where turns the walk's "FILE:LINE:" into "--set KEY=VALUE:".
 *
 * Replaced nodes stay in the document, unreferenced: libyaml frees them
 * with it.  Node pointers move when a node is added (the document's node
 * array grows), so nodes are always looked up again by index after an add.
 */
#include "spec/spec_int.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * Deeper flow collections than this are refused (the copy recurses), and
 * values of more nodes (aliases can repeat a node without end: "billion
 * laughs") than SET_MAX_NODES.
 */
#define SET_MAX_DEPTH 64
#define SET_MAX_NODES 10000
#define SET_TOO_BIG "the value is nested more than 64 deep or holds more than 10000 items"

/* Mappings whose keys are the user's names: after them the rest of KEY is one name. */
static const char *const free_maps[] = { "args", "env", NULL };

/* The record of --set (spec.h: overrides); --set may not write it. */
static const char record_key[] = "overrides";

static int set_fail(struct tc_err *err, const char *set, const char *fmt, ...) TC_PRINTF(3, 4);
static int set_fail(struct tc_err *err, const char *set, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	sbuf_addf(&sb, "--set %s: ", set);
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	tc_error(err, TC_ESPEC, "%s", sb.buf);
	sbuf_release(&sb);
	return TC_ESPEC;
}

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as libyaml wants. */
static bool utf8_ok(const unsigned char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		if (!n || i + n > len)
			return false;
		unsigned long cp = n == 1 ? c : c & (0x7fu >> n);
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		static const unsigned long least[] = { 0, 0, 0x80, 0x800, 0x10000 };
		if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n;
	}
	return true;
}

/* KEY's form: not empty, UTF-8, no empty part ("a..b", ".a", "a."), not the record. */
static int check_key(const char *set, const char *key, size_t len, struct tc_err *err)
{
	if (!len)
		return set_fail(err, set, "give KEY=VALUE (KEY a dotted path such as args.lr)");
	if (!utf8_ok((const unsigned char *)key, len))
		return set_fail(err, set, "the key is not UTF-8 text");
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
			return set_fail(err, set, "the key holds a control character");
	if (key[0] == '.' || key[len - 1] == '.' || memmem(key, len, "..", 2))
		return set_fail(err, set, "'%.*s' has an empty part (keys are joined by single dots)",
				(int)len, key);
	size_t first = strcspn(key, ".");
	if (first > len)
		first = len;
	if (first == sizeof(record_key) - 1 && !memcmp(key, record_key, first))
		return set_fail(err, set, "overrides: is trainctl's record of --set, not a key to set");
	return 0;
}

/* Parse VALUE into *doc: one scalar or flow collection, or nothing (null). */
static int parse_value(const char *set, const char *value, yaml_document_t *doc,
		       struct tc_err *err)
{
	yaml_parser_t p;
	if (!yaml_parser_initialize(&p))
		xdie_oom(sizeof(p));
	yaml_parser_set_input_string(&p, (const unsigned char *)value, strlen(value));
	int rc = 0;
	if (!yaml_parser_load(&p, doc)) {
		rc = set_fail(err, set, "the value is not YAML: %s%s%s",
			      p.problem ? p.problem : "cannot parse", p.context ? " " : "",
			      p.context ? p.context : "");
		yaml_parser_delete(&p);
		return rc;
	}
	yaml_node_t *root = yaml_document_get_root_node(doc);
	if (root && ((root->type == YAML_MAPPING_NODE &&
		      root->data.mapping.style != YAML_FLOW_MAPPING_STYLE) ||
		     (root->type == YAML_SEQUENCE_NODE &&
		      root->data.sequence.style != YAML_FLOW_SEQUENCE_STYLE)))
		rc = set_fail(err, set, "the value must be one YAML scalar or a flow collection "
			      "([a, b] or {k: v}); quote it to keep it a string");
	if (!rc) {
		/* "a\n---\nb": a second document */
		yaml_document_t more;
		if (!yaml_parser_load(&p, &more)) {
			rc = set_fail(err, set, "the value is not YAML: %s",
				      p.problem ? p.problem : "cannot parse");
		} else {
			if (yaml_document_get_root_node(&more))
				rc = set_fail(err, set, "the value holds more than one YAML document");
			yaml_document_delete(&more);
		}
	}
	if (rc)
		yaml_document_delete(doc);
	yaml_parser_delete(&p);
	return rc;
}

/* A new node's mark: the override's line (spec_int.h: SPEC_SET_LINE). */
static void mark(yaml_document_t *doc, int id, int line)
{
	yaml_node_t *n = yaml_document_get_node(doc, id);
	n->start_mark.line = (size_t)line - 1;
	n->start_mark.column = 0;
	n->end_mark = n->start_mark;
}

static int add_scalar(yaml_document_t *doc, const yaml_char_t *tag, const char *v, size_t len,
		      yaml_scalar_style_t style, int line)
{
	int id = yaml_document_add_scalar(doc, (yaml_char_t *)tag, (yaml_char_t *)v, (int)len, style);
	if (!id)
		xdie_oom(len);
	mark(doc, id, line);
	return id;
}

static int add_mapping(yaml_document_t *doc, int line)
{
	int id = yaml_document_add_mapping(doc, NULL, YAML_BLOCK_MAPPING_STYLE);
	if (!id)
		xdie_oom(0);
	mark(doc, id, line);
	return id;
}

/* Copy node sid of src into dst; its new index, or 0 when too deep or too big (*left nodes). */
static int copy_node(yaml_document_t *dst, yaml_document_t *src, int sid, int line, int depth,
		     size_t *left)
{
	yaml_node_t *n = yaml_document_get_node(src, sid);
	if (!n || depth > SET_MAX_DEPTH || !*left)
		return 0;
	(*left)--;
	int id;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return add_scalar(dst, n->tag, (const char *)n->data.scalar.value,
				  n->data.scalar.length, n->data.scalar.style, line);
	case YAML_SEQUENCE_NODE:
		id = yaml_document_add_sequence(dst, n->tag, n->data.sequence.style);
		if (!id)
			xdie_oom(0);
		mark(dst, id, line);
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     i < n->data.sequence.items.top; i++) {
			int c = copy_node(dst, src, *i, line, depth + 1, left);
			if (!c || !yaml_document_append_sequence_item(dst, id, c))
				return 0;
		}
		return id;
	case YAML_MAPPING_NODE:
		id = yaml_document_add_mapping(dst, n->tag, n->data.mapping.style);
		if (!id)
			xdie_oom(0);
		mark(dst, id, line);
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     p < n->data.mapping.pairs.top; p++) {
			int k = copy_node(dst, src, p->key, line, depth + 1, left);
			int v = k ? copy_node(dst, src, p->value, line, depth + 1, left) : 0;
			if (!v || !yaml_document_append_mapping_pair(dst, id, k, v))
				return 0;
		}
		return id;
	default:
		return 0;
	}
}

/* The value of a null document: an empty plain scalar, as `key:` in a file. */
static int value_node(yaml_document_t *dst, yaml_document_t *vdoc, int line)
{
	if (!yaml_document_get_root_node(vdoc))
		return add_scalar(dst, NULL, "", 0, YAML_PLAIN_SCALAR_STYLE, line);
	size_t left = SET_MAX_NODES;
	return copy_node(dst, vdoc, 1, line, 0, &left);
}

/* The pair of map whose key is name (len bytes), or NULL. */
static yaml_node_pair_t *find_pair(yaml_document_t *doc, yaml_node_t *map, const char *name,
				   size_t len)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == len &&
		    !memcmp(k->data.scalar.value, name, len))
			return p;
	}
	return NULL;
}

static bool null_node(yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE && is_null(n);
}

/*
 * Put value (a node index) at key's path under the root; missing or null
 * mappings on the way are made, lists are indexed by number.
 */
static int graft(yaml_document_t *doc, const char *set, const char *key, int value, int line,
		 struct tc_err *err)
{
	int cur = 1; /* the root */
	bool free_map = false;
	for (const char *part = key; *part;) {
		size_t len = strcspn(part, ".");
		if (free_map)
			len = strlen(part); /* args.model.lr: the name "model.lr" */
		bool last = !part[len];
		int child = 0;
		yaml_node_t *n = yaml_document_get_node(doc, cur);
		if (n->type == YAML_MAPPING_NODE) {
			yaml_node_pair_t *p = find_pair(doc, n, part, len);
			if (p && last) {
				p->value = value;
				return 0;
			}
			if (p) {
				child = p->value;
			} else {
				int k = add_scalar(doc, NULL, part, len, YAML_PLAIN_SCALAR_STYLE, line);
				child = last ? value : add_mapping(doc, line);
				if (!yaml_document_append_mapping_pair(doc, cur, k, child))
					xdie_oom(0);
				if (last)
					return 0;
			}
		} else if (n->type == YAML_SEQUENCE_NODE) {
			size_t nr = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
			size_t idx = 0, d = 0;
			for (; d < len && part[d] >= '0' && part[d] <= '9' && idx <= nr; d++)
				idx = idx * 10 + (size_t)(part[d] - '0');
			if (!len || d < len || idx >= nr)
				return set_fail(err, set, "'%.*s' is a list of %zu: give an index 0..%zu, not '%.*s'",
						(int)(part - key - 1), key, nr, nr ? nr - 1 : 0,
						(int)len, part);
			if (last) {
				n->data.sequence.items.start[idx] = value;
				return 0;
			}
			child = n->data.sequence.items.start[idx];
		} else {
			return set_fail(err, set, "'%.*s' is a single value, not a mapping or list",
					(int)(part - key - 1), key);
		}
		/* the next part goes into child: a null there becomes a mapping */
		yaml_node_t *c = yaml_document_get_node(doc, child);
		if (c && null_node(c)) {
			int m = add_mapping(doc, line);
			n = yaml_document_get_node(doc, cur);
			if (n->type == YAML_MAPPING_NODE) {
				find_pair(doc, n, part, len)->value = m;
			} else {
				for (yaml_node_item_t *i = n->data.sequence.items.start;
				     i < n->data.sequence.items.top; i++)
					if (*i == child)
						*i = m;
			}
			child = m;
		}
		free_map = false;
		if (cur == 1)
			for (const char *const *f = free_maps; *f; f++)
				if (strlen(*f) == len && !memcmp(*f, part, len))
					free_map = true;
		cur = child;
		part += len + 1;
	}
	return 0;
}

/* Split "KEY=VALUE": the key's length and where the value starts. */
static int split_set(const char *set, size_t *keylen, const char **value, struct tc_err *err)
{
	const char *eq = strchr(set, '=');
	if (!eq)
		return set_fail(err, set, "give KEY=VALUE (KEY a dotted path such as args.lr)");
	*keylen = (size_t)(eq - set);
	*value = eq + 1;
	return check_key(set, set, *keylen, err);
}

int spec_set_check(const char *set, struct tc_err *err)
{
	size_t keylen;
	const char *value;
	int rc = split_set(set, &keylen, &value, err);
	if (rc)
		return rc;
	yaml_document_t vdoc;
	if ((rc = parse_value(set, value, &vdoc, err)))
		return rc;
	/* the copy's depth limit, without a document to copy into */
	yaml_document_t scratch;
	if (!yaml_document_initialize(&scratch, NULL, NULL, NULL, 1, 1))
		xdie_oom(0);
	size_t left = SET_MAX_NODES;
	if (yaml_document_get_root_node(&vdoc) &&
	    !copy_node(&scratch, &vdoc, 1, SPEC_SET_LINE, 0, &left))
		rc = set_fail(err, set, SET_TOO_BIG);
	yaml_document_delete(&scratch);
	yaml_document_delete(&vdoc);
	return rc;
}

int spec_apply_sets(yaml_document_t *doc, const struct strvec *sets, struct tc_err *err)
{
	yaml_node_t *root = yaml_document_get_root_node(doc);
	if (!sets || !root || root->type != YAML_MAPPING_NODE)
		return 0;
	for (size_t i = 0; i < sets->nr; i++) {
		const char *set = sets->v[i];
		int line = SPEC_SET_LINE + (int)i;
		size_t keylen;
		const char *value;
		yaml_document_t vdoc;
		int rc = split_set(set, &keylen, &value, err);
		if (rc || (rc = parse_value(set, value, &vdoc, err)))
			return rc;
		int v = value_node(doc, &vdoc, line);
		yaml_document_delete(&vdoc);
		if (!v)
			return set_fail(err, set, SET_TOO_BIG);
		char *key = xstrndup(set, keylen);
		rc = graft(doc, set, key, v, line, err);
		free(key);
		if (rc)
			return rc;
	}
	return 0;
}

void spec_set_where(struct tc_err *err, const char *file, const struct strvec *sets)
{
	size_t flen = strlen(file);
	const char *m = err->msg;
	if (!sets || !m || strncmp(m, file, flen) != 0 || m[flen] != ':')
		return;
	char *end;
	long line = strtol(m + flen + 1, &end, 10);
	if (*end != ':' || line < SPEC_SET_LINE || (size_t)(line - SPEC_SET_LINE) >= sets->nr)
		return;
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "--set %s%s", sets->v[line - SPEC_SET_LINE], end);
	tc_error(err, err->code, "%s", sb.buf);
	sbuf_release(&sb);
}
