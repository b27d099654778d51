// same-CPU (or cross-CPU) futex ping-pong between two threads: ns per one-way hand-off
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
static _Alignas(64) _Atomic int a; static _Alignas(64) _Atomic int b;
static long N = 20000;
static void pin(int c){if(c<0)return;cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void fw(_Atomic int*p,int v){while(atomic_load(p)==v)syscall(SYS_futex,p,FUTEX_WAIT_PRIVATE,v,0,0,0);}
static void fk(_Atomic int*p,int v){atomic_store(p,v);syscall(SYS_futex,p,FUTEX_WAKE_PRIVATE,1,0,0,0);}
static int cb;
static void* th(void* x){pin(cb);for(int i=0;i<N;i++){fw(&a,i);fk(&b,i+1);}return 0;}
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int c,char**v){int ca=atoi(v[1]);cb=atoi(v[2]);pthread_t t;pthread_create(&t,0,th,0);pin(ca);usleep(1000);
 double t0=now();for(int i=0;i<N;i++){fk(&a,i+1);fw(&b,i);}double t1=now();pthread_join(t,0);printf("%.0f ns per hand-off (wake+switch)\n",(t1-t0)/N/2);}
