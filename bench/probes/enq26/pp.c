// cross-CPU cache-line ping-pong: round trip ns, thread A on CPU a, B on CPU b
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <time.h>
static _Alignas(64) _Atomic long ping; static _Alignas(64) _Atomic long pong;
static long N = 200000;
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void* b(void* a){pin((int)(long)a);for(long i=1;i<=N;i++){while(atomic_load_explicit(&ping,memory_order_acquire)!=i);atomic_store_explicit(&pong,i,memory_order_release);}return 0;}
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int c,char**v){int ca=atoi(v[1]),cb=atoi(v[2]);pthread_t t;pthread_create(&t,0,b,(void*)(long)cb);pin(ca);
 double t0=now();for(long i=1;i<=N;i++){atomic_store_explicit(&ping,i,memory_order_release);while(atomic_load_explicit(&pong,memory_order_acquire)!=i);}
 double t1=now();pthread_join(t,0);printf("%.1f\n",(t1-t0)/N);}
