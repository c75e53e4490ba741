/* device_opts.h — what a device is opened with, and the kinds that callers name without using an
 * op: which backend (device_kind), the activation functions of act_forward and act_backward
 * (act_kind), and device_opts, which device_open takes. The training job fills device_opts from
 * its config (device, cuda.tf32), which holds these kinds for its keys; tests and tools fill it
 * directly. Declarations only: nothing here opens a device or runs an op (device.h does). */
#ifndef DDP_DEVICE_OPTS_H
#define DDP_DEVICE_OPTS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A device's backend: DEVICE_CPU or DEVICE_CUDA (device.kind); DEVICE_AUTO only asks device_open
 * to choose. */
typedef enum { DEVICE_AUTO, DEVICE_CPU, DEVICE_CUDA } device_kind;

/* The activation functions of act_forward / act_backward: ReLU, GELU (erf) and GELU's tanh
 * approximation (PyTorch's approximate='tanh'). */
typedef enum { ACT_RELU, ACT_GELU, ACT_GELU_TANH } act_kind;

/* "relu", "gelu", "gelu_tanh" (the config's names); "unknown" for any other value. */
static inline const char *act_kind_name(act_kind a)
{
    switch (a) {
    case ACT_RELU: return "relu";
    case ACT_GELU: return "gelu";
    case ACT_GELU_TANH: return "gelu_tanh";
    }
    return "unknown";
}

typedef struct device_opts {
    device_kind kind; /* DEVICE_AUTO: CUDA when a GPU is usable, else the CPU (device_open logs why) */
    bool tf32;        /* allow TF32 tensor-core GEMMs on the CUDA backend (no effect on the CPU) */
} device_opts;

#ifdef __cplusplus
}
#endif

#endif
