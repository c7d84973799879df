// DFlash2's grouped dynamic causal convolutions (z-lab dflash 0.1.0, GroupedDynamicCausalConv).
// Each draft layer has two, one around attention and one around the MLP. Over the block's rows
// (the context never enters), output row t, channel c of group g is
//   sum_{o < K, o <= t} (base[o][c] + dynamic_t[o][g]) * input[t - o][c]
// where dynamic_t = kernel_projection(the normed row t entering the sublayer), [2][K][G]: its
// first half convolves that input (Prepare), its second the sublayer's output (Finish) with
// base_kernel[1]. A row depends only on itself and the K - 1 rows before it in the block.
#pragma once

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/tensor_store.h"
#include "model/config.h"

namespace dflash {

class DynamicConvs {
 public:
  enum Site { kAttention, kMlp };

  // Loads layers.<l>.{attention,mlp}_conv.{base_kernel,kernel_projection.weight} of every
  // layer; max_rows bounds the block.
  DynamicConvs(const DraftConfig& config, const TensorStore& store, int max_rows);

  // rows ([B][H]) convolved in place with base_kernel[0] and their own first dynamic kernels,
  // which also yields the second ones, kept for Finish of the same layer and site.
  void Prepare(int layer, Site site, float* rows, int B, ThreadPool& pool);
  // The sublayer's output rows ([B][H]) convolved in place with base_kernel[1] and the
  // second dynamic kernels of the last Prepare.
  void Finish(int layer, Site site, float* rows, int B, ThreadPool& pool);

 private:
  struct Conv {
    std::vector<float> base;  // [2][K][H]
    WeightRef projection;     // [2*K*G][H]
  };
  void Convolve(const Conv& conv, int half, float* rows, int B, ThreadPool& pool);

  int hidden_, kernel_, group_size_, groups_;
  std::vector<Conv> convs_;       // [layer][site]
  std::vector<float> dynamic_;    // [B][2][K][G] of the last Prepare
  std::vector<float> out_;        // [B][H]
};

}  // namespace dflash
