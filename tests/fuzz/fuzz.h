/*
 * fuzz.h -- shared by the libFuzzer harnesses of tests/fuzz/ (docs/fuzzing.md).
 *
 * Each fuzz_<target>.c defines LLVMFuzzerTestOneInput over one parser of
 * input trainctl did not write.  Built two ways (tests/fuzz/CMakeLists.txt):
 * with clang's libFuzzer (cmake -DTC_FUZZ=ON, `make fuzz`), and with
 * replay.c as a plain program that runs a corpus once (the fuzz_corpus_*
 * unit tests), so every build replays the crashes kept in the corpus.
 *
 * A harness must not print, keep state between inputs other than warm
 * buffers, or leak; it aborts (FUZZ_ASSERT) when a parser breaks one of
 * its own documented promises, so that such a break is a crash too.
 */
#ifndef TC_FUZZ_H
#define TC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_ASSERT(c)                                                              \
	do {                                                                        \
		if (!(c)) {                                                         \
			fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                    \
		}                                                                   \
	} while (0)

/* A NUL-terminated heap copy of the input (free it), for parsers of C strings. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Read every byte of a string, so that ASan checks it lies in live memory. */
static inline size_t fuzz_touch(const char *s)
{
	return s ? strlen(s) : 0;
}

#endif
