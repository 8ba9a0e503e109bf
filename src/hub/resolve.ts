import { existsSync } from "node:fs";

/**
 * Turns what a user passed as --model (a local .gguf file, a local folder, or — once the Hub
 * client lands — a Hugging Face reference like `org/name`, `org/name@rev`, `org/name:Q4_K_M`)
 * into a local path. Today only local paths are accepted.
 */
export async function resolveModelReference(ref: string): Promise<string> {
  if (existsSync(ref)) return ref;
  throw new Error(`model not found: ${ref} (expected a local .gguf file or model folder)`);
}
