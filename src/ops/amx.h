// AMX tiles (Sapphire Rapids and later): AMX-INT8 for quantised MatMul with several activation
// rows (ops/matmul_quant.cc), AMX-BF16 for attention over bf16 caches (ops/attention.cc). MatMul's
// tile and VNNI paths give the same bits, so its switch below decides only speed; it exists so
// tests and benchmarks can run both paths on one machine.
#pragma once

namespace dflash::ops {

// True when the CPU has AMX-TILE and AMX-INT8 and Linux granted this process the tile data
// state (arch_prctl ARCH_REQ_XCOMP_PERM). Checked once per process, thread-safely.
bool AmxSupported();

// Whether quantised MatMul may use the tiles (when supported). Starts on unless the
// environment has DFLASH_AMX=0.
void SetAmxAllowed(bool allowed);
bool AmxAllowed();

// AmxSupported() && AmxAllowed().
bool AmxActive();

// True when the CPU also has AMX-BF16 (and AmxSupported()): attention then attends bf16 caches
// with tile dot products (ops.h: Bf16DotActive). Not switched by SetAmxAllowed, which is
// MatMul's: attention's paths give different bits, so it takes one per process.
bool AmxBf16Supported();

// The tile configuration a thread last loaded. Each tile kernel loads its own shapes when the
// thread's differ (a worker may run MatMul and attention tasks in turn).
enum class TileConfig { kNone, kMatMulInt8, kAttentionBf16 };
TileConfig& LoadedTileConfig();

}  // namespace dflash::ops
