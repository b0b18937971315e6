/* range.c — NVTX ranges (see range.h); no-ops without CUDA. */
#include "config.h"

#include "prof/range.h"

#if HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <string.h>

/* ARGB, the timeline's palette */
static uint32_t colour_of(const char *what)
{
    static const struct { const char *name; uint32_t argb; } table[] = {
        {"forward", 0xff4c9a2a}, {"backward", 0xff2a6fb0}, {"recompute", 0xffd4a017},
        {"send", 0xffe07b39},    {"recv", 0xff8e5bb5},     {"optimizer", 0xffc0392b},
        {"wait", 0xffa0a0a0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(what, table[i].name)) return table[i].argb;
    return 0xff707070;
}

void ppdl_range_push(const char *what, int mb)
{
    char msg[64];
    if (mb >= 0) snprintf(msg, sizeof msg, "%s mb %d", what, mb);
    else snprintf(msg, sizeof msg, "%s", what);
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = colour_of(what);
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    nvtxRangePushEx(&a);
}

void ppdl_range_pop(void) { nvtxRangePop(); }

#else

void ppdl_range_push(const char *what, int mb)
{
    (void)what;
    (void)mb;
}

void ppdl_range_pop(void) {}

#endif
