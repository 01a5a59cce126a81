/*
 * test.h -- the unit-test harness (libuv's habit): TEST(name) defines a test
 * and registers it; runner.c runs each test in its own child process with a
 * timeout and prints "N passed, N failed".  `test_x NAME` runs one test in
 * the foreground, for a debugger.
 */
#ifndef TC_TEST_H
#define TC_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);

#define TEST(name)                                                         \
	static void test_##name(void);                                     \
	__attribute__((constructor)) static void test_reg_##name(void)     \
	{                                                                  \
		test_register(#name, test_##name);                         \
	}                                                                  \
	static void test_##name(void)

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			exit(1);                                           \
		}                                                          \
	} while (0)

#define CHECK_INT(a, b)                                                    \
	do {                                                               \
		long long a_ = (long long)(a), b_ = (long long)(b);        \
		if (a_ != b_) {                                            \
			fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n",\
				__FILE__, __LINE__, #a, a_, b_);           \
			exit(1);                                           \
		}                                                          \
	} while (0)

#define CHECK_STR(a, b)                                                    \
	do {                                                               \
		const char *a_ = (a), *b_ = (b);                           \
		if (!a_ || !b_ || strcmp(a_, b_)) {                        \
			fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n",\
				__FILE__, __LINE__, #a, a_ ? a_ : "(null)",\
				b_ ? b_ : "(null)");                       \
			exit(1);                                           \
		}                                                          \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                        \
	do {                                                               \
		const char *h_ = (hay), *n_ = (needle);                    \
		if (!h_ || !strstr(h_, n_)) {                              \
			fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n",\
				__FILE__, __LINE__, h_ ? h_ : "(null)", n_);\
			exit(1);                                           \
		}                                                          \
	} while (0)

/* A fresh empty directory for this test (removed by the runner). */
const char *test_tmpdir(void);
/* Write text to dir/rel, making its folders; any failure fails the test. */
void test_put_file(const char *dir, const char *rel, const char *text);
/* Parse job.yaml text (base dir /tmp) that must parse; an error fails the
 * test after printing its message.  The caller frees the spec. */
struct spec;
struct spec *test_spec_ok(const char *text);

#endif
