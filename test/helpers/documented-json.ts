/**
 * The keys a help text or README documents for a JSON output, read from the first `{...}` after
 * `from` (or from the start): `{prompt, promptTokens, ...}`, `{"ids": [...], "pieces": [...]}`,
 * `[{repo, dir, revisions: [...]}]`. Only the top level counts; nested `[...]` / `{...}` are skipped.
 */
export function documentedKeys(text: string, from = ""): string[] {
  const at = text.indexOf(from);
  if (at < 0) throw new Error(`documentedKeys: "${from}" is not in the text`);
  const open = text.indexOf("{", at + from.length);
  if (open < 0) throw new Error(`documentedKeys: no "{" after "${from}"`);
  const keys: string[] = [];
  let depth = 0, part = "";
  for (let i = open + 1; i < text.length; i++) {
    const c = text[i]!;
    if (depth === 0 && (c === "," || c === "}")) {
      keys.push(part.split(":")[0]!.trim().replace(/^"|"$/g, ""));
      part = "";
      if (c === "}") return keys.filter((k) => k !== "");
      continue;
    }
    if (c === "[" || c === "{") depth++;
    else if (c === "]" || c === "}") depth--;
    part += c;
  }
  throw new Error(`documentedKeys: the "{" after "${from}" is never closed`);
}
