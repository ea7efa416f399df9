/* bench/broker/latency.h — the clock and the "NAME p50 p99" line shared by
 * call_latency.c and notify_floor.c (microseconds). */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Sorts v and prints "NAME p50 p99", flushed (a caller may _exit). */
static void report(const char* name, double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  printf("%s %.2f %.2f\n", name, v[n / 2], v[(n * 99) / 100]);
  fflush(stdout);
}
