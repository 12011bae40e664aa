/*
 * env.c -- the environment variables of the tracer: their names, from the
 * one table include/hbtrace_env.def, and how a flag is read.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *const hbt_env_names[HBT_ENV_COUNT] = {
#define HBT_ENV(name, description) [HBT_ENV_##name] = #name,
#include "hbtrace_env.def"
#undef HBT_ENV
};

const char *hbt_getenv(enum hbt_env e)
{
    return getenv(hbt_env_names[e]);
}

/* Set to anything but "" or "0". */
int hbt_env_flag(enum hbt_env e)
{
    const char *v = hbt_getenv(e);
    return v && *v && strcmp(v, "0") != 0;
}
