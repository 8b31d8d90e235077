/** \file
 * Fixed-width integer types and the constants generated code uses, for NVRTC (which compiles
 * without <cstdint> or <cmath>). Generated code picks its index type I from these (int32_t when
 * every vertex and edge id fits, int64_t otherwise) and its float type T (float or double).
 */
#pragma once

#ifndef SEASTAR_DEVICE_TYPES
#define SEASTAR_DEVICE_TYPES
typedef signed char int8_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#endif

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
