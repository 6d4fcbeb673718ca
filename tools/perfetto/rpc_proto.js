// The bits of Perfetto's trace-processor RPC protocol tp_query.js speaks
// (protos/perfetto/trace_processor/trace_processor.proto): a minimal protobuf
// encoder/decoder and the few messages and field numbers it needs.
'use strict';

// ---------------------------------------------------------------- protobuf --

function encodeVarint(value, out) {
  let v = BigInt.asUintN(64, BigInt(value));
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
}

// Builds a message from [fieldNumber, kind, value] triples; kind is 'varint' or
// 'bytes' (value: Uint8Array or string).
function encodeMessage(fields) {
  const out = [];
  for (const [num, kind, value] of fields) {
    if (kind === 'varint') {
      encodeVarint((num << 3) | 0, out);
      encodeVarint(value, out);
    } else {
      const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
      encodeVarint((num << 3) | 2, out);
      encodeVarint(bytes.length, out);
      for (let i = 0; i < bytes.length; i++) out.push(bytes[i]);
    }
  }
  return Uint8Array.from(out);
}

class Reader {
  constructor(buf, start = 0, end = buf.length) {
    this.buf = buf;
    this.pos = start;
    this.end = end;
  }
  done() { return this.pos >= this.end; }
  varint() {  // BigInt, unsigned
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
  }
  // Returns {num, wire, value}; value is a BigInt (varint), a subarray
  // (length-delimited) or a subarray of 8/4 bytes (fixed64/fixed32).
  field() {
    const key = Number(this.varint());
    const num = key >>> 3;
    const wire = key & 7;
    let value;
    if (wire === 0) {
      value = this.varint();
    } else if (wire === 2) {
      const len = Number(this.varint());
      if (this.pos + len > this.end) throw new Error('truncated length-delimited field');
      value = this.buf.subarray(this.pos, this.pos + len);
      this.pos += len;
    } else if (wire === 1 || wire === 5) {
      const len = wire === 1 ? 8 : 4;
      value = this.buf.subarray(this.pos, this.pos + len);
      this.pos += len;
    } else {
      throw new Error(`unsupported wire type ${wire}`);
    }
    return { num, wire, value };
  }
}

const utf8 = new TextDecoder('utf-8');

function int64ToJs(big) {
  const v = BigInt.asIntN(64, big);
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
}

// TraceProcessorRpc field numbers.
const RPC_SEQ = 1, RPC_FATAL_ERROR = 5, RPC_REQUEST = 2, RPC_RESPONSE = 3, RPC_INVALID_REQUEST = 4;
const ARG_APPEND_TRACE_DATA = 101, ARG_QUERY_ARGS = 103;
const RES_APPEND_RESULT = 201, RES_QUERY_RESULT = 203, RES_STATUS = 210, RES_FINALIZE = 212;
// TraceProcessorMethod values.
const TPM_APPEND_TRACE_DATA = 1, TPM_FINALIZE_TRACE_DATA = 2, TPM_QUERY_STREAMING = 3, TPM_GET_STATUS = 10;
// QueryResult.CellsBatch.CellType values.
const CELL_NULL = 1, CELL_VARINT = 2, CELL_FLOAT64 = 3, CELL_STRING = 4, CELL_BLOB = 5;

function decodeRpc(bytes) {
  const msg = { raw: {} };
  const r = new Reader(bytes);
  while (!r.done()) {
    const f = r.field();
    switch (f.num) {
      case RPC_SEQ: msg.seq = Number(f.value); break;
      case RPC_FATAL_ERROR: msg.fatalError = utf8.decode(f.value); break;
      case RPC_REQUEST: msg.request = Number(f.value); break;
      case RPC_RESPONSE: msg.response = Number(f.value); break;
      case RPC_INVALID_REQUEST: msg.invalidRequest = Number(f.value); break;
      default: msg.raw[f.num] = f.value;
    }
  }
  return msg;
}

// Decodes a message whose only interesting field is "optional string error"
// at |errorField| (AppendTraceDataResult: 2, FinalizeDataResult: 1).
function decodeError(bytes, errorField) {
  if (!bytes) return undefined;
  const r = new Reader(bytes);
  let error;
  while (!r.done()) {
    const f = r.field();
    if (f.num === errorField && f.wire === 2) error = utf8.decode(f.value);
  }
  return error;
}

function decodeStatus(bytes) {
  const out = {};
  const r = new Reader(bytes);
  while (!r.done()) {
    const f = r.field();
    if (f.num === 2) out.human_readable_version = utf8.decode(f.value);
    else if (f.num === 3) out.api_version = Number(f.value);
    else if (f.num === 4) out.version_code = utf8.decode(f.value);
  }
  return out;
}

// Appends the cells of one QueryResult message to |acc| ({columns, cells,
// error, done}). Cells are row-major over the columns.
function decodeQueryResult(bytes, acc) {
  const r = new Reader(bytes);
  while (!r.done()) {
    const f = r.field();
    if (f.num === 1) {
      acc.columns.push(utf8.decode(f.value));
    } else if (f.num === 2) {
      const e = utf8.decode(f.value);
      if (e) acc.error = e;
    } else if (f.num === 3) {
      decodeBatch(f.value, acc);
    }
  }
}

function decodeBatch(bytes, acc) {
  const types = [];
  const varints = [];
  const doubles = [];
  const blobs = [];
  let strings = [];
  const r = new Reader(bytes);
  const readPackedVarints = (buf, sink) => {
    const pr = new Reader(buf);
    while (!pr.done()) sink.push(pr.varint());
  };
  while (!r.done()) {
    const f = r.field();
    if (f.num === 1) {
      if (f.wire === 2) readPackedVarints(f.value, types); else types.push(f.value);
    } else if (f.num === 2) {
      if (f.wire === 2) readPackedVarints(f.value, varints); else varints.push(f.value);
    } else if (f.num === 3) {
      const dv = new DataView(f.value.buffer, f.value.byteOffset, f.value.byteLength);
      for (let i = 0; i + 8 <= f.value.byteLength; i += 8) doubles.push(dv.getFloat64(i, true));
    } else if (f.num === 4) {
      blobs.push(f.value);
    } else if (f.num === 5) {
      const s = utf8.decode(f.value);
      strings = s.split('\0');  // every cell is NUL-terminated
    } else if (f.num === 6) {
      if (f.value !== 0n) acc.done = true;
    }
  }
  let vi = 0, di = 0, bi = 0, si = 0;
  for (const t of types) {
    switch (Number(t)) {
      case CELL_NULL: acc.cells.push(null); break;
      case CELL_VARINT: acc.cells.push(int64ToJs(varints[vi++])); break;
      case CELL_FLOAT64: acc.cells.push(doubles[di++]); break;
      case CELL_STRING: acc.cells.push(strings[si++]); break;
      case CELL_BLOB: acc.cells.push({ blob_hex: Buffer.from(blobs[bi++]).toString('hex') }); break;
      default: throw new Error(`invalid cell type ${t}`);
    }
  }
}


module.exports = {ARG_APPEND_TRACE_DATA, ARG_QUERY_ARGS, CELL_BLOB, CELL_FLOAT64, CELL_NULL, CELL_STRING, CELL_VARINT, RES_APPEND_RESULT, RES_FINALIZE, RES_QUERY_RESULT, RES_STATUS, RPC_FATAL_ERROR, RPC_INVALID_REQUEST, RPC_REQUEST, RPC_RESPONSE, RPC_SEQ, Reader, TPM_APPEND_TRACE_DATA, TPM_FINALIZE_TRACE_DATA, TPM_GET_STATUS, TPM_QUERY_STREAMING, decodeBatch, decodeError, decodeQueryResult, decodeRpc, decodeStatus, encodeMessage, encodeVarint, int64ToJs, utf8};
