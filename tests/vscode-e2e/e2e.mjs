// The VS Code extension in real VS Code: code-server with the packaged
// .vsix installed, driven headless by Playwright and Debian's Chromium.
// Opens an example, checks the code lenses and inlay hints (uncut), hovers
// an index variable and a tensor (its sparsity picture drawn), runs the time
// lens and saves screenshots.
//   tests/vscode-e2e/run.sh
import { chromium } from 'playwright-core';
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const work = resolve(root, 'target', 'vscode-e2e');
const codeServer = resolve(root, 'tests/vscode-e2e/node_modules/.bin/code-server');
const port = 18000 + (process.pid % 1000);
rmSync(work, { recursive: true, force: true });
mkdirSync(resolve(work, 'data/User'), { recursive: true });
writeFileSync(resolve(work, 'data/User/settings.json'), JSON.stringify({
  'tensor.server.path': resolve(root, 'target/release/tensor-lsp'),
  'workbench.startupEditor': 'none',
  'security.workspace.trust.enabled': false,
  'editor.inlayHints.enabled': 'on',
  'workbench.tips.enabled': false,
  'extensions.ignoreRecommendations': true,
}));
const common = ['--user-data-dir', resolve(work, 'data'), '--extensions-dir', resolve(work, 'ext')];
execFileSync(codeServer, [...common, '--install-extension', resolve(root, 'editors/vscode/tensor.vsix')], { stdio: 'inherit' });
const server = spawn(codeServer, [...common, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-workspace-trust', resolve(root, 'examples')], { stdio: ['ignore', 'pipe', 'pipe'] });
const log = [];
server.stdout.on('data', (d) => log.push(String(d)));
server.stderr.on('data', (d) => log.push(String(d)));

const step = (s) => console.log(`[e2e] ${s}`);
let browser;
try {
  for (let i = 0; i < 100; i++) {
    try { await fetch(`http://127.0.0.1:${port}/healthz`); break; } catch { await new Promise((r) => setTimeout(r, 200)); }
  }
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(resolve(root, 'examples'))}`);
  await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
  step('workbench loaded');
  // Open the example from the explorer.
  await page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'spmv_vectors.tensor' }).first().click();
  await page.waitForFunction(() => [...document.querySelectorAll('.monaco-editor .view-line')].some((l) => l.textContent.includes('sparse_x')), null, { timeout: 30000 });
  step('opened spmv_vectors.tensor');
  // Code lenses from the server.
  await page.waitForFunction(() => [...document.querySelectorAll('.codelens-decoration')].some((e) => e.textContent.includes('time')), null, { timeout: 60000 });
  const lenses = await page.$$eval('.codelens-decoration', (es) => es.map((e) => e.textContent));
  step(`code lenses: ${JSON.stringify(lenses)}`);
  // Inlay hints: the loop order and merge strategy after each statement.
  await page.waitForFunction(() => document.querySelector('.view-lines').textContent.includes('∀'), null, { timeout: 30000 });
  const hintLine = await page.$$eval('.view-line', (ls) => ls.map((l) => l.textContent).find((t) => t.includes('sparse_x')));
  step(`inlay hint line: ${hintLine}`);
  // The hint is short enough that VS Code shows the strategy uncut.
  if (!hintLine.includes('xs→dense') || hintLine.includes('…')) throw new Error(`inlay hint cut: ${hintLine}`);
  // Hover the index variable j of `xs(j)`.
  const lines = page.locator('.view-line', { hasText: 'sparse_x' });
  const j = lines.locator('span', { hasText: /^j$/ }).last();
  await j.hover();
  await page.waitForSelector('.monaco-hover .markdown-hover, .monaco-hover-content', { timeout: 30000 });
  await page.waitForTimeout(500);
  const hover = await page.$eval('.monaco-hover', (e) => e.textContent);
  step(`hover: ${hover.slice(0, 200)}`);
  if (!hover.includes('index') || !hover.includes('co-iterate')) throw new Error(`hover: ${hover}`);
  await page.screenshot({ path: resolve(root, 'target', 'vscode-e2e.png') });
  step(`screenshot: target/vscode-e2e.png`);
  // Hover the tensor A of its declaration: format table, the shape with its
  // brackets, and the sparsity picture drawn as an image.
  await page.mouse.move(5, 5);
  await page.keyboard.press('Escape');
  await page.waitForTimeout(300);
  const decl = page.locator('.view-line', { hasText: 'tensor A :' });
  await decl.locator('span', { hasText: /^A$/ }).first().hover();
  await page.waitForFunction(() => { const i = document.querySelector('.monaco-hover img'); return i && i.complete && i.naturalWidth > 0; }, null, { timeout: 30000 });
  const picture = await page.$eval('.monaco-hover img', (i) => ({ w: i.naturalWidth, h: i.naturalHeight, alt: i.alt }));
  const tensorHover = await page.$eval('.monaco-hover', (e) => e.textContent);
  step(`tensor hover: ${tensorHover.slice(0, 160)}; picture ${JSON.stringify(picture)}`);
  if (!tensorHover.includes('f64[M, N]')) throw new Error(`tensor hover lost its brackets: ${tensorHover}`);
  if (picture.w < 32 || !picture.alt.includes('sparsity')) throw new Error(`picture: ${JSON.stringify(picture)}`);
  await page.screenshot({ path: resolve(root, 'target', 'vscode-e2e-picture.png') });
  step(`screenshot: target/vscode-e2e-picture.png`);
  // Run the time lens of the first kernel.
  await page.mouse.move(5, 5);
  await page.locator('.codelens-decoration a', { hasText: 'time' }).first().click();
  await page.waitForFunction(() => [...document.querySelectorAll('.codelens-decoration')].some((e) => e.textContent.includes('ms median')), null, { timeout: 60000 });
  const timed = await page.$$eval('.codelens-decoration', (es) => es.map((e) => e.textContent).filter((t) => t.includes('ms median')));
  step(`after timing: ${JSON.stringify(timed)}`);
  await page.screenshot({ path: resolve(root, 'target', 'vscode-e2e-timed.png') });
  // The show C lens opens the emitted C beside the file.
  await page.locator('.codelens-decoration a', { hasText: 'show C' }).first().click();
  await page.waitForFunction(() => [...document.querySelectorAll('.view-line')].some((l) => l.textContent.includes('tensor_t')), null, { timeout: 30000 });
  step('show C lens opened the C');
  console.log('PASS');
} catch (e) {
  console.log(log.join('').slice(-1500));
  const pages = browser ? browser.contexts().flatMap((c) => c.pages()) : [];
  if (pages[0]) await pages[0].screenshot({ path: resolve(root, 'target', 'vscode-e2e-failure.png') });
  throw e;
} finally {
  await browser?.close();
  server.kill();
}
