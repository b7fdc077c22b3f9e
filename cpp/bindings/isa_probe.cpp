// multidraft._isa._probe: which instruction-set levels this CPU and OS can run.
//
// Compiled for the baseline of the target (it must load everywhere). The core is compiled once per
// level (multidraft/_isa/<level>/_core); python/multidraft/_isa/__init__.py imports the best one
// that this probe allows. Levels follow the x86-64 psABI: "avx2" is x86-64-v3 (AVX2, FMA, BMI1/2,
// F16C, LZCNT, MOVBE), "avx512" is x86-64-v4 (AVX-512 F/BW/CD/DQ/VL); the compiler may use any
// instruction of the level, so every feature of it is checked, and the OS must save the
// AVX / AVX-512 register state (XCR0), or the first such instruction faults.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <initializer_list>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#define MULTIDRAFT_X86_64 1
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#endif

namespace {

#ifdef MULTIDRAFT_X86_64
struct CpuidRegisters {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegisters cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegisters r;
#if defined(_MSC_VER)
  int regs[4];
  __cpuidex(regs, static_cast<int>(leaf), static_cast<int>(subleaf));
  r = {static_cast<unsigned>(regs[0]), static_cast<unsigned>(regs[1]), static_cast<unsigned>(regs[2]),
       static_cast<unsigned>(regs[3])};
#else
  // __get_cpuid_count returns 0 (registers untouched, all zero) for a leaf above the maximum.
  __get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx);
#endif
  return r;
}

unsigned long long xcr0() {
#if defined(_MSC_VER)
  return _xgetbv(0);
#else
  unsigned eax = 0, edx = 0;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
#endif
}

bool all_bits(unsigned value, std::initializer_list<int> bits) {
  for (int b : bits)
    if (!((value >> b) & 1u)) return false;
  return true;
}

std::vector<std::string> supported_levels() {
  std::vector<std::string> levels{"baseline"};
  const unsigned max_leaf = cpuid(0, 0).eax;
  const unsigned max_extended_leaf = cpuid(0x80000000u, 0).eax;
  if (max_leaf < 7 || max_extended_leaf < 0x80000001u) return levels;
  const CpuidRegisters leaf1 = cpuid(1, 0), leaf7 = cpuid(7, 0), extended1 = cpuid(0x80000001u, 0);
  // leaf 1 ECX: SSE3 0, SSSE3 9, FMA 12, CMPXCHG16B 13, SSE4.1 19, SSE4.2 20, MOVBE 22, POPCNT 23,
  // OSXSAVE 27, AVX 28, F16C 29; leaf 7 EBX: BMI1 3, AVX2 5, BMI2 8; 0x80000001 ECX: LAHF 0, LZCNT 5.
  const bool v3_features = all_bits(leaf1.ecx, {0, 9, 12, 13, 19, 20, 22, 23, 27, 28, 29}) &&
                           all_bits(leaf7.ebx, {3, 5, 8}) && all_bits(extended1.ecx, {0, 5});
  if (!v3_features) return levels;  // OSXSAVE checked first: xgetbv faults without it
  const unsigned long long state = xcr0();
  if ((state & 0x6u) != 0x6u) return levels;  // XMM and YMM state saved by the OS
  levels.push_back("avx2");
  // leaf 7 EBX: AVX512F 16, AVX512DQ 17, AVX512CD 28, AVX512BW 30, AVX512VL 31; XCR0 bits 5-7:
  // opmask, upper halves of ZMM0-15, ZMM16-31.
  if (all_bits(leaf7.ebx, {16, 17, 28, 30, 31}) && (state & 0xE0u) == 0xE0u) levels.push_back("avx512");
  return levels;
}
#else
std::vector<std::string> supported_levels() { return {"baseline"}; }
#endif

}  // namespace

PYBIND11_MODULE(_probe, m) {
  m.doc() = "Instruction-set levels of this CPU that the multidraft core is compiled for";
  m.def("supported_levels", &supported_levels,
        "The levels this CPU and OS run, lowest first: 'baseline', then 'avx2' (x86-64-v3), 'avx512' (x86-64-v4)");
}
