/** the flags the peer benchmarks (bench:onnx, bench:wllama) share, for src/cli/args.ts's parse */
export const PEER_BENCH_FLAGS = {
  only: { type: "string" },
  threads: { type: "string" },
  "prompt-tokens": { type: "string" },
  "gen-tokens": { type: "string" },
  repetitions: { type: "string" },
  json: { type: "boolean" },
} as const;
