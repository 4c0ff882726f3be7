#!/bin/sh
# The llama.cpp backend `make install` builds for when LLAMA_BACKEND is not given: an NVIDIA
# GPU with the CUDA toolkit (nvcc on PATH or in /usr/local/cuda) means cuda, macOS on Apple
# silicon means metal, anything else the CPU. The toolkit alone is not enough: build machines
# and CI images often carry nvcc without a GPU, and a CUDA build there is an hour on two cores
# for nothing; LLAMA_BACKEND=cuda builds it anyway. Vulkan is never guessed: LLAMA_BACKEND=vulkan.
has_nvcc() { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }
has_nvidia_gpu() { [ -e /dev/nvidia0 ] || ls /proc/driver/nvidia/gpus/* >/dev/null 2>&1; }
if has_nvcc && has_nvidia_gpu; then
  echo cuda
elif [ "$(uname -s)" = Darwin ] && [ "$(uname -m)" = arm64 ]; then
  echo metal
else
  echo cpu
fi
