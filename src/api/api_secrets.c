/*
 * api_secrets.c -- each token user's secrets on the server (secret.h):
 * POST and DELETE /api/v1/secrets/{secret}, GET /api/v1/secrets (names,
 * never values), always the caller's own, admins included; the check at
 * submit that a spec's {secret:} values exist; and their handover to a
 * job's supervisor when it starts (SECRET_ENV_VAR).
 *
 * The store is <state>/user-secrets/<user>/NAME, 0700 folders and 0600
 * files of the server's account: no job and no other user reads it.
 */
#include "server/server_int.h"
#include "api/api_int.h"
#include "core/enc.h"
#include "core/json.h"
#include "core/xalloc.h"
#include "secret/secret.h"
#include "spec/spec.h"
#include "store/store.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

/* The caller's store (heap), or NULL when its name cannot name a folder. */
static char *user_dir(struct srv *s, const char *user)
{
	if (!user || !server_user_name_ok(user) || user[0] == '.')
		return NULL;
	return secret_user_dir(s->home, user);
}

int h_secret_list(struct srv *s, struct MHD_Connection *con, const struct who *w)
{
	char *dir = user_dir(s, w->user);
	if (!dir)
		return reply_err(con, 403, "user '%s' cannot hold secrets here", w->user ? w->user : "?");
	struct strvec names = STRVEC_INIT;
	struct tc_err err = TC_ERR_INIT;
	int ret;
	if (secret_list(dir, &names, &err)) {
		ret = reply_tc(con, &err);
	} else {
		json_t *a = json_array();
		for (size_t i = 0; i < names.nr; i++)
			json_array_append_new(a, json_string(names.v[i]));
		ret = reply_jsont(con, 200, json_pack("{s:o}", "secrets", a));
	}
	strvec_clear(&names);
	tc_err_release(&err);
	free(dir);
	return ret;
}

/* body: {"value": "text"} or {"hex": "..."} (any bytes but NUL); 0 with v filled, or 400 with why. */
static unsigned parse_value(const struct sbuf *body, struct sbuf *v, const char **why)
{
	json_t *o = body->len ? json_loadb(body->buf, body->len, 0, NULL) : NULL;
	const char *text = json_string_value(json_object_get(o, "value"));
	const char *hex = json_string_value(json_object_get(o, "hex"));
	unsigned st = 0;
	if (!json_is_object(o) || (!text == !hex)) {
		*why = "the body must be {\"value\": TEXT} or {\"hex\": HEX}";
		st = 400;
	} else if (text) {
		sbuf_add(v, text, json_string_length(json_object_get(o, "value")));
	} else {
		size_t n = strlen(hex);
		for (size_t k = 0; k + 1 < n && !st; k += 2) {
			int hi = hex_digit(hex[k]), lo = hex_digit(hex[k + 1]);
			if (hi < 0 || lo < 0)
				st = 400;
			else
				sbuf_addch(v, (char)(hi << 4 | lo));
		}
		if (st || n % 2)
			*why = "hex: not an even number of hex digits", st = 400;
	}
	json_decref(o);
	return st;
}

int h_secret_put(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *name,
		 const struct sbuf *body)
{
	char *dir = user_dir(s, w->user);
	if (!dir)
		return reply_err(con, 403, "user '%s' cannot hold secrets here", w->user ? w->user : "?");
	struct sbuf v = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	const char *why = NULL;
	int ret;
	unsigned st = parse_value(body, &v, &why);
	if (st)
		ret = reply_err(con, st, "%s", why);
	else if (!v.len)
		ret = reply_err(con, 400, "secret %s: the value is empty", name);
	else if (secret_put(dir, name, v.buf, v.len, &err))
		ret = reply_tc(con, &err);
	else
		ret = reply_jsont(con, 201, json_pack("{s:s, s:b}", "name", name, "set", 1));
	if (v.buf)
		explicit_bzero(v.buf, v.len);
	sbuf_release(&v);
	tc_err_release(&err);
	free(dir);
	return ret;
}

int h_secret_delete(struct srv *s, struct MHD_Connection *con, const struct who *w,
		    const char *name)
{
	char *dir = user_dir(s, w->user);
	if (!dir)
		return reply_err(con, 403, "user '%s' cannot hold secrets here", w->user ? w->user : "?");
	struct tc_err err = TC_ERR_INIT;
	int ret = secret_remove(dir, name, &err)
			  ? reply_tc(con, &err)
			  : reply_jsont(con, 200, json_pack("{s:s, s:b}", "name", name, "removed", 1));
	tc_err_release(&err);
	free(dir);
	return ret;
}

int srv_secrets_check(struct srv *s, const char *user, const struct spec *sp, bool own_queue,
		      struct tc_err *err)
{
	bool any = false;
	for (size_t i = 0; i < sp->nenv; i++)
		any |= sp->env[i].from != ENV_FROM_VALUE;
	/* a Slurm job's secrets go with its sbatch (backend/slurm.c), its files are read on its nodes */
	(void)own_queue;
	if (!any)
		return 0;
	char *dir = user_dir(s, user);
	char *missing = dir ? secret_missing(sp, dir) : NULL;
	int rc = 0;
	if (!dir)
		rc = tc_error(err, TC_EINPUT, "env: user '%s' cannot hold secrets here", user);
	else if (missing)
		rc = tc_error(err, TC_EINPUT, "env: user '%s' has no secret %s on this server (trainctl"
			      " secret set NAME --server URL)", user, missing);
	free(missing);
	free(dir);
	return rc;
}

int srv_secrets_handover(struct srv *s, const char *job_id, struct strvec *env, struct tc_err *err)
{
	struct job_row r = { 0 };
	struct spec *sp = NULL;
	char *text = NULL, *dir = NULL;
	int rc = store_job_get(s->st, job_id, &r, err);
	if (!rc)
		rc = spec_from_json(r.spec_json, &sp, err);
	bool any = false;
	for (size_t i = 0; !rc && i < sp->nenv; i++)
		any |= sp->env[i].from == ENV_FROM_SECRET;
	if (rc || !any)
		goto out;
	if (!(dir = user_dir(s, r.user))) {
		rc = tc_error(err, TC_ESTORAGE, "user '%s' cannot hold secrets here", r.user);
		goto out;
	}
	if (!(rc = secret_handover(sp, dir, &text, err)))
		env_set(env, SECRET_ENV_VAR, text);
out:
	if (text)
		explicit_bzero(text, strlen(text));
	free(text);
	free(dir);
	spec_free(sp);
	job_row_release(&r);
	return rc;
}
