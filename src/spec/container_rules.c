/*
 * container_rules.c -- the image: and container: keys of a spec (the job
 * runs in a container image, docs/containers.md) and their JSON form both
 * ways; see spec_int.h.  What the keys mean at run time is
 * src/container/'s: here they are only checked and stored.
 */
#include "spec/spec_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

static struct spec_container *ctr(struct walk *w)
{
	return &w->s->container;
}

/* A value that goes on the runtime's command line whole: one line, no NUL tricks. */
static int one_line(struct walk *w, yaml_node_t *n, const char *key, char **out)
{
	int rc = walk_string(w, n, key, out);
	if (rc)
		return rc;
	if (!**out)
		return walk_fail(w, n, key, "is empty");
	if (strpbrk(*out, "\n\r"))
		return walk_fail(w, n, key, "must be one line");
	return 0;
}

int spec_r_image(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = one_line(w, n, key, &ctr(w)->image);
	if (rc)
		return rc;
	/* an image reference: never an option to the runtime, never a blank inside */
	const char *v = ctr(w)->image;
	if (v[0] == '-' || strpbrk(v, " \t"))
		return walk_fail(w, n, key, "'%s' is not an image reference (e.g. "
				 "docker.io/library/python:3.11 or localhost/train:1)", v);
	return 0;
}

static int r_runtime(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const names[] = { "podman", "docker", "pyxis", NULL };
	w->runtime_line = line_of(n); /* pyxis needs backend: slurm (spec.c) */
	return walk_enum(w, n, key, names, &ctr(w)->runtime);
}

static int r_pull(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const names[] = { "never", "missing", "always", NULL };
	return walk_enum(w, n, key, names, &ctr(w)->pull);
}

static int r_network(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const names[] = { "host", "none", "bridge", NULL };
	return walk_enum(w, n, key, names, &ctr(w)->network);
}

static int r_user(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = one_line(w, n, key, &ctr(w)->user);
	if (rc)
		return rc;
	/* whether it is the job's own user is asked at launch (container.c) */
	for (const char *c = ctr(w)->user; *c; c++)
		if (!(*c == ':' || *c == '_' || *c == '-' || *c == '.' || (*c >= '0' && *c <= '9') ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
			return walk_fail(w, n, key, "'%s' is not a user (a name or UID[:GID])",
					 ctr(w)->user);
	return 0;
}

static int r_shm_size(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = one_line(w, n, key, &ctr(w)->shm_size);
	if (rc)
		return rc;
	/* the runtimes' form: a number with an optional b, k, m or g */
	const char *v = ctr(w)->shm_size;
	size_t digits = strspn(v, "0123456789");
	if (!digits || (v[digits] && (strchr("bkmgBKMG", v[digits]) == NULL || v[digits + 1])))
		return walk_fail(w, n, key, "'%s' is not a size (e.g. 8g, 512m)", v);
	return 0;
}

/* "SRC[:DST][:ro|rw]", both absolute; the form docker -v takes. */
static int one_mount(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = one_line(w, n, key, &v);
	if (rc) {
		free(v);
		return rc;
	}
	char *parts[4];
	int np = 0;
	for (char *p = v;; np++) {
		char *colon = strchr(p, ':');
		if (np < 4)
			parts[np] = p;
		if (!colon) {
			np++;
			break;
		}
		*colon = '\0';
		p = colon + 1;
	}
	bool ro = false;
	if (np >= 2 && np <= 3 && (!strcmp(parts[np - 1], "ro") || !strcmp(parts[np - 1], "rw")))
		ro = !strcmp(parts[--np], "ro");
	if (np > 2)
		rc = walk_fail(w, n, key, "'%s' must be SRC[:DST][:ro]", scalar(n));
	else if (parts[0][0] != '/' || (np == 2 && parts[1][0] != '/'))
		rc = walk_fail(w, n, key, "'%s': both paths must be absolute", scalar(n));
	else if (strchr(scalar(n), ','))
		rc = walk_fail(w, n, key, "'%s': a path with ',' cannot be mounted", scalar(n));
	if (!rc) {
		struct spec_container *c = ctr(w);
		c->mounts = xrealloc(c->mounts, (c->nmounts + 1) * sizeof(*c->mounts));
		c->mounts[c->nmounts++] = (struct spec_mount){
			.src = xstrdup(parts[0]), .dst = xstrdup(np == 2 ? parts[1] : parts[0]), .ro = ro,
		};
	}
	free(v);
	return rc;
}

static int r_mounts(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of \"SRC[:DST][:ro]\"");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		int rc = item ? one_mount(w, item, key) : walk_fail(w, n, key, "items must be strings");
		if (rc)
			return rc;
	}
	return 0;
}

static int r_extra(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of runtime options (\"--memory=8g\")");
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		char *v = NULL;
		if (!item)
			return walk_fail(w, n, key, "items must be strings");
		int rc = one_line(w, item, key, &v);
		if (!rc && v[0] != '-')
			rc = walk_fail(w, item, key, "'%s' is not a runtime option (it must start with '-')",
				       v);
		if (rc) {
			free(v);
			return rc;
		}
		strvec_push_nodup(&ctr(w)->extra, v);
	}
	return 0;
}

/*
 * What a non-admin's container.extra may say through a server: resource
 * limits and labels.  Everything else (--privileged, --cap-add, --device,
 * -v, --mount, --user, --userns, --pid, --ulimit, --security-opt, ...)
 * gives more than the user has, or reaches past the job, and is an admin's.
 */
static const char *const extra_allowed[] = {
	"--cpus", "--cpuset-cpus", "--cpuset-mems", "--cpu-shares", "--memory", "-m",
	"--memory-reservation", "--memory-swap", "--pids-limit", "--label", "-l", "--annotation",
	"--tmpfs", "--read-only", "--env", "-e", "--hostname", "--stop-timeout", "--log-driver",
};

const char *spec_container_extra_refused(const struct spec *s)
{
	return spec_extra_refused(&s->container.extra, extra_allowed,
				  sizeof(extra_allowed) / sizeof(extra_allowed[0]));
}

static const struct rule container_rules[] = {
	{ "runtime", r_runtime, NULL },
	{ "mounts", r_mounts, NULL },
	{ "pull", r_pull, NULL },
	{ "network", r_network, NULL },
	{ "user", r_user, NULL },
	{ "shm_size", r_shm_size, NULL },
	{ "extra", r_extra, NULL },
	{ NULL, NULL, NULL },
};

int spec_r_container(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	w->container_line = line_of(n);
	return walk_map(w, n, "container.", container_rules);
}

/* ---- JSON ---- */

void spec_container_json(const struct spec *s, json_t *o)
{
	const struct spec_container *c = &s->container;
	if (!c->image)
		return;
	json_object_set_new(o, "image", json_string(c->image));
	json_t *x = json_object();
	const char *const kv[][2] = { { "runtime", c->runtime }, { "pull", c->pull },
				      { "network", c->network }, { "user", c->user },
				      { "shm_size", c->shm_size } };
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (kv[i][1])
			json_object_set_new(x, kv[i][0], json_string(kv[i][1]));
	if (c->nmounts) {
		json_t *a = json_array();
		for (size_t i = 0; i < c->nmounts; i++) {
			struct sbuf sb = SBUF_INIT;
			sbuf_addf(&sb, "%s:%s%s", c->mounts[i].src, c->mounts[i].dst,
				  c->mounts[i].ro ? ":ro" : "");
			json_array_append_new(a, json_string(sb.buf));
			sbuf_release(&sb);
		}
		json_object_set_new(x, "mounts", a);
	}
	if (c->extra.nr) {
		json_t *a = json_array();
		for (size_t i = 0; i < c->extra.nr; i++)
			json_array_append_new(a, json_string(c->extra.v[i]));
		json_object_set_new(x, "extra", a);
	}
	if (json_object_size(x))
		json_object_set_new(o, "container", x);
	else
		json_decref(x);
}

static void take(json_t *o, const char *key, char **dst)
{
	const char *v = json_string_value(json_object_get(o, key));
	if (v) {
		free(*dst);
		*dst = xstrdup(v);
	}
}

void spec_container_take(struct spec *s, json_t *o)
{
	struct spec_container *c = &s->container;
	take(o, "image", &c->image);
	json_t *x = json_object_get(o, "container");
	take(x, "runtime", &c->runtime);
	take(x, "pull", &c->pull);
	take(x, "network", &c->network);
	take(x, "user", &c->user);
	take(x, "shm_size", &c->shm_size);
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(x, "extra"), i, v)
		if (json_is_string(v))
			strvec_push(&c->extra, json_string_value(v));
	json_t *m = json_object_get(x, "mounts");
	c->mounts = xcalloc(json_array_size(m) + 1, sizeof(*c->mounts));
	json_array_foreach(m, i, v) {
		/* written as "SRC:DST[:ro]" by spec_container_json */
		const char *t = json_string_value(v);
		const char *colon = t ? strchr(t, ':') : NULL;
		if (!colon)
			continue;
		struct spec_mount *mm = &c->mounts[c->nmounts++];
		mm->src = xstrndup(t, (size_t)(colon - t));
		const char *d = colon + 1;
		const char *ro = strchr(d, ':');
		mm->dst = ro ? xstrndup(d, (size_t)(ro - d)) : xstrdup(d);
		mm->ro = ro && !strcmp(ro, ":ro");
	}
}

void spec_container_free(struct spec *s)
{
	struct spec_container *c = &s->container;
	free(c->image);
	free(c->runtime);
	for (size_t i = 0; i < c->nmounts; i++) {
		free(c->mounts[i].src);
		free(c->mounts[i].dst);
	}
	free(c->mounts);
	free(c->pull);
	free(c->network);
	free(c->user);
	free(c->shm_size);
	strvec_clear(&c->extra);
}
