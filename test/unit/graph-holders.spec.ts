import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import {
  canFixGraph,
  generateDetachCell,
  GRAPH_WARN_BYTES,
  graphRows,
  graphsToWarn,
  sharedOutputs
} from '../../src/analysis/memory/graph-holders';
import { GpuKernelModel } from '../../src/model';
import { describeGraphHolder, GpuNotifier } from '../../src/notifications';
import type { IGraphHolder, IInventory } from '../../src/protocol';
import { c08Inventory, graphHolder, OneModelMonitor } from './fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;
const HOSTILE = '<img src=x onerror=alert(1)>';

function withGraphs(graphs: IGraphHolder[], seq = 5): IInventory {
  return { ...c08Inventory(), seq, graphs };
}

describe('graph holders', () => {
  it('orders by CUDA bytes and flags from 64 MiB on one CUDA device', () => {
    const inventory = withGraphs([
      graphHolder({ name: 'small', path: 'small', bytes: { 'cuda:0': MiB } }),
      graphHolder(),
      graphHolder({
        name: 'edge',
        path: 'edge',
        bytes: { 'cuda:0': 40 * MiB, 'cuda:1': 40 * MiB }
      }),
      graphHolder({
        name: 'cpu',
        path: 'cpu',
        bytes: { cpu: 4096 * MiB }
      }),
      graphHolder({
        name: 'exact',
        path: 'exact',
        bytes: { 'cuda:1': GRAPH_WARN_BYTES }
      })
    ]);
    expect(graphRows(inventory).map(r => r.graph.name)).toEqual([
      'val_losses',
      'edge',
      'exact',
      'small',
      'cpu'
    ]);
    // 80 MiB spread over two devices is not 64 MiB on one; CPU graphs never warn.
    expect(graphsToWarn(inventory).map(r => [r.graph.name, r.device])).toEqual([
      ['val_losses', 'cuda:0'],
      ['exact', 'cuda:1']
    ]);
  });

  it('offers code only for a plain identifier that is the container', () => {
    expect(canFixGraph(graphHolder())).toBe(true);
    for (const [name, path] of [
      ['stats', "stats['loss']"],
      [HOSTILE, HOSTILE],
      ['x"); import os; ("', 'x"); import os; ("'],
      ['class', 'class'],
      ['a b', 'a b']
    ]) {
      const graph = graphHolder({ name, path });
      expect(canFixGraph(graph)).toBe(false);
      expect(generateDetachCell(graph)).toBeNull();
    }
    const code = generateDetachCell(graphHolder({ truncated: true }))!;
    expect(code).toContain('(about 1.0 GiB or more)');
    expect(code).toContain('obj[:] = [drop(v) for v in obj]');
    expect(code.trimEnd().split('\n').pop()).toBe(
      '_gpu_hygiene_detach_graphs()'
    );
  });

  it('detaches only while the name holds the object of the finding (issue 31)', () => {
    expect(generateDetachCell(graphHolder())).toContain(
      '(name="val_losses", held=None,'
    );
    const code = generateDetachCell(
      graphHolder({ valueId: '0x7f3a12345678' })
    )!;
    expect(code).toContain('(name="val_losses", held=0x7f3a12345678,');
    const check = code.indexOf(
      'if held is not None and name in ns and id(ns[name]) != held:'
    );
    expect(check).toBeGreaterThan(0);
    expect(check).toBeLessThan(code.indexOf('obj[:] = [drop(v) for v in obj]'));
    expect(
      generateDetachCell(graphHolder({ valueId: '0x1); import os; (' }))
    ).not.toContain('import os');
  });

  it('words the toast within 140 characters', () => {
    const [row] = graphRows(c08Inventory());
    expect(describeGraphHolder(row, trans)).toBe(
      'val_losses keeps 4 autograd graphs alive (~1.0 GiB on cuda:0): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
    );
    const [long] = graphRows(
      withGraphs([
        graphHolder({
          name: 'history',
          path: `history['${'x'.repeat(200)}']`,
          count: 1,
          truncated: true
        })
      ])
    );
    const text = describeGraphHolder(long, trans);
    expect(text.length).toBeLessThanOrEqual(140);
    expect(text).toMatch(/^history\['x+…/);
    expect(text).toContain('keeps 1 autograd graph alive (≥1.0 GiB on cuda:0)');
  });
});

describe('graph-holder toast', () => {
  afterEach(() => {
    Notification.dismiss();
  });
  const warnings = () =>
    Notification.manager.notifications.filter(n => n.type === 'warning');

  function setup(settings = {}) {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    // C08's last traceback (256 MiB) has its own toast (findings rule): off here.
    const monitor = new OneModelMonitor(model, {
      warnOnFindings: false,
      ...settings
    });
    const commands = new CommandRegistry();
    const calls: unknown[] = [];
    commands.addCommand('gpu-hygiene:fix-graph-holder', {
      execute: args => void calls.push(args)
    });
    const notifier = new GpuNotifier({ monitor, commands, trans });
    return { model, monitor, notifier, calls };
  }

  it('warns once per (kernel, variable) and dismisses when it is fixed', () => {
    const { model, notifier, calls } = setup();
    model.apply(c08Inventory());
    expect(warnings()).toHaveLength(1);
    const [toast] = warnings();
    expect(toast.message).toContain('val_losses keeps 4 autograd graphs');
    expect(toast.options.actions?.map(a => a.label)).toEqual([
      'Fix…',
      'Open VRAM panel',
      "Don't warn again"
    ]);
    toast.options.actions?.[0].callback(new MouseEvent('click'));
    expect(calls).toEqual([{ kernelId: 'k1', name: 'val_losses' }]);

    // The next cells: the same holder, growing, and a skipped re-send: no new toast.
    model.apply(withGraphs([graphHolder({ count: 8 })], 6));
    model.apply({
      ...withGraphs([graphHolder({ count: 8 })], 7),
      skipped: true
    });
    expect(warnings()).toHaveLength(1);

    // A second variable gets its own toast.
    model.apply(
      withGraphs([graphHolder(), graphHolder({ name: 'outs', path: 'outs' })])
    );
    expect(warnings()).toHaveLength(2);

    // Fixed: its toast goes; when it comes back it is not raised again.
    model.apply(withGraphs([graphHolder({ name: 'outs', path: 'outs' })]));
    expect(warnings().map(w => w.message)).toEqual([
      expect.stringContaining('outs keeps')
    ]);
    model.apply(withGraphs([graphHolder()]));
    expect(warnings().map(w => w.message)).toEqual([]);
    notifier.dispose();
  });

  it('stays quiet below 64 MiB and offers no Fix… for a hostile name', () => {
    const { model, notifier } = setup();
    model.apply(withGraphs([graphHolder({ bytes: { 'cuda:0': 63 * MiB } })]));
    expect(warnings()).toHaveLength(0);
    model.apply(withGraphs([graphHolder({ name: HOSTILE, path: HOSTILE })]));
    expect(warnings()).toHaveLength(1);
    // the name whole (the advice is what shortens), as text, never as markup
    expect(warnings()[0].message).toMatch(
      /^<img src=x onerror=alert\(1\)> keeps 4 autograd graphs alive \(~1\.0 GiB on cuda:0\): store loss\.item\(\) or loss\.detach\(\)\.$/
    );
    expect(warnings()[0].message.length).toBeLessThanOrEqual(140);
    expect(warnings()[0].options.actions?.map(a => a.label)).toEqual([
      'Open VRAM panel',
      "Don't warn again"
    ]);
    notifier.dispose();
  });

  it('CPU RAM only: an info toast from 64 MiB, Fix… from 1 MiB; none below', () => {
    const { model, notifier } = setup();
    const infos = () =>
      Notification.manager.notifications.filter(n => n.type === 'info');
    model.apply(
      withGraphs([
        graphHolder({ bytes: { cpu: 78 * MiB } }),
        graphHolder({ name: 'small', path: 'small', bytes: { cpu: 76 } })
      ])
    );
    expect(warnings()).toHaveLength(0);
    expect(infos().map(n => n.message)).toEqual([
      'val_losses keeps 4 autograd graphs alive (~78.0 MiB on cpu): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
    ]);
    expect(infos()[0].options.autoClose).toBe(15_000);
    const rows = graphRows(model.inventory);
    expect(rows.map(r => [r.graph.name, r.fixable])).toEqual([
      ['val_losses', true],
      ['small', false] // 76 B: no Fix…
    ]);
    notifier.dispose();
  });

  it('keeps its figures true while the list grows, and never cuts the name', () => {
    // the H200 recording leak-append-loss: val_losses after one training
    // cell (60 graphs, 4.9 GiB) and after the second (120, 9.8 GiB), beside
    // the loop variable val_loss that holds the last one
    const { model, notifier } = setup();
    const held = (count: number, gib: number) =>
      withGraphs(
        [
          graphHolder({
            name: 'val_losses',
            path: 'val_losses',
            count,
            bytes: { 'cuda:0': gib * 1024 * MiB }
          }),
          graphHolder({
            name: 'val_loss',
            path: 'val_loss',
            count: 1,
            bytes: { 'cuda:0': 84 * MiB }
          })
        ],
        count
      );
    model.apply(held(60, 4.9));
    model.apply(held(120, 9.8));
    const messages = warnings().map(w => w.message);
    expect(messages).toHaveLength(2);
    expect(messages).toContain(
      'val_losses keeps 120 autograd graphs alive (~9.8 GiB on cuda:0): store loss.item() or loss.detach().'
    );
    expect(
      messages.some(m => m.startsWith('val_loss keeps 1 autograd graph alive'))
    ).toBe(true);
    notifier.dispose();
  });

  it("follows warnOnGraphHolders; 'Don't warn again' turns it off", () => {
    const off = setup({ warnOnGraphHolders: false });
    off.model.apply(c08Inventory());
    expect(warnings()).toHaveLength(0);
    off.notifier.dispose();

    const { model, monitor, notifier } = setup();
    model.apply(c08Inventory());
    warnings()[0]
      .options.actions?.find(a => a.label === "Don't warn again")
      ?.callback(new MouseEvent('click'));
    expect(monitor.settings.warnOnGraphHolders).toBe(false);
    expect(warnings()).toHaveLength(0);
    model.apply(withGraphs([graphHolder({ name: 'other', path: 'other' })]));
    expect(warnings()).toHaveLength(0);
    notifier.dispose();
  });
});

describe('detach cell for displayed outputs (agent 0.12.0)', () => {
  const out = graphHolder({
    name: 'Out[9]',
    path: 'Out[9]',
    container: 'tensor',
    count: 1,
    root: 'output',
    names: ['Out[9]', '_9', '_'],
    valueId: '0x7f00aa'
  });

  it('never for an object whose attributes hold the graphs (container object)', () => {
    expect(
      canFixGraph(
        graphHolder({ name: 'run', path: 'run', container: 'object' })
      )
    ).toBe(false);
    expect(canFixGraph({ ...out, container: 'object' })).toBe(false);
  });

  it('an output alone: found by id in IPython names only, never a user variable', () => {
    expect(canFixGraph(out)).toBe(true);
    expect(canFixGraph({ ...out, valueId: 'id(x)' })).toBe(false);
    expect(
      canFixGraph({ ...out, name: '_', path: '_', valueId: undefined })
    ).toBe(false);
    const cell = generateDetachCell(out)!;
    expect(cell).toContain('outs=(0x7f00aa,)');
    expect(cell).not.toContain('name=');
    expect(cell).toContain('re.fullmatch(r"_{1,3}|_\\d+", key)');
    expect(cell).toContain('ip.history_manager.output_hist');
  });

  it("a list's cell also detaches the outputs that share its graphs", () => {
    const listed = graphHolder({ sharedWith: ['Out[9]', 'other'] });
    const inventory = withGraphs([listed, out]);
    const shown = sharedOutputs(listed, inventory);
    expect(shown.map(g => g.name)).toEqual(['Out[9]']);
    const cell = generateDetachCell(listed, shown)!;
    expect(cell).toContain('name="val_losses"');
    expect(cell).toContain('outs=(0x7f00aa,)');
    expect(cell).toContain(
      '# displayed output Out[9] keeps the same graphs: detached too.'
    );
    expect(sharedOutputs(out, inventory)).toEqual([]);
  });
});
