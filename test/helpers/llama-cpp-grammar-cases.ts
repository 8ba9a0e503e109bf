import { llamaCppSourceFile } from "./llama-cpp-templates.js";

/**
 * The accept / reject cases of llama.cpp's tests/test-grammar-integration.cpp (GBNF grammars and
 * JSON Schemas, each with strings that must match and strings that must not), read from the
 * llama.cpp source node-llama-cpp installs: the C++ calls are scanned for their string literals,
 * so no case is copied here.
 */
export interface LlamaCppGrammarCase {
  readonly kind: "grammar" | "schema";
  readonly description: string;
  /** the GBNF text, or the JSON Schema's text */
  readonly source: string;
  readonly passing: readonly string[];
  readonly failing: readonly string[];
}

/** a C++ source reader: string literals (plain, raw, concatenated), braces and commas */
class CppScanner {
  pos = 0;
  constructor(readonly src: string) {}

  skipSpace(): void {
    for (;;) {
      const m = /^(\s+|\/\/[^\n]*|\/\*[\s\S]*?\*\/)/.exec(this.src.slice(this.pos, this.pos + 4096));
      if (!m) return;
      this.pos += m[0].length;
    }
  }

  /** one string expression: adjacent literals joined; undefined where none starts here */
  string(): string | undefined {
    let out: string | undefined;
    for (;;) {
      this.skipSpace();
      const s = this.src.slice(this.pos);
      const raw = /^R"([^(\s]*)\(/.exec(s);
      if (raw) {
        const close = `)${raw[1]}"`;
        const end = s.indexOf(close, raw[0].length);
        out = (out ?? "") + s.slice(raw[0].length, end);
        this.pos += end + close.length;
      } else if (s.startsWith('"')) {
        const bytes: number[] = [];
        let i = 1;
        for (; s[i] !== '"'; i++) {
          if (s[i] !== "\\") {
            const c = String.fromCodePoint(s.codePointAt(i)!);
            bytes.push(...Buffer.from(c, "utf8"));
            i += c.length - 1;
            continue;
          }
          const e = s[++i]!;
          const simple: Record<string, number> = { n: 10, t: 9, r: 13, "\\": 92, '"': 34, "'": 39, "0": 0, "?": 63 };
          if (e in simple) bytes.push(simple[e]!);
          else if (e === "x") {
            const h = /^[0-9a-fA-F]+/.exec(s.slice(i + 1))![0];
            bytes.push(parseInt(h, 16));
            i += h.length;
          } else if (e === "u" || e === "U") {
            const n = e === "u" ? 4 : 8;
            bytes.push(...Buffer.from(String.fromCodePoint(parseInt(s.slice(i + 1, i + 1 + n), 16)), "utf8"));
            i += n;
          } else throw new Error(`unknown C++ escape \\${e} at ${this.pos + i}`);
        }
        out = (out ?? "") + Buffer.from(bytes).toString("utf8");
        this.pos += i + 1;
      } else return out;
    }
  }

  expect(c: string): void {
    this.skipSpace();
    if (this.src[this.pos] !== c) throw new Error(`expected ${c} at ${this.pos}: ${this.src.slice(this.pos, this.pos + 40)}`);
    this.pos++;
  }

  /** { "a", "b", } */
  list(): string[] | undefined {
    this.expect("{");
    const out: string[] = [];
    for (;;) {
      this.skipSpace();
      if (this.src[this.pos] === "}") break;
      const s = this.string();
      // an expression that is no literal (token(10) + "..." in the token-grammar cases)
      if (s === undefined || /^\s*\+/.test(this.src.slice(this.pos, this.pos + 20))) return undefined;
      out.push(s);
      this.skipSpace();
      if (this.src[this.pos] === ",") this.pos++;
    }
    this.pos++;
    return out;
  }
}

/** every test_grammar / test_schema call of llama.cpp's grammar integration test whose strings are literals */
export function llamaCppGrammarCases(): LlamaCppGrammarCase[] {
  const src = llamaCppSourceFile("tests/test-grammar-integration.cpp");
  const out: LlamaCppGrammarCase[] = [];
  for (const m of src.matchAll(/\btest_(grammar|schema)\(/g)) {
    // the definitions of the two functions themselves
    if (/static void\s*$/.test(src.slice(Math.max(0, m.index - 20), m.index))) continue;
    const sc = new CppScanner(src);
    sc.pos = m.index + m[0].length;
    const description = sc.string()!;
    sc.expect(",");
    const source = sc.string()!;
    sc.expect(",");
    const passing = sc.list();
    if (passing === undefined) continue;
    sc.expect(",");
    const failing = sc.list();
    if (failing === undefined) continue;
    out.push({ kind: m[1] as "grammar" | "schema", description, source, passing, failing });
  }
  return out;
}

/** a JSON Schema of llama.cpp's tests/test-json-schema-to-grammar.cpp, the grammar llama.cpp makes of it (SUCCESS), or none (FAILURE) */
export interface LlamaCppSchemaConversion {
  readonly name: string;
  readonly schema: string;
  /** undefined where llama.cpp refuses the schema */
  readonly grammar: string | undefined;
}

/** every test({STATUS, name, schema, grammar}) of llama.cpp's JSON-Schema-to-grammar test whose texts are literals */
export function llamaCppSchemaConversions(): LlamaCppSchemaConversion[] {
  const src = llamaCppSourceFile("tests/test-json-schema-to-grammar.cpp");
  const out: LlamaCppSchemaConversion[] = [];
  for (const m of src.matchAll(/\btest\(\{\s*(SUCCESS|FAILURE),/g)) {
    const sc = new CppScanner(src);
    sc.pos = m.index + m[0].length;
    const name = sc.string();
    sc.expect(",");
    const schema = sc.string();
    sc.expect(",");
    const grammar = sc.string();
    if (name === undefined || schema === undefined || grammar === undefined) continue;
    out.push({ name, schema, grammar: m[1] === "SUCCESS" ? grammar : undefined });
  }
  return out;
}
