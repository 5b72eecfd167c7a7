/* cache-scratch.c - passive false sharing; see cache_bench.h. */
#define CACHE_SCRATCH 1
#include "cache_bench.h"
