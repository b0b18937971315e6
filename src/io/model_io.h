/* model_io.h — model.h5, the file every ppdl program reads and writes.
 *
 * Layout (contract: docs/formats.md "model.h5"):
 *   /                      attributes ppdl_format="ppdl-model", ppdl_version=1 (int),
 *                          family ("gpt"|"mlp"|"cnn") and the family's hyperparameters
 *                          (model.h: ints as int32, ln_eps as float64, activation as a string)
 *   /layers/00000 ...      one group per layer in chain order, attribute kind (string);
 *                          linear: in_features, out_features (int32), activation (string)
 *                          conv: in_channels, out_channels, kernel_size, stride, padding
 *                                (int32), activation (string)
 *                          maxpool: kernel, stride (int32)
 *     <param name>         float32 dataset per parameter, PyTorch name and shape
 *   tied embeddings        gpt root attribute tie_embeddings (int32 0/1; absent: 0, the
 *                          files from before it). 1: /layers/<L-1>/lm_head.weight is an
 *                          HDF5 hard link to /layers/00000/wte, one dataset that h5py
 *                          sees under both names (f[a] == f[b]); a file claiming 1 with
 *                          two datasets is refused
 *
 * Readers validate everything a hand-made file could get wrong and report the file and
 * the field: missing/extra attributes, wrong types, shapes, layer counts, non-finite
 * weights. They never crash on a bad file.
 */
#ifndef PPDL_MODEL_IO_H
#define PPDL_MODEL_IO_H

#include <stddef.h>

#include "nn/model.h"

#define PPDL_FORMAT_VERSION 1

/* Read root attributes and the layer table of `path`, build m's chain and check every
 * /layers group against it (kinds, attributes, parameter datasets: present, float32,
 * right shape). */
int ppdl_model_load_desc(const char *path, ppdl_model *m, char *err, size_t errlen);

/* Read the parameters of layers first..last (inclusive) into host, back to back in
 * layer order and each layer's table order (the held layout, nn/model.h: a tied
 * lm_head.weight is read, through its link, only where the range lacks layer 0). Fails
 * on a non-finite value, naming the layer and dataset. */
int ppdl_model_load_params(const char *path, const ppdl_model *m, int first, int last,
                           float *host, char *err, size_t errlen);

/* Write a complete model file: all layers' parameters back to back in host (the held
 * layout of layers 0..L-1: a tied weight once, as wte).
 * Written to "path.tmp" first and renamed over path only when complete, so an
 * existing file is never left half-written. */
int ppdl_model_save(const char *path, const ppdl_model *m, const float *host, char *err, size_t errlen);

#endif
