/* test_cuda_mlp.c — the PyTorch reference MLP (fixture mlp-reference, tests/fixtures/README.md)
 * run through the CUDA device: forward/backward for ReLU and GELU (logits, loss, gradient norm,
 * every gradient) and the four 3-step optimizer trajectories (SGD+Nesterov+wd, plain SGD, AdamW,
 * AdamW with clipping), at the shapes the fixture's MANIFEST gives.
 *
 * Same checks and tolerances as the CPU tests (test_mlp.c, test_optim.c), so the CUDA backend is
 * held to an outside reference, not only to the CPU backend. In the emulated build the kernels
 * run under DDP_CUDA_EMU_ORDER. */
#include "tests/models/mlp_fixture.h"

int main(void)
{
    fx_check_forward_backward(DEVICE_CUDA, ACT_RELU, "relu");
    fx_check_forward_backward(DEVICE_CUDA, ACT_GELU, "gelu");
    fx_check_all_trajectories(DEVICE_CUDA);
    return check_done("test_cuda_mlp");
}
