import { OptionError } from "../units/index.js";

/** Unicode normalization applied to prompt text before tokenizing; "none" leaves it as typed. */
export type PromptNormalization = "none" | "nfc" | "nfkc";

export const PROMPT_NORMALIZATIONS: readonly PromptNormalization[] = ["none", "nfc", "nfkc"];

/**
 * NFKC folds compatibility forms: full-width ASCII (ＡＢＣ１２３！) and the ideographic space
 * become their half-width forms, ligatures and circled digits are spelled out. Models trained
 * mostly on half-width text tokenize such input into many rare tokens without it.
 */
export function normalizePrompt(text: string, form: PromptNormalization = "none"): string {
  switch (form) {
    case "none": return text;
    case "nfc": return text.normalize("NFC");
    case "nfkc": return text.normalize("NFKC");
    default: throw new OptionError(`normalize: expected one of ${PROMPT_NORMALIZATIONS.join(", ")}, got ${JSON.stringify(form)}`, "normalize");
  }
}
