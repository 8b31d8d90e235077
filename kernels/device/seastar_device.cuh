/** \file
 * The device helpers every generated CUDA translation unit includes. NVRTC has no standard
 * headers, so these files are self-contained; the build embeds them into the library and hands
 * them to NVRTC through its headers API (runtime/cuda/nvrtc_compiler.cpp).
 */
#pragma once

#include "seastar_types.cuh"
#include "seastar_math.cuh"
#include "seastar_half.cuh"
#include "seastar_group.cuh"
