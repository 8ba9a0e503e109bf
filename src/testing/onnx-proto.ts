/**
 * A minimal protobuf encoder for the ONNX messages a model file needs (ModelProto, GraphProto,
 * NodeProto, AttributeProto, TensorProto, ValueInfoProto), with the field numbers of onnx.proto.
 * Only writing: large raw tensor data is kept as its own part and copied once, into the final file.
 */

/** TensorProto.DataType values */
export const OnnxType = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7, BOOL: 9 } as const;
export type OnnxType = (typeof OnnxType)[keyof typeof OnnxType];

/** AttributeProto.AttributeType values */
const AttrType = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7 } as const;

const WIRE_VARINT = 0, WIRE_LEN = 2, WIRE_I32 = 5;

/** Bytes of one message, built as a list of parts so nested messages and big tensors are not re-copied per level. */
export class ProtoWriter {
  private readonly parts: Uint8Array[] = [];
  private pending: number[] = [];
  private size = 0;

  get byteLength(): number {
    return this.size + this.pending.length;
  }

  /** an int64/int32/enum/bool field; negative values take ten bytes (two's complement), as protobuf writes them */
  varint(field: number, value: number | bigint): this {
    this.key(field, WIRE_VARINT);
    this.rawVarint(value);
    return this;
  }

  float(field: number, value: number): this {
    this.key(field, WIRE_I32);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, value, true);
    this.pending.push(...b);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  /** a length-delimited field; `data` is kept by reference, not copied, until finish() */
  bytes(field: number, data: Uint8Array): this {
    this.key(field, WIRE_LEN);
    this.rawVarint(data.length);
    this.flush();
    this.parts.push(data);
    this.size += data.length;
    return this;
  }

  message(field: number, m: ProtoWriter): this {
    this.key(field, WIRE_LEN);
    this.rawVarint(m.byteLength);
    this.flush();
    m.flush();
    this.parts.push(...m.parts);
    this.size += m.size;
    return this;
  }

  /** a packed repeated varint field (proto3 and proto2 [packed] parse it alike) */
  packedVarints(field: number, values: readonly number[]): this {
    const inner = new ProtoWriter();
    for (const v of values) inner.rawVarint(v);
    return this.message(field, inner);
  }

  finish(): Uint8Array {
    this.flush();
    const out = new Uint8Array(this.size);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  private key(field: number, wire: number): void {
    this.rawVarint(field * 8 + wire);
  }

  private rawVarint(value: number | bigint): void {
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.pending.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.pending.push(Number(v));
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    this.parts.push(Uint8Array.from(this.pending));
    this.size += this.pending.length;
    this.pending = [];
  }
}

/** TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9 (little-endian values) */
export function tensorProto(name: string, type: OnnxType, dims: readonly number[], raw: Uint8Array): ProtoWriter {
  const w = new ProtoWriter();
  for (const d of dims) w.varint(1, d);
  return w.varint(2, type).string(8, name).bytes(9, raw);
}

export type AttrValue = number | readonly number[] | string | { readonly float: number } | { readonly tensor: ProtoWriter };

/**
 * AttributeProto: name = 1, f = 2, i = 3, s = 4, t = 5, ints = 8, type = 20. A plain number is
 * an INT; a float attribute is written { float: x } so 1.0 is not mistaken for an int.
 */
function attribute(name: string, value: AttrValue): ProtoWriter {
  const w = new ProtoWriter().string(1, name);
  if (typeof value === "number") return w.varint(3, value).varint(20, AttrType.INT);
  if (typeof value === "string") return w.string(4, value).varint(20, AttrType.STRING);
  if (isNumberList(value)) {
    for (const v of value) w.varint(8, v);
    return w.varint(20, AttrType.INTS);
  }
  if ("float" in value) return w.float(2, value.float).varint(20, AttrType.FLOAT);
  return w.message(5, value.tensor).varint(20, AttrType.TENSOR);
}

export interface OnnxNode {
  readonly op: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly attrs?: Readonly<Record<string, AttrValue>>;
  /** "" is the default ONNX domain; "com.microsoft" for onnxruntime's contrib ops */
  readonly domain?: string;
  readonly name?: string;
}

function isNumberList(v: AttrValue): v is readonly number[] {
  return Array.isArray(v);
}

/** NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7 */
function nodeProto(n: OnnxNode): ProtoWriter {
  const w = new ProtoWriter();
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  if (n.name) w.string(3, n.name);
  w.string(4, n.op);
  for (const [k, v] of Object.entries(n.attrs ?? {})) w.message(5, attribute(k, v));
  if (n.domain) w.string(7, n.domain);
  return w;
}

/** a dimension: a fixed size or a symbolic name ("sequence_length") */
export type OnnxDim = number | string;

export interface OnnxValueInfo {
  readonly name: string;
  readonly type: OnnxType;
  readonly dims: readonly OnnxDim[];
}

/**
 * ValueInfoProto { name = 1, type = 2 } with TypeProto { tensor_type = 1 }, TypeProto.Tensor
 * { elem_type = 1, shape = 2 }, TensorShapeProto { dim = 1 }, Dimension { dim_value = 1, dim_param = 2 }
 */
function valueInfoProto(v: OnnxValueInfo): ProtoWriter {
  const shape = new ProtoWriter();
  for (const d of v.dims) shape.message(1, typeof d === "number" ? new ProtoWriter().varint(1, d) : new ProtoWriter().string(2, d));
  const tensorType = new ProtoWriter().varint(1, v.type).message(2, shape);
  return new ProtoWriter().string(1, v.name).message(2, new ProtoWriter().message(1, tensorType));
}

export interface OnnxModel {
  readonly graphName: string;
  readonly nodes: readonly OnnxNode[];
  /** TensorProtos (tensorProto()) */
  readonly initializers: readonly ProtoWriter[];
  readonly inputs: readonly OnnxValueInfo[];
  readonly outputs: readonly OnnxValueInfo[];
  /** domain -> opset version ("" = ai.onnx) */
  readonly opsets: Readonly<Record<string, number>>;
  readonly irVersion: number;
  readonly producer: string;
}

/**
 * ModelProto: ir_version = 1, producer_name = 2, graph = 7, opset_import = 8 (OperatorSetIdProto
 * { domain = 1, version = 2 }); GraphProto: node = 1, name = 2, initializer = 5, input = 11, output = 12.
 */
export function encodeOnnxModel(m: OnnxModel): Uint8Array {
  const graph = new ProtoWriter();
  for (const n of m.nodes) graph.message(1, nodeProto(n));
  graph.string(2, m.graphName);
  for (const t of m.initializers) graph.message(5, t);
  for (const i of m.inputs) graph.message(11, valueInfoProto(i));
  for (const o of m.outputs) graph.message(12, valueInfoProto(o));
  const model = new ProtoWriter().varint(1, m.irVersion).string(2, m.producer).message(7, graph);
  for (const [domain, version] of Object.entries(m.opsets)) model.message(8, new ProtoWriter().string(1, domain).varint(2, version));
  return model.finish();
}
