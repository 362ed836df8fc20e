import { nullTranslator } from '@jupyterlab/translation';
import { fireEvent, render, screen, within } from '@testing-library/react';
import React from 'react';
import { GpuKernelModel } from '../../src/model';
import { MAX_CHART_POINTS, VramChart } from '../../src/panel/chart';
import { panelData } from '../../src/panel/data';
import { CellTable } from '../../src/panel/tables/cell-table';
import { Identifier, keptTail } from '../../src/panel/tables/common';
import { GraphsTable } from '../../src/panel/tables/graph-table';
import { HoldersTable } from '../../src/panel/tables/holder-table';
import { RootsTable } from '../../src/panel/tables/root-table';
import { TensorsTable } from '../../src/panel/tables/tensor-table';
import { TrendSummary } from '../../src/panel/trend';
import {
  FindingsSection,
  noGpuCause,
  PanelContent
} from '../../src/panel/view';
import type { IFinding } from '../../src/analysis/findings';
import { graphRows } from '../../src/analysis/memory/graph-holders';
import {
  DEFAULT_HOLDER_SORT,
  holderRows,
  rootsSummary
} from '../../src/analysis/memory/holders';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import {
  c01Inventory,
  c08Inventory,
  graphHolder,
  h200Hello,
  held
} from './fixtures';
import * as shapes from './leak-shape-cells';

// Record what the chart hands to recharts, and still render the real chart.
const chartData: unknown[][] = [];
jest.mock('recharts', () => {
  const actual = jest.requireActual('recharts');
  const react = jest.requireActual('react');
  return {
    ...actual,
    LineChart: (props: any) => {
      chartData.push(props.data);
      return react.createElement(actual.LineChart, props);
    }
  };
});

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** A kernel with one H200 and `n` samples; allocated peaks once at 7 GiB. */
function gpuModel(n: number): GpuKernelModel {
  const model = new GpuKernelModel({ kernelId: 'k', maxSamples: n });
  const hello = h200Hello({ agentVersion: '0.1.0' });
  model.apply({ ...hello, devices: [{ ...hello.devices[0], uuid: null }] });
  for (let i = 0; i < n; i++) {
    const allocated = i === 6_543 ? 7 * GiB : GiB + (i % 13) * MiB;
    model.apply({
      protocol: 2,
      type: 'sample',
      t: 1_000 + i,
      seq: i + 1,
      busy: i > 5_000 && i < 8_000,
      devices: [
        {
          index: 0,
          used: allocated + 2 * GiB,
          total: 141 * GiB,
          process: allocated + GiB,
          allocated,
          reserved: allocated + 512 * MiB,
          cached: 512 * MiB,
          nonTorch: 512 * MiB,
          processHidden: false
        }
      ]
    });
  }
  model.apply({ ...c01Inventory(), t: 1_000 + 8_000.5, executionCount: 7 });
  return model;
}

describe('VramChart', () => {
  beforeEach(() => {
    chartData.length = 0;
  });

  it('draws at most 500 points from 10k samples, keeping the peak', () => {
    const model = gpuModel(10_000);
    expect(model.samples).toHaveLength(10_000);
    const data = panelData(model, DEFAULT_SETTINGS, null);
    expect(data.rows).toHaveLength(10_000);
    const { container } = render(
      <VramChart
        rows={data.rows}
        total={data.total}
        markers={data.markers}
        scale="device"
        trans={trans}
        size={{ width: 600, height: 240 }}
      />
    );
    const passed = chartData[chartData.length - 1] as Array<{
      allocated: number;
    }>;
    expect(passed.length).toBeLessThanOrEqual(MAX_CHART_POINTS);
    expect(Math.max(...passed.map(r => r.allocated))).toBe(7 * GiB);
    const root = container.querySelector('.jp-GpuHygiene-chart') as HTMLElement;
    expect(Number(root.dataset.points)).toBeLessThanOrEqual(500);
    expect(root.dataset.samples).toBe('10000');
    // The real chart rendered an SVG with the four lines.
    expect(container.querySelector('svg')).not.toBeNull();
    const legend = Array.from(
      container.querySelectorAll('.jp-GpuHygiene-legend li')
    );
    expect(legend.map(li => li.textContent)).toEqual([
      'Device used (NVML)3.0 GiB',
      'This kernel (NVML)2.0 GiB',
      'PyTorch reserved1.5 GiB',
      'PyTorch allocated (in use by tensors)1.0 GiB',
      'Cached by PyTorch (free for this kernel)512.0 MiB',
      'CUDA context and libraries (until restart)512.0 MiB',
      'Device total141.0 GiB'
    ]);
  });

  it('draws the GPU utilisation and this kernel’s share on a percent axis (issue 29, item 4)', () => {
    const model = gpuModel(20);
    model.apply({
      protocol: 2,
      type: 'sample',
      t: 1_100,
      seq: 21,
      busy: true,
      devices: [
        {
          index: 0,
          used: 3 * GiB,
          total: 141 * GiB,
          process: 2 * GiB,
          allocated: GiB,
          reserved: 1.5 * GiB,
          cached: 512 * MiB,
          nonTorch: 512 * MiB,
          processHidden: false,
          utilization: 87,
          processUtilization: 80
        }
      ]
    });
    const data = panelData(model, DEFAULT_SETTINGS, null);
    // the older samples had no figure (an agent before 0.13.0): gaps, not 0 %
    expect(data.rows.slice(-2).map(r => r.utilization)).toEqual([null, 87]);
    expect(data.rows[data.rows.length - 1].processUtilization).toBe(80);
    const { container } = render(
      <VramChart
        rows={data.rows}
        total={data.total}
        markers={data.markers}
        scale="device"
        trans={trans}
        size={{ width: 600, height: 240 }}
      />
    );
    const legend = Array.from(
      container.querySelectorAll('.jp-GpuHygiene-legend li')
    ).map(li => li.textContent);
    expect(legend).toContain('GPU utilisation (NVML)87 %');
    expect(legend).toContain('This kernel’s GPU share (NVML)80 %');
    // the memory figures stay in bytes beside them
    expect(legend).toContain('Device used (NVML)3.0 GiB');
  });

  it('draws the running cell’s projection to full and a mark at each epoch', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    // a cell whose validations keep 490 MiB every 4 s epoch; the trainer's progress on each sample
    const busy = shapes.sampleShape(shapes.stairsLeak(4), {
      intervalS: 1,
      subReads: true,
      seed: 1
    });
    for (const sample of busy.slice(0, 30)) {
      const epoch = Math.floor((sample.t - shapes.T0 - 0.5) / 4);
      model.apply({
        ...sample,
        ...(epoch >= 0 ? { progress: { epoch, epochs: 10 } } : {})
      } as typeof sample);
    }
    const data = panelData(model, DEFAULT_SETTINGS, null);
    expect(data.trend.verdict).toBe('rising');
    expect(data.projection).not.toBeNull();
    expect(data.projection!.segment[0].y).toBe(data.trend.floor!.bytes);
    expect(data.epochs.map(m => m.epoch)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const { container } = render(
      <VramChart
        rows={data.rows}
        total={data.total}
        markers={data.markers}
        projection={data.projection}
        epochs={data.epochs}
        scale="device"
        trans={trans}
        size={{ width: 600, height: 240 }}
      />
    );
    const texts = Array.from(container.querySelectorAll('svg text')).map(
      t => t.textContent
    );
    expect(texts).toContain('epoch 2');
    expect(texts.some(t => /^full in ~\d+ min$/.test(t ?? ''))).toBe(true);
  });

  it('places a marker at the cell with its execution count', () => {
    const data = panelData(gpuModel(10_000), DEFAULT_SETTINGS, null);
    expect(data.markers).toEqual([
      { executionCount: 7, t: 1_000 + 5_001, end: expect.any(Number) }
    ]);
    expect(data.cells[0].peak).toBe(7 * GiB);
  });
});

describe('HoldersTable', () => {
  it('lists models by size with free and delete… actions', () => {
    const freed: string[] = [];
    const deleted: string[] = [];
    const sorts: unknown[] = [];
    const { container } = render(
      <HoldersTable
        rows={holderRows(c01Inventory())}
        sort={DEFAULT_HOLDER_SORT}
        onSort={sort => sorts.push(sort)}
        onFree={id => freed.push(id)}
        onDelete={id => deleted.push(id)}
        truncated={false}
        trans={trans}
      />
    );
    const rows = Array.from(
      container.querySelectorAll('tbody tr')
    ) as HTMLElement[];
    // Same size: the older one first.
    expect(rows.map(r => r.dataset.state)).toEqual(['stale', 'named']);
    expect(rows[0].textContent).toContain('Out[2], _2, __');
    expect(rows[1].textContent).toContain('model, Out[3], _3, _');
    fireEvent.click(screen.getByText('Free'));
    expect(freed).toEqual(['0x7f0000000001']);
    fireEvent.click(screen.getByText('Delete…'));
    expect(deleted).toEqual(['0x7f0000000002']);
    fireEvent.click(screen.getByText('Holder'));
    expect(sorts).toEqual([{ key: 'holder', direction: 'asc' }]);
    fireEvent.click(screen.getByText(/Size/));
    expect(sorts[1]).toEqual({ key: 'bytes', direction: 'asc' });
  });

  it('shows the first four holder paths, then how many more in words (all of them in the title)', () => {
    const inventory = c01Inventory();
    inventory.models[1].holders = ['a', 'b', 'c', 'd', 'e', 'f'].map(name =>
      held('variable', name)
    );
    const { container } = render(
      <HoldersTable
        rows={holderRows(inventory)}
        sort={DEFAULT_HOLDER_SORT}
        onSort={() => undefined}
        onFree={() => undefined}
        onDelete={() => undefined}
        truncated={false}
        trans={trans}
      />
    );
    const cell = container.querySelector(
      'tr[data-state="named"] td.jp-GpuHygiene-path'
    ) as HTMLElement;
    expect(cell.textContent).toBe('a, b, c, d and 2 more');
    expect(cell.title).toBe('a\nb\nc\nd\ne\nf');
  });

  it('cuts a long path in the middle: its start and its last key stay, the whole path in the title and the text', () => {
    const path = "trainer.state.log_history['validation'][0].loss";
    const { container } = render(<Identifier name={path} />);
    const ident = container.querySelector('.jp-GpuHygiene-ident')!;
    expect(ident.getAttribute('title')).toBe(path);
    expect(ident.textContent).toBe(path);
    expect(
      container.querySelector('.jp-GpuHygiene-identTail')!.textContent
    ).toBe('.loss');
    // a short name is one span, nothing kept apart
    const short = render(<Identifier name="model" />).container;
    expect(short.querySelector('.jp-GpuHygiene-identTail')).toBeNull();
    // a long last key: its last 14 characters stay
    expect(keptTail("Out['" + 'x'.repeat(40) + "']")).toBe(47 - 14);
  });

  it('offers no delete… for a name that is not an identifier', () => {
    const inventory = c01Inventory();
    inventory.models[1].holders = [
      { kind: 'variable', name: 'a b', path: 'a b' }
    ];
    render(
      <HoldersTable
        rows={holderRows(inventory)}
        sort={DEFAULT_HOLDER_SORT}
        onSort={() => undefined}
        onFree={() => undefined}
        onDelete={() => undefined}
        truncated={true}
        trans={trans}
      />
    );
    expect(screen.queryByText('Delete…')).toBeNull();
    expect(screen.getByText(/some holders may be missing/)).toBeTruthy();
  });

  it('says what to do when there is no model', () => {
    render(
      <HoldersTable
        rows={[]}
        sort={DEFAULT_HOLDER_SORT}
        onSort={() => undefined}
        onFree={() => undefined}
        onDelete={() => undefined}
        truncated={false}
        trans={trans}
      />
    );
    expect(screen.getByText(/No live PyTorch model/)).toBeTruthy();
  });
});

describe('noGpuCause', () => {
  it('tells a missing nvidia-ml-py from a missing driver, from the agent’s nvmlError', () => {
    expect(
      noGpuCause(
        "nvidia-ml-py (pynvml) not importable: ModuleNotFoundError: No module named 'pynvml'"
      )
    ).toBe('no-pynvml');
    expect(
      noGpuCause(
        'NVML initialisation failed: NVMLError_LibraryNotFound: NVML Shared Library Not Found'
      )
    ).toBe('no-driver');
    expect(noGpuCause(null)).toBe('no-device');
  });
});

describe('PanelContent', () => {
  function noGpuModel(): GpuKernelModel {
    const model = new GpuKernelModel({ kernelId: 'cpu' });
    model.apply({
      protocol: 2,
      type: 'hello',
      agentVersion: '0.1.0',
      python: '3.11.7',
      pid: 1,
      torch: null,
      nvml: false,
      nvmlError:
        'NVML initialisation failed: NVMLError_LibraryNotFound: NVML Shared Library Not Found',
      devices: []
    });
    model.apply({
      protocol: 2,
      type: 'sample',
      t: 1_764_496_700,
      seq: 1,
      busy: false,
      devices: []
    });
    model.apply({ ...c01Inventory(), executionCount: null, models: [] });
    model.apply(c01Inventory());
    return model;
  }

  const noop = () => undefined;

  /** Render the panel's content for `data`, with no-op handlers unless given. */
  function renderContent(
    data: ReturnType<typeof panelData>,
    props: Partial<React.ComponentProps<typeof PanelContent>> = {}
  ) {
    return render(
      <PanelContent
        data={data}
        notebook="n.ipynb"
        settings={DEFAULT_SETTINGS}
        scale="device"
        sort={DEFAULT_HOLDER_SORT}
        onDevice={noop}
        onScale={noop}
        onSort={noop}
        onFree={noop}
        onDelete={noop}
        trans={trans}
        {...props}
      />
    );
  }

  it('charts the kernel’s resident RAM when there is no GPU (issue 29, item 3)', () => {
    const model = noGpuModel();
    const GiB = 2 ** 30;
    for (const [i, rss] of [1.5, 2.5, 3.7].entries()) {
      model.apply({
        protocol: 2,
        type: 'sample',
        t: 1_764_496_710 + i,
        seq: 2 + i,
        busy: false,
        devices: [],
        ram: { rss: rss * GiB, total: 24 * GiB }
      });
    }
    const data = panelData(model, DEFAULT_SETTINGS, null);
    expect(data.gpu).toBe(false);
    expect(data.total).toBe(24 * GiB);
    expect(data.rows.map(r => r.rss)).toEqual([
      null,
      1.5 * GiB,
      2.5 * GiB,
      3.7 * GiB
    ]);
    expect(data.rows.every(r => r.used === null && r.allocated === null)).toBe(
      true
    );
    const { container } = renderContent(data, {
      notebook: 'cpu.ipynb',
      chartSize: { width: 400, height: 200 }
    });
    expect(container.textContent).toContain('Memory over time');
    expect(container.textContent).not.toContain('VRAM over time');
    expect(screen.getByText('No GPU visible to this kernel.')).toBeTruthy();
    const legend = Array.from(
      container.querySelectorAll('.jp-GpuHygiene-legend li')
    ).map(li => li.textContent);
    expect(legend).toEqual([
      'This kernel’s RAM (resident)3.7 GiB',
      'RAM it may use24.0 GiB'
    ]);
  });

  it('says "no GPU" and still lists holders and cells on a CPU-only kernel', () => {
    const data = panelData(noGpuModel(), DEFAULT_SETTINGS, null);
    expect(data.gpu).toBe(false);
    expect(data.trend.verdict).toBe('no-data');
    const { container } = renderContent(data, {
      notebook: 'stacked-yolo.ipynb'
    });
    // NVML's library is missing (no driver): said plainly, the raw error
    // under Details, no advice to install nvidia-ml-py (it is installed).
    expect(screen.getByText('No GPU visible to this kernel.')).toBeTruthy();
    expect(container.textContent).toContain('No NVIDIA driver was found');
    expect(
      container.querySelector('.jp-GpuHygiene-noGpuDetails code')?.textContent
    ).toBe(
      'NVML initialisation failed: NVMLError_LibraryNotFound: NVML Shared Library Not Found'
    );
    expect(container.textContent).not.toContain('pip install nvidia-ml-py');
    expect(container.textContent).toContain('Who holds memory');
    expect(container.textContent).not.toContain('Who holds VRAM');
    expect(container.querySelector('.jp-GpuHygiene-chart')).toBeNull();
    expect(
      container
        .querySelector('.jp-GpuHygiene-trend')
        ?.getAttribute('data-verdict')
    ).toBe('no-gpu');
    expect(
      container.querySelectorAll('.jp-GpuHygiene-holders tbody tr')
    ).toHaveLength(2);
    const cell = container.querySelector(
      '.jp-GpuHygiene-cells tbody tr'
    ) as HTMLElement;
    expect(cell.dataset.executionCount).toBe('3');
    // No allocation columns without a GPU (the banner says why).
    expect(container.textContent).not.toContain('Δ allocated');
    expect(cell.textContent).toContain(
      'YOLO (yolov8n.yaml), YOLO (yolov8n.yaml)'
    );
  });

  it('says what to do for an unsupported kernel', () => {
    const model = new GpuKernelModel({ kernelId: 'r' });
    model.setStatus('unsupported', 'R');
    renderContent(panelData(model, DEFAULT_SETTINGS, null), { notebook: null });
    expect(screen.getByText(/kernel \(R\) is not supported/)).toBeTruthy();
  });

  it('offers a GPU selector when the kernel sees several devices', () => {
    const model = gpuModel(20);
    model.apply({
      ...model.latestSample!,
      seq: 99,
      devices: [
        ...model.latestSample!.devices,
        { ...model.latestSample!.devices[0], index: 1 }
      ]
    });
    const devices: number[] = [];
    renderContent(panelData(model, DEFAULT_SETTINGS, null), {
      onDevice: d => devices.push(d),
      chartSize: { width: 400, height: 200 }
    });
    const select = screen.getByLabelText('GPU') as HTMLSelectElement;
    fireEvent.change(select, { target: { value: '1' } });
    expect(devices).toEqual([1]);
  });
});

/** What a trend over cells has none of. */
const CELLS_BASIS = {
  intercept: 0,
  shape: null,
  since: null,
  floor: null,
  interval: null,
  cellStart: null
};

describe('TrendSummary and CellTable', () => {
  it('words a rising trend and the empty states', () => {
    const { container, rerender } = render(
      <TrendSummary
        trend={{
          verdict: 'rising',
          basis: 'cells',
          device: 0,
          rate: 12 * MiB,
          slope: 12 * MiB,
          r2: 0.99,
          points: 8,
          executionCount: null,
          ...CELLS_BASIS
        }}
        gpu={true}
        cells={8}
        minPoints={5}
        trans={trans}
      />
    );
    expect(container.textContent).toContain(
      'allocated climbs ~12.0 MiB per cell over 8 cells (R² 0.99)'
    );
    rerender(
      <TrendSummary
        trend={{
          verdict: 'too-few',
          basis: 'cells',
          device: 0,
          rate: 0,
          slope: 0,
          r2: 0,
          points: 2,
          executionCount: null,
          ...CELLS_BASIS
        }}
        gpu={true}
        cells={2}
        minPoints={5}
        trans={trans}
      />
    );
    expect(container.textContent).toContain('2 of 5 cells measured');
    render(<CellTable cells={[]} gpu={true} trans={trans} />);
    expect(screen.getByText(/Run a cell/)).toBeTruthy();
  });
});

describe('PanelContent while the kernel starts', () => {
  it('shows the status, not "no GPU", before the first sample', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    model.setStatus('restarting');
    const noop = () => undefined;
    const { container } = render(
      <PanelContent
        data={panelData(model, DEFAULT_SETTINGS, null)}
        notebook={null}
        settings={DEFAULT_SETTINGS}
        scale="device"
        sort={DEFAULT_HOLDER_SORT}
        onDevice={noop}
        onScale={noop}
        onSort={noop}
        onFree={noop}
        onDelete={noop}
        trans={trans}
      />
    );
    expect(container.textContent).toContain('The kernel is restarting');
    expect(container.textContent).not.toContain('No GPU');
  });
});

describe('who holds VRAM (protocol 2)', () => {
  const HOSTILE = '<img src=x onerror=alert(1)>';
  const noop = () => undefined;

  /** C08 with hostile names everywhere the kernel chooses them. */
  function hostileInventory() {
    const inventory = c08Inventory();
    inventory.models[0].holders.push(
      held('variable', HOSTILE, `${HOSTILE}.model`)
    );
    inventory.models[0].parts.push({
      path: `trainer.${HOSTILE}`,
      kind: 'tensor',
      className: HOSTILE,
      bytes: { 'cuda:0': 2 * MiB }
    });
    inventory.roots.push({
      kind: 'variable',
      name: HOSTILE,
      bytes: { 'cuda:0': 2 * MiB },
      models: 0,
      tensors: 1
    });
    inventory.unattributed['cuda:0'] = 30 * MiB;
    inventory.tensors.push({
      path: `${HOSTILE}[0]`,
      kind: 'variable',
      device: 'cuda:0',
      bytes: 2 * MiB,
      shape: [512, 1024],
      dtype: HOSTILE,
      gradFn: HOSTILE
    });
    inventory.graphs.push(graphHolder({ name: HOSTILE, path: HOSTILE }));
    return inventory;
  }

  it('shows bytes per root with an unattributed row that add up to allocated', () => {
    const summary = rootsSummary(c08Inventory(), 'cuda:0')!;
    // 1 GiB + 256 MiB + 30 MiB of roots, 32 MiB unattributed.
    expect(summary.total).toBe(GiB + 318 * MiB);
    const { container } = render(
      <RootsTable summary={summary} trans={trans} />
    );
    const rows = Array.from(
      container.querySelectorAll('tbody tr, tfoot tr')
    ) as HTMLElement[];
    expect(rows.map(r => r.dataset.rootKind)).toEqual([
      'variable',
      'traceback',
      'variable',
      'unattributed',
      'total'
    ]);
    expect(rows.map(r => r.textContent)).toEqual([
      'val_lossesvariable1.0 GiB0 / 4',
      'last traceback (train_step)last traceback256.0 MiB0 / 1',
      'modelvariable30.0 MiB1 / 0',
      'unattributednot reachable from a name32.0 MiB',
      'PyTorch allocated1.3 GiB'
    ]);
    expect(container.querySelector('thead')?.textContent).toContain(
      'On cuda:0'
    );
  });

  it('shows holder paths and a model’s parts nested under it', () => {
    const { container } = render(
      <HoldersTable
        rows={holderRows(c08Inventory())}
        sort={DEFAULT_HOLDER_SORT}
        onSort={noop}
        onFree={noop}
        onDelete={noop}
        truncated={false}
        trans={trans}
      />
    );
    const rows = Array.from(
      container.querySelectorAll('tbody tr')
    ) as HTMLElement[];
    expect(rows[0].textContent).toContain('model, runs[0].model');
    expect(rows.slice(1).map(r => [r.dataset.partKind, r.textContent])).toEqual(
      [
        ['model', '↳ trainer.ema.emamodel copy DetectionModel12.0 MiB'],
        ['optimizer', '↳ trainer.optimizeroptimizer state SGD6.0 MiB']
      ]
    );
    // Delete… names only the variable that is the model itself.
    expect(screen.getByText('Delete…').getAttribute('title')).toBe(
      'Ask, then insert a cell that runs del model and frees the model'
    );
  });

  it('renders every name from the kernel as text, never as HTML', () => {
    const inventory = hostileInventory();
    const model = gpuModel(5);
    model.apply(inventory);
    const data = panelData(model, DEFAULT_SETTINGS, null);
    expect(data.roots?.rows.some(r => r.name === HOSTILE)).toBe(true);
    expect(data.tensors.map(t => t.path)).toEqual([
      'last traceback (train_step).act',
      `${HOSTILE}[0]`
    ]);
    const fixed: string[] = [];
    const { container } = render(
      <PanelContent
        data={data}
        notebook={HOSTILE}
        settings={DEFAULT_SETTINGS}
        scale="device"
        sort={DEFAULT_HOLDER_SORT}
        onDevice={noop}
        onScale={noop}
        onSort={noop}
        onFree={noop}
        onDelete={noop}
        onFixGraph={name => fixed.push(name)}
        trans={trans}
        chartSize={{ width: 400, height: 200 }}
      />
    );
    expect(container.querySelector('img')).toBeNull();
    const text = container.textContent ?? '';
    expect(text).toContain(`${HOSTILE}.model`);
    expect(text).toContain(`↳ trainer.${HOSTILE}`);
    expect(text).toContain(`512×1024 ${HOSTILE} cuda:0`);
    expect(text).toContain('Largest tensors outside models');
    expect(text).toContain('Variables that keep autograd graphs alive');
    expect(
      container.querySelector(`[data-root="${CSS.escape(HOSTILE)}"]`)
    ).not.toBeNull();
    // Fix… only for val_losses: the hostile name never reaches an action.
    const graphRowsShown = Array.from(
      container.querySelectorAll('.jp-GpuHygiene-graphs tbody tr')
    ) as HTMLElement[];
    expect(graphRowsShown.map(r => r.dataset.graph)).toEqual([
      HOSTILE,
      'val_losses'
    ]);
    // One Fix… in the graphs table, and one on the same finding in the
    // findings list (issue 17): none for the hostile name.
    const graphsTable = container.querySelector(
      '.jp-GpuHygiene-graphs'
    ) as HTMLElement;
    expect(within(graphsTable).getAllByText('Fix…')).toHaveLength(1);
    expect(screen.getAllByText('Fix…')).toHaveLength(2);
    expect(
      container
        .querySelector(
          '.jp-GpuHygiene-findings [data-kind="graph-holder"] [data-action="fix"]'
        )
        ?.closest('[data-finding]')
        ?.getAttribute('data-finding')
    ).toBe('graph-holder:val_losses');
    fireEvent.click(within(graphsTable).getByText('Fix…'));
    expect(fixed).toEqual(['val_losses']);
  });

  it('lists graph holders with count, estimate, grad_fn and the fix', () => {
    const { container } = render(
      <GraphsTable
        graphs={graphRows({
          ...c08Inventory(),
          graphs: [
            graphHolder(),
            graphHolder({
              name: 'stats',
              path: "stats['loss']",
              container: 'dict',
              count: 2,
              gradFn: 'MeanBackward0',
              bytes: { 'cuda:0': 64 * MiB },
              truncated: true
            })
          ]
        })}
        onFix={noop}
        trans={trans}
      />
    );
    const rows = Array.from(
      container.querySelectorAll('tbody tr')
    ) as HTMLElement[];
    expect(rows.map(r => r.textContent)).toEqual([
      'val_losses4 in a list~1.0 GiBNllLossBackward0Fix…',
      "stats['loss']2 in a dict≥ 64.0 MiBMeanBackward0"
    ]);
    expect(container.textContent).toContain(
      'Fix: store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
    );
  });

  it('shows nothing for loose tensors or graphs when there are none', () => {
    const { container } = render(
      <>
        <TensorsTable tensors={[]} trans={trans} />
        <GraphsTable graphs={[]} onFix={noop} trans={trans} />
      </>
    );
    expect(container.innerHTML).toBe('');
  });
});

describe('FindingsSection (issue 28, item 5)', () => {
  const noop = () => undefined;

  function finding(id: string, bytes: Record<string, number>): IFinding {
    return {
      kind: 'output-tensors',
      id,
      severity: 'info',
      subject: id,
      bytes,
      explain: () => `${id} keeps tensors`,
      evidence: [id],
      fix: { kind: 'none' }
    } as IFinding;
  }

  it('lists the findings under the floor only on request', () => {
    const big = finding('Out[2]', { 'cuda:0': 64 * 2 ** 20 });
    const small = [
      finding('Out[3]', { cpu: 4 }),
      finding('Out[4]', { cpu: 20 })
    ];
    const { container } = render(
      <FindingsSection
        findings={[big]}
        small={small}
        floorMiB={1}
        onFix={noop}
        trans={trans}
      />
    );
    const listed = () =>
      Array.from(container.querySelectorAll('li[data-finding]')).map(li =>
        li.getAttribute('data-finding')
      );
    expect(listed()).toEqual(['Out[2]']);
    const button = screen.getByRole('button', {
      name: 'Show 2 findings under 1.0 MiB'
    });
    expect(button.getAttribute('aria-expanded')).toBe('false');
    fireEvent.click(button);
    expect(listed()).toEqual(['Out[2]', 'Out[3]', 'Out[4]']);
    fireEvent.click(
      screen.getByRole('button', { name: 'Hide 2 findings under 1.0 MiB' })
    );
    expect(listed()).toEqual(['Out[2]']);
  });

  it('shows the heading and the button when every finding is small, nothing without findings', () => {
    const { container, rerender } = render(
      <FindingsSection
        findings={[]}
        small={[finding('Out[3]', { cpu: 4 })]}
        floorMiB={1}
        onFix={noop}
        trans={trans}
      />
    );
    expect(screen.getByText('Findings')).toBeTruthy();
    expect(
      screen.getByRole('button', { name: 'Show 1 finding under 1.0 MiB' })
    ).toBeTruthy();
    rerender(
      <FindingsSection
        findings={[]}
        small={[]}
        floorMiB={1}
        onFix={noop}
        trans={trans}
      />
    );
    expect(container.textContent).toBe('');
  });

  it('panelData splits the kernel findings at the setting', () => {
    const model = new GpuKernelModel({ kernelId: 'floor' });
    model.apply(c01Inventory());
    const all = panelData(
      model,
      { ...DEFAULT_SETTINGS, findingFloorMiB: 0 },
      null
    );
    const high = panelData(
      model,
      { ...DEFAULT_SETTINGS, findingFloorMiB: 1_048_576 },
      null
    );
    expect(all.smallFindings).toEqual([]);
    expect(high.findings.length + high.smallFindings.length).toBe(
      all.findings.length
    );
    expect(high.smallFindings.length).toBeGreaterThan(0);
  });
});
