/**
 * A strict reader of Prometheus' text exposition format (version 0.0.4, what /metrics answers):
 * scripts/soak-serve.ts and test/server-load.test.ts judge tsllm serve's /metrics with it. It
 * refuses what Prometheus' own parser refuses (a malformed name, label or value, an unknown
 * escape, a TYPE after its samples, a family split in two, a series given twice) and what the
 * format's rules for the types say: a counter is not negative; a histogram's buckets are
 * cumulative, end in le="+Inf" equal to its _count, and come with _sum and _count.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: "counter" | "gauge" | "histogram" | "summary" | "untyped";
  help?: string;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

/** the family a sample name belongs to, given the families declared: a histogram's name_bucket / _sum / _count are its own */
function familyOf(name: string, families: ReadonlyMap<string, Family>): string {
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const t = families.get(base)?.type;
    if (t === "histogram" || (t === "summary" && suffix !== "_bucket")) return base;
  }
  return name;
}

function parseValue(text: string, line: number): number {
  if (text === "+Inf" || text === "Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw new Error(`line ${line}: ${JSON.stringify(text)} is not a sample value`);
  return Number(text);
}

/** `{a="x",b="y"}` from `at` (the `{`): the labels and where the text after `}` starts */
function parseLabels(text: string, at: number, line: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = at + 1;
  for (;;) {
    if (text[i] === "}") return { labels, end: i + 1 };
    const eq = text.indexOf("=", i);
    if (eq < 0) throw new Error(`line ${line}: a label without '='`);
    const name = text.slice(i, eq).trim();
    if (!LABEL_NAME.test(name)) throw new Error(`line ${line}: ${JSON.stringify(name)} is not a label name`);
    if (Object.hasOwn(labels, name)) throw new Error(`line ${line}: label ${name} given twice`);
    if (text[eq + 1] !== '"') throw new Error(`line ${line}: label ${name}'s value is not quoted`);
    let value = "";
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === "\n") throw new Error(`line ${line}: a raw line break in label ${name}`);
      if (text[j] !== "\\") { value += text[j]; continue; }
      const e = text[++j];
      if (e === "\\" || e === '"') value += e;
      else if (e === "n") value += "\n";
      else throw new Error(`line ${line}: label ${name} has the escape \\${e ?? ""} (only \\\\, \\" and \\n exist)`);
    }
    if (j >= text.length) throw new Error(`line ${line}: label ${name}'s value is not closed`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ",") i++;
    else if (text[i] !== "}") throw new Error(`line ${line}: expected ',' or '}' after label ${name}`);
  }
}

/** every family of an exposition, in order; throws the first rule it breaks, naming the line */
export function parsePrometheusText(text: string): Family[] {
  if (text.length > 0 && !text.endsWith("\n")) throw new Error("the exposition does not end with a line break");
  const families = new Map<string, Family>();
  const closed = new Set<string>();
  const series = new Set<string>();
  const typed = new Set<string>();
  let current: string | undefined;
  const family = (name: string, line: number): Family => {
    let f = families.get(name);
    if (!f) families.set(name, (f = { name, type: "untyped", samples: [] }));
    if (current !== name) {
      if (closed.has(name)) throw new Error(`line ${line}: the family ${name} continues after another family began`);
      if (current !== undefined) closed.add(current);
      current = name;
    }
    return f;
  };
  text.split("\n").slice(0, -1).forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === "") return;
    if (raw.startsWith("#")) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(raw);
      if (!m) return; // a comment
      const [, kind, name, rest = ""] = m;
      if (!METRIC_NAME.test(name!)) throw new Error(`line ${line}: ${JSON.stringify(name)} is not a metric name`);
      const f = family(name!, line);
      if (kind === "HELP") {
        if (f.help !== undefined) throw new Error(`line ${line}: a second HELP for ${name}`);
        if (/\\[^\\n]|\\$/.test(rest.replace(/\\\\/g, ""))) throw new Error(`line ${line}: HELP of ${name} has an escape other than \\\\ and \\n`);
        f.help = rest.replace(/\\(\\|n)/g, (_, e: string) => (e === "n" ? "\n" : "\\"));
      } else {
        if (!TYPES.has(rest.trim())) throw new Error(`line ${line}: ${JSON.stringify(rest)} is not a metric type`);
        if (f.samples.length > 0) throw new Error(`line ${line}: the TYPE of ${name} comes after its samples`);
        if (typed.has(name!)) throw new Error(`line ${line}: a second TYPE for ${name}`);
        typed.add(name!);
        f.type = rest.trim() as Family["type"];
      }
      return;
    }
    const nameEnd = raw.search(/[{ \t]/);
    if (nameEnd <= 0) throw new Error(`line ${line}: a sample without a value`);
    const name = raw.slice(0, nameEnd);
    if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: ${JSON.stringify(name)} is not a metric name`);
    let labels: Record<string, string> = {};
    let rest = raw.slice(nameEnd);
    if (rest.startsWith("{")) {
      const parsed = parseLabels(raw, nameEnd, line);
      labels = parsed.labels;
      rest = raw.slice(parsed.end);
    }
    const parts = rest.trim().split(/[ \t]+/);
    if (parts.length < 1 || parts.length > 2 || parts[0] === "") throw new Error(`line ${line}: expected a value (and an optional timestamp) after ${name}`);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new Error(`line ${line}: ${JSON.stringify(parts[1])} is not a timestamp`);
    const value = parseValue(parts[0]!, line);
    const f = family(familyOf(name, families), line);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (series.has(key)) throw new Error(`line ${line}: the series ${name}${JSON.stringify(labels)} is given twice`);
    series.add(key);
    if (f.type === "counter" && !(value >= 0)) throw new Error(`line ${line}: the counter ${name} is ${value}`);
    f.samples.push({ name, labels, value });
  });
  for (const f of families.values()) if (f.type === "histogram") checkHistogram(f);
  return [...families.values()];
}

/** a histogram's series (one per label set but le): cumulative buckets ending in +Inf = _count, with _sum */
function checkHistogram(f: Family): void {
  const groups = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { buckets: [] }));
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${f.name}_bucket without an le label`);
      g.buckets.push([parseValue(le, 0), s.value]);
    } else if (s.name === `${f.name}_sum`) g.sum = s.value;
    else if (s.name === `${f.name}_count`) g.count = s.value;
    else throw new Error(`histogram ${f.name} has the sample ${s.name}`);
  }
  for (const g of groups.values()) {
    if (g.sum === undefined || g.count === undefined) throw new Error(`histogram ${f.name} lacks its _sum or _count`);
    const last = g.buckets.at(-1);
    if (!last || last[0] !== Infinity) throw new Error(`histogram ${f.name}'s buckets do not end in le="+Inf"`);
    if (last[1] !== g.count) throw new Error(`histogram ${f.name}'s +Inf bucket (${last[1]}) is not its _count (${g.count})`);
    for (let i = 1; i < g.buckets.length; i++) {
      if (!(g.buckets[i]![0] > g.buckets[i - 1]![0])) throw new Error(`histogram ${f.name}'s buckets are not in increasing le order`);
      if (g.buckets[i]![1] < g.buckets[i - 1]![1]) throw new Error(`histogram ${f.name}'s buckets are not cumulative (le=${g.buckets[i]![0]}: ${g.buckets[i]![1]} < ${g.buckets[i - 1]![1]})`);
    }
  }
}

/** the value of one series (labels matched exactly; 0 when absent: a counter not yet incremented) */
export function sampleValue(families: readonly Family[], name: string, labels: Record<string, string> = {}): number {
  const want = JSON.stringify(Object.entries(labels).sort());
  for (const f of families) for (const s of f.samples) if (s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want) return s.value;
  return 0;
}

/** the sum of a family's samples whose labels include `labels` */
export function sampleSum(families: readonly Family[], name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const f of families) for (const s of f.samples) if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  return sum;
}
