/* cluster.h — the cluster as ppdl shows it: the probe's (or --cluster's) table. The type,
 * its reader and writer and the node grouping are plan/cluster_model.h's, shared with
 * ppdl-plan. */
#ifndef PPDL_CLUSTER_H
#define PPDL_CLUSTER_H

#include <stdio.h>

#include "plan/cluster_model.h"

/* A readable table: bandwidth GB/s and latency us (full matrices up to 16 ranks,
 * a summary within / between nodes beyond), the nodes, memory and speed per rank. */
void ppdl_cluster_print(const ppdl_cluster_model *cl, FILE *f);

#endif
