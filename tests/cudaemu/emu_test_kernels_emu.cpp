/* emu_test_kernels_emu.cpp — compiles emu_test_kernels.cu with g++ for the CUDA emulator (meson
 * cannot hand a .cu file to the C++ compiler). Nothing else belongs here. */
#include "emu_test_kernels.cu"
