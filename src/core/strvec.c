/* strvec.c -- NULL-terminated string vectors; see strvec.h. */
#include "core/strvec.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

const char *strvec_empty[1];

void strvec_push_nodup(struct strvec *sv, char *s)
{
	if (sv->alloc == 0) {
		sv->v = NULL;
		sv->alloc = 0;
	}
	XGROW(sv->v, sv->nr + 2, sv->alloc);
	sv->v[sv->nr++] = s;
	sv->v[sv->nr] = NULL;
}

void strvec_push(struct strvec *sv, const char *s)
{
	strvec_push_nodup(sv, xstrdup(s));
}

void strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strvec_push_nodup(sv, sbuf_detach(&sb));
}

void strvec_pushv(struct strvec *sv, const char *const *v)
{
	for (; v && *v; v++)
		strvec_push(sv, *v);
}

void strvec_clear(struct strvec *sv)
{
	if (sv->alloc) {
		for (size_t i = 0; i < sv->nr; i++)
			free(sv->v[i]);
		free(sv->v);
	}
	sv->v = (char **)strvec_empty;
	sv->nr = 0;
	sv->alloc = 0;
}

static long env_find(const struct strvec *env, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], key, kl) && env->v[i][kl] == '=')
			return (long)i;
	return -1;
}

void env_set(struct strvec *env, const char *key, const char *val)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s=%s", key, val);
	long i = env_find(env, key);
	if (i >= 0) {
		free(env->v[i]);
		env->v[i] = sbuf_detach(&sb);
	} else {
		strvec_push_nodup(env, sbuf_detach(&sb));
	}
}

void env_setf(struct strvec *env, const char *key, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	env_set(env, key, sb.buf);
	sbuf_release(&sb);
}

const char *env_get(const struct strvec *env, const char *key)
{
	long i = env_find(env, key);
	return i >= 0 ? strchr(env->v[i], '=') + 1 : NULL;
}

void env_unset(struct strvec *env, const char *key)
{
	long i = env_find(env, key);
	if (i < 0)
		return;
	free(env->v[i]);
	memmove(env->v + i, env->v + i + 1, (env->nr - (size_t)i) * sizeof(char *));
	env->nr--;
}
