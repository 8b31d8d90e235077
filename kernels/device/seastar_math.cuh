/** \file
 * sx::exp, sx::max, ...: the functions that the scalar expressions of core/ir/ops.def call as
 * std::f (the CUDA emitter writes sx::f), overloaded for float and double, so a float kernel
 * calls expf, not the double-precision exp.
 */
#pragma once

namespace sx {

#define SEASTAR_UNARY(name, f32, f64)                                 \
  __device__ __forceinline__ float name(float a) { return ::f32(a); } \
  __device__ __forceinline__ double name(double a) { return ::f64(a); }
SEASTAR_UNARY(exp, expf, exp)
SEASTAR_UNARY(log, logf, log)
SEASTAR_UNARY(sqrt, sqrtf, sqrt)
SEASTAR_UNARY(abs, fabsf, fabs)
SEASTAR_UNARY(tanh, tanhf, tanh)
SEASTAR_UNARY(log1p, log1pf, log1p)
SEASTAR_UNARY(expm1, expm1f, expm1)
#undef SEASTAR_UNARY

__device__ __forceinline__ float pow(float a, float b) { return ::powf(a, b); }
__device__ __forceinline__ double pow(double a, double b) { return ::pow(a, b); }

// like std::max / std::min: the first argument when neither is greater (NaN-propagation as std)
template <class A>
__device__ __forceinline__ A max(A a, A b) { return a < b ? b : a; }
template <class A>
__device__ __forceinline__ A min(A a, A b) { return b < a ? b : a; }

}  // namespace sx
