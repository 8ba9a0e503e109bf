#!/bin/bash
# The GPU benchmarks in one go, on a host with a GPU and the portable kit (scripts/pack-portable.mjs
# OUT --node --archive --llama-cpp vulkan). Packed as OUT/bench-gpu-host.sh; run it from anywhere:
#
#   OUT/bench-gpu-host.sh LOGS [MODELS] [PROMPTS]
#
# LOGS       a folder for the logs (made if missing): kernels.log, models.log, the summary last
# MODELS     bench.mjs --only list (default smollm-q8_0,smollm-q4_0)
# PROMPTS    prompt lengths (default 128,2048)
#
# It runs bench-webgpu.mjs (every matmul type and KV cache type: host recording and GPU time apart;
# KERNEL_SIZE and KERNEL_TOKENS in the environment change its 4096 and 1,128,512),
# then bench.mjs on the webgpu backend against llama.cpp's Vulkan build on the same GPU when the kit
# has it (else tsllm alone), then bench-webgpu.mjs --model on the first model at the first prompt
# length (where a decode step's time goes, the GPU time per kernel of a prefill and a decode step:
# profile.log). The random models are generated on the CPU while the kernels run.
# Vulkan: the system loader (libvulkan.so.1) and the GPU driver's ICD; where the loader does not
# find the ICD, set VK_DRIVER_FILES to it (an NVIDIA container often has it under
# /usr/local/nvidia/share/vulkan/icd.d/, which this script tries when nothing is set).
set -u
if [ $# -lt 1 ]; then
  echo "usage: $0 LOGS [MODELS] [PROMPTS]" >&2
  exit 2
fi
kit=$(cd "$(dirname "$0")" && pwd)
logs=$1
models=${2:-smollm-q8_0,smollm-q4_0}
prompts=${3:-128,2048}
mkdir -p "$logs" || exit 1
node="$kit/node"
[ -x "$node" ] || node=node
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; do
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi
done
peer=(--no-llama-cpp)
[ -d "$kit/tsllm/node_modules/node-llama-cpp" ] && peer=(--llama-cpp-gpu vulkan)

# the models first, in the background (generated once into ~/.cache/tsllm/models)
"$node" "$kit/tsllm/bench.mjs" --backend wasm --no-llama-cpp --only "$models" --prompt-tokens 8 --gen-tokens 1 --repetitions 1 > "$logs/generate.log" 2>&1 &
generating=$!
"$node" "$kit/tsllm/bench-webgpu.mjs" --size "${KERNEL_SIZE:-4096}" --tokens "${KERNEL_TOKENS:-1,128,512}" --keys 2048 --repetitions 20 > "$logs/kernels.log" 2>&1
echo "kernels: exit $? ($logs/kernels.log)"
wait "$generating" || { echo "generating the models failed: $logs/generate.log" >&2; exit 1; }
"$node" "$kit/tsllm/bench.mjs" --backend webgpu "${peer[@]}" --threads 4 --only "$models" --prompt-tokens "$prompts" --gen-tokens 64 --repetitions 3 --timeout 120 > "$logs/models.log" 2>&1
status=$?
grep -E '^(model|-----|[a-z]+-[a-z0-9_]+ |[a-z]+-[a-z0-9_]+: FAILED|tsllm: )' "$logs/models.log"
echo "models: exit $status ($logs/models.log)"
# the first model's file, as bench.mjs named it when it generated it
first=$(grep -m1 -oE '^[a-z]+-[a-z0-9_]+: random-[A-Za-z0-9_.-]+\.gguf' "$logs/generate.log" | sed 's/^[^ ]* //')
if [ -n "$first" ] && [ -f "$HOME/.cache/tsllm/models/$first" ]; then
  "$node" "$kit/tsllm/bench-webgpu.mjs" --model "$HOME/.cache/tsllm/models/$first" --prompt-tokens "${prompts%%,*}" --steps 32 --per-submit 64,256 > "$logs/profile.log" 2>&1
  echo "profile: exit $? ($logs/profile.log)"
  grep -E '^(decode|prefill|  [a-zA-Z0-9_-]+ +[0-9.]+ ms|engine)' "$logs/profile.log"
fi
exit $status
