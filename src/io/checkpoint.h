/* checkpoint.h — checkpoints: a model.h5 with the optimizer state and the training
 * position, written by all ranks together into one file with parallel HDF5, and read
 * back under any number of ranks and any plan (layers are keyed by index, not rank).
 *
 * Layout (the contract, every field: docs/formats.md "checkpoint.h5"). A checkpoint IS a
 * model file, so `ppdl ckpt.h5` trains from it and h5py reads it:
 *   /, /layers/NNNNN/...     the model file of model_io.h, with the current weights
 *   /optimizer               AdamW's hyperparameters and step; m/NNNNN/<param> and
 *                            v/NNNNN/<param>, its moments, shaped as the parameters
 *   /train                   the position (step, data_position), the run's settings,
 *                            ppdl_checkpoint_version (PPDL_CKPT_VERSION) and
 *                            complete = 1, written after all the data
 *     checksums              uint64 [L, 3]: Fletcher-64 of layer l's parameters, m and v
 *   tied embeddings          stored once: the head's lm_head.weight, m and v are hard
 *                            links to layer 0's wte, written by layer 0's owner (the
 *                            head's checksums read them through the links)
 *
 * Writing (ppdl_ckpt_write, collective): every rank creates every group, dataset and
 * attribute with the same arguments (parallel HDF5 requires metadata changes from all
 * ranks), then writes the datasets of its own layers with independent I/O, into
 * PATH.tmp. The file is closed, synced, opened again and each rank reads its layers back
 * against the checksums; only then does rank 0 rename PATH.tmp over PATH. A run killed
 * at any moment leaves the previous PATH as it was.
 */
#ifndef PPDL_CHECKPOINT_H
#define PPDL_CHECKPOINT_H

#include <mpi.h>
#include <stddef.h>

#include "nn/model.h"

#define PPDL_CKPT_VERSION 1

/* the training state besides the arrays */
typedef struct ppdl_ckpt_info {
    long long step, data_position, adam_t;
    long long seed, batch_size, micro_batches, ranks;
    double lr, beta1, beta2, eps, weight_decay;
    char schedule[16];
    /* the learning-rate schedule and clipping (docs/training.md):
     * /train attributes lr_schedule, warmup, min_lr, decay_steps, decay_fraction,
     * clip_grad_norm; older checkpoints have none: read as constant and zeros */
    char lr_schedule[16];
    long long warmup, decay_steps;
    double min_lr, decay_fraction, clip_grad_norm;
    /* the data order: /train attribute shuffle, the --shuffle seed or -1 (in order);
     * older checkpoints have none: read as -1 */
    long long shuffle;
    /* --precision: /train attribute precision, "fp32" or "bf16" (the arrays are fp32
     * either way); older checkpoints have none: read as "fp32" */
    char precision[8];
    char *plan_json;           /* write: the caller's; read: malloc'd (ppdl_ckpt_info_free) */
} ppdl_ckpt_info;

/* what one write cost; seconds are the slowest rank's */
typedef struct ppdl_ckpt_stats {
    double bytes;              /* size of the file */
    double write_s;            /* create, metadata, data, close */
    double sync_s;             /* fsync of the file */
    double verify_s;           /* open again, read back, compare checksums */
    double total_s;            /* all of it, with the rename */
} ppdl_ckpt_stats;

typedef struct ppdl_ckpt ppdl_ckpt;

/* Prepare to write checkpoints of layers first..last on this rank (an empty range,
 * last = first - 1, on a rank whose layers another rank writes: a stage's replicas
 * after the first hold the same weights as it); remembers the root
 * and layer attributes of model_path (the model file the run started from, already
 * validated as m) so every checkpoint carries them. Not collective. NULL on error. */
ppdl_ckpt *ppdl_ckpt_create(const char *model_path, const ppdl_model *m, int first, int last,
                            char *err, size_t errlen);
/* The same for a rank holding several stages (interleaved, zb-v): n ascending, disjoint
 * ranges first[i]..last[i] (1 <= n <= PPDL_CKPT_MAX_RANGES), whose arrays the writes
 * take back to back in layer order. Every rank of the job must have the same n (the
 * check after a write reads each range collectively). A rank writing nothing (a
 * replica after the first) gives empty ranges, first[i] = last[i] + 1. */
#define PPDL_CKPT_MAX_RANGES 8
ppdl_ckpt *ppdl_ckpt_create_ranges(const char *model_path, const ppdl_model *m, int n, const int *first,
                                   const int *last, char *err, size_t errlen);
void ppdl_ckpt_destroy(ppdl_ckpt *c);

/* Write a checkpoint to path (atomically, see above). params, adam_m, adam_v: host
 * arrays of this rank's layers, back to back in layer and table order (the stage
 * arena's held layout, nn/model.h). Collective on comm; every layer must be on exactly one rank.
 * Returns 0; -1 with a message when this rank failed; -2 when another rank failed
 * (its message says why). On failure path is untouched and PATH.tmp removed.
 * Non-finite weights or moments are refused (the run diverged): path is kept. */
int ppdl_ckpt_write(ppdl_ckpt *c, const char *path, MPI_Comm comm, const float *params,
                    const float *adam_m, const float *adam_v, const ppdl_ckpt_info *info,
                    ppdl_ckpt_stats *stats, char *err, size_t errlen);

/* Check that path is a complete checkpoint of model m (the same family and
 * hyperparameters; the message names the first difference) in a format this ppdl
 * reads, and fill info. Not collective (serial HDF5, read-only). */
int ppdl_ckpt_read_info(const char *path, const ppdl_model *m, ppdl_ckpt_info *info,
                        char *err, size_t errlen);
void ppdl_ckpt_info_free(ppdl_ckpt_info *info);

/* Read layers first..last of path into params, adam_m, adam_v (host, held layout)
 * and check them against the checksums. Collective on comm (parallel HDF5 open);
 * each rank reads only its own layers. seconds: this rank's read time (may be NULL).
 * Returns 0, or -1 with a message on this rank (other ranks may return 0). */
int ppdl_ckpt_read_layers(const char *path, MPI_Comm comm, const ppdl_model *m, int first, int last,
                          float *params, float *adam_m, float *adam_v, double *seconds,
                          char *err, size_t errlen);

/* Can a checkpoint be written at path (its folder exists and is writable)? Checked
 * before training starts, not hours later. Not collective. */
int ppdl_ckpt_check_path(const char *path, char *err, size_t errlen);

/* Fletcher-64 of n floats' bit patterns continued from *state (start at {0, 0});
 * returns the number of non-finite values seen. ppdl_ckpt_fletcher_value gives the
 * checksum (b << 32 | a). For tests and tools. */
typedef struct ppdl_fletcher { unsigned long long a, b; } ppdl_fletcher;
size_t ppdl_ckpt_fletcher(ppdl_fletcher *state, const float *x, size_t n);
unsigned long long ppdl_ckpt_fletcher_value(const ppdl_fletcher *state);

#endif
