import { nullTranslator } from '@jupyterlab/translation';
import { fireEvent, render, screen } from '@testing-library/react';
import React from 'react';
import { GpuKernelModel } from '../../src/model';
import { MAX_CHART_POINTS, VramChart } from '../../src/panel/chart';
import {
  CellTable,
  formatDelta,
  formatDuration,
  HoldersTable,
  TrendSummary
} from '../../src/panel/components';
import { panelData } from '../../src/panel/data';
import { PanelContent } from '../../src/panel/view';
import { DEFAULT_HOLDER_SORT, holderRows } from '../../src/analysis/holders';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import { c01Inventory } from './fixtures';

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
  model.apply({
    protocol: 1,
    type: 'hello',
    agentVersion: '0.1.0',
    python: '3.11.7',
    pid: 1,
    torch: '2.14.1',
    nvml: true,
    nvmlError: null,
    devices: [{ index: 0, name: 'NVIDIA H200', total: 141 * GiB, uuid: null }]
  });
  for (let i = 0; i < n; i++) {
    const allocated = i === 6_543 ? 7 * GiB : GiB + (i % 13) * MiB;
    model.apply({
      protocol: 1,
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
          reserved: allocated + 512 * MiB
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
      'PyTorch allocated1.0 GiB',
      'Device total141.0 GiB'
    ]);
  });

  it('places a marker at the cell with its execution count', () => {
    const data = panelData(gpuModel(10_000), DEFAULT_SETTINGS, null);
    expect(data.markers).toEqual([
      { executionCount: 7, t: 1_000 + 5_001, end: expect.any(Number) }
    ]);
    expect(data.cells[0].peak).toBe(7 * GiB);
  });
});

describe('formatting', () => {
  it('formats durations and deltas', () => {
    expect(formatDuration(null)).toBe('—');
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(12_345)).toBe('12.3 s');
    expect(formatDuration(245_000)).toBe('4 min 05 s');
    expect(formatDelta(12 * MiB)).toBe('+12.0 MiB');
    expect(formatDelta(-3 * MiB)).toBe('−3.0 MiB');
    expect(formatDelta(0)).toBe('0 B');
    expect(formatDelta(null)).toBe('n/a');
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

  it('offers no delete… for a name that is not an identifier', () => {
    const inventory = c01Inventory();
    inventory.models[1].holders = [{ kind: 'variable', name: 'a b' }];
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

describe('PanelContent', () => {
  function noGpuModel(): GpuKernelModel {
    const model = new GpuKernelModel({ kernelId: 'cpu' });
    model.apply({
      protocol: 1,
      type: 'hello',
      agentVersion: '0.1.0',
      python: '3.11.7',
      pid: 1,
      torch: null,
      nvml: false,
      nvmlError: 'NVML Shared Library Not Found',
      devices: []
    });
    model.apply({
      protocol: 1,
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

  it('says "no GPU" and still lists holders and cells on a CPU-only kernel', () => {
    const data = panelData(noGpuModel(), DEFAULT_SETTINGS, null);
    expect(data.gpu).toBe(false);
    expect(data.trend.verdict).toBe('no-data');
    const { container } = render(
      <PanelContent
        data={data}
        notebook="stacked-yolo.ipynb"
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
    expect(screen.getByText('No GPU in this kernel.')).toBeTruthy();
    expect(container.textContent).toContain(
      'NVML: NVML Shared Library Not Found'
    );
    expect(container.textContent).toContain('pip install nvidia-ml-py');
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
    render(
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
    render(
      <PanelContent
        data={panelData(model, DEFAULT_SETTINGS, null)}
        notebook="n.ipynb"
        settings={DEFAULT_SETTINGS}
        scale="device"
        sort={DEFAULT_HOLDER_SORT}
        onDevice={d => devices.push(d)}
        onScale={noop}
        onSort={noop}
        onFree={noop}
        onDelete={noop}
        trans={trans}
        chartSize={{ width: 400, height: 200 }}
      />
    );
    const select = screen.getByLabelText('GPU') as HTMLSelectElement;
    fireEvent.change(select, { target: { value: '1' } });
    expect(devices).toEqual([1]);
  });
});

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
          executionCount: null
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
          executionCount: null
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
