/*
 * s3_ini.c -- the settings of an s3:// or obs:// location: the environment,
 * storage.conf (INI), defaults.  No network; see s3_int.h and
 * docs/storage.md.
 */
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/s3_int.h"

#include <stdlib.h>
#include <string.h>

static char *config_path(void)
{
	const char *e = getenv("TRAINCTL_STORAGE_CONFIG");
	if (e && *e)
		return xstrdup(e);
	char *home = trainctl_home();
	if (!home)
		return NULL;
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/storage.conf", home);
	free(home);
	return sbuf_detach(&sb);
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

char *s3_ini_get(const char *text, size_t len, const char *section, const char *key)
{
	bool in = false;
	size_t sl = strlen(section), kl = strlen(key);
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *next = eol ? eol + 1 : end;
		const char *e = eol ? eol : end;
		while (p < e && is_space(*p))
			p++;
		while (e > p && (is_space(e[-1]) || e[-1] == '\r'))
			e--;
		size_t n = (size_t)(e - p);
		if (n && p[0] == '[') {
			in = n == sl + 2 && !memcmp(p + 1, section, sl) && p[n - 1] == ']';
		} else if (in && n && p[0] != '#' && p[0] != ';') {
			const char *eq = memchr(p, '=', n);
			if (eq) {
				const char *ke = eq;
				while (ke > p && is_space(ke[-1]))
					ke--;
				if ((size_t)(ke - p) == kl && !memcmp(p, key, kl)) {
					const char *v = eq + 1;
					while (v < e && is_space(*v))
						v++;
					return xstrndup(v, (size_t)(e - v));
				}
			}
		}
		p = next;
	}
	return NULL;
}

/* env first, then [section] of the file, then [s3] of the file. */
static char *conf_value(const struct sbuf *text, const char *section, const char *env1,
			const char *key)
{
	const char *e = env1 ? getenv(env1) : NULL;
	if (e && *e)
		return xstrdup(e);
	if (!text)
		return NULL;
	char *v = s3_ini_get(text->buf, text->len, section, key);
	if (!v && strcmp(section, "s3") != 0)
		v = s3_ini_get(text->buf, text->len, "s3", key);
	return v;
}

void s3_config_free(struct s3 *s)
{
	if (!s)
		return;
	if (s->secret)
		memset(s->secret, 0, strlen(s->secret));
	free(s->access);
	free(s->secret);
	free(s->token);
	free(s->region);
	free(s->endpoint);
	free(s->sigv4);
	free(s);
}

/* The endpoint and the addressing style: given, or the provider's default for the region. */
static void set_endpoint(struct s3 *s, const struct sbuf *t, const char *section, bool obs)
{
	s->endpoint = conf_value(t, section, obs ? "OBS_ENDPOINT_URL" : "AWS_ENDPOINT_URL", "endpoint");
	char *addr = conf_value(t, section, NULL, "addressing");
	if (s->endpoint) {
		s->virtual_host = addr && !strcmp(addr, "virtual");
	} else {
		struct sbuf ep = SBUF_INIT;
		if (obs)
			sbuf_addf(&ep, "https://obs.%s.myhuaweicloud.com", s->region);
		else
			sbuf_addf(&ep, "https://s3.%s.amazonaws.com", s->region);
		s->endpoint = sbuf_detach(&ep);
		s->virtual_host = !(addr && !strcmp(addr, "path"));
	}
	size_t el = strlen(s->endpoint);
	while (el && s->endpoint[el - 1] == '/')
		s->endpoint[--el] = '\0';
	free(addr);
}

int s3_config_load(const char *url, bool obs, struct s3 **out, struct tc_err *err)
{
	const char *section = obs ? "obs" : "s3";
	struct sbuf text = SBUF_INIT;
	char *cpath = config_path();
	bool have_file = cpath && read_file(cpath, &text, NULL) == 0;
	const struct sbuf *t = have_file ? &text : NULL;
	struct s3 *s = xcalloc(1, sizeof(*s));
	s->access = conf_value(t, section, "AWS_ACCESS_KEY_ID", "access_key_id");
	s->secret = conf_value(t, section, "AWS_SECRET_ACCESS_KEY", "secret_access_key");
	s->token = conf_value(t, section, "AWS_SESSION_TOKEN", "session_token");
	s->region = conf_value(t, section, obs ? "OBS_REGION" : "AWS_REGION", "region");
	if (!s->region && obs)
		s->region = conf_value(t, section, "AWS_REGION", "region");
	if (!s->region)
		s->region = xstrdup(obs ? "cn-north-4" : "us-east-1");
	set_endpoint(s, t, section, obs);
	char *verify = conf_value(t, section, NULL, "verify_etag");
	s->verify_etag = !(verify && (!strcmp(verify, "false") || !strcmp(verify, "0")));
	free(verify);
	sbuf_release(&text);
	int rc = 0;
	if (!s->access || !s->secret) {
		rc = tc_error(err, TC_EINPUT,
			      "%s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
			      "access_key_id and secret_access_key under [%s] in %s",
			      url, section, cpath ? cpath : "$TRAINCTL_STORAGE_CONFIG");
	} else if (strncmp(s->endpoint, "http://", 7) && strncmp(s->endpoint, "https://", 8)) {
		rc = tc_error(err, TC_EINPUT, "%s: endpoint '%s' must start with http:// or https://",
			      url, s->endpoint);
	} else {
		struct sbuf sv = SBUF_INIT;
		sbuf_addf(&sv, "aws:amz:%s:s3", s->region);
		s->sigv4 = sbuf_detach(&sv);
	}
	free(cpath);
	if (rc) {
		s3_config_free(s);
		return rc;
	}
	*out = s;
	return 0;
}
