#!/usr/bin/env node
// What a user's JupyterLab start costs this extension (issue 14, "Cost"), in Debian's chromium
// against a real JupyterLab server: `make bench` runs it (`node bench/start.mjs --help`).
//
// 1. Start-path bytes: opens /lab with no notebook open (fresh server, workspace, settings and
//    browser cache), waits for the application to be restored and the network to be quiet, and
//    sums the bytes of this extension's requests (/lab/extensions/jupyterlab-gpu-hygiene/static/):
//    raw and gzip -9 of the same bytes, per chunk. Asserts the budget (gzip -9 total) and that no
//    start-path chunk holds the agent's text or the panel's chart.
// 2. Kernel ready -> hello: opens --kernels new notebooks one after the other, each with a fresh
//    python3 kernel, and times, in the page, from the kernel being ready (its first
//    kernel_info_reply or `idle` status) to the agent's `hello` on the comm (iopub, after the
//    extension handled it). The first kernel of the page also pays for loading the agent's
//    chunk; it is reported on its own as well.
//
// Each build runs in its own server (a labextensions folder of its own holding only that build,
// searched before the environment's installed copy); the served files are checked byte for byte
// against the build's folder, so the figures are those of the build named. --baseline measures
// a second build (e.g. the main checkout's) in the same run, with the same browser.
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { mkdirSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, platform, release, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { chromium } from '@playwright/test';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const NAME = 'jupyterlab-gpu-hygiene';
const STATIC = `/lab/extensions/${NAME}/static/`;
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--headless',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run'
];
// What a chunk holds, recognised by strings that survive minification.
const MARKERS = {
  agent: '_jupyterlab_gpu_hygiene_agent', // the agent's package name, in its text
  zod: '__zod_globalRegistry',
  recharts: 'recharts-', // recharts' CSS class prefix
  'panel view': 'PanelContent', // src/panel/view.tsx's export
  toasts: "Don't warn again", // the toasts' buttons (src/notifications/actions.ts)
  findings: 'child-processes:other', // a finding's id (src/analysis/findings/child-processes.ts)
  'clean cell': 'safe to re-run, also without it', // the clean cell's first line (src/analysis/codegen/clean-cell.ts)
  css: 'theme variables only', // the comment that opens style/base.css
  'panel css': "The VRAM panel's views", // the comment that opens style/panel.css
  plugins: `${NAME}:plugin`
};
// Not allowed on the start path: issue 14's goal (the agent, the panel), and what else
// waits for the first kernel (the message validator, the toasts, the findings' rules) or
// for a command or view that needs it (the clean cell's generator, the panel's styles).
const FORBIDDEN = [
  'agent',
  'zod',
  'recharts',
  'panel view',
  'toasts',
  'findings',
  'clean cell',
  'panel css'
];

const HELP = `usage: node bench/start.mjs [options]
  --build DIR      labextension folder to measure (default: this checkout's
                   jupyterlab_gpu_hygiene/labextension)
  --baseline DIR   a second labextension folder measured in the same run
  --kernels N      kernel starts per build for kernel ready -> hello (default 20, 0: none)
  --budget BYTES   start-path gzip -9 budget (default 40000)
  --hello-budget MS  p95 budget of kernel ready -> hello (default 150)
  --port N         first port to try (default 8890)
  --python PATH    Python with JupyterLab (default .venv/bin/python)
  --json FILE      also write the figures as JSON
  --no-assert      exit 0 even when a byte budget is missed
  --assert-hello   exit 1 when hello's p95 misses its budget too (a timing: by default
                   it is printed against the goal, not asserted)`;

function parseArgs(argv) {
  const args = {
    build: join(ROOT, 'jupyterlab_gpu_hygiene', 'labextension'),
    baseline: null,
    kernels: 20,
    budget: 40000,
    helloBudget: 150,
    port: 8890,
    python: join(ROOT, '.venv', 'bin', 'python'),
    json: null,
    assert: true,
    assertHello: false
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) {
        throw new Error(`${flag} needs a value`);
      }
      return argv[++i];
    };
    switch (flag) {
      case '--build':
        args.build = resolve(value());
        break;
      case '--baseline':
        args.baseline = resolve(value());
        break;
      case '--kernels':
        args.kernels = Number(value());
        break;
      case '--budget':
        args.budget = Number(value());
        break;
      case '--hello-budget':
        args.helloBudget = Number(value());
        break;
      case '--port':
        args.port = Number(value());
        break;
      case '--python':
        args.python = resolve(value());
        break;
      case '--json':
        args.json = resolve(value());
        break;
      case '--no-assert':
        args.assert = false;
        break;
      case '--assert-hello':
        args.assertHello = true;
        break;
      case '--help':
      case '-h':
        console.log(HELP);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${flag}\n${HELP}`);
    }
  }
  return args;
}

/** Percentile with linear interpolation between closest ranks (as bench/bench.py). */
function pct(values, q) {
  const v = [...values].sort((a, b) => a - b);
  if (!v.length) {
    return NaN;
  }
  const k = (v.length - 1) * q;
  const lo = Math.floor(k);
  const hi = Math.min(lo + 1, v.length - 1);
  return v[lo] + (v[hi] - v[lo]) * (k - lo);
}

function freePort(from) {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once('error', () => {
      if (from > 65000) {
        fail(new Error('no free port'));
      } else {
        freePort(from + 1).then(ok, fail);
      }
    });
    server.listen(from, '127.0.0.1', () => server.close(() => ok(from)));
  });
}

const sleep = ms => new Promise(done => setTimeout(done, ms));

/** Bytes of `gzip -9 -n` of `body` (zlib at level 9 where there is no gzip binary). */
function gzip9(body) {
  const run = spawnSync('gzip', ['-9', '-n', '-c'], {
    input: body,
    maxBuffer: 1 << 28
  });
  return run.status === 0
    ? run.stdout.length
    : gzipSync(body, { level: 9 }).length;
}

/** A JupyterLab server of its own serving the build in `buildDir`. */
async function startServer(buildDir, firstPort, python) {
  const meta = JSON.parse(readFileSync(join(buildDir, 'package.json'), 'utf8'));
  if (meta.name !== NAME || !meta.jupyterlab?._build?.load) {
    throw new Error(`${buildDir} is not a built ${NAME} labextension`);
  }
  const tmp = mkdtempSync(join(tmpdir(), 'gpu-hygiene-start-'));
  for (const sub of ['ext', 'root', 'ws', 'settings', 'config', 'runtime']) {
    mkdirSync(join(tmp, sub));
  }
  // A labextensions folder holding only this build: searched first, so it
  // shadows the copy installed in the environment.
  symlinkSync(buildDir, join(tmp, 'ext', NAME));
  const port = await freePort(firstPort);
  const argv = [
    '-m',
    'jupyterlab',
    '--no-browser',
    '--ip=127.0.0.1',
    `--port=${port}`,
    '--port-retries=0',
    '--ServerApp.token=',
    '--ServerApp.password=',
    '--ServerApp.disable_check_xsrf=True',
    `--ServerApp.root_dir=${join(tmp, 'root')}`,
    `--LabApp.workspaces_dir=${join(tmp, 'ws')}`,
    `--LabApp.user_settings_dir=${join(tmp, 'settings')}`,
    `--LabApp.extra_labextensions_path=${join(tmp, 'ext')}`,
    '--LabApp.expose_app_in_browser=True',
    '--Application.log_level=WARN'
  ];
  if (process.getuid?.() === 0) {
    argv.push('--allow-root');
  }
  const env = {
    ...process.env,
    JUPYTER_CONFIG_DIR: join(tmp, 'config'),
    JUPYTER_RUNTIME_DIR: join(tmp, 'runtime'),
    YOLO_OFFLINE: 'true'
  };
  const child = spawn(python, argv, {
    env,
    stdio: ['ignore', 'ignore', 'pipe']
  });
  let log = '';
  child.stderr.on('data', chunk => {
    log = (log + chunk).slice(-20000);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`jupyter lab exited (${child.exitCode}):\n${log}`);
    }
    try {
      const reply = await fetch(`${url}/api/status`);
      if (reply.ok) {
        break;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`jupyter lab did not answer on ${url}:\n${log}`);
    }
    await sleep(250);
  }
  return {
    url,
    load: meta.jupyterlab._build.load,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        for (let i = 0; i < 40 && child.exitCode === null; i++) {
          await sleep(250);
        }
        if (child.exitCode === null) {
          child.kill('SIGKILL');
        }
      }
      rmSync(tmp, { recursive: true, force: true });
    }
  };
}

/** Open /lab with no notebook and collect this extension's requests until quiet. */
async function startPath(browser, server, buildDir) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const files = new Map();
  const pending = [];
  let last = Date.now();
  page.on('response', response => {
    const path = new URL(response.url()).pathname;
    if (!path.startsWith(STATIC)) {
      return;
    }
    last = Date.now();
    pending.push(
      response.body().then(body => {
        files.set(path.slice(STATIC.length), body);
      })
    );
  });
  const errors = [];
  page.on('pageerror', error => errors.push(String(error)));
  const started = Date.now();
  await page.goto(`${server.url}/lab`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => window.jupyterapp !== undefined, null, {
    timeout: 120_000
  });
  await page.evaluate(() => window.jupyterapp.restored);
  await page.waitForLoadState('networkidle');
  // Plugins activated after `restored` may still ask for a chunk: wait for 2 s without one.
  while (Date.now() - last < 2000) {
    await sleep(250);
  }
  await Promise.all(pending);
  const readyMs = Date.now() - started;
  if (!files.has(server.load.replace(/^static\//, ''))) {
    throw new Error(`the page did not load ${server.load} of ${buildDir}`);
  }
  const atStart = new Set(files.keys());
  const chunks = describe(files, atStart, buildDir);
  /** What the page loaded after the start (the kernels' chunks). */
  const later = async () => {
    await Promise.all(pending);
    const names = new Set([...files.keys()].filter(n => !atStart.has(n)));
    return describe(files, names, buildDir);
  };
  return { context, page, chunks, later, readyMs, errors };
}

/** Rows (file, raw, gzip -9, what it holds) of the served files `names`, checked against the build. */
function describe(files, names, buildDir) {
  const chunks = [];
  for (const name of names) {
    const body = files.get(name);
    const local = join(buildDir, 'static', name);
    if (!existsSync(local) || !readFileSync(local).equals(body)) {
      throw new Error(
        `the server served ${name}, which is not the file of ${buildDir}: another build is served`
      );
    }
    const text = body.toString('utf8');
    chunks.push({
      file: name,
      raw: body.length,
      gzip9: gzip9(body),
      holds: Object.entries(MARKERS)
        .filter(([, marker]) => text.includes(marker))
        .map(([what]) => what)
    });
  }
  return chunks.sort((a, b) => b.gzip9 - a.gzip9);
}

/**
 * Open `count` new notebooks, each with a fresh kernel: from the kernel being ready (its first
 * kernel_info_reply or `idle` status, whichever comes first) to the agent's `hello` (ms), and
 * where that time goes: ready -> the install request is sent (the extension loads its agent
 * chunk the first time), sent -> its execute_reply (the kernel compiles and installs the agent,
 * while it also answers JupyterLab's own requests at kernel start: the debugger's), reply ->
 * comm_open sent, comm_open -> the comm's hello. The hello that counts is the first the page
 * gets: since issue 14 the install's execute_reply carries one (a user expression, `via`
 * "reply"); a build without it waits for the comm's (`via` "comm").
 */
async function helloLatency(page, count) {
  const runs = [];
  for (let i = 0; i < count; i++) {
    const run = await page.evaluate(async () => {
      const app = window.jupyterapp;
      const t = {
        info: null,
        idle: null,
        sent: null,
        reply: null,
        open: null,
        hello: null,
        comm: null,
        via: null
      };
      const statuses = [];
      let installId = null;
      let finished = null;
      // the first hello the page gets: in the install's reply, else on the comm
      // (the run waits for the comm's hello either way: its samples follow it)
      const helloAt = (at, via) => {
        if (t.hello === null) {
          t.hello = at;
          t.via = via;
        }
      };
      const panel = await app.commands.execute('notebook:create-new', {
        kernelName: 'python3'
      });
      const context = panel.sessionContext;
      const watched = new Set();
      const watch = kernel => {
        if (!kernel || watched.has(kernel)) {
          return;
        }
        watched.add(kernel);
        kernel.anyMessage.connect((_, { msg, direction }) => {
          const type = msg.header.msg_type;
          if (direction === 'send') {
            if (
              type === 'execute_request' &&
              installId === null &&
              msg.content.silent &&
              msg.content.code.startsWith('exec(')
            ) {
              installId = msg.header.msg_id;
              t.sent = performance.now();
            } else if (type === 'comm_open' && t.open === null) {
              t.open = performance.now();
            }
          } else if (type === 'kernel_info_reply' && t.info === null) {
            t.info = performance.now();
          } else if (
            type === 'execute_reply' &&
            msg.parent_header.msg_id === installId
          ) {
            t.reply = performance.now();
            // the agent's hello, evaluated after the install (user expression)
            const early =
              msg.content.user_expressions?.jupyterlab_gpu_hygiene_hello;
            if (
              early?.status === 'ok' &&
              early.data?.['application/json']?.type === 'hello'
            ) {
              helloAt(t.reply, 'reply');
            }
          }
        });
      };
      watch(context.session?.kernel);
      context.kernelChanged.connect((_, change) => watch(change.newValue));
      const done = new Promise((ok, fail) => {
        const timer = setTimeout(
          () => fail(new Error('no hello in 120 s')),
          120_000
        );
        context.statusChanged.connect((_, status) => {
          statuses.push(status);
          if (status === 'idle' && t.idle === null) {
            t.idle = performance.now();
          }
        });
        finished = () => {
          clearTimeout(timer);
          ok();
        };
        context.iopubMessage.connect((_, msg) => {
          if (
            msg.header.msg_type === 'comm_msg' &&
            msg.content.data?.type === 'hello' &&
            t.comm === null
          ) {
            t.comm = performance.now();
            helloAt(t.comm, 'comm');
            finished();
          }
        });
      });
      await done;
      await context.shutdown();
      panel.dispose();
      return { t, statuses: statuses.slice(0, 4).join(' ') };
    });
    const { t } = run;
    // Ready: the kernel answered kernel_info (what the extension waits for) or
    // said idle, whichever came first.
    const ready = Math.min(...[t.info, t.idle].filter(v => v !== null));
    const total = t.hello - ready;
    if (!Number.isFinite(total) || total < 0) {
      throw new Error(
        `kernel ${i}: no kernel_info reply or idle status before hello (${run.statuses})`
      );
    }
    const span = (a, b) => (a !== null && b !== null ? b - a : NaN);
    runs.push({
      total,
      toSent: span(ready, t.sent),
      install: span(t.sent, t.reply),
      toOpen: span(t.reply, t.open),
      toHello: span(t.open, t.comm),
      via: t.via
    });
  }
  return runs;
}

async function measure(browser, label, buildDir, args) {
  const server = await startServer(buildDir, args.port, args.python);
  try {
    const start = await startPath(browser, server, buildDir);
    let hello = [];
    if (args.kernels > 0) {
      hello = await helloLatency(start.page, args.kernels);
    }
    const later = await start.later();
    await start.context.close();
    const total = start.chunks.reduce(
      (sum, c) => ({ raw: sum.raw + c.raw, gzip9: sum.gzip9 + c.gzip9 }),
      { raw: 0, gzip9: 0 }
    );
    const phases = key => ({
      p50Ms: pct(
        hello.map(r => r[key]),
        0.5
      ),
      p95Ms: pct(
        hello.map(r => r[key]),
        0.95
      )
    });
    return {
      label,
      build: buildDir,
      chunks: start.chunks,
      later,
      total,
      readyMs: start.readyMs,
      pageErrors: start.errors,
      hello: hello.length
        ? {
            starts: hello.length,
            ...phases('total'),
            maxMs: Math.max(...hello.map(r => r.total)),
            first: hello[0],
            later: {
              p50Ms: pct(
                hello.slice(1).map(r => r.total),
                0.5
              ),
              p95Ms: pct(
                hello.slice(1).map(r => r.total),
                0.95
              )
            },
            phases: {
              toSent: phases('toSent'),
              install: phases('install'),
              toOpen: phases('toOpen'),
              toHello: phases('toHello')
            },
            viaReply: hello.filter(r => r.via === 'reply').length,
            runs: hello
          }
        : null
    };
  } finally {
    await server.stop();
  }
}

const kb = bytes => (bytes / 1000).toFixed(1);
const ms = value => (Number.isFinite(value) ? value.toFixed(1) : '-');

function report(result) {
  console.log(`\n${result.label}: ${result.build}`);
  console.log(
    `  start path (no notebook open), ${result.chunks.length} requests, app restored + quiet in ${result.readyMs} ms`
  );
  console.log(
    '  file                                      raw B   gzip-9 B  holds'
  );
  for (const c of result.chunks) {
    console.log(
      `  ${c.file.padEnd(38)} ${String(c.raw).padStart(9)} ${String(c.gzip9).padStart(10)}  ${c.holds.join(', ')}`
    );
  }
  console.log(
    `  ${'total'.padEnd(38)} ${String(result.total.raw).padStart(9)} ${String(result.total.gzip9).padStart(10)}  (${kb(result.total.gzip9)} KB gzip -9)`
  );
  if (result.pageErrors.length) {
    console.log(`  page errors: ${result.pageErrors.join(' | ')}`);
  }
  if (result.later.length) {
    console.log('  loaded later, with the kernels:');
    for (const c of result.later) {
      console.log(
        `  ${c.file.padEnd(38)} ${String(c.raw).padStart(9)} ${String(c.gzip9).padStart(10)}  ${c.holds.join(', ')}`
      );
    }
  }
  if (result.hello) {
    const h = result.hello;
    const p = h.phases;
    console.log(
      `  kernel ready -> hello, ${h.starts} kernel starts: p50 ${ms(h.p50Ms)} ms, p95 ${ms(h.p95Ms)} ms, max ${ms(h.maxMs)} ms`
    );
    console.log(
      `    first kernel of the page ${ms(h.first.total)} ms (ready -> install sent ${ms(h.first.toSent)}), the others p50 ${ms(h.later.p50Ms)} / p95 ${ms(h.later.p95Ms)} ms`
    );
    console.log(
      `    p50 / p95 of its parts, ms: ready -> install sent ${ms(p.toSent.p50Ms)} / ${ms(p.toSent.p95Ms)}, install request -> reply ${ms(p.install.p50Ms)} / ${ms(p.install.p95Ms)}, reply -> comm_open ${ms(p.toOpen.p50Ms)} / ${ms(p.toOpen.p95Ms)}, comm_open -> the comm's hello ${ms(p.toHello.p50Ms)} / ${ms(p.toHello.p95Ms)}; hello first in the install's reply in ${h.viaReply} of ${h.starts}`
    );
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: CHROMIUM_ARGS
  });
  const results = [];
  try {
    if (args.baseline) {
      results.push(await measure(browser, 'baseline', args.baseline, args));
    }
    results.push(await measure(browser, 'build', args.build, args));
  } finally {
    await browser.close();
  }
  results.forEach(report);
  const build = results[results.length - 1];
  const verdicts = [];
  const onPath = build.chunks.flatMap(c => c.holds);
  // [text, met, asserted]: bytes are asserted; a timing only with --assert-hello.
  verdicts.push([
    `start path ${kb(build.total.gzip9)} KB gzip -9 <= ${kb(args.budget)} KB`,
    build.total.gzip9 <= args.budget,
    args.assert
  ]);
  verdicts.push([
    `nothing of ${FORBIDDEN.join(', ')} on the start path`,
    !FORBIDDEN.some(what => onPath.includes(what)),
    args.assert
  ]);
  if (build.hello) {
    verdicts.push([
      `kernel ready -> hello p95 ${ms(build.hello.p95Ms)} ms <= ${args.helloBudget} ms (browser, ${build.hello.starts} kernel starts, 1-min load ${loadavg()[0].toFixed(1)})`,
      build.hello.p95Ms <= args.helloBudget,
      args.assertHello
    ]);
  }
  if (args.baseline) {
    const base = results[0];
    console.log(
      `\nstart path: ${kb(base.total.gzip9)} -> ${kb(build.total.gzip9)} KB gzip -9 (${(
        (100 * build.total.gzip9) /
        base.total.gzip9
      ).toFixed(0)} % of the baseline)`
    );
  }
  console.log('');
  for (const [text, ok] of verdicts) {
    console.log(`${ok ? 'met   ' : 'MISSED'} ${text}`);
  }
  if (args.json) {
    // what make bench-start commits (bench/start.json), as make bench does
    // bench/results.json: the agent, the commit and the machine beside the figures
    const limits = readFileSync(
      join(ROOT, 'src/agent/gpu_hygiene_agent/limits.py'),
      'utf-8'
    );
    const git = (...argv) =>
      spawnSync('git', ['-C', ROOT, ...argv], {
        encoding: 'utf-8'
      }).stdout.trim();
    writeFileSync(
      args.json,
      JSON.stringify(
        {
          date: new Date().toISOString(),
          agentVersion: /^AGENT_VERSION = "(.+)"$/m.exec(limits)?.[1] ?? null,
          commit: git('rev-parse', '--short', 'HEAD'),
          dirty: git('status', '--porcelain', '--untracked-files=no') !== '',
          machine: {
            cores: cpus().length,
            cpu: cpus()[0]?.model ?? null,
            platform: `${platform()} ${release()}`,
            node: process.version
          },
          budget: args.budget,
          verdicts: verdicts.map(([text, ok]) => ({ goal: text, met: ok })),
          results
        },
        null,
        1
      ) + '\n'
    );
  }
  if (verdicts.some(([, ok, asserted]) => asserted && !ok)) {
    process.exitCode = 1;
  }
}

main().catch(error => {
  console.error(error);
  process.exit(2);
});
