#include "emu_test_kernels.cu"
