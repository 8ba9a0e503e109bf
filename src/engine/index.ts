export { DEFAULT_MAX_SEQUENCES, Engine, type EngineOptions, type EngineStats } from "./engine.js";
export type { Admission } from "./scheduler.js";
export { exclusive } from "./runner.js";
export { EngineRequest, type Decoding, type RequestEvent, type RequestOutcome, type RequestParams } from "./request.js";
export { RunningSequence } from "./running-sequence.js";
export type { ChoiceOutcome, Strategy, StrategyHost, StrategyRequest } from "./strategy.js";
export { completionDecoder, completionText } from "./completion-text.js";
export { RequestError, refusalInTerms, type RefusalTerms } from "./errors.js";
export { AUTO_CONTEXT_FLOOR, autoContextSize, AVAILABLE_MEMORY_ENV, availableMemoryBytes, bytesWithPool, checkMemoryPlan, DEFAULT_MEMORY_MARGIN, kvPoolBytes, largestFittingContext, MEMORY_MARGIN_ENV, memoryBeside, memoryMarginBytes, outgrownKvBlocks, planDraft, planFits, planMemory, WASM_MEMORY_BYTES, WORKER_BYTES, type LoadedMemory, type MemoryPlan, type PlanRequest, type PlanShape } from "./memory-plan.js";
