/** \file
 * Half-precision storage for generated CUDA: float16 (sx::half_t) and bfloat16 (sx::bfloat16_t)
 * tensors are read into float and written back from float, so every sum, softmax and product
 * runs in float32 and only the storage is 16-bit. Self-contained (NVRTC gets no cuda_fp16.h from
 * us, and the host emulator has none): conversions round to nearest even, NaN stays NaN,
 * overflow gives infinity, as torch's .half() / .bfloat16(). On a GPU float16 converts with the
 * hardware's cvt instruction; elsewhere (the emulator) with the same rounding in integer code.
 *
 * The emitter reads a 16-bit buffer through sx::cvt_ptr<S, T> (its [] returns T) and stores
 * through S* (S's assignment from float rounds).
 */
#pragma once

#include "seastar_types.cuh"

namespace sx {

__device__ __forceinline__ uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return u;
#endif
}
__device__ __forceinline__ float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

__device__ __forceinline__ unsigned short float_to_f16(float f) {
#ifdef __CUDA_ARCH__
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  uint32_t u = float_bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t h;
  if (u >= 0x47800000u) {           // |f| >= 65536 (or inf, NaN): inf, or a quiet NaN
    h = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {     // below 2^-14: a subnormal half (or zero); adding 0.5f
    h = float_bits(bits_float(u) + 0.5f) - 0x3f000000u;  // rounds at the half's last place
  } else {                          // rebias the exponent, round to nearest even
    const uint32_t odd = (u >> 13) & 1u;
    u += 0xc8000fffu + odd;
    h = u >> 13;                    // a carry out of the mantissa rounds up to the next binade (or inf)
  }
  return (unsigned short)(h | (sign >> 16));
#endif
}

__device__ __forceinline__ float f16_to_float(unsigned short h) {
#ifdef __CUDA_ARCH__
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  uint32_t u = ((uint32_t)h & 0x7fffu) << 13;
  const uint32_t exp = u & (0x7c00u << 13);
  u += (127u - 15u) << 23;
  if (exp == (0x7c00u << 13)) {     // inf, NaN
    u += (128u - 16u) << 23;
  } else if (exp == 0) {            // zero, subnormal: renormalise through a float subtraction
    u += 1u << 23;
    u = float_bits(bits_float(u) - bits_float(113u << 23));
  }
  return bits_float(u | (((uint32_t)h & 0x8000u) << 16));
#endif
}

__device__ __forceinline__ unsigned short float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // a quiet NaN
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                     // nearest even
}
__device__ __forceinline__ float bf16_to_float(unsigned short b) { return bits_float((uint32_t)b << 16); }

/// A float16 in memory. Reads convert to float implicitly; a float is stored by assignment.
/// No implicit conversion from float: `cond ? half : float` and mixed arithmetic stay float.
struct half_t {
  unsigned short bits;
  half_t() = default;
  __device__ __forceinline__ explicit half_t(float f) : bits(float_to_f16(f)) {}
  __device__ __forceinline__ half_t& operator=(float f) {
    bits = float_to_f16(f);
    return *this;
  }
  __device__ __forceinline__ operator float() const { return f16_to_float(bits); }
};

/// A bfloat16 in memory, as half_t.
struct bfloat16_t {
  unsigned short bits;
  bfloat16_t() = default;
  __device__ __forceinline__ explicit bfloat16_t(float f) : bits(float_to_bf16(f)) {}
  __device__ __forceinline__ bfloat16_t& operator=(float f) {
    bits = float_to_bf16(f);
    return *this;
  }
  __device__ __forceinline__ operator float() const { return bf16_to_float(bits); }
};

/// x rounded to the storage type S and back: values compared for equality with stored ones (a
/// max/min gradient's ties with the stored extreme) are compared at the precision stored.
template <class S>
__device__ __forceinline__ float round_to(float x) { return float(S(x)); }

/// A read-only row of a 16-bit buffer whose elements read as the kernel's float type T.
template <class S, class T>
struct cvt_ptr {
  const S* p;
  __device__ __forceinline__ explicit cvt_ptr(const S* q) : p(q) {}
  __device__ __forceinline__ T operator[](int64_t i) const { return T(float(p[i])); }
  __device__ __forceinline__ cvt_ptr operator+(int64_t o) const { return cvt_ptr(p + o); }
};

}  // namespace sx
