/* slices.c — n elements cut into k contiguous slices by weight (slices.h) */
#include "config.h"

#include "core/slices.h"
#include "core/error.h"

#include <math.h>

void ppdl_slices(size_t n, int k, const double *weight, size_t align, size_t *bounds)
{
    PPDL_CHECK(k >= 1, "cannot cut %zu elements into %d slices", n, k);
    if (align == 0) align = 1;
    double total = 0;
    if (weight)
        for (int r = 0; r < k; r++) {
            PPDL_CHECK(isfinite(weight[r]) && weight[r] >= 0, "slice weight %d is %g: expected a finite number >= 0",
                       r, weight[r]);
            total += weight[r];
        }
    PPDL_CHECK(!weight || total > 0, "the %d slice weights sum to 0", k);
    bounds[0] = 0;
    double cum = 0;
    for (int r = 1; r < k; r++) {
        size_t b;
        if (weight) {
            cum += weight[r - 1];
            double x = floor((double)n * (cum / total));
            b = x >= (double)n ? n : (size_t)x;
        } else {
            /* n r / k without overflow: (n / k) r + (n % k) r / k */
            b = (n / (size_t)k) * (size_t)r + (n % (size_t)k) * (size_t)r / (size_t)k;
        }
        b -= b % align;
        bounds[r] = b < bounds[r - 1] ? bounds[r - 1] : b;
    }
    bounds[k] = n;
}
