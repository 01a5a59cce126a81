/*
 * pool.c -- a fixed set of threads working through a bounded task queue.
 * The bound keeps a sync of a million objects from queueing a million
 * tasks: the producer blocks until a thread takes one.
 */
#include "core/xalloc.h"
#include "storage/storage_int.h"

#include <pthread.h>
#include <stdlib.h>

struct task {
	task_fn fn;
	void *arg;
};

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full, idle;
	struct task *q;
	int cap, head, count;
	int busy;
	bool stop;
	pthread_t *threads;
	int nthreads;
	void (*thread_init)(void), (*thread_exit)(void);
};

static void *worker(void *arg)
{
	struct pool *p = arg;
	if (p->thread_init)
		p->thread_init();
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->count && !p->stop)
			pthread_cond_wait(&p->not_empty, &p->mu);
		if (!p->count && p->stop)
			break;
		struct task t = p->q[p->head];
		p->head = (p->head + 1) % p->cap;
		p->count--;
		p->busy++;
		pthread_cond_signal(&p->not_full);
		pthread_mutex_unlock(&p->mu);
		t.fn(t.arg);
		pthread_mutex_lock(&p->mu);
		p->busy--;
		if (!p->busy && !p->count)
			pthread_cond_broadcast(&p->idle);
	}
	pthread_mutex_unlock(&p->mu);
	if (p->thread_exit)
		p->thread_exit();
	return NULL;
}

struct pool *pool_new(int threads, int queue_max, void (*thread_init)(void),
		      void (*thread_exit)(void))
{
	struct pool *p = xcalloc(1, sizeof(*p));
	if (threads < 1)
		threads = 1;
	if (queue_max < 1)
		queue_max = 1;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->not_empty, NULL);
	pthread_cond_init(&p->not_full, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->cap = queue_max;
	p->q = xcalloc((size_t)queue_max, sizeof(*p->q));
	p->threads = xcalloc((size_t)threads, sizeof(*p->threads));
	p->thread_init = thread_init;
	p->thread_exit = thread_exit;
	for (int i = 0; i < threads; i++) {
		if (pthread_create(&p->threads[p->nthreads], NULL, worker, p) != 0)
			break; /* fewer threads still work; none would be fatal below */
		p->nthreads++;
	}
	if (!p->nthreads)
		abort();
	return p;
}

void pool_submit(struct pool *p, task_fn fn, void *arg)
{
	pthread_mutex_lock(&p->mu);
	while (p->count == p->cap)
		pthread_cond_wait(&p->not_full, &p->mu);
	p->q[(p->head + p->count) % p->cap] = (struct task){ fn, arg };
	p->count++;
	pthread_cond_signal(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
}

void pool_wait(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->count || p->busy)
		pthread_cond_wait(&p->idle, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->not_empty);
	pthread_cond_destroy(&p->not_full);
	pthread_cond_destroy(&p->idle);
	free(p->q);
	free(p->threads);
	free(p);
}
