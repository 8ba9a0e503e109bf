import { applyFilter, applyTest, escapeHtml, groupMembers, hasFilter, hasTest, useAdd, type FilterContext } from "./jinja-filters.js";
import { dictMethod, listMethod, percentFormat, strMethod, useEquals } from "./jinja-methods.js";
import {
  Callable, Float, Markup, PyObject, Undefined, checkDefined, compare, contains, dictGet, equals, fail, isDict, isNumber, isStr, isTuple,
  iterate, keyOf, num, str, strOf, truthy, tuple, typeName, type Key, type Value,
} from "./jinja-values.js";

/*
 * Renders a chat template's parse tree (from @huggingface/jinja's parser) as jinja2 renders it,
 * set up as transformers sets it up (no autoescape, ImmutableSandboxedEnvironment): jinja2's
 * scoping (each loop iteration a fresh scope, macros see the scope they were defined in),
 * attribute and item lookup, Undefined, operators on Python's types. Every node checks the clock
 * and every string or list built checks its size, so a runaway template stops with an error.
 */

/** a parse-tree node as far as this reads it */
export interface Node { type: string; [field: string]: unknown }

/** what bounds one render */
export interface RenderBudget {
  /** performance.now() past which rendering stops */
  deadline: number;
  maxOutputChars: number;
  maxItems: number;
}

/** a render stopped by its budget (the message says which bound) */
export class RenderLimitError extends Error {}

/** how deep macro calls may nest (jinja2 stops at Python's recursion limit, a few hundred macro calls deep) */
const MAX_MACRO_DEPTH = 250;

/** the statements whose evaluation is not output */
const STATEMENTS = new Set(["Set", "If", "For", "Macro", "CallStatement", "FilterStatement", "Break", "Continue", "Comment"]);

/** {% break %} / {% continue %}, carrying what the loop body wrote before it (jinja2 keeps that output) */
class LoopSignal {
  constructor(readonly breaks: boolean, public output = "") {}
}

/** a frame of variables; lookups walk out to the enclosing frames */
class Scope {
  readonly vars = new Map<string, Value>();
  constructor(readonly parent?: Scope) {}
  lookup(name: string): Value | undefined {
    for (let s: Scope | undefined = this; s; s = s.parent) {
      const v = s.vars.get(name);
      if (v !== undefined) return v;
    }
    return undefined;
  }
}

const CONSTANTS: Record<string, Value> = { true: true, false: false, none: null, True: true, False: false, None: null };

/** jinja2's object_type_repr: how an Undefined's message names the object it was looked up on */
function objectTypeRepr(v: Value): string {
  if (v === null) return "None";
  if (v instanceof Markup) return "markupsafe.Markup object";
  if (v instanceof PyObject) return `${v.kind === "LoopContext" ? "jinja2.runtime.LoopContext" : v.kind === "Namespace" ? "jinja2.utils.Namespace" : v.kind} object`;
  return `${typeName(v)} object`;
}
const noAttribute = (obj: Value, name: string) => new Undefined(`'${objectTypeRepr(obj)}' has no attribute '${name}'`);
const noElement = (obj: Value, key: Value) => new Undefined(`${objectTypeRepr(obj)} has no element ${isStr(key) ? `'${strOf(key)}'` : str(key)}`);

/** the names a macro's body reads (varargs, kwargs, caller are bound only when the body reads them, as jinja2 does) */
function readsName(node: unknown, name: string, seen = new Set<unknown>()): boolean {
  if (!node || typeof node !== "object" || seen.has(node)) return false;
  seen.add(node);
  if ((node as Node).type === "Identifier" && (node as Node).value === name) return true;
  const children = node instanceof Map ? [...node.keys(), ...node.values()] : Object.values(node);
  return children.some((c) => readsName(c, name, seen));
}

export class Interpreter implements FilterContext {
  private steps = 0;
  private macroDepth = 0;

  constructor(private readonly budget: RenderBudget) {
    useEquals(equals);
    useAdd((a, b) => this.binary("+", a, b));
  }

  /** the template's output; `globals` are the variables it is rendered with */
  render(program: Node, globals: Map<string, Value>): string {
    const root = new Scope();
    for (const [k, v] of globals) root.vars.set(k, v);
    return this.block(program.body as Node[], new Scope(root));
  }

  // ---- size and time ----

  check(chars: number): void {
    if (chars > this.budget.maxOutputChars) throw new RenderLimitError(`rendering produced more than ${this.budget.maxOutputChars} characters; the template may be runaway`);
  }

  private checkItems(n: number): void {
    if (n > this.budget.maxItems) throw new RenderLimitError(`rendering produced a list of ${n} items, more than the ${this.budget.maxItems} allowed; the template may be runaway`);
  }

  private tick(): void {
    this.steps++;
    if ((this.steps & 63) === 0 && performance.now() > this.budget.deadline) {
      throw new RenderLimitError(`rendering took too long (stopped after ${this.steps} steps); the template may loop without end`);
    }
  }

  // ---- statements ----

  private block(statements: readonly Node[], scope: Scope): string {
    let out = "";
    try {
      for (const node of statements) {
        out += STATEMENTS.has(node.type) ? this.statement(node, scope) : str(this.expr(node, scope));
        this.check(out.length);
      }
    } catch (e) {
      if (e instanceof LoopSignal) e.output = out + e.output;
      throw e;
    }
    return out;
  }

  private statement(node: Node, scope: Scope): string {
    this.tick();
    switch (node.type) {
      case "Set": return this.set(node, scope);
      case "If": return this.block((truthy(this.expr(node.test as Node, scope)) ? node.body : node.alternate) as Node[], scope);
      case "For": return this.for(node, scope);
      case "Macro": {
        const name = (node.name as Node).value as string;
        scope.vars.set(name, this.macro(name, node.args as Node[], node.body as Node[], scope));
        return "";
      }
      case "CallStatement": return this.callBlock(node, scope);
      case "FilterStatement": return str(this.filterNode(this.block(node.body as Node[], scope), node.filter as Node, scope));
      case "Break": throw new LoopSignal(true);
      case "Continue": throw new LoopSignal(false);
      default: return "";
    }
  }

  private set(node: Node, scope: Scope): string {
    const value = node.value ? this.expr(node.value as Node, scope) : this.block(node.body as Node[], scope);
    const target = node.assignee as Node;
    if (target.type === "MemberExpression" && !target.computed) {
      const obj = this.expr(target.object as Node, scope);
      if (!(obj instanceof PyObject && obj.assignable)) fail("cannot assign attribute on non-namespace object");
      (obj as PyObject).attrs.set((target.property as Node).value as string, value);
    } else this.assign(target, value, scope);
    return "";
  }

  /** binds a name, or unpacks into a tuple of names */
  private assign(target: Node, value: Value, scope: Scope): void {
    if (target.type === "Identifier") {
      scope.vars.set(target.value as string, value);
      return;
    }
    if (target.type !== "TupleLiteral") fail(`cannot assign to ${target.type}`);
    const names = target.value as Node[];
    const items = iterate(value);
    if (items.length < names.length) fail(`not enough values to unpack (expected ${names.length}, got ${items.length})`);
    if (items.length > names.length) fail(`too many values to unpack (expected ${names.length})`);
    names.forEach((n, i) => this.assign(n, items[i]!, scope));
  }

  private for(node: Node, scope: Scope): string {
    const select = (node.iterable as Node).type === "SelectExpression" ? (node.iterable as Node) : undefined;
    const source = this.expr(select ? (select.lhs as Node) : (node.iterable as Node), scope);
    const loopvar = node.loopvar as Node;
    let items = iterate(source);
    if (select) {
      items = items.filter((item) => {
        const s = new Scope(scope);
        this.assign(loopvar, item, s);
        return truthy(this.expr(select.test as Node, s));
      });
    }
    let out = "";
    let changedLast: Value[] | undefined;
    for (let i = 0; i < items.length; i++) {
      this.tick();
      const s = new Scope(scope);
      const n = items.length;
      const loop = new PyObject("LoopContext", new Map<string, Value>([
        ["index", i + 1], ["index0", i], ["revindex", n - i], ["revindex0", n - i - 1], ["first", i === 0], ["last", i === n - 1], ["length", n],
        ["depth", 1], ["depth0", 0],
        ["previtem", i > 0 ? items[i - 1]! : new Undefined("there is no previous item")],
        ["nextitem", i < n - 1 ? items[i + 1]! : new Undefined("there is no next item")],
        ["cycle", new Callable("cycle", (args) => (args.length ? args[i % args.length]! : fail("no items for cycling given")))],
        ["changed", new Callable("changed", (args) => {
          if (changedLast && equals(tuple(changedLast), tuple(args))) return false;
          changedLast = args;
          return true;
        })],
      ]), false, () => `<LoopContext ${i + 1}/${n}>`);
      s.vars.set("loop", loop);
      this.assign(loopvar, items[i]!, s);
      try {
        out += this.block(node.body as Node[], s);
      } catch (e) {
        if (!(e instanceof LoopSignal)) throw e;
        out += e.output;
        if (e.breaks) break;
      }
      this.check(out.length);
    }
    if (items.length === 0) out += this.block(node.defaultBlock as Node[], new Scope(scope));
    return out;
  }

  /** a macro (or a call block's caller): binds its parameters in a scope of the one it was defined in */
  private macro(name: string, params: readonly Node[], body: readonly Node[], definedIn: Scope, isCaller = false): Callable {
    const uses = { varargs: readsName(body, "varargs"), kwargs: readsName(body, "kwargs"), caller: readsName(body, "caller") };
    const display = isCaller ? "caller" : `'${name}'`;
    return new Callable(name, (args, kwargs) => {
      if (++this.macroDepth > MAX_MACRO_DEPTH) fail(`macro calls nest more than ${MAX_MACRO_DEPTH} deep (a macro calling itself without end?)`);
      try {
        return this.callMacro(args, kwargs, params, body, definedIn, display, isCaller, uses);
      } finally {
        this.macroDepth--;
      }
    });
  }

  /** a macro's parameters bound (positional, keyword, default, else undefined; varargs, kwargs, caller) and its body rendered */
  private callMacro(args: Value[], kwargs: Map<string, Value>, params: readonly Node[], body: readonly Node[], definedIn: Scope, display: string, isCaller: boolean, uses: { varargs: boolean; kwargs: boolean; caller: boolean }): string {
    const s = new Scope(definedIn);
    const rest = new Map(kwargs);
    if (rest.has("caller")) {
      if (!uses.caller && !isCaller) fail(`macro ${display} takes no keyword argument 'caller'`);
      s.vars.set("caller", rest.get("caller")!);
      rest.delete("caller");
    }
    params.forEach((p, i) => {
      const pname = (p.type === "KeywordArgumentExpression" ? (p.key as Node).value : p.value) as string;
      let v: Value | undefined = args[i];
      if (v === undefined && rest.has(pname)) {
        v = rest.get(pname)!;
        rest.delete(pname);
      }
      if (v === undefined) v = p.type === "KeywordArgumentExpression" ? this.expr(p.value as Node, s) : new Undefined(`parameter '${pname}' was not provided`);
      s.vars.set(pname, v);
    });
    if (args.length > params.length && !uses.varargs) fail(`macro ${display} takes not more than ${params.length} argument(s)`);
    s.vars.set("varargs", tuple(args.slice(params.length)));
    if (rest.size && !uses.kwargs) fail(`macro ${display} takes no keyword argument '${rest.keys().next().value}'`);
    s.vars.set("kwargs", new Map(rest));
    return this.block(body, s);
  }

  private callBlock(node: Node, scope: Scope): string {
    const call = node.call as Node;
    const caller = this.macro("caller", (node.callerArgs as Node[] | null) ?? [], node.body as Node[], scope, true);
    const fn = this.expr(call.callee as Node, scope);
    const [args, kwargs] = this.args(call.args as Node[], scope);
    kwargs.set("caller", caller);
    return str(this.invoke(fn, args, kwargs));
  }

  // ---- expressions ----

  private expr(node: Node, scope: Scope): Value {
    this.tick();
    const v = this.evaluate(node, scope);
    if (typeof v === "string") this.check(v.length);
    else if (Array.isArray(v)) this.checkItems(v.length);
    return v;
  }

  private evaluate(node: Node, scope: Scope): Value {
    switch (node.type) {
      case "StringLiteral": return node.value as string;
      case "IntegerLiteral": return node.value as number;
      case "FloatLiteral": return new Float(node.value as number);
      case "Identifier": {
        const name = node.value as string;
        const v = scope.lookup(name);
        if (v !== undefined) return v;
        return Object.hasOwn(CONSTANTS, name) ? CONSTANTS[name]! : new Undefined(`'${name}' is undefined`);
      }
      case "ArrayLiteral": return (node.value as Node[]).map((x) => this.expr(x, scope));
      case "TupleLiteral": return tuple((node.value as Node[]).map((x) => this.expr(x, scope)));
      case "ObjectLiteral": {
        const d = new Map();
        for (const [k, v] of node.value as Map<Node, Node>) d.set(keyOf(this.expr(k, scope)), this.expr(v, scope));
        return d;
      }
      case "MemberExpression": {
        const obj = this.expr(node.object as Node, scope);
        const prop = node.property as Node;
        if (!node.computed) return prop.type === "IntegerLiteral" ? this.getitem(obj, prop.value as number) : this.getattr(obj, prop.value as string);
        if (prop.type === "SliceExpression") return this.slice(obj, prop, scope);
        return this.getitem(obj, this.expr(prop, scope));
      }
      case "CallExpression": {
        const fn = this.expr(node.callee as Node, scope);
        const [args, kwargs] = this.args(node.args as Node[], scope);
        return this.invoke(fn, args, kwargs);
      }
      case "UnaryExpression": {
        const op = (node.operator as { value: string }).value;
        const v = this.expr(node.argument as Node, scope);
        if (op === "not") return !truthy(v);
        checkDefined(v);
        if (!isNumber(v)) return fail(`bad operand type for unary ${op}: '${typeName(v)}'`);
        if (op === "+") return typeof v === "boolean" ? Number(v) : v;
        return v instanceof Float ? new Float(-v.v) : -num(v);
      }
      case "BinaryExpression": {
        const op = (node.operator as { value: string }).value;
        const left = this.expr(node.left as Node, scope);
        if (op === "and") return truthy(left) ? this.expr(node.right as Node, scope) : left;
        if (op === "or") return truthy(left) ? left : this.expr(node.right as Node, scope);
        return this.binary(op, left, this.expr(node.right as Node, scope));
      }
      case "FilterExpression": return this.filterNode(this.expr(node.operand as Node, scope), node.filter as Node, scope);
      case "TestExpression": {
        const name = (node.test as Node).value as string;
        if (!hasTest(name)) fail(`no test named '${name}'`);
        const result = applyTest(name, this.expr(node.operand as Node, scope), []);
        return node.negate ? !result : result;
      }
      case "SelectExpression": return truthy(this.expr(node.test as Node, scope)) ? this.expr(node.lhs as Node, scope) : new Undefined("the inline if expression on line evaluated to false and no else section was defined.");
      case "Ternary": return this.expr((truthy(this.expr(node.condition as Node, scope)) ? node.trueExpr : node.falseExpr) as Node, scope);
      default: return fail(`${node.type} cannot be evaluated here`);
    }
  }

  private args(nodes: readonly Node[], scope: Scope): [Value[], Map<string, Value>] {
    const args: Value[] = [], kwargs = new Map<string, Value>();
    for (const a of nodes) {
      if (a.type === "KeywordArgumentExpression") kwargs.set((a.key as Node).value as string, this.expr(a.value as Node, scope));
      else if (a.type === "SpreadExpression") args.push(...iterate(this.expr(a.argument as Node, scope)));
      else if (a.type === "KeywordSpreadExpression") {
        const d = this.expr(a.argument as Node, scope);
        if (!isDict(d)) fail(`argument after ** must be a mapping, not ${typeName(d)}`);
        for (const [k, v] of d as Map<never, Value>) kwargs.set(str(k), v);
      } else args.push(this.expr(a, scope));
    }
    return [args, kwargs];
  }

  private invoke(fn: Value, args: Value[], kwargs: Map<string, Value>): Value {
    checkDefined(fn);
    if (!(fn instanceof Callable)) return fail(`'${typeName(fn)}' object is not callable`);
    return fn.call(args, kwargs);
  }

  private filterNode(value: Value, node: Node, scope: Scope): Value {
    const call = node.type === "CallExpression";
    const name = (call ? (node.callee as Node).value : node.value) as string;
    const [args, kwargs] = call ? this.args(node.args as Node[], scope) : [[], new Map<string, Value>()];
    return this.applyFilterByName(name, value, args, kwargs);
  }

  private applyFilterByName(name: string, value: Value, args: Value[], kwargs: Map<string, Value>): Value {
    if (!hasFilter(name)) fail(`no filter named '${name}'`);
    // filters that write a value with str() treat an undefined one as ""; the rest need a value
    if (value instanceof Undefined && !UNDEFINED_OK.has(name)) checkDefined(value);
    return applyFilter(name, value, args, kwargs, this);
  }

  test(name: string, value: Value, args: Value[]): boolean {
    if (!hasTest(name)) fail(`no test named '${name}'`);
    return applyTest(name, value, args);
  }

  filter(name: string, value: Value, args: Value[], kwargs: Map<string, Value>): Value {
    return this.applyFilterByName(name, value, args, kwargs);
  }

  // ---- operators ----

  binary(op: string, a: Value, b: Value): Value {
    switch (op) {
      case "==": return equals(a, b);
      case "!=": return !equals(a, b);
      case "in": return contains(b, a);
      case "not in": return !contains(b, a);
      case "~": {
        const s = str(a) + str(b);
        this.check(s.length);
        return s;
      }
    }
    checkDefined(a);
    checkDefined(b);
    switch (op) {
      case "<": return compare(a, b, op) < 0;
      case ">": return compare(a, b, op) > 0;
      case "<=": return compare(a, b, op) <= 0;
      case ">=": return compare(a, b, op) >= 0;
    }
    if (isNumber(a) && isNumber(b)) return arithmetic(op, a, b);
    switch (op) {
      case "+": {
        if (isStr(a) && isStr(b)) {
          // Markup + str escapes the str (markupsafe), which functionary v3.1's `"..."|safe + name` relies on
          const joined = a instanceof Markup || b instanceof Markup
            ? new Markup((a instanceof Markup ? a.s : escapeHtml(a)) + (b instanceof Markup ? b.s : escapeHtml(b as string)))
            : (a as string) + (b as string);
          this.check(strOf(joined).length);
          return joined;
        }
        if (Array.isArray(a) && Array.isArray(b) && isTuple(a) === isTuple(b)) {
          this.checkItems(a.length + b.length);
          return isTuple(a) ? tuple([...a, ...b]) : [...a, ...b];
        }
        if (isStr(a)) fail(`can only concatenate str (not "${typeName(b)}") to str`);
        if (Array.isArray(a)) fail(`can only concatenate ${typeName(a)} (not "${typeName(b)}") to ${typeName(a)}`);
        break;
      }
      case "*": {
        const [seq, n] = isNumber(a) ? [b, a] : [a, b];
        if ((isStr(seq) || Array.isArray(seq)) && isNumber(n)) {
          if (n instanceof Float) fail(`can't multiply sequence by non-int of type 'float'`);
          const times = Math.max(0, num(n));
          if (isStr(seq)) {
            this.check(strOf(seq).length * times);
            const s = strOf(seq).repeat(times);
            return seq instanceof Markup ? new Markup(s) : s;
          }
          this.checkItems(seq.length * times);
          const out = Array.from({ length: times }, () => seq).flat();
          return isTuple(seq) ? tuple(out) : out;
        }
        break;
      }
      case "%":
        if (isStr(a)) {
          const s = percentFormat(strOf(a), b, this);
          return a instanceof Markup ? new Markup(s) : s;
        }
        break;
    }
    return fail(`unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);
  }

  // ---- attribute and item lookup (jinja2's Environment.getattr / getitem under the sandbox) ----

  getattr(obj: Value, name: string): Value {
    checkDefined(obj);
    if (name.startsWith("_")) return new Undefined(`access to attribute '${name}' of '${typeName(obj)}' object is unsafe.`);
    const method = this.method(obj, name);
    if (method) return method;
    // (a None value is found: `??` would take it for a missing one)
    if (isDict(obj)) {
      const v = dictGet(obj, name);
      return v === undefined ? noAttribute(obj, name) : v;
    }
    if (obj instanceof PyObject) return obj.attrs.has(name) ? obj.attrs.get(name)! : noAttribute(obj, name);
    if (Array.isArray(obj)) {
      const group = groupMembers(obj);
      if (group?.attrs.has(name)) return group.attrs.get(name)!;
    }
    return noAttribute(obj, name);
  }

  getitem(obj: Value, key: Value): Value {
    checkDefined(obj);
    if (isDict(obj)) {
      const v = keyable(key) ? dictGet(obj, key) : undefined;
      if (v !== undefined) return v;
      return isStr(key) ? this.getattr(obj, strOf(key)) : noElement(obj, key);
    }
    if ((Array.isArray(obj) || isStr(obj)) && (typeof key === "number" || typeof key === "boolean")) {
      const items = isStr(obj) ? [...strOf(obj)] : obj;
      const i = Number(key) < 0 ? items.length + Number(key) : Number(key);
      if (i < 0 || i >= items.length) return noElement(obj, key);
      const v = items[i]!;
      return obj instanceof Markup ? new Markup(v as string) : v;
    }
    if (isStr(key)) return this.getattr(obj, strOf(key));
    return noElement(obj, key);
  }

  /** a method of a str, dict, list or tuple */
  private method(obj: Value, name: string): Callable | undefined {
    if (isStr(obj)) return strMethod(obj, name, this);
    if (isDict(obj)) return dictMethod(obj, name);
    if (Array.isArray(obj)) return listMethod(obj, name);
    return undefined;
  }

  private slice(obj: Value, node: Node, scope: Scope): Value {
    checkDefined(obj);
    const bound = (n: unknown): number | undefined => {
      if (!n) return undefined;
      const v = this.expr(n as Node, scope);
      if (v === null) return undefined;
      if (typeof v === "number" || typeof v === "boolean") return Number(v);
      return fail("slice indices must be integers or None or have an __index__ method");
    };
    const step = bound(node.step) ?? 1;
    if (step === 0) fail("slice step cannot be zero");
    const items = isStr(obj) ? [...strOf(obj)] : Array.isArray(obj) ? obj : fail(`'${typeName(obj)}' object is not subscriptable`);
    const n = items.length;
    const norm = (i: number | undefined, fallback: number, lo: number, hi: number) => (i === undefined ? fallback : i < 0 ? Math.max(lo, n + i) : Math.min(i, hi));
    const start = step > 0 ? norm(bound(node.start), 0, 0, n) : norm(bound(node.start), n - 1, -1, n - 1);
    const stop = step > 0 ? norm(bound(node.stop), n, 0, n) : norm(bound(node.stop), -1, -1, n - 1);
    const out: Value[] = [];
    for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(items[i]!);
    if (isStr(obj)) return obj instanceof Markup ? new Markup(out.join("")) : out.join("");
    return isTuple(obj) ? tuple(out) : out;
  }
}

/** the filters jinja2 lets an undefined value through (they call str() or len() or iterate it, or test it) */
const UNDEFINED_OK = new Set([
  "default", "d", "string", "trim", "upper", "lower", "title", "capitalize", "indent", "replace", "striptags", "wordcount", "center", "truncate", "format",
  "length", "count", "list", "items", "dictsort", "join", "map", "select", "reject", "selectattr", "rejectattr", "unique", "safe", "escape", "e", "forceescape",
  "first", "batch", "slice", "sort", "sum", "min", "max", "reverse", "int", "float", "tojson",
]);

const keyable = (v: Value): boolean => v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean" || v instanceof Float || v instanceof Markup;

/** Python's arithmetic on int, float and bool: // and % floor toward -inf, / is always float, int ** negative int is float */
function arithmetic(op: string, a: number | Float | boolean, b: number | Float | boolean): Value {
  const x = num(a), y = num(b);
  const float = a instanceof Float || b instanceof Float;
  const result = (v: number, asFloat = float) => (asFloat ? new Float(v) : v);
  switch (op) {
    case "+": return result(x + y);
    case "-": return result(x - y);
    case "*": return result(x * y);
    case "/": return y === 0 ? fail("division by zero") : new Float(x / y);
    case "//": return y === 0 ? fail(float ? "float floor division by zero" : "integer division or modulo by zero") : result(Math.floor(x / y));
    case "%": {
      if (y === 0) return fail(float ? "float modulo" : "integer division or modulo by zero");
      const r = x % y;
      return result(r !== 0 && (r < 0) !== (y < 0) ? r + y : r);
    }
    case "**": {
      if (x === 0 && y < 0) return fail("0.0 cannot be raised to a negative power");
      return result(x ** y, float || y < 0);
    }
    default: return fail(`unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);
  }
}


/** jinja2's own globals: namespace(), dict(), cycler(), joiner() */
export function jinjaGlobals(): [string, Value][] {
  const mapping = (name: string, args: Value[], kwargs: Map<string, Value>): Map<Key, Value> => {
    if (args.length > 1) fail(`${name} expected at most 1 argument, got ${args.length}`);
    const d = new Map<Key, Value>();
    const [source] = args;
    if (source !== undefined) checkDefined(source);
    if (isDict(source ?? null)) for (const [k, v] of source as Map<Key, Value>) d.set(k, v);
    else if (source !== undefined) {
      for (const pair of iterate(source)) {
        const kv = iterate(pair);
        if (kv.length !== 2) fail(`${name} needs pairs: an item has ${kv.length} elements`);
        d.set(keyOf(kv[0]!), kv[1]!);
      }
    }
    for (const [k, v] of kwargs) d.set(k, v);
    return d;
  };
  const cycler = (items: Value[]) => {
    const attrs = new Map<string, Value>([["current", items[0] ?? null]]);
    let at = 0;
    const advance = () => { const v = items[at]!; at = (at + 1) % items.length; attrs.set("current", items[at]!); return v; };
    attrs.set("next", new Callable("next", () => (items.length ? advance() : fail("no items for cycling given"))));
    attrs.set("reset", new Callable("reset", () => { at = 0; attrs.set("current", items[0] ?? null); return null; }));
    return new PyObject("Cycler", attrs);
  };
  return [
    ["namespace", new Callable("namespace", (args, kwargs) => {
      const attrs = new Map([...mapping("namespace", args, kwargs)].map(([k, v]) => [str(k), v] as [string, Value]));
      const ns: PyObject = new PyObject("Namespace", attrs, true, () => `<Namespace ${str(new Map(ns.attrs))}>`);
      return ns;
    })],
    ["dict", new Callable("dict", (args, kwargs) => mapping("dict", args, kwargs))],
    ["cycler", new Callable("cycler", (args) => cycler(args))],
    ["joiner", new Callable("joiner", ([sep = ", "]) => {
      let used = false;
      return new Callable("joiner", () => { if (!used) { used = true; return ""; } return sep; });
    })],
  ];
}
