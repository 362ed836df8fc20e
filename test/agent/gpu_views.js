/*
 * Issue 12's views as the browser computes them, from the compiled TypeScript
 * (kernel_driver.compile_browser) in the folder given as the first argument,
 * for the agent tests and the GPU check (kernel_driver.gpu_views). No copy
 * of the browser's logic: each step calls the app's own function.
 *
 * stdin (JSON):
 *   {kernelId, path,          the kernel whose agent sent the messages, its notebook
 *    messages: [...],         that agent's comm messages (hello, inventory, sample,
 *                             gpuProcesses...), in order, as the kernel sent them
 *    server: any,             the body of GET gpu-hygiene/kernels
 *    now: ms since the epoch}
 * stdout (JSON):
 *   {dropped: [reason],       messages parseKernelMessage refused (none expected)
 *    server: {ok, reason?},   parseServerKernels of the body
 *    join,                    gpuProcessesOf(model, monitor): the join the gauge and panel use
 *    device,                  the device the panel shows ("cuda:<primary index>")
 *    gauge: {text, tooltip},  gaugeState(model, DEFAULT_SETTINGS, trans, join)
 *    panel: {header, rows: [{pid, kind, cells, vramTitle}], notes, empty}}
 *                             the "On this GPU" table (GpuProcessesTable) rendered by React
 *                             to static markup, as text
 *
 * The monitor is this one notebook's: the browser has an agent in this kernel
 * only, so every other kernel is known from the server's answer alone.
 */
'use strict';

process.env.NODE_ENV = 'production';
const path = require('path');
const Module = require('module');

const root = path.resolve(process.argv[2]);
// server-kernels.js loads @jupyterlab/services for its fetch only; the parse (server-kernels-schema.js) needs nothing of it
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === '@jupyterlab/services') {
    return { ServerConnection: {} };
  }
  return load.call(this, request, ...rest);
};
const compiled = file => require(path.join(root, file));
const fromRoot = name => require(require.resolve(name, { paths: [root] }));

const { parseKernelMessage } = compiled('protocol.js');
const { parseServerKernels } = compiled('server-kernels-schema.js');
const { GpuKernelModel } = compiled('model.js');
const { DEFAULT_SETTINGS } = compiled('tokens.js');
const { deviceKey } = compiled('analysis/processes/gpu-process-join.js');
const { DEFAULT_GPU_PROCESS_SORT } = compiled(
  'analysis/processes/device-processes.js'
);
const { gpuProcessesOf } = compiled('other-kernels.js');
const { gaugeState } = compiled('statusbar/state.js');
// the findings' rules are a lazy chunk in the app; the gauge shows them once loaded
const { loadFindings } = compiled('analysis/findings/rules-loader.js');
const { GpuProcessesTable } = compiled('panel/tables/gpu-process-table.js');
const React = fromRoot('react');
const { renderToStaticMarkup } = fromRoot('react-dom/server');

/** @jupyterlab/translation's null bundle (Gettext.strfmt): the untranslated text. */
function strfmt(fmt, ...args) {
  return fmt
    .replace(/%%/g, '%% ')
    .replace(/%(\d+)/g, (_s, n) => args[n - 1])
    .replace(/%% /g, '%');
}
const trans = {
  __: (msgid, ...args) => strfmt(msgid, ...args),
  _n: (one, many, n, ...args) => strfmt(n === 1 ? one : many, n, ...args),
  _p: (_ctx, msgid, ...args) => strfmt(msgid, ...args),
  _np: (_ctx, one, many, n, ...args) => strfmt(n === 1 ? one : many, n, ...args)
};

const ENTITIES = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  '#x27': "'",
  '#39': "'"
};
function text(html) {
  return html
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(amp|lt|gt|quot|#x27|#39);/g, (_m, e) => ENTITIES[e])
    .replace(/\s+/g, ' ')
    .trim();
}
function attribute(tag, name) {
  const found = new RegExp(`${name}="([^"]*)"`).exec(tag);
  return found ? text(found[1]) : null;
}

function panelText(html) {
  const header = [...html.matchAll(/<th[^>]*>([\s\S]*?)<\/th>/g)].map(m =>
    text(m[1])
  );
  const rows = [...html.matchAll(/<tr( data-pid[^>]*)>([\s\S]*?)<\/tr>/g)].map(
    m => {
      const cells = [...m[2].matchAll(/<td([^>]*)>([\s\S]*?)<\/td>/g)];
      return {
        pid: Number(attribute(m[1], 'data-pid')),
        kind: attribute(m[1], 'data-kind'),
        cells: cells.map(c => text(c[2])),
        vramTitle: cells[2] ? attribute(cells[2][1], 'title') : null
      };
    }
  );
  const notes = [
    ...html.matchAll(/<div class="jp-GpuHygiene-note"[^>]*>([\s\S]*?)<\/div>/g)
  ].map(m => text(m[1]));
  const empty = rows.length ? null : text(html);
  return { header, rows, notes, empty };
}

function main(input) {
  const model = new GpuKernelModel({ kernelId: input.kernelId });
  const dropped = [];
  for (const data of input.messages) {
    const parsed = parseKernelMessage(data);
    if (parsed.ok) {
      model.apply(parsed.message);
    } else {
      dropped.push(`${data && data.type}: ${parsed.reason}`);
    }
  }
  const server = parseServerKernels(input.server);
  const answer = server.ok ? server.answer : null;
  const monitor = {
    models: [model],
    currentModel: model,
    serverKernels: {
      answer,
      state: answer
        ? { status: 'ok', answer, at: input.now }
        : {
            status: 'error',
            reason: 'invalid',
            detail: server.reason,
            at: input.now
          }
    },
    panelFor: () => ({
      sessionContext: {
        path: input.path,
        session: { kernel: { status: 'idle' } }
      }
    })
  };
  const join = gpuProcessesOf(model, monitor, input.now);
  const gauge = gaugeState(model, DEFAULT_SETTINGS, trans, join);
  const primary = model.primaryDevice();
  const device = deviceKey(primary ? primary.index : 0);
  const html = renderToStaticMarkup(
    React.createElement(GpuProcessesTable, {
      join,
      device,
      server: monitor.serverKernels.state,
      sort: DEFAULT_GPU_PROCESS_SORT,
      onSort: () => undefined,
      onOpen: () => undefined,
      onShutDown: () => undefined,
      trans
    })
  );
  return {
    dropped,
    server: server.ok ? { ok: true } : { ok: false, reason: server.reason },
    join,
    device,
    gauge: { text: gauge.text, tooltip: gauge.tooltip },
    panel: panelText(html)
  };
}

let stdin = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', chunk => (stdin += chunk));
process.stdin.on('end', () => {
  void loadFindings().then(() =>
    process.stdout.write(JSON.stringify(main(JSON.parse(stdin))))
  );
});
