// AMX-INT8 tiles (Sapphire Rapids and later) for quantised MatMul with several activation rows
// (ops/matmul_quant.cc). Tile and VNNI paths give the same bits, so the switch below decides
// only speed; it exists so tests and benchmarks can run both paths on one machine.
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

}  // namespace dflash::ops
