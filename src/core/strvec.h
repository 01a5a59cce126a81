/*
 * strvec.h -- a NULL-terminated vector of heap strings (argv, envp).
 *
 * Invariant: v is never NULL and v[nr] == NULL, so v can be passed to
 * exec as is.  The vector owns its strings.
 */
#ifndef TC_CORE_STRVEC_H
#define TC_CORE_STRVEC_H

#include <stddef.h>

#include "core/err.h"

extern const char *strvec_empty[];

struct strvec {
	char **v;
	size_t nr;
	size_t alloc;
};
#define STRVEC_INIT { (char **)strvec_empty, 0, 0 }

void strvec_push(struct strvec *sv, const char *s);
void strvec_pushf(struct strvec *sv, const char *fmt, ...) TC_PRINTF(2, 3);
void strvec_pushv(struct strvec *sv, const char *const *v);
/* Take ownership of s. */
void strvec_push_nodup(struct strvec *sv, char *s);
void strvec_clear(struct strvec *sv);

/*
 * Environment helpers: entries are "K=V".  env_set replaces an existing K,
 * env_get returns the value or NULL, env_unset removes K.
 */
void env_set(struct strvec *env, const char *key, const char *val);
void env_setf(struct strvec *env, const char *key, const char *fmt, ...) TC_PRINTF(3, 4);
const char *env_get(const struct strvec *env, const char *key);
void env_unset(struct strvec *env, const char *key);

#endif
