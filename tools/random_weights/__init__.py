"""Random-weight checkpoints with real shapes, written tensor by tensor (numpy only).

layout.py:  config.json -> the tensors transformers / z-lab would save (name, shape, how to fill)
configs.py: which config.json: a path, a data/pairs.json entry, or the legacy --shape names
writer.py:  sharded bf16 safetensors streamed in row chunks, with HF's index file
"""
