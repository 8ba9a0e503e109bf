export { Engine, type EngineOptions, type EngineStats } from "./engine.js";
export { EngineRequest, RunningSequence, type ChoiceOutcome, type Decoding, type RequestEvent, type RequestOutcome, type RequestParams } from "./request.js";
