// Latency of the language server under load (not part of `node --test`):
//
//   cargo build --release -p tensor-lsp && (cd tests/lsp-node && node bench-latency.mjs)
//
// 1. A 100-kernel file while a timing run of a kernel of the same file is
//    going: 200 edits, each timed to its diagnostics, then a hover.
// 2. Hovers on another document while a document reads a FIFO data path,
//    and while a document holds 400 KB of garbage text (edited meanwhile).
import { resolve } from 'node:path';
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { start, stop, within, timed, open, change, hover, diagnosticsOf, uriOf, tmp, children, until, garbageText } from './client.mjs';

const EDITS = Number(process.env.EDITS ?? 200);

function summary(name, times) {
  const t = [...times].sort((a, b) => a - b);
  const q = (p) => t[Math.min(t.length - 1, Math.floor(t.length * p))].toFixed(2);
  console.log(`${name}: n=${t.length} p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${t[t.length - 1].toFixed(2)} ms`);
}

async function hundredKernels(s) {
  let text = 'tensor A : f64[64, 64] @ CSR = random(seed: 1, density: 0.1)\ntensor x : f64[64] @ dense = random(seed: 2)\ntensor y : f64[64] @ dense\n';
  text += 'tensor B : f64[3000, 3000] @ CSR = random(seed: 3, density: 0.3)\ntensor w : f64[3000] @ dense = random(seed: 4)\ntensor v : f64[3000] @ dense\n';
  for (let k = 0; k < 100; k++) text += `kernel k${k} { y(i) = A(i,j) * x(j) }\n`;
  text += 'kernel slow { v(i) = B(i,j) * w(j) }\n';
  const uri = uriOf(resolve(tmp, 'bench-100.tensor'));
  let d = diagnosticsOf(s, uri);
  open(s, uri, text);
  await within(d, 30000, 'first diagnostics');
  // Keep a timing run going for the whole measurement.
  let running = true;
  const runs = [];
  const keepTiming = (async () => {
    while (running) runs.push(await s.conn.sendRequest('tensor/timeKernel', { textDocument: { uri }, kernel: 'slow', runs: 1000 }).catch((e) => e));
  })();
  await within(until(s, () => children(s).length > 0), 10000, 'a timing worker');
  const diag = [];
  const hov = [];
  let busy = 0;
  for (let n = 0; n < EDITS; n++) {
    const k = n % 100;
    const line = 6 + k;
    const kernel = `kernel k${k} { y(i) = A(i,j) * x(j) }`;
    const star = kernel.indexOf('*');
    const version = n + 2;
    d = diagnosticsOf(s, uri, version);
    const t0 = performance.now();
    // Toggle the multiplication into an addition and back.
    change(s, uri, version, [{ range: { start: { line, character: star }, end: { line, character: star + 1 } }, text: n % 200 < 100 ? '+' : '*' }]);
    await within(d, 10000, 'diagnostics');
    diag.push(performance.now() - t0);
    const { ms } = await timed(hover(s, uri, { line, character: kernel.indexOf('A(i') + 2 }));
    hov.push(ms);
    if (children(s).length > 0) busy++;
  }
  running = false;
  for (const token of [...s.progress.keys()]) s.conn.sendNotification('window/workDoneProgress/cancel', { token });
  await keepTiming;
  console.log(`100-kernel file, ${EDITS} edits, a timing run going during ${busy} of them`);
  summary('  edit -> diagnostics', diag);
  summary('  hover', hov);
}

async function otherRequestsWhile(s, what, setUp, poke) {
  const other = uriOf(resolve(tmp, `bench-other-${what}.tensor`));
  const text = 'tensor x : f64[4] @ dense = random(seed: 1)\ntensor y : f64[4] @ dense\nkernel copy { y(i) = x(i) }\n';
  const d = diagnosticsOf(s, other);
  open(s, other, text);
  await within(d, 5000, 'other diagnostics');
  await setUp();
  const times = [];
  for (let n = 0; n < 50; n++) {
    poke(n);
    times.push((await timed(hover(s, other, { line: 2, character: 16 }))).ms);
  }
  summary(`hover on another document while ${what}`, times);
}

const s = await start();
await hundredKernels(s);

const fifo = resolve(tmp, 'bench-pipe.mtx');
if (existsSync(fifo)) rmSync(fifo);
execFileSync('mkfifo', [fifo]);
const fifoUri = uriOf(resolve(tmp, 'bench-fifo.tensor'));
const fifoText = 'tensor A : f64[M, N] @ CSR = mtx("bench-pipe.mtx")\ntensor x : f64[N] @ dense\ntensor y : f64[M] @ dense\nkernel spmv { y(i) = A(i,j) * x(j) }\n';
await otherRequestsWhile(s, 'a document reads a FIFO', async () => open(s, fifoUri, fifoText), (n) => change(s, fifoUri, n + 2, [{ range: { start: { line: 3, character: 7 }, end: { line: 3, character: 8 } }, text: 's' }]));
rmSync(fifo);

const garbageUri = uriOf(resolve(tmp, 'bench-garbage.tensor'));
await otherRequestsWhile(s, 'a document holds 400 KB of garbage', async () => open(s, garbageUri, garbageText(400_000)), (n) => change(s, garbageUri, n + 2, [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, text: '$' }]));
await stop(s);
