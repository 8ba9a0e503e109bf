export { computePerplexity, type PerplexityOptions, type PerplexityProgress, type PerplexityResult } from "./perplexity.js";
export { computeKlDivergence, type Estimate, type KlDivergenceOptions, type KlDivergenceProgress, type KlDivergenceResult } from "./kl-divergence.js";
export { planWindows, windowTokens, type WindowPlan } from "./windows.js";
export { argmaxOf, logSoftmaxInto, logSumExp, tokenNll } from "./log-softmax.js";
export { MeanAccumulator } from "./stats.js";
