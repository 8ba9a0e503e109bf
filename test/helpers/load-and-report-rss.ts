// Child process for the memory test: loads a model, runs one token, prints peak RSS as JSON.
import { loadModel } from "../../src/index.js";

const [path, backend] = process.argv.slice(2);
const model = await loadModel(path!, { backend: backend as "wasm" | "reference", contextSize: 256 });
const lm = model.languageModel;
lm.forward([1, 2, 3], lm.createCache(256));
const kvBytes = 2 * lm.info.blockCount * 256 * lm.info.headCountKv * lm.info.headDim * 4;
process.stdout.write(JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024, kvBytes }) + "\n");
model.dispose();
