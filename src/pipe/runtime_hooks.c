/* runtime_hooks.c — the planted bugs of the runtime, read from the test hooks
 * (runtime_hooks.h). */
#include "pipe/runtime_hooks.h"
#include "core/test_hooks.h"

#include <stdio.h>
#include <string.h>

void ppdl_runtime_hooks_read(ppdl_runtime_hooks *h, int rank)
{
    const char *s = ppdl_test_hook("GRAD_SCALE");
    int r;
    float f;
    h->grad_scale = 1.0f;
    if (s && sscanf(s, "%d:%f", &r, &f) == 2 && r == rank) h->grad_scale = f;

    long k;
    s = ppdl_test_hook("FAIL_STEP");
    h->fail_step = -1;
    if (s && sscanf(s, "%d:%ld", &r, &k) == 2 && r == rank && k >= 1) h->fail_step = k - 1;

    s = ppdl_test_hook("BF16");
    h->bf16_stage_only = s && !strcmp(s, "stage-only");

    s = ppdl_test_hook("SHARD");
    h->shard_norm_one = s && !strcmp(s, "norm-one-shard");
    h->shard_no_gather = s && !strcmp(s, "no-gather");
    if (s && *s && !h->shard_norm_one && !h->shard_no_gather) ppdl_test_hook_bad("SHARD", s, "norm-one-shard or no-gather");
}
