/* cache-thrash.c - active false sharing; see cache_bench.h. */
#define CACHE_SCRATCH 0
#include "cache_bench.h"
