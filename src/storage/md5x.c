/*
 * md5x.c -- the MD5 of several transfers at once, eight streams side by side.
 *
 * A transfer checks each object against its ETag (the MD5 of its bytes),
 * and that MD5 was more than half the CPU of a sync of many small objects:
 * MD5 is one long chain of dependent steps, so one stream cannot go faster
 * than ~5 cycles a byte.  Here a stream's bytes are gathered into chunks
 * of 128 KiB that wait in a shared queue; a thread that must have its
 * hash (md5x_final), or has CAP chunks waiting, leads: it hashes its
 * own and up to seven other streams' chunks side by side, one 32-bit lane
 * of an AVX2 register per stream (AVX-512VL where the CPU has it: one
 * instruction per round function and per rotation).  Full lanes give about 3 GB/s here against
 * libcrypto's 0.5 GB/s for one stream.
 *
 * Invariants: a stream is in at most one leader's lanes; a thread leads
 * only until its own stream has nothing waiting, so no thread hashes for
 * the others while its own transfer stands still; a stream is in the
 * queue exactly when it has chunks waiting and no lane; a stream that
 * leaves md5x_final or md5x_free has no chunk anywhere.  A stream's chunks
 * are hashed in order (they form one chain).  Without AVX2, or off x86-64,
 * md5x_lanes() is false and the caller uses libcrypto instead.
 */
#include "core/xalloc.h"
#include "storage/storage_int.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t K[64] = {
	0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
	0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
	0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
	0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
	0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
	0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
	0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
	0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
	0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
	0xeb86d391,
};

/* the per-step rotations, and the message word each step reads */
static const int R[64] = { 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
			   5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
			   4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
			   6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21 };

static int word_of(int i)
{
	return i < 16 ? i : i < 32 ? (5 * i + 1) & 15 : i < 48 ? (3 * i + 5) & 15 : (7 * i) & 15;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void md5x_blocks1(uint32_t st[4], const unsigned char *p, size_t nblocks)
{
	for (size_t blk = 0; blk < nblocks; blk++, p += 64) {
		uint32_t m[16], a = st[0], b = st[1], c = st[2], d = st[3];
		for (int i = 0; i < 16; i++)
			m[i] = le32(p + 4 * i);
		for (int i = 0; i < 64; i++) {
			uint32_t f = i < 16 ? (b & c) | (~b & d)
				   : i < 32 ? (b & d) | (c & ~d)
				   : i < 48 ? b ^ c ^ d
					    : c ^ (b | ~d);
			uint32_t t = a + f + K[i] + m[word_of(i)];
			a = d;
			d = c;
			c = b;
			b += (t << R[i]) | (t >> (32 - R[i]));
		}
		st[0] += a;
		st[1] += b;
		st[2] += c;
		st[3] += d;
	}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_LANES 1

enum { LANES = 8, CHUNK = 64 /* blocks a lane runs between looks at the queue */ };

/* The 16 message words of block blk of each lane, one register per word. */
#define LOAD_WORDS(m, p, blk)                                                                \
	do {                                                                                 \
		uint32_t w_[16][LANES];                                                      \
		for (int l_ = 0; l_ < LANES; l_++)                                           \
			for (int i_ = 0; i_ < 16; i_++) /* x86 is little-endian */           \
				memcpy(&w_[i_][l_], (p)[l_] + (blk) * 64 + 4 * i_, 4);       \
		for (int i_ = 0; i_ < 16; i_++)                                              \
			(m)[i_] = _mm256_loadu_si256((const __m256i *)(const void *)w_[i_]); \
	} while (0)

/* One MD5 step in every lane; F and ROT are the kernel's (the rotation must be a constant). */
#define STEP(F, ROT, i, r)                                                                     \
	do {                                                                                   \
		__m256i t_ = _mm256_add_epi32(_mm256_add_epi32(a, F(b, c, d)),                 \
					      _mm256_add_epi32(_mm256_set1_epi32((int)K[i]), m[word_of(i)])); \
		a = d;                                                                         \
		d = c;                                                                         \
		c = b;                                                                         \
		b = _mm256_add_epi32(b, ROT(t_, r));                                           \
	} while (0)
#define STEP4(F, ROT, i, r0, r1, r2, r3)                                                       \
	STEP(F, ROT, i, r0);                                                                   \
	STEP(F, ROT, (i) + 1, r1);                                                             \
	STEP(F, ROT, (i) + 2, r2);                                                             \
	STEP(F, ROT, (i) + 3, r3)

/* st[w * 8 + lane]: word w of each lane's state; each p[lane] has nblocks * 64 bytes. */
#define KERNEL(F1, F2, F3, F4, ROT)                                                            \
	{                                                                                      \
		__m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(st + 0));       \
		__m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8));       \
		__m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(st + 16));      \
		__m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(st + 24));      \
		for (size_t blk = 0; blk < nblocks; blk++) {                                   \
			__m256i m[16];                                                         \
			LOAD_WORDS(m, p, blk);                                                 \
			__m256i a0 = a, b0 = b, c0 = c, d0 = d;                                \
			for (int i = 0; i < 16; i += 4)                                        \
				{ STEP4(F1, ROT, i, 7, 12, 17, 22); }                              \
			for (int i = 16; i < 32; i += 4)                                       \
				{ STEP4(F2, ROT, i, 5, 9, 14, 20); }                              \
			for (int i = 32; i < 48; i += 4)                                       \
				{ STEP4(F3, ROT, i, 4, 11, 16, 23); }                              \
			for (int i = 48; i < 64; i += 4)                                       \
				{ STEP4(F4, ROT, i, 6, 10, 15, 21); }                              \
			a = _mm256_add_epi32(a, a0);                                           \
			b = _mm256_add_epi32(b, b0);                                           \
			c = _mm256_add_epi32(c, c0);                                           \
			d = _mm256_add_epi32(d, d0);                                           \
		}                                                                              \
		_mm256_storeu_si256((__m256i *)(void *)(st + 0), a);                           \
		_mm256_storeu_si256((__m256i *)(void *)(st + 8), b);                           \
		_mm256_storeu_si256((__m256i *)(void *)(st + 16), c);                          \
		_mm256_storeu_si256((__m256i *)(void *)(st + 24), d);                          \
	}

/* AVX2: the round functions from and/or/xor, rotations from two shifts */
#define F1_2(b, c, d) _mm256_or_si256(_mm256_and_si256(b, c), _mm256_andnot_si256(b, d))
#define F2_2(b, c, d) _mm256_or_si256(_mm256_and_si256(b, d), _mm256_andnot_si256(d, c))
#define F3_2(b, c, d) _mm256_xor_si256(_mm256_xor_si256(b, c), d)
#define F4_2(b, c, d) _mm256_xor_si256(c, _mm256_or_si256(b, _mm256_xor_si256(d, _mm256_set1_epi32(-1))))
#define ROT_2(x, r) _mm256_or_si256(_mm256_slli_epi32(x, r), _mm256_srli_epi32(x, 32 - (r)))

__attribute__((target("avx2"))) static void blocks8_avx2(uint32_t st[4 * LANES],
							 const unsigned char *p[LANES], size_t nblocks)
	KERNEL(F1_2, F2_2, F3_2, F4_2, ROT_2)

/* AVX-512VL on the same 8 lanes: each round function is one ternary-logic
 * instruction (b ? c : d, d ? b : c, b ^ c ^ d, c ^ (b | ~d)), a rotation
 * one instruction: 1.7 times AVX2's bytes per second here */
#define F1_5(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0xCA)
#define F2_5(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0xE4)
#define F3_5(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0x96)
#define F4_5(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0x39)
#define ROT_5(x, r) _mm256_rol_epi32(x, r)

__attribute__((target("avx2,avx512f,avx512vl"))) static void
blocks8_avx512(uint32_t st[4 * LANES], const unsigned char *p[LANES], size_t nblocks)
	KERNEL(F1_5, F2_5, F3_5, F4_5, ROT_5)

typedef void (*blocks8_fn)(uint32_t st[4 * LANES], const unsigned char *p[LANES], size_t nblocks);
static blocks8_fn blocks8; /* set once by lanes_check */

/*
 * A stream's blocks wait in chunks of GATHER bytes until a leader hashes
 * them; a stream is in the queue when it has chunks and no lane.
 */
#define GATHER ((size_t)128 << 10)
enum { CAP = 8 /* chunks a stream may have waiting before its thread drains them */,
       HARD_CAP = 32 /* ... before it waits for another leader to drain them */ };

struct chunk {
	struct chunk *next;
	size_t nblocks, done;
	unsigned char data[];
};

struct md5x {
	uint32_t st[4]; /* not while in_lane: the leader holds it */
	uint64_t len;
	struct chunk *cur; /* gathering; this stream's thread only */
	size_t clen;
	/* under Q.mu */
	struct chunk *head, *tail;
	int npending;
	bool queued, in_lane;
	struct md5x *qnext;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t changed;
	struct md5x *head, *tail;
	struct chunk *spare; /* hashed chunks kept for reuse: a fresh 128 KiB is a fresh mapping */
	int nspare;
	int live; /* streams not yet final or freed: the spares go with the last */
} Q = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, NULL, 0, 0 };

enum { SPARE_MAX = 64 };

/* A hashed chunk back to the spares, or freed.  Q.mu held. */
static void chunk_put(struct chunk *c)
{
	if (Q.nspare >= SPARE_MAX) {
		free(c);
		return;
	}
	c->next = Q.spare;
	Q.spare = c;
	Q.nspare++;
}

/* A stream has ended; with the last one the spares are freed.  Q.mu held. */
static void stream_gone(void)
{
	if (--Q.live)
		return;
	while (Q.spare) {
		struct chunk *c = Q.spare;
		Q.spare = c->next;
		free(c);
	}
	Q.nspare = 0;
}

static struct chunk *chunk_get(void)
{
	pthread_mutex_lock(&Q.mu);
	struct chunk *c = Q.spare;
	if (c) {
		Q.spare = c->next;
		Q.nspare--;
	}
	pthread_mutex_unlock(&Q.mu);
	return c ? c : xmalloc(sizeof(struct chunk) + GATHER);
}

/* What an idle lane reads: its result is thrown away. */
static const unsigned char idle_data[CHUNK * 64];

static void enqueue_back(struct md5x *x)
{
	x->queued = true;
	x->qnext = NULL;
	if (Q.tail)
		Q.tail->qnext = x;
	else
		Q.head = x;
	Q.tail = x;
}

/* Take x (queued) out of the queue.  Q.mu held. */
static void dequeue(struct md5x *x)
{
	struct md5x **pp = &Q.head, *prev = NULL;
	while (*pp != x) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	*pp = x->qnext;
	if (Q.tail == x)
		Q.tail = prev;
	x->qnext = NULL;
	x->queued = false;
}

/*
 * A leader's loop, entered and left with Q.mu held: its own stream (queued,
 * not in a lane) in the first lane, other queued streams in the rest, side
 * by side, each through its chunks in order.  It leaves once its own stream
 * has nothing waiting, putting the streams still in its lanes back at the
 * head of the queue, so no thread hashes for the others while its own
 * transfer stands still.  Several threads may lead at once, each with
 * streams of its own: on a loaded machine a waiting thread must not depend
 * on one leader that is not running.
 */
static void lead(struct md5x *own)
{
	struct md5x *lane[LANES] = { 0 };
	uint32_t st[4 * LANES] = { 0 };
	if (own->queued)
		dequeue(own);
	for (;;) {
		int active = 0;
		for (int l = 0; l < LANES; l++) {
			struct md5x *x = l == 0 && own->head && !own->in_lane ? own
					 : !lane[l] && Q.head ? Q.head
							      : NULL;
			if (!lane[l] && x) {
				if (x->queued)
					dequeue(x);
				x->in_lane = true;
				lane[l] = x;
				for (int w = 0; w < 4; w++)
					st[w * LANES + l] = x->st[w];
			}
			active += lane[l] != NULL;
		}
		if (!active)
			return;
		size_t n = CHUNK;
		const unsigned char *p[LANES];
		for (int l = 0; l < LANES; l++) {
			struct chunk *c = lane[l] ? lane[l]->head : NULL;
			if (c && c->nblocks - c->done < n)
				n = c->nblocks - c->done;
			p[l] = c ? c->data + c->done * 64 : idle_data;
		}
		pthread_mutex_unlock(&Q.mu);
		blocks8(st, p, n);
		pthread_mutex_lock(&Q.mu);
		bool released = false;
		for (int l = 0; l < LANES; l++) {
			struct md5x *x = lane[l];
			if (!x)
				continue;
			struct chunk *c = x->head;
			if ((c->done += n) < c->nblocks)
				continue;
			x->head = c->next;
			if (!x->head)
				x->tail = NULL;
			x->npending--;
			chunk_put(c);
			/* done, or others wait for a lane: a fast producer must not keep one */
			if (!x->head || (Q.head && x != own)) {
				for (int w = 0; w < 4; w++)
					x->st[w] = st[w * LANES + l];
				x->in_lane = false;
				lane[l] = NULL;
				released = true;
				if (x->head)
					enqueue_back(x);
			}
		}
		if (own->npending) {
			if (released)
				pthread_cond_broadcast(&Q.changed);
			continue;
		}
		for (int l = LANES - 1; l >= 0; l--) {
			struct md5x *x = lane[l];
			if (!x)
				continue;
			for (int w = 0; w < 4; w++)
				x->st[w] = st[w * LANES + l];
			x->in_lane = false;
			x->queued = true;
			x->qnext = Q.head;
			Q.head = x;
			if (!Q.tail)
				Q.tail = x;
		}
		pthread_cond_broadcast(&Q.changed); /* the drained, and those waiting for a lane */
		return;
	}
}

/* Until x has nothing waiting: lead it, or wait while another leader has it.  Q.mu held. */
static void drain_locked(struct md5x *x)
{
	while (x->npending) {
		if (x->in_lane)
			pthread_cond_wait(&Q.changed, &Q.mu);
		else
			lead(x);
	}
}

static void submit(struct md5x *x, struct chunk *c)
{
	c->next = NULL;
	c->done = 0;
	pthread_mutex_lock(&Q.mu);
	if (x->tail)
		x->tail->next = c;
	else
		x->head = c;
	x->tail = c;
	x->npending++;
	if (!x->queued && !x->in_lane)
		enqueue_back(x);
	/* CAP waiting: lead them unless a leader has them; HARD_CAP: wait for that leader too */
	if ((x->npending >= CAP && !x->in_lane) || x->npending >= HARD_CAP)
		drain_locked(x);
	pthread_mutex_unlock(&Q.mu);
}

static pthread_once_t lanes_once = PTHREAD_ONCE_INIT;
static bool lanes_have;

static void lanes_check(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
		blocks8 = blocks8_avx512;
	else if (__builtin_cpu_supports("avx2"))
		blocks8 = blocks8_avx2;
	lanes_have = blocks8 != NULL;
}

static bool lanes_ok(void)
{
	return pthread_once(&lanes_once, lanes_check) == 0 && lanes_have;
}

int md5x_kernels_check(void)
{
	static unsigned char data[LANES][3 * 64];
	for (int l = 0; l < LANES; l++)
		for (int i = 0; i < 3 * 64; i++)
			data[l][i] = (unsigned char)(i * 29 + l * 101 + i / 7);
	uint32_t want[4 * LANES];
	for (int l = 0; l < LANES; l++) {
		uint32_t one[4] = { 0x67452301u + (uint32_t)l, 0xefcdab89, 0x98badcfe, 0x10325476 };
		md5x_blocks1(one, data[l], 3);
		for (int w = 0; w < 4; w++)
			want[w * LANES + l] = one[w];
	}
	__builtin_cpu_init();
	const blocks8_fn fn[2] = { __builtin_cpu_supports("avx2") ? blocks8_avx2 : NULL,
				   __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
					   ? blocks8_avx512
					   : NULL };
	int ran = 0;
	for (int k = 0; k < 2; k++) {
		if (!fn[k])
			continue;
		uint32_t st[4 * LANES];
		const unsigned char *p[LANES];
		for (int l = 0; l < LANES; l++) {
			st[l] = 0x67452301u + (uint32_t)l;
			st[LANES + l] = 0xefcdab89;
			st[2 * LANES + l] = 0x98badcfe;
			st[3 * LANES + l] = 0x10325476;
			p[l] = data[l];
		}
		fn[k](st, p, 3);
		if (memcmp(st, want, sizeof(st)) != 0)
			return -1;
		ran++;
	}
	return ran;
}

struct md5x *md5x_new(void)
{
	if (!lanes_ok())
		abort(); /* the caller asks md5x_lanes() first */
	struct md5x *x = xcalloc(1, sizeof(*x));
	x->st[0] = 0x67452301;
	x->st[1] = 0xefcdab89;
	x->st[2] = 0x98badcfe;
	x->st[3] = 0x10325476;
	pthread_mutex_lock(&Q.mu);
	Q.live++;
	pthread_mutex_unlock(&Q.mu);
	return x;
}

void md5x_update(struct md5x *x, const void *data, size_t len)
{
	const unsigned char *p = data;
	x->len += len;
	while (len) {
		if (!x->cur) {
			x->cur = chunk_get();
			x->clen = 0;
		}
		size_t k = GATHER - x->clen < len ? GATHER - x->clen : len;
		memcpy(x->cur->data + x->clen, p, k);
		x->clen += k;
		p += k;
		len -= k;
		if (x->clen == GATHER) {
			x->cur->nblocks = GATHER / 64;
			submit(x, x->cur);
			x->cur = NULL;
		}
	}
}

/*
 * Hash what is gathered and wait for every chunk; the bytes past the last
 * whole block go to tail.  The stream is no longer live after this.
 */
static size_t settle(struct md5x *x, unsigned char tail[64])
{
	size_t t = 0;
	if (x->cur) {
		size_t whole = x->clen - x->clen % 64;
		t = x->clen - whole;
		memcpy(tail, x->cur->data + whole, t);
		if (whole) {
			x->cur->nblocks = whole / 64;
			submit(x, x->cur);
		} else {
			pthread_mutex_lock(&Q.mu);
			chunk_put(x->cur);
			pthread_mutex_unlock(&Q.mu);
		}
		x->cur = NULL;
	}
	pthread_mutex_lock(&Q.mu);
	drain_locked(x);
	stream_gone();
	pthread_mutex_unlock(&Q.mu);
	return t;
}

void md5x_final(struct md5x *x, unsigned char out[16])
{
	unsigned char tail[128] = { 0 };
	size_t t = settle(x, tail);
	/* the padding: 0x80, zeros, the length in bits (little-endian), in one or two blocks */
	tail[t] = 0x80;
	size_t tlen = t < 56 ? 64 : 128;
	uint64_t bits = x->len * 8;
	for (int i = 0; i < 8; i++)
		tail[tlen - 8 + (size_t)i] = (unsigned char)(bits >> (8 * i));
	md5x_blocks1(x->st, tail, tlen / 64);
	for (int w = 0; w < 4; w++)
		for (int i = 0; i < 4; i++)
			out[4 * w + i] = (unsigned char)(x->st[w] >> (8 * i));
	free(x);
}

void md5x_free(struct md5x *x)
{
	if (!x)
		return;
	unsigned char tail[64];
	(void)settle(x, tail); /* a leader may be reading its chunks: let them pass */
	free(x);
}
#else
#define HAVE_LANES 0

int md5x_kernels_check(void)
{
	return 0;
}

/* never called: md5x_lanes() says there are none */
struct md5x *md5x_new(void)
{
	abort();
}

void md5x_update(struct md5x *x, const void *data, size_t len)
{
	(void)x, (void)data, (void)len;
	abort();
}

void md5x_final(struct md5x *x, unsigned char out[16])
{
	(void)x, (void)out;
	abort();
}

void md5x_free(struct md5x *x)
{
	if (x)
		abort();
}
#endif

bool md5x_lanes(void)
{
#if HAVE_LANES
	return lanes_ok();
#else
	return false;
#endif
}
