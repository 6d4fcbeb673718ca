// SYNCLINE_CPU_CLONES, written before a plain loop, has GCC/clang compile it
// three times (x86-64-v4: AVX-512 F/BW/DQ/VL; v3: AVX2 + FMA + F16C; the
// baseline) and pick one by ifunc when the program loads, so element-wise
// loops left to the auto-vectorizer run at the CPU's width. Used by the
// summation and compression kernels (built -O3 -ffp-contract=off, so every
// clone performs the same IEEE operations and gives the same bits).
// SYNCLINE_NO_RUNTIME_DISPATCH turns it off: the compile flags (-march=...)
// decide, which is how tests check each path on its own.
#pragma once

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(SYNCLINE_NO_RUNTIME_DISPATCH) && \
    defined(__has_attribute)
#if __has_attribute(target_clones)
#define SYNCLINE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef SYNCLINE_CPU_CLONES
#define SYNCLINE_CPU_CLONES
#endif
