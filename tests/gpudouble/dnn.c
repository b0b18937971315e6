/* dnn.c — the GPU double's cuDNN: handles, 4-d NCHW float descriptors, algorithm
 * rankings and the three convolutions ppdl calls.
 *
 * The rankings put first what a caller must pass over (tensor-op math, non-determinism,
 * work spaces over 256 MiB, unsupported entries). A convolution checks its descriptors
 * against each other, the algorithm against the descriptor's math type, the work space
 * against the algorithm's need and every pointer against device memory, then queues a
 * direct convolution accumulated in double (PyTorch's Conv2d: cross-correlation). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn.h"
#include "gpud.h"

#define HANDLE_LIVE 0x644e4e48u
#define TENSOR_LIVE 0x644e4e54u
#define FILTER_LIVE 0x644e4e46u
#define CONV_LIVE 0x644e4e43u
#define DNN_DEAD 0x64656164u /* any destroyed object: kept, so that reuse is detected */

#define HANDLE_BYTES ((size_t)8 << 20)   /* cuDNN's own device memory per handle */
#define HUGE_WS ((size_t)320 << 20)      /* over ppdl's 256 MiB cap */

/* the head of every object: destroyed ones stay on a list, reachable for leak checkers */
typedef struct dnn_obj {
    unsigned magic;
    struct dnn_obj *next_dead;
} dnn_obj;

static dnn_obj *dead_objects;

static void bury(dnn_obj *o)
{
    o->magic = DNN_DEAD;
    o->next_dead = dead_objects;
    dead_objects = o;
}

struct cudnnContext {
    dnn_obj obj;
    cudaStream_t stream;
    void *mem;
};

struct cudnnTensorStruct {
    dnn_obj obj;
    int set; /* cudnnSetTensor4dDescriptor succeeded */
    int n, c, h, w;
};

struct cudnnFilterStruct {
    dnn_obj obj;
    int set;
    int k, c, r, s;
};

struct cudnnConvolutionStruct {
    dnn_obj obj;
    int set;
    int pad_h, pad_w, u, v, dil_h, dil_w;
    cudnnConvolutionMode_t mode;
    cudnnMathType_t math;
};

static int handle_ok(cudnnHandle_t h) { return h && h->obj.magic == HANDLE_LIVE; }
static int tensor_ok(cudnnTensorDescriptor_t d) { return d && d->obj.magic == TENSOR_LIVE && d->set; }
static int filter_ok(cudnnFilterDescriptor_t d) { return d && d->obj.magic == FILTER_LIVE && d->set; }
static int conv_ok(cudnnConvolutionDescriptor_t d) { return d && d->obj.magic == CONV_LIVE && d->set; }

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH: return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case CUDNN_STATUS_DEPRECATED: return "CUDNN_STATUS_DEPRECATED";
    case CUDNN_STATUS_LICENSE_ERROR: return "CUDNN_STATUS_LICENSE_ERROR";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_INVALID_VALUE: return "CUDNN_STATUS_INVALID_VALUE";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH: return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
        return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    }
    return "CUDNN_UNKNOWN_STATUS_FOUND";
}

/* ------------------------------------------------------------------ handles */

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    gpud_trace("cudnnCreate");
    if (!handle) return CUDNN_STATUS_BAD_PARAM;
    struct cudnnContext *h = calloc(1, sizeof *h);
    if (!h) return CUDNN_STATUS_ALLOC_FAILED;
    h->mem = gpud_lib_alloc(HANDLE_BYTES, "cuDNN handle memory");
    if (!h->mem) {
        free(h);
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    h->obj.magic = HANDLE_LIVE;
    gpud_handle_open("cuDNN handle");
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    gpud_trace("cudnnDestroy %p", (void *)handle);
    if (!handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    gpud_lib_free(handle->mem);
    handle->mem = NULL;
    bury(&handle->obj);
    gpud_handle_close("cuDNN handle");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    gpud_trace("cudnnSetStream %p %p", (void *)handle, (void *)streamId);
    if (!handle_ok(handle) || !gpud_stream_live(streamId)) return CUDNN_STATUS_BAD_PARAM;
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ descriptors */

/* a new descriptor of `bytes`, its head marked `magic`, counted as open */
static cudnnStatus_t create_desc(void **out, size_t bytes, unsigned magic, const char *who)
{
    gpud_trace("%s", who);
    if (!out) return CUDNN_STATUS_BAD_PARAM;
    dnn_obj *o = calloc(1, bytes);
    if (!o) return CUDNN_STATUS_ALLOC_FAILED;
    o->magic = magic;
    gpud_handle_open("cuDNN descriptor");
    *out = o;
    return CUDNN_STATUS_SUCCESS;
}

/* NULL is accepted and ignored, as by cuDNN; a destroyed one is BAD_PARAM */
static cudnnStatus_t destroy_desc(dnn_obj *o, unsigned magic, const char *who)
{
    gpud_trace("%s %p", who, (void *)o);
    if (!o) return CUDNN_STATUS_SUCCESS;
    if (o->magic != magic) return CUDNN_STATUS_BAD_PARAM;
    bury(o);
    gpud_handle_close("cuDNN descriptor");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc)
{
    void *p = NULL;
    cudnnStatus_t s = create_desc(&p, sizeof **tensorDesc, TENSOR_LIVE, "cudnnCreateTensorDescriptor");
    if (s == CUDNN_STATUS_SUCCESS) *tensorDesc = p;
    return s;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc)
{
    return destroy_desc(tensorDesc ? &tensorDesc->obj : NULL, TENSOR_LIVE, "cudnnDestroyTensorDescriptor");
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc)
{
    void *p = NULL;
    cudnnStatus_t s = create_desc(&p, sizeof **filterDesc, FILTER_LIVE, "cudnnCreateFilterDescriptor");
    if (s == CUDNN_STATUS_SUCCESS) *filterDesc = p;
    return s;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc)
{
    return destroy_desc(filterDesc ? &filterDesc->obj : NULL, FILTER_LIVE, "cudnnDestroyFilterDescriptor");
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc)
{
    void *p = NULL;
    cudnnStatus_t s = create_desc(&p, sizeof **convDesc, CONV_LIVE, "cudnnCreateConvolutionDescriptor");
    if (s == CUDNN_STATUS_SUCCESS) {
        *convDesc = p;
        (*convDesc)->math = CUDNN_DEFAULT_MATH;
    }
    return s;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc)
{
    return destroy_desc(convDesc ? &convDesc->obj : NULL, CONV_LIVE, "cudnnDestroyConvolutionDescriptor");
}

/* the layout and type of a 4-d tensor or filter: NCHW float only */
static cudnnStatus_t layout_ok(cudnnTensorFormat_t format, cudnnDataType_t type)
{
    if ((int)format < CUDNN_TENSOR_NCHW || (int)format > CUDNN_TENSOR_NCHW_VECT_C) return CUDNN_STATUS_BAD_PARAM;
    if ((int)type < CUDNN_DATA_FLOAT || (int)type > CUDNN_DATA_FAST_FLOAT_FOR_FP8) return CUDNN_STATUS_BAD_PARAM;
    if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

/* positive dimensions, at most INT_MAX elements in all */
static cudnnStatus_t dims_ok(int a, int b, int c, int d)
{
    if (a <= 0 || b <= 0 || c <= 0 || d <= 0) return CUDNN_STATUS_BAD_PARAM;
    if ((long long)a * b * c * d > INT_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w)
{
    gpud_trace("cudnnSetTensor4dDescriptor %p %d %d %dx%dx%dx%d", (void *)tensorDesc, (int)format, (int)dataType, n,
               c, h, w);
    if (!tensorDesc || tensorDesc->obj.magic != TENSOR_LIVE) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t s = layout_ok(format, dataType);
    if (s == CUDNN_STATUS_SUCCESS) s = dims_ok(n, c, h, w);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    tensorDesc->n = n;
    tensorDesc->c = c;
    tensorDesc->h = h;
    tensorDesc->w = w;
    tensorDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    gpud_trace("cudnnSetFilter4dDescriptor %p %d %d %dx%dx%dx%d", (void *)filterDesc, (int)dataType, (int)format, k,
               c, h, w);
    if (!filterDesc || filterDesc->obj.magic != FILTER_LIVE) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t s = layout_ok(format, dataType);
    if (s == CUDNN_STATUS_SUCCESS) s = dims_ok(k, c, h, w);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    filterDesc->k = k;
    filterDesc->c = c;
    filterDesc->r = h;
    filterDesc->s = w;
    filterDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u,
                                              int v, int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType)
{
    gpud_trace("cudnnSetConvolution2dDescriptor %p pad %d,%d stride %d,%d dilation %d,%d mode %d type %d",
               (void *)convDesc, pad_h, pad_w, u, v, dilation_h, dilation_w, (int)mode, (int)computeType);
    if (!convDesc || convDesc->obj.magic != CONV_LIVE) return CUDNN_STATUS_BAD_PARAM;
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0) return CUDNN_STATUS_BAD_PARAM;
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_BAD_PARAM;
    if ((int)computeType < CUDNN_DATA_FLOAT || (int)computeType > CUDNN_DATA_FAST_FLOAT_FOR_FP8)
        return CUDNN_STATUS_BAD_PARAM;
    if (computeType != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
    convDesc->pad_h = pad_h;
    convDesc->pad_w = pad_w;
    convDesc->u = u;
    convDesc->v = v;
    convDesc->dil_h = dilation_h;
    convDesc->dil_w = dilation_w;
    convDesc->mode = mode;
    convDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType)
{
    gpud_trace("cudnnSetConvolutionMathType %p %d", (void *)convDesc, (int)mathType);
    if (!convDesc || convDesc->obj.magic != CONV_LIVE) return CUDNN_STATUS_BAD_PARAM;
    if ((int)mathType < CUDNN_DEFAULT_MATH || (int)mathType > CUDNN_FMA_MATH) return CUDNN_STATUS_BAD_PARAM;
    convDesc->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ shapes */

/* one convolution's sizes: x N,C,H,W; w K,C,R,S; y N,K,P,Q */
typedef struct conv_shape {
    int N, C, H, W, K, R, S, P, Q;
    int pad_h, pad_w, u, v, dil_h, dil_w, flip;
} conv_shape;

/* the shape the four descriptors describe together, or BAD_PARAM where they disagree */
static cudnnStatus_t shape_of(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t cd,
                              cudnnTensorDescriptor_t y, conv_shape *sh)
{
    if (!tensor_ok(x) || !filter_ok(w) || !conv_ok(cd) || !tensor_ok(y)) return CUDNN_STATUS_BAD_PARAM;
    if (w->c != x->c) return CUDNN_STATUS_BAD_PARAM;
    long long eh = (long long)cd->dil_h * (w->r - 1) + 1, ew = (long long)cd->dil_w * (w->s - 1) + 1;
    long long span_h = x->h + 2LL * cd->pad_h, span_w = x->w + 2LL * cd->pad_w;
    if (span_h < eh || span_w < ew) return CUDNN_STATUS_BAD_PARAM; /* no output position */
    int P = (int)((span_h - eh) / cd->u + 1), Q = (int)((span_w - ew) / cd->v + 1);
    if (y->n != x->n || y->c != w->k || y->h != P || y->w != Q) return CUDNN_STATUS_BAD_PARAM;
    *sh = (conv_shape){.N = x->n, .C = x->c, .H = x->h, .W = x->w, .K = w->k, .R = w->r, .S = w->s, .P = P,
                       .Q = Q, .pad_h = cd->pad_h, .pad_w = cd->pad_w, .u = cd->u, .v = cd->v,
                       .dil_h = cd->dil_h, .dil_w = cd->dil_w, .flip = cd->mode == CUDNN_CONVOLUTION};
    return CUDNN_STATUS_SUCCESS;
}

static size_t x_elems(const conv_shape *s) { return (size_t)s->N * s->C * s->H * s->W; }
static size_t w_elems(const conv_shape *s) { return (size_t)s->K * s->C * s->R * s->S; }
static size_t y_elems(const conv_shape *s) { return (size_t)s->N * s->K * s->P * s->Q; }

/* ------------------------------------------------------------------ algorithms */

/* The double's algorithms per direction: an entry of the ranking, in rank order.
 * `tensor_op` algorithms refuse a descriptor with CUDNN_FMA_MATH; `status` other than
 * SUCCESS: the algorithm cannot run this convolution. Work spaces scale with the
 * shape: small (the filter's size and a page), huge (over 256 MiB) or none. */
enum ws_kind { WS_NONE, WS_SMALL, WS_HUGE };

typedef struct algo_entry {
    int algo;
    cudnnStatus_t status;
    float time;
    enum ws_kind ws;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} algo_entry;

#define OK CUDNN_STATUS_SUCCESS
#define NS CUDNN_STATUS_NOT_SUPPORTED
#define DET CUDNN_DETERMINISTIC
#define NONDET CUDNN_NON_DETERMINISTIC

static const algo_entry fwd_algos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, OK, 0.05f, WS_SMALL, DET, CUDNN_TENSOR_OP_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, OK, 0.07f, WS_HUGE, DET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, NS, -1.0f, WS_NONE, DET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, OK, 0.1f, WS_SMALL, DET, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, OK, 0.2f, WS_NONE, DET, CUDNN_DEFAULT_MATH},
};
static const algo_entry data_algos[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, OK, 0.04f, WS_NONE, NONDET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, OK, 0.05f, WS_SMALL, DET, CUDNN_TENSOR_OP_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, OK, 0.07f, WS_HUGE, DET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, NS, -1.0f, WS_NONE, DET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, OK, 0.1f, WS_SMALL, DET, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, OK, 0.3f, WS_SMALL, DET, CUDNN_DEFAULT_MATH},
};
static const algo_entry filter_algos[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, OK, 0.04f, WS_NONE, NONDET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, OK, 0.05f, WS_SMALL, DET, CUDNN_TENSOR_OP_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, OK, 0.07f, WS_HUGE, DET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, OK, 0.08f, WS_SMALL, NONDET, CUDNN_FMA_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, NS, -1.0f, WS_NONE, DET, CUDNN_DEFAULT_MATH},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, OK, 0.1f, WS_SMALL, DET, CUDNN_FMA_MATH},
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static size_t ws_bytes(enum ws_kind k, const conv_shape *s)
{
    switch (k) {
    case WS_NONE: return 0;
    case WS_SMALL: return 4096 + w_elems(s) * sizeof(float);
    case WS_HUGE: return HUGE_WS + y_elems(s) * sizeof(float);
    }
    return 0;
}

/* the entry of `algo` in a table, NULL when the double has none (not supported) */
static const algo_entry *find_algo(const algo_entry *t, int n, int algo)
{
    for (int i = 0; i < n; i++)
        if (t[i].algo == algo) return &t[i];
    return NULL;
}

/* the work space `algo` needs: BAD_PARAM outside the enum, NOT_SUPPORTED for one the
 * double does not run */
static cudnnStatus_t algo_need(const algo_entry *t, int n, int count, int algo, const conv_shape *s, size_t *bytes,
                               const algo_entry **entry)
{
    if (algo < 0 || algo >= count) return CUDNN_STATUS_BAD_PARAM;
    const algo_entry *e = find_algo(t, n, algo);
    if (!e || e->status != CUDNN_STATUS_SUCCESS) return CUDNN_STATUS_NOT_SUPPORTED;
    *bytes = ws_bytes(e->ws, s);
    if (entry) *entry = e;
    return CUDNN_STATUS_SUCCESS;
}

/* fill a perf array (any of the three: same layout but for the algo's enum type) */
#define FILL_RANKING(perf, table, requested, returned, shape)                                                       \
    do {                                                                                                             \
        int n_ = N_OF(table) < (requested) ? N_OF(table) : (requested);                                              \
        for (int i_ = 0; i_ < n_; i_++) {                                                                            \
            memset(&(perf)[i_], 0, sizeof (perf)[i_]);                                                               \
            (perf)[i_].algo = (table)[i_].algo;                                                                      \
            (perf)[i_].status = (table)[i_].status;                                                                  \
            (perf)[i_].time = (table)[i_].time;                                                                      \
            (perf)[i_].memory = (table)[i_].status == CUDNN_STATUS_SUCCESS ? ws_bytes((table)[i_].ws, (shape)) : 0;  \
            (perf)[i_].determinism = (table)[i_].det;                                                                \
            (perf)[i_].mathType = (table)[i_].math;                                                                  \
        }                                                                                                            \
        *(returned) = n_;                                                                                            \
    } while (0)

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
                                                     const cudnnFilterDescriptor_t filterDesc,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t destDesc,
                                                     const int requestedAlgoCount, int *returnedAlgoCount,
                                                     cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    gpud_trace("cudnnGetConvolutionForwardAlgorithm_v7 %p", (void *)handle);
    conv_shape s;
    if (!handle_ok(handle) || !returnedAlgoCount || !perfResults || requestedAlgoCount <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(srcDesc, filterDesc, convDesc, destDesc, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    FILL_RANKING(perfResults, fwd_algos, requestedAlgoCount, returnedAlgoCount, &s);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle,
                                                          const cudnnFilterDescriptor_t filterDesc,
                                                          const cudnnTensorDescriptor_t diffDesc,
                                                          const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t gradDesc,
                                                          const int requestedAlgoCount, int *returnedAlgoCount,
                                                          cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    gpud_trace("cudnnGetConvolutionBackwardDataAlgorithm_v7 %p", (void *)handle);
    conv_shape s;
    if (!handle_ok(handle) || !returnedAlgoCount || !perfResults || requestedAlgoCount <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(gradDesc, filterDesc, convDesc, diffDesc, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    FILL_RANKING(perfResults, data_algos, requestedAlgoCount, returnedAlgoCount, &s);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle,
                                                            const cudnnTensorDescriptor_t srcDesc,
                                                            const cudnnTensorDescriptor_t diffDesc,
                                                            const cudnnConvolutionDescriptor_t convDesc,
                                                            const cudnnFilterDescriptor_t gradDesc,
                                                            const int requestedAlgoCount, int *returnedAlgoCount,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    gpud_trace("cudnnGetConvolutionBackwardFilterAlgorithm_v7 %p", (void *)handle);
    conv_shape s;
    if (!handle_ok(handle) || !returnedAlgoCount || !perfResults || requestedAlgoCount <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(srcDesc, gradDesc, convDesc, diffDesc, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    FILL_RANKING(perfResults, filter_algos, requestedAlgoCount, returnedAlgoCount, &s);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes)
{
    conv_shape s;
    if (!handle_ok(handle) || !sizeInBytes) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(xDesc, wDesc, convDesc, yDesc, &s);
    if (st == CUDNN_STATUS_SUCCESS)
        st = algo_need(fwd_algos, N_OF(fwd_algos), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, (int)algo, &s, sizeInBytes, NULL);
    return st;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *sizeInBytes)
{
    conv_shape s;
    if (!handle_ok(handle) || !sizeInBytes) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(dxDesc, wDesc, convDesc, dyDesc, &s);
    if (st == CUDNN_STATUS_SUCCESS)
        st = algo_need(data_algos, N_OF(data_algos), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, (int)algo, &s,
                       sizeInBytes, NULL);
    return st;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle,
                                                             const cudnnTensorDescriptor_t xDesc,
                                                             const cudnnTensorDescriptor_t dyDesc,
                                                             const cudnnConvolutionDescriptor_t convDesc,
                                                             const cudnnFilterDescriptor_t gradDesc,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t *sizeInBytes)
{
    conv_shape s;
    if (!handle_ok(handle) || !sizeInBytes) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(xDesc, gradDesc, convDesc, dyDesc, &s);
    if (st == CUDNN_STATUS_SUCCESS)
        st = algo_need(filter_algos, N_OF(filter_algos), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, (int)algo, &s,
                       sizeInBytes, NULL);
    return st;
}

/* ------------------------------------------------------------------ convolutions */

enum conv_dir { FWD, BWD_DATA, BWD_FILTER };

/* one queued convolution: `in0`, `in1` are x, w (FWD), dy, w (BWD_DATA), x, dy (BWD_FILTER) */
typedef struct conv_work {
    enum conv_dir dir;
    conv_shape s;
    float alpha, beta;
    const float *in0, *in1;
    float *out;
    void *ws;
    size_t ws_need;
} conv_work;

static size_t xi(const conv_shape *s, int n, int c, int h, int w)
{
    return (((size_t)n * s->C + c) * s->H + h) * s->W + w;
}
static size_t wi(const conv_shape *s, int k, int c, int r, int q)
{
    if (s->flip) { /* CUDNN_CONVOLUTION: the kernel turned by 180 degrees */
        r = s->R - 1 - r;
        q = s->S - 1 - q;
    }
    return (((size_t)k * s->C + c) * s->R + r) * s->S + q;
}
static size_t yi(const conv_shape *s, int n, int k, int p, int q)
{
    return (((size_t)n * s->K + k) * s->P + p) * s->Q + q;
}

/* runs BODY for every pairing of an output position (n, k, p, q) with an input
 * position (n, c, h, w) inside x (not in the padding) through filter tap (r, t) */
#define FOR_EACH_TAP(s, BODY)                                                                                        \
    for (int n = 0; n < (s)->N; n++)                                                                                 \
        for (int k = 0; k < (s)->K; k++)                                                                             \
            for (int p = 0; p < (s)->P; p++)                                                                         \
                for (int q = 0; q < (s)->Q; q++)                                                                     \
                    for (int c = 0; c < (s)->C; c++)                                                                 \
                        for (int r = 0; r < (s)->R; r++) {                                                           \
                            int h = p * (s)->u - (s)->pad_h + r * (s)->dil_h;                                        \
                            if (h < 0 || h >= (s)->H) continue;                                                      \
                            for (int t = 0; t < (s)->S; t++) {                                                       \
                                int w = q * (s)->v - (s)->pad_w + t * (s)->dil_w;                                    \
                                if (w < 0 || w >= (s)->W) continue;                                                  \
                                BODY;                                                                                \
                            }                                                                                        \
                        }

/* runs on the stream */
static void conv_run(void *ctx)
{
    const conv_work *cw = ctx;
    const conv_shape *s = &cw->s;
    /* the work space holds nothing between calls: scribble over it */
    if (cw->ws_need) memset(cw->ws, 0xa5, cw->ws_need);
    size_t n_out = cw->dir == FWD ? y_elems(s) : cw->dir == BWD_DATA ? x_elems(s) : w_elems(s);
    double *acc = calloc(n_out ? n_out : 1, sizeof *acc);
    if (!acc) gpud_fatal("cuDNN convolution: out of host memory for %zu accumulators", n_out);
    switch (cw->dir) {
    case FWD: /* in0 x, in1 w */
        FOR_EACH_TAP(s, acc[yi(s, n, k, p, q)] += (double)cw->in0[xi(s, n, c, h, w)] * cw->in1[wi(s, k, c, r, t)]);
        break;
    case BWD_DATA: /* in0 dy, in1 w */
        FOR_EACH_TAP(s, acc[xi(s, n, c, h, w)] += (double)cw->in0[yi(s, n, k, p, q)] * cw->in1[wi(s, k, c, r, t)]);
        break;
    case BWD_FILTER: /* in0 x, in1 dy; a flipped kernel's gradient lands flipped */
        FOR_EACH_TAP(s, acc[wi(s, k, c, r, t)] += (double)cw->in0[xi(s, n, c, h, w)] * cw->in1[yi(s, n, k, p, q)]);
        break;
    }
    for (size_t i = 0; i < n_out; i++) {
        double v = (double)cw->alpha * acc[i];
        if (cw->beta != 0.0f) v += (double)cw->beta * cw->out[i]; /* beta == 0: out is not read */
        cw->out[i] = (float)v;
    }
    free(acc);
}

/* fatal when the output range overlaps an input's: cuDNN's convolutions are not in place */
static void require_apart(const void *out, size_t out_bytes, const void *in, size_t in_bytes, const char *who,
                          const char *out_name, const char *in_name)
{
    const char *o = out, *i = in;
    if (o < i + in_bytes && i < o + out_bytes)
        gpud_fatal("%s: %s [%p, +%zu) overlaps %s [%p, +%zu): cuDNN convolutions are not in place", who, out_name,
                   out, out_bytes, in_name, in, in_bytes);
}

/* the checks and queueing the three convolutions share; `in0`, `in1`, `out` are named
 * `n0`, `n1`, `no` in messages and hold e0, e1, eo floats */
static cudnnStatus_t convolve(const char *who, cudnnHandle_t h, enum conv_dir dir, const conv_shape *s,
                              const algo_entry *table, int n_table, int count, int algo,
                              cudnnConvolutionDescriptor_t cd, const void *alpha, const void *beta, const void *in0,
                              size_t e0, const char *n0, const void *in1, size_t e1, const char *n1, void *out,
                              size_t eo, const char *no, void *ws, size_t ws_size)
{
    if (!alpha || !beta || !in0 || !in1 || !out) return CUDNN_STATUS_BAD_PARAM;
    size_t need = 0;
    const algo_entry *e = NULL;
    cudnnStatus_t st = algo_need(table, n_table, count, algo, s, &need, &e);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    /* a tensor-op algorithm does not run under FMA math */
    if (e->math == CUDNN_TENSOR_OP_MATH && cd->math == CUDNN_FMA_MATH) return CUDNN_STATUS_NOT_SUPPORTED;
    if (ws_size < need || (need > 0 && !ws)) return CUDNN_STATUS_BAD_PARAM;
    if (ws_size > 0 && ws) gpud_require_device(ws, ws_size, who, "workSpace");
    gpud_require_device(in0, e0 * sizeof(float), who, n0);
    gpud_require_device(in1, e1 * sizeof(float), who, n1);
    gpud_require_device(out, eo * sizeof(float), who, no);
    require_apart(out, eo * sizeof(float), in0, e0 * sizeof(float), who, no, n0);
    require_apart(out, eo * sizeof(float), in1, e1 * sizeof(float), who, no, n1);
    if (need > 0) {
        require_apart(ws, need, in0, e0 * sizeof(float), who, "workSpace", n0);
        require_apart(ws, need, in1, e1 * sizeof(float), who, "workSpace", n1);
        require_apart(ws, need, out, eo * sizeof(float), who, "workSpace", no);
    }

    conv_work *cw = malloc(sizeof *cw);
    if (!cw) return CUDNN_STATUS_ALLOC_FAILED;
    *cw = (conv_work){.dir = dir, .s = *s, .alpha = *(const float *)alpha, .beta = *(const float *)beta,
                      .in0 = in0, .in1 = in1, .out = out, .ws = ws, .ws_need = need};
    /* the double owns cw from here, whether or not it accepts the work */
    if (gpud_enqueue(h->stream, who, conv_run, cw) != cudaSuccess) return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y)
{
    const char *who = "cudnnConvolutionForward";
    gpud_trace("%s %p algo %d work space %zu", who, (void *)handle, (int)algo, workSpaceSizeInBytes);
    conv_shape s;
    if (!handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(xDesc, wDesc, convDesc, yDesc, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return convolve(who, handle, FWD, &s, fwd_algos, N_OF(fwd_algos), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, (int)algo,
                    convDesc, alpha, beta, x, x_elems(&s), "x", w, w_elems(&s), "w", y, y_elems(&s), "y",
                    workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    const char *who = "cudnnConvolutionBackwardData";
    gpud_trace("%s %p algo %d work space %zu", who, (void *)handle, (int)algo, workSpaceSizeInBytes);
    conv_shape s;
    if (!handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(dxDesc, wDesc, convDesc, dyDesc, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return convolve(who, handle, BWD_DATA, &s, data_algos, N_OF(data_algos), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                    (int)algo, convDesc, alpha, beta, dy, y_elems(&s), "dy", w, w_elems(&s), "w", dx, x_elems(&s),
                    "dx", workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    const char *who = "cudnnConvolutionBackwardFilter";
    gpud_trace("%s %p algo %d work space %zu", who, (void *)handle, (int)algo, workSpaceSizeInBytes);
    conv_shape s;
    if (!handle_ok(handle)) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = shape_of(xDesc, dwDesc, convDesc, dyDesc, &s);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return convolve(who, handle, BWD_FILTER, &s, filter_algos, N_OF(filter_algos),
                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, (int)algo, convDesc, alpha, beta, x, x_elems(&s), "x",
                    dy, y_elems(&s), "dy", dw, w_elems(&s), "dw", workSpace, workSpaceSizeInBytes);
}
